"""The files of an outcome table (CSV, Parquet, JSON lines) read into columns of raw cells, with one-line errors.

Nothing is converted here: a CSV cell is its text ("" when empty), a Parquet cell its value (None when null, a
float NaN stays NaN so that ``pools.importers.table_cells`` can refuse it), a JSON record's field its JSON value
(``None`` when the record lacks it). Rows are numbered from 1 in the order of the file: for CSV and Parquet the
n-th data row (the header is not counted, a quoted newline does not start a row), for JSON lines the line number.
A byte-order mark at the start of a CSV file is dropped (spreadsheets write one); a cell longer than
``pools.limits.MAX_CELL_CHARS`` is refused when its column is read.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pools.errors import PoolError
from pools.importers.canonical_records import read_json_lines
from pools.limits import MAX_CELL_CHARS

__all__ = ["RawTable", "TABLE_SUFFIXES", "all_text", "read_table", "table_files"]

#: File name endings of the table kinds read here.
TABLE_SUFFIXES: dict[str, str] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
                                  ".ndjson": "jsonl"}


@dataclass
class RawTable:
    """One file's columns of raw cells (object arrays), the number of each row in the file, and its path."""

    path: str
    columns: dict[str, np.ndarray]
    rows: np.ndarray
    unit: str = "row"
    _checked: set[str] = field(default_factory=set)

    @property
    def n_rows(self) -> int:
        """Number of data rows (records)."""
        return len(self.rows)

    def has(self, name: str) -> bool:
        """Whether the file has column (or field path) ``name``."""
        return name in self.columns

    def column(self, name: str) -> np.ndarray:
        """Column ``name``'s raw cells; the first cell longer than ``MAX_CELL_CHARS`` raises ``PoolError``."""
        cells = self.columns[name]
        if name not in self._checked:
            lengths = np.fromiter(map(len, cells) if all_text(cells) else
                                  (len(c) if isinstance(c, str) else 0 for c in cells), dtype=np.int64,
                                  count=len(cells))
            too_long = lengths > MAX_CELL_CHARS
            if too_long.any():
                pos = int(np.argmax(too_long))
                raise self.error(f"a cell of {lengths[pos]:,} characters; expected at most {MAX_CELL_CHARS:,} (an "
                                 "unclosed quote makes one cell of the rest of the file)", pos, name)
            self._checked.add(name)
        return cells

    def error(self, message: str, pos: int | None, column: str | None) -> PoolError:
        """A ``PoolError`` naming this file, the row at position ``pos`` (None: the header) and ``column``."""
        where = f"{self.path}, header" if pos is None else f"{self.path}, {self.unit} {int(self.rows[pos])}"
        return PoolError(message, file=where, column=column)


def all_text(cells: np.ndarray) -> bool:
    """Whether every cell is a str (a CSV column always is): the readers then take their vectorized path."""
    return pd.api.types.infer_dtype(cells, skipna=False) == "string"


def table_files(sources: list[str], kinds: tuple[str, ...] = ("csv", "parquet", "jsonl")) -> list[str]:
    """The table files of ``sources``: a file as it is, a folder's files of a known ending (sorted by name)."""
    out: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found = sorted(str(p) for p in path.iterdir() if p.is_file() and TABLE_SUFFIXES.get(p.suffix.lower())
                           in kinds)
            if not found:
                endings = sorted(s for s, k in TABLE_SUFFIXES.items() if k in kinds)
                raise PoolError(f"holds no table file; expected files ending in {', '.join(endings)}", file=source)
            out.extend(found)
        else:
            out.append(str(path))
    return out


def read_table(path: str, fields: tuple[str, ...] = ()) -> RawTable:
    """Read ``path`` by its ending; a JSON-lines file keeps only ``fields`` (dotted paths into each record)."""
    kind = TABLE_SUFFIXES.get(Path(path).suffix.lower())
    if kind == "csv":
        return _read_csv(path)
    if kind == "parquet":
        return _read_parquet(path)
    if kind == "jsonl":
        return _read_jsonl(path, fields)
    raise PoolError(f"unknown table file ending; expected one of {', '.join(TABLE_SUFFIXES)}", file=path)


