"""A pool's optional embeddings table: the user's own vector per item, read from Parquet, NumPy or JSONL.

The table lives beside the pool's tables as ``embeddings.parquet`` (columns ``dataset``, ``item_id``,
``embedding``: a list of float32, the same length for every item). ``coba pools embed POOL FILE`` imports it
(``import_embeddings``); ``pools.store.load_pool`` reads it back into ``Pool.embeddings``; the problem features'
``embeddings`` source reads it (``coba_env.featurizers``). Accepted files:

- ``.parquet``: a column ``item_id``, optionally ``dataset``, and ``embedding`` (a list of numbers per row);
- ``.npz`` (NumPy): arrays ``item_id`` [n], optionally ``dataset`` [n], and ``embedding`` [n, d];
- ``.jsonl``: one object per line, ``{"item_id": ..., "dataset": ..., "embedding": [...]}`` (dataset optional).

Checked before anything is written (``validate_embeddings``): one dimension for every row (a ragged row is
named), finite values (the first NaN or infinity is named), every id an item of the pool (a wrong id is named),
each item once, and every item covered, unless ``default`` gives the value of every coordinate of an item the
file leaves out. Without a ``dataset`` an ``item_id`` must name one item of the pool. Every error is one
``PoolError`` naming the file, the row and the field.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pools.errors import PoolError

EMBEDDINGS_FILE = "embeddings.parquet"
#: Most coordinates an embedding may have.
MAX_DIMENSIONS = 65_536
SUFFIXES = (".parquet", ".npz", ".jsonl")


def _rows_from_npz(path: Path) -> list[dict[str, Any]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PoolError(f"not a readable .npz file ({type(exc).__name__}); expected arrays item_id and embedding",
                        file=str(path)) from None
    for name in ("item_id", "embedding"):
        if name not in arrays:
            raise PoolError(f"missing array {name!r}; expected item_id [n], embedding [n, d] (dataset [n] optional)",
                            file=str(path), field=name)
    ids, vectors = arrays["item_id"], arrays["embedding"]
    if vectors.ndim != 2 or vectors.dtype.kind not in "fiu" or len(vectors) != len(ids):
        raise PoolError(f"expected a numeric [n, d] array with one row per item_id ({len(ids)}), got shape "
                        f"{vectors.shape}", file=str(path), field="embedding")
    datasets = arrays.get("dataset")
    return [{"item_id": ids[i].item(), "embedding": vectors[i].tolist(),
             **({} if datasets is None else {"dataset": datasets[i].item()})} for i in range(len(ids))]


def _rows_from_jsonl(path: Path) -> list[dict[str, Any]]:
    from pools.parse_boundary import PARSE_ERRORS, parse_problem

    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PoolError(f"not a readable UTF-8 text file ({type(exc).__name__})", file=str(path)) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except PARSE_ERRORS as exc:
            raise PoolError(f"not valid JSON ({parse_problem(exc)})", file=str(path), row=number) from None
        if not isinstance(row, dict):
            raise PoolError("expected a JSON object", file=str(path), row=number)
        rows.append(row)
    return rows


def _rows_from_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:
        raise PoolError(f"unreadable Parquet ({type(exc).__name__})", file=str(path)) from None
    for name in ("item_id", "embedding"):
        if name not in table.columns:
            raise PoolError(f"missing column {name!r}; expected item_id, embedding (a list per row), dataset optional",
                            file=str(path), field=name)
    out = []
    for row in table.to_dict("records"):
        vector = row["embedding"]
        row["embedding"] = vector.tolist() if isinstance(vector, np.ndarray) else vector
        out.append(row)
    return out


def read_embedding_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an embedding file (``SUFFIXES``), not yet checked against a pool."""
    path = Path(path)
    if not path.is_file():
        raise PoolError("no such file; expected an embedding file (.parquet, .npz or .jsonl)", file=str(path))
    readers = {".parquet": _rows_from_parquet, ".npz": _rows_from_npz, ".jsonl": _rows_from_jsonl}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise PoolError(f"unknown embedding file type {path.suffix!r}; expected one of {list(SUFFIXES)}",
                        file=str(path))
    return reader(path)


def _vector(value: Any, where: str, row: int) -> list[float]:
    if not isinstance(value, list | tuple) or not value:
        raise PoolError("expected a non-empty list of numbers", file=where, row=row, field="embedding")
    out = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise PoolError(f"coordinate {i} is {str(x)[:20]!r}; expected a number", file=where, row=row,
                            field="embedding")
        if not math.isfinite(x):
            raise PoolError(f"coordinate {i} is {x}; expected a finite number", file=where, row=row,
                            field="embedding")
        out.append(float(x))
    return out


