"""A stored pool validated a batch of rows at a time (``load_pool`` + ``validate_pool`` without the whole tables).

``read_stored_pool`` gives what a bench reads of a stored pool before any work, without holding its candidate and
verification tables (at a million episodes ~8 GB in pandas): the small tables (items, models, episodes) and the
manifest as ``load_pool`` reads them, the first problem ``validate_pool`` would raise (the same message: the
small tables' checks are its own functions; the large tables' are ``pools.row_checks`` and
``pools.table_checks``, interleaved in its order), the verifier diagnostics (``pools.verifier_tally``), the
estimated-token count and the (verifier, model) pairs the light pass of the chunked compile reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pools.errors import PoolError
from pools.manifest_checks import check_manifest_basics
from pools.manifest_fields import ordered_tiers
from pools.row_checks import STEP_INDEX, STEPS, C, Failure, RowRecord, V
from pools.schema import LATER_COLUMNS, TABLES
from pools.store import Pool, read_manifest_file
from pools.table_checks import CandidatePass, VerificationPass
from pools.validate import (
    TABLE_KEYS,
    _check_columns,
    _check_keys,
    _check_manifest_agrees,
    _check_names,
    _check_not_empty,
    _check_references,
    _check_values,
    _Checker,
    _plain,
)
from pools.verifier_tally import VerifierTally
from pools.whole_steps import WHOLE_STEPS

#: Rows per record batch of the pass (the candidate table's columns of ~1M rows: ~150 MB at most).
BATCH_ROWS = 1 << 20
#: The small tables, read whole as ``load_pool`` reads them.
SMALL_TABLES = ("items", "models", "episodes")
#: String columns read dictionary-encoded (few distinct values; only their nulls and names are checked).
DICTIONARY_COLUMNS = {C: ("answer_key", "finish_reason", "extraction_status"), V: ("tier", "model")}
_NEUTRAL = {"int": np.int64, "float": np.float64, "bool": bool}


@dataclass
class StoredPool:
    """What a bench reads of a validated stored pool (see the module docstring)."""

    #: Manifest, items, models, episodes and embeddings; candidates and verifications empty (their columns only).
    pool: Pool
    verifiers: dict[str, dict[str, Any]]
    #: (candidates whose token counts are estimated, candidates): ``eval.cost_notes.estimated_tokens``.
    estimated: tuple[int, int]
    #: Verifier names and (verifier, model) pairs in order of first appearance (``scan_pool``'s).
    verifier_pairs: tuple[list[str], list[tuple[str, str]]]


def read_stored_pool(path: str | os.PathLike[str], *, batch_rows: int = BATCH_ROWS) -> StoredPool:
    """Read and validate the pool directory ``path`` a batch of rows at a time; raises ``PoolError`` with
    ``load_pool``'s message at the first problem."""
    path = Path(path)
    manifest = read_manifest_file(path)
    files = {name: _open(path, name) for name in TABLES}
    small = {name: files[name].read().to_pandas() for name in SMALL_TABLES}
    thin = Pool(manifest=manifest, **small, candidates=_neutral(C), verifications=_neutral(V))
    ck = _Checker(thin, str(path))
    n = check_manifest_basics(thin.manifest, ck.fail_manifest, thin.models["name"].astype(str))
    _check_not_empty(ck, n)
    _check_columns(ck)
    ids = np.unique(thin.episodes["episode_id"].to_numpy(dtype=np.int64))
    cands = CandidatePass(ids=ids, n=n)
    verifs = VerificationPass(candidates=cands, tally=VerifierTally(len(ids)))
    record = RowRecord()
    resolver = Resolver(path, ck, record, cands, verifs, files, n)
    resolver.read(C, cands.add, batch_rows)
    if record.limit > STEP_INDEX[("kind", V, "episode_id")]:  # else the verifications cannot hold the first problem
        resolver.read(V, verifs.add, batch_rows)
    resolver.resolve()
    tiers = ordered_tiers(sorted(verifs.first["tier"], key=verifs.first["tier"].get), manifest.get("tiers"))
    verifiers = verifs.tally.diagnostics(tiers, manifest.get("verifier_roles") or {}, cands.rows, cands.label)
    pairs = sorted(verifs.first["pair"], key=verifs.first["pair"].get)
    from pools.embeddings import load_embeddings

    thin.embeddings = load_embeddings(path, thin.items)
    return StoredPool(pool=thin, verifiers=verifiers, estimated=(cands.estimated, cands.rows),
                      verifier_pairs=(list(sorted(verifs.first["tier"], key=verifs.first["tier"].get)), pairs))