_PANDAS_LINE = re.compile(r"line (\d+)|row (\d+)")


def _read_csv(path: str) -> RawTable:
    header = _csv_header(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8-sig",
                            engine="c")
    except pd.errors.ParserError as exc:
        text = " ".join(str(exc).split())
        found = _PANDAS_LINE.search(text)
        at = f" near line {found.group(1) or found.group(2)}" if found else ""
        what = "an unclosed quote" if "EOF inside string" in text else text.removeprefix("Error tokenizing data. ")
        raise PoolError(f"malformed CSV{at}: {what}", file=path) from None
    except UnicodeDecodeError as exc:
        raise PoolError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    except pd.errors.EmptyDataError:
        raise PoolError("empty file; expected a header row and one row per query", file=path) from None
    except OSError as exc:
        raise PoolError(f"cannot read ({exc.strerror or exc})", file=path) from None
    if list(frame.columns) != header:  # pandas renames a repeated header ("a", "a.1"): refuse it instead
        repeated = next((c for c in header if header.count(c) > 1), None)
        if repeated is not None:
            raise RawTable(path, {}, np.zeros(0)).error(f"column {repeated!r} appears twice in the header; "
                                                        "expected each column once", None, repeated)
    columns = {str(c): frame[c].to_numpy(dtype=object) for c in frame.columns}
    return RawTable(path, columns, np.arange(1, len(frame) + 1))


def _csv_header(path: str) -> list[str]:
    """The header row of a CSV file as the csv module reads it (a quoted newline stays inside its cell)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            return next(csv.reader(fh), [])
    except (UnicodeDecodeError, csv.Error, OSError):
        return []  # pandas reports the problem with the whole file


def _read_parquet(path: str) -> RawTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise PoolError(f"unreadable or truncated Parquet ({' '.join(str(exc).split())[:200]})", file=path) from None
    names = [str(n) for n in table.column_names]
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise PoolError(f"column {repeated!r} appears twice; expected each column once", file=path, column=repeated)
    columns = {name: np.array(table.column(i).to_pylist() + [None], dtype=object)[:-1]
               for i, name in enumerate(names)}  # the extra None keeps a column of lists one-dimensional
    return RawTable(path, columns, np.arange(1, table.num_rows + 1))


def _lookup(record: Any, path: str) -> Any:
    """The value at dotted ``path`` in a JSON record (None when any step is missing); a key holding dots itself
    is found whole first."""
    if isinstance(record, dict) and path in record:
        return record[path]
    head, dot, rest = path.partition(".")
    if not dot or not isinstance(record, dict) or head not in record:
        return None
    return _lookup(record[head], rest)


def _read_jsonl(path: str, fields: tuple[str, ...]) -> RawTable:
    if os.path.isdir(path):
        raise PoolError("is a directory; expected a JSON-lines file", file=path)
    rows, values = [], {f: [] for f in fields}
    present = dict.fromkeys(fields, False)
    for lineno, obj in read_json_lines(path):
        if not isinstance(obj, dict):
            raise PoolError(f"expected a JSON object per line, got {type(obj).__name__}", file=f"{path}, line {lineno}")
        rows.append(lineno)
        for name in fields:
            value = _lookup(obj, name)
            values[name].append(value)
            present[name] = present[name] or value is not None or _has_path(obj, name)
    columns = {name: np.array([*cells, None], dtype=object)[:-1] for name, cells in values.items() if present[name]}
    return RawTable(path, columns, np.asarray(rows, dtype=np.int64), unit="line")


def _has_path(record: Any, path: str) -> bool:
    """Whether dotted ``path`` exists in ``record`` (holding null counts as existing)."""
    if isinstance(record, dict) and path in record:
        return True
    head, dot, rest = path.partition(".")
    return bool(dot) and isinstance(record, dict) and head in record and _has_path(record[head], rest)
