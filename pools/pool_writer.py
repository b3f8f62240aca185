"""Streaming pool writer: each table written chunk by chunk as Parquet row groups, the manifest from counts.

A pool too large to hold as pandas frames (``coba pools simulate`` of a million episodes) is written by
appending frames of a few thousand episodes: each table buffers at most one row group of Arrow data, so
memory does not grow with the pool. Row groups hold ``ROW_GROUP_ROWS`` rows, pyarrow's default for one
``write_table`` call, so a streamed table is byte for byte the file ``save_pool`` writes for the same rows.
The files land in a temporary sibling that ``pools.atomic_write.atomic_dir`` renames into place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pools.atomic_write import atomic_dir
from pools.manifest_fields import derived_manifest, ordered_tiers
from pools.schema import TABLES

#: Rows per Parquet row group: pyarrow's default for ``pq.write_table`` (so both ways give the same bytes).
ROW_GROUP_ROWS = 1024 * 1024

_ARROW_TYPES = {
    "str": pa.string(),
    "str?": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "float?": pa.float64(),
    "bool": pa.bool_(),
    "bool?": pa.bool_(),
}


def coerce_table(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Return ``df`` with exactly the schema's columns, in order, with pandas dtypes for their kinds."""
    out = {}
    for col, kind in TABLES[table].items():
        s = df[col]
        if kind in ("str", "str?"):
            s = s.astype(object).where(s.notna(), None)
        elif kind == "int":
            s = s.astype("int64")
        elif kind in ("float", "float?"):
            s = s.astype("float64")
        elif kind == "bool":
            s = s.astype(bool)
        elif kind == "bool?":
            s = s.astype("boolean")
        out[col] = s
    return pd.DataFrame(out).reset_index(drop=True)


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema a pool table is stored with."""
    return pa.schema([(c, _ARROW_TYPES[k]) for c, k in TABLES[table].items()])


def to_arrow(df: pd.DataFrame, table: str) -> pa.Table:
    """``df`` as the Arrow table stored for pool table ``table`` (schema columns and types, pandas metadata)."""
    return pa.Table.from_pandas(coerce_table(df, table), schema=arrow_schema(table), preserve_index=False)


def manifest_text(manifest: dict[str, Any]) -> str:
    """The manifest.json text: sorted keys, two-space indent, strict JSON, a final newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"


class TableWriter:
    """Appends frames of one pool table to a Parquet file in row groups of ``ROW_GROUP_ROWS`` rows."""

    def __init__(self, path: Path, table: str, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.path, self.table, self.rows = path, table, 0
        self._row_group_rows = row_group_rows
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` (any columns beyond the schema's are dropped)."""
        arrow = to_arrow(df, self.table)
        self.rows += arrow.num_rows
        self._pending.append(arrow)
        self._pending_rows += arrow.num_rows
        while self._pending_rows >= self._row_group_rows:
            whole = pa.concat_tables(self._pending).combine_chunks()
            self._flush(whole.slice(0, self._row_group_rows))
            rest = whole.slice(self._row_group_rows)
            self._pending, self._pending_rows = [rest], rest.num_rows

    def _flush(self, arrow: pa.Table) -> None:
        if self._writer is None:  # the first frame's schema carries the pandas metadata write_table stores
            self._writer = pq.ParquetWriter(self.path, arrow.schema, compression="zstd")
        self._writer.write_table(arrow)

    def close(self) -> None:
        """Write the last (short) row group and the file's footer."""
        if self._pending_rows or self._writer is None:  # an empty table still gets its file, as write_table does
            pending = self._pending or [to_arrow(pd.DataFrame(columns=list(TABLES[self.table])), self.table)]
            self._flush(pa.concat_tables(pending).combine_chunks())
        self._pending, self._pending_rows = [], 0
        assert self._writer is not None
        self._writer.close()


class PoolSummary:
    """What the manifest's derived fields need, counted while the tables stream past."""

    def __init__(self) -> None:
        self.dataset_sizes: dict[str, int] = {}
        self.present_tiers: list[str] = []
        self.models = pd.DataFrame(columns=["name", "params_b", "role"])

    def add(self, table: str, df: pd.DataFrame) -> None:
        """Count one frame of ``table``."""
        if table == "items":
            for name, n in df.groupby("dataset", sort=False).size().items():
                self.dataset_sizes[str(name)] = self.dataset_sizes.get(str(name), 0) + int(n)
        elif table == "verifications":
            self.present_tiers += [str(t) for t in pd.unique(df["tier"]) if t not in self.present_tiers]
        elif table == "models":
            self.models = df if not len(self.models) else pd.concat([self.models, df], ignore_index=True)


def write_pool_stream(dest: Path, frames: Iterable[tuple[str, pd.DataFrame]], manifest: dict[str, Any], *,
                      on_frame: Callable[[str, int], object] | None = None) -> dict[str, Any]:
    """Write the pool whose tables arrive as ``(table, frame)`` pairs (any order, each table's rows in order)
    to ``dest`` (checked beforehand, ``pools.output_paths.check_output_dir``) atomically; return the manifest.

    ``manifest`` holds the fields the tables do not give (``n_candidates``, generation, provenance); the
    derived ones are computed as ``Pool.refresh_manifest`` does. ``on_frame(table, rows)`` reports progress.
    """
    def fill(tmp: Path) -> dict[str, Any]:
        writers = {name: TableWriter(tmp / f"{name}.parquet", name) for name in TABLES}
        summary = PoolSummary()
        for name, df in frames:
            writers[name].write(df)
            summary.add(name, df)
            if on_frame is not None:
                on_frame(name, len(df))
        for w in writers.values():
            w.close()
        full = derived_manifest(manifest, models=summary.models, dataset_sizes=summary.dataset_sizes,
                                tiers=ordered_tiers(summary.present_tiers, manifest.get("tiers")),
                                counts={name: w.rows for name, w in writers.items()})
        (tmp / "manifest.json").write_text(manifest_text(full), encoding="utf-8")
        return full

    return atomic_dir(dest, fill, marker="pool")