def _open(path: Path, name: str) -> pq.ParquetFile:
    """A table's Parquet file, checked as ``load_pool`` checks it: present, readable, with the schema's columns."""
    f = path / f"{name}.parquet"
    if not f.exists():
        raise PoolError("missing table file", file=str(f), table=name)
    try:
        handle = pq.ParquetFile(f)
    except (pa.ArrowInvalid, OSError):
        try:  # load_pool's own read, for its message
            pq.read_table(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise PoolError(f"unreadable or truncated Parquet ({exc})", file=str(f), table=name) from exc
        raise
    names = handle.schema_arrow.names
    columns = TABLES[name]
    missing = [c for c in columns if c not in names and c not in LATER_COLUMNS.get(name, {})]
    if missing:
        raise PoolError(f"missing column(s) {missing}; expected {list(columns)}", file=str(f), table=name,
                        field=missing[0])
    return handle


def _neutral(table: str) -> pd.DataFrame:
    """An empty table with the schema's columns in dtypes every check accepts (the thin pool's large tables)."""
    return pd.DataFrame({col: pd.Series([], dtype=_NEUTRAL.get(kind, object))
                         for col, kind in TABLES[table].items()})


class _Counted:
    """The pool as ``_check_manifest_agrees`` reads it: the small tables, the large tables' row counts, the tiers."""

    def __init__(self, thin: Pool, counts: dict[str, int], tiers: list[str]) -> None:
        self.manifest, self.items, self.models, self.tiers = thin.manifest, thin.items, thin.models, tiers
        self._tables = {name: pd.DataFrame(index=pd.RangeIndex(counts[name])) if name in counts else thin.table(name)
                        for name in TABLES}

    def table(self, name: str) -> pd.DataFrame:
        """A table, or for the large ones a frame of their row count."""
        return self._tables[name]


class Resolver:
    """The passes' reading, and the first problem in validate_pool's order (row checks, whole-table checks and the
    small tables' checks interleaved)."""

    def __init__(self, path: Path, ck: _Checker, record: RowRecord, cands: CandidatePass, verifs: VerificationPass,
                 files: dict[str, pq.ParquetFile], n: int) -> None:
        self.path, self.ck, self.record, self.cands, self.verifs, self.files, self.n = (
            path, ck, record, cands, verifs, files, n)
        self.source = str(path)
        self.whole_nulls = {name: _null_columns(files[name]) for name in (C, V)}

    def read(self, table: str, sink: Callable[..., None], batch_rows: int) -> None:
        """Feed ``table``'s record batches to ``sink`` (a nullable string column is not read: nothing to check)."""
        f = self.path / f"{table}.parquet"
        schema = self.files[table].schema_arrow
        columns = [c for c, kind in TABLES[table].items() if c in schema.names and not (
            kind == "str?" and c != "answer_key" and pa.types.is_string(schema.field(c).type))]
        wanted = [c for c in DICTIONARY_COLUMNS[table] if c in columns and pa.types.is_string(schema.field(c).type)]
        later = {c: fill for c, fill in LATER_COLUMNS.get(table, {}).items() if c not in schema.names}
        start, batches = 0, pq.ParquetFile(f, read_dictionary=wanted).iter_batches(batch_size=batch_rows,
                                                                                    columns=columns)
        # The next batch decoded on a second thread while this one is checked (Arrow releases the GIL).
        with ThreadPoolExecutor(max_workers=1) as reader:
            pending = reader.submit(_next_batch, batches, f, table)
            while (batch := pending.result()) is not None:
                pending = reader.submit(_next_batch, batches, f, table)
                for col, fill in later.items():
                    batch = batch.append_column(col, pa.array(np.full(batch.num_rows, fill)))
                sink(batch, start, self.record, self.whole_nulls[table])
                start += batch.num_rows

    def resolve(self) -> None:
        """Raise the pool's first problem, in validate_pool's order."""
        ck = self.ck
        self.steps("kind", "kind", last_table=V)
        _check_keys(ck)
        self.steps("whole_keys", "whole_keys", last_table=V)
        _check_names(ck)
        self.steps("name", "name")
        _check_values(ck)
        self.steps("negative", "outcome_key")
        _check_references(ck)
        self.steps("episode_ref", "whole_order")
        counts = {C: self.cands.rows, V: self.verifs.rows}
        tiers = ordered_tiers(sorted(self.verifs.first["tier"], key=self.verifs.first["tier"].get),
                              ck.pool.manifest.get("tiers"))
        _check_manifest_agrees(_Checker(_Counted(ck.pool, counts, tiers), self.source))

    def steps(self, first: str, last: str, last_table: str | None = None) -> None:
        """Resolve ``STEPS`` from the first of kind ``first`` to the last of kind ``last`` (of ``last_table``)."""
        begin = min(k for k, s in enumerate(STEPS) if s[0] == first)
        end = max(k for k, s in enumerate(STEPS) if s[0] == last and last_table in (None, s[1]))
        for k in range(begin, end + 1):
            if k in self.record.failures:
                self.fail(self.record.failures[k])
            whole = WHOLE_STEPS.get(STEPS[k][0])
            if whole is not None:
                failure = whole(self, STEPS[k])
                if failure is not None:
                    self.fail(failure)

    def fail(self, failure: Failure) -> None:
        """Raise ``failure`` as validate_pool does: the row's keys and the field's value read back from the file."""
        keys = list(TABLE_KEYS[failure.table])
        row = self.row(failure.table, failure.pos, [*keys, failure.field])
        label = ", ".join(f"{k}={_plain(row[k].iat[0])!r}" for k in keys)
        value = _plain(row[failure.field].iat[0])
        raise PoolError(failure.message.format(value=value), file=self.source, table=failure.table,
                        row=f"{failure.pos} ({label})", field=failure.field)

    def row(self, table: str, pos: int, columns: list[str]) -> pd.DataFrame:
        """Row ``pos`` of a large table as the whole table converts it to pandas."""
        handle = self.files[table]
        names = [c for c in dict.fromkeys(columns) if c in handle.schema_arrow.names]
        for group in range(handle.metadata.num_row_groups):
            rows = handle.metadata.row_group(group).num_rows
            if pos < rows:
                break
            pos -= rows
        frame = handle.read_row_group(group, columns=names).slice(pos, 1).to_pandas()
        for col in names:
            if self.whole_nulls[table].get(col) and pd.api.types.is_integer_dtype(frame[col].dtype):
                frame[col] = frame[col].astype(np.float64)
        return frame.assign(**{c: fill for c, fill in LATER_COLUMNS.get(table, {}).items() if c not in names})


def _next_batch(batches: Any, f: Path, table: str) -> pa.RecordBatch | None:
    """The next record batch, None at the end; a page that cannot be read is ``load_pool``'s unreadable table."""
    try:
        return next(batches)
    except StopIteration:
        return None
    except (pa.ArrowInvalid, OSError) as exc:
        raise PoolError(f"unreadable or truncated Parquet ({exc})", file=str(f), table=table) from exc


def _null_columns(handle: pq.ParquetFile) -> dict[str, bool]:
    """Per integer or boolean column (whose pandas dtype a null anywhere changes), whether it holds a null anywhere
    (from the row groups' statistics, else read)."""
    meta, out, schema = handle.metadata, {}, handle.schema_arrow
    for k, name in enumerate(schema.names):
        if not (pa.types.is_integer(schema.field(name).type) or pa.types.is_boolean(schema.field(name).type)):
            continue
        stats = [meta.row_group(g).column(k).statistics for g in range(meta.num_row_groups)]
        if all(s is not None and s.has_null_count for s in stats):
            out[name] = any(s.null_count for s in stats)
        else:
            out[name] = bool(handle.read(columns=[name]).column(name).null_count)
    return out