def validate_embeddings(rows: list[dict[str, Any]], items: pd.DataFrame, where: str,
                        default: float | None = None) -> pd.DataFrame:
    """The embeddings table (dataset, item_id, embedding) of ``rows`` for the pool's ``items``, every check of the
    module docstring applied; ``where`` names the file in errors."""
    keys = list(zip(items["dataset"].astype(str), items["item_id"].astype(str), strict=True))
    by_id: dict[str, list[tuple[str, str]]] = {}
    for d, i in keys:
        by_id.setdefault(i, []).append((d, i))
    known, seen, vectors, dim = set(keys), {}, [], None
    for number, row in enumerate(rows, start=1):
        item = row.get("item_id")
        if item is None or isinstance(item, bool | float | list | dict):
            raise PoolError(f"item_id is {str(item)[:40]!r}; expected a string or an integer", file=where,
                            row=number, field="item_id")
        item = str(item)
        if row.get("dataset") is not None:
            key = (str(row["dataset"]), item)
            if key not in known:
                raise PoolError(f"no item {key[1]!r} in dataset {key[0]!r} of the pool", file=where, row=number,
                                field="item_id")
        else:
            matches = by_id.get(item, [])
            if len(matches) != 1:
                why = "no item" if not matches else f"{len(matches)} items (in several datasets; give the dataset)"
                raise PoolError(f"the pool has {why} with item_id {item!r}", file=where, row=number, field="item_id")
            key = matches[0]
        vector = _vector(row.get("embedding"), where, number)
        dim = len(vector) if dim is None else dim
        if len(vector) != dim:
            raise PoolError(f"{len(vector)} coordinates; expected {dim} like the first row (one dimension for "
                            "every item)", file=where, row=number, field="embedding")
        if key in seen:
            raise PoolError(f"item {key[0]}/{key[1]} given twice (rows {seen[key]} and {number})", file=where,
                            row=number, field="item_id")
        seen[key] = number
        vectors.append((key, vector))
    if dim is None or dim > MAX_DIMENSIONS:
        raise PoolError(f"expected between 1 and {MAX_DIMENSIONS} coordinates per item and at least one row",
                        file=where)
    missing = [k for k in keys if k not in seen]
    if missing and default is None:
        raise PoolError(f"{len(missing)} of the pool's {len(keys)} items have no embedding, e.g. {missing[0][0]}/"
                        f"{missing[0][1]}; cover every item or give --default VALUE", file=where)
    if default is not None and not math.isfinite(default):
        raise PoolError(f"--default is {default}; expected a finite number", file=where)
    vectors += [(k, [float(default)] * dim) for k in missing]
    order = {k: i for i, k in enumerate(keys)}
    vectors.sort(key=lambda kv: order[kv[0]])
    return pd.DataFrame({"dataset": [k[0] for k, _ in vectors], "item_id": [k[1] for k, _ in vectors],
                         "embedding": [np.asarray(v, dtype=np.float32) for _, v in vectors]})


def write_embeddings(table: pd.DataFrame, pool_dir: str | Path) -> Path:
    """Write ``table`` as the pool's ``embeddings.parquet`` (a temp file, then a rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pools.atomic_write import atomic_write

    dim = len(table["embedding"].iloc[0])
    arrow = pa.table({"dataset": pa.array(table["dataset"].tolist(), pa.string()),
                      "item_id": pa.array(table["item_id"].tolist(), pa.string()),
                      "embedding": pa.array([v.tolist() for v in table["embedding"]], pa.list_(pa.float32(), dim))})
    target = Path(pool_dir) / EMBEDDINGS_FILE
    atomic_write(target, lambda tmp: pq.write_table(arrow, tmp, compression="zstd"))
    return target


def load_embeddings(pool_dir: str | Path, items: pd.DataFrame) -> pd.DataFrame | None:
    """The pool's embeddings table, checked against its ``items`` (None when the pool has none): one row per item,
    one dimension, finite values (vectorized: the file is the one ``write_embeddings`` wrote)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(pool_dir) / EMBEDDINGS_FILE
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
        column = table.column("embedding").combine_chunks()
        dim = column.type.list_size
        values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(table), dim)
        keys = list(zip(table.column("dataset").to_pylist(), table.column("item_id").to_pylist(), strict=True))
    except (pa.ArrowInvalid, OSError, KeyError, AttributeError, ValueError) as exc:
        raise PoolError(f"not an embeddings table written by coba pools embed ({type(exc).__name__})",
                        file=str(path)) from None
    if not np.isfinite(values).all():
        raise PoolError("holds a value that is not a finite number", file=str(path), field="embedding")
    expected = list(zip(items["dataset"].astype(str), items["item_id"].astype(str), strict=True))
    if sorted(keys) != sorted(expected):
        raise PoolError("does not hold exactly one embedding per item of the pool; import it again: coba pools "
                        "embed POOL FILE --force", file=str(path))
    return pd.DataFrame({"dataset": [k[0] for k in keys], "item_id": [k[1] for k in keys],
                         "embedding": list(values)})
