"""A stored pool read a chunk of episodes at a time (the streaming bench, issue 37), without its whole tables.

``read_pool_chunk`` reads the rows of some episodes from a pool directory's Parquet tables with pyarrow: a filter
on ``episode_id`` (its bounds first, so that a table stored in episode order, as ``save_pool`` writes it, skips
every row group outside the chunk by its statistics; then the ids themselves, so any table order works) and gives
a ``Pool`` of those episodes, its items and every model, whose tables are what ``load_pool`` gives for those rows
(the same pandas dtypes). ``column_batches`` reads a few columns of a table a record batch at a time, for the
first, light pass over the pool. Nothing here validates: a chunked reader's caller validates what it reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pools.schema import LATER_COLUMNS
from pools.store import Pool

#: Tables whose rows belong to one episode (read per chunk); the others are read whole (items: those of the chunk).
PER_EPISODE_TABLES: tuple[str, ...] = ("episodes", "candidates", "verifications")


def read_manifest(path: str | os.PathLike[str]) -> dict:
    """The pool directory's ``manifest.json`` (the caller has checked the directory, e.g. with ``load_pool``)."""
    return json.loads((Path(path) / "manifest.json").read_bytes())


def read_table(path: str | os.PathLike[str], name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A whole small table (items, models, episodes), or some of its columns, as ``load_pool`` reads it."""
    return pq.read_table(Path(path) / f"{name}.parquet", columns=None if columns is None else list(columns)).to_pandas()


def episode_filter(episode_ids: np.ndarray) -> ds.Expression:
    """The rows of ``episode_ids``: their bounds (row-group statistics prune a table in episode order), then the
    ids themselves (exact in any order)."""
    ids = np.asarray(episode_ids, dtype=np.int64)
    field = ds.field("episode_id")
    bounds = (field >= int(ids.min())) & (field <= int(ids.max()))
    return bounds & field.isin(pa.array(ids))


def read_rows(path: str | os.PathLike[str], name: str, episode_ids: np.ndarray,
              columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of table ``name`` whose ``episode_id`` is one of ``episode_ids``, in the table's own order; a
    column of ``LATER_COLUMNS`` the stored table lacks (a pool saved before it existed) is its fill value."""
    dataset = ds.dataset(Path(path) / f"{name}.parquet", format="parquet")
    later = {c: fill for c, fill in LATER_COLUMNS.get(name, {}).items()
             if c not in dataset.schema.names and (columns is None or c in columns)}
    wanted = None if columns is None else [c for c in columns if c not in later]
    frame = dataset.to_table(columns=wanted, filter=episode_filter(episode_ids)).to_pandas()
    return frame.assign(**later)[list(columns)] if later and columns is not None else frame.assign(**later)


def read_pool_chunk(path: str | os.PathLike[str], episode_ids: np.ndarray, *, manifest: dict | None = None,
                    items: pd.DataFrame | None = None, models: pd.DataFrame | None = None) -> Pool:
    """The ``Pool`` of the episodes ``episode_ids`` of the pool at ``path``: their episode, candidate and
    verification rows, the items they cover (in the items table's order) and every model. ``manifest``, ``items``
    and ``models`` (read once by a caller that reads many chunks) are read here when not given."""
    manifest = read_manifest(path) if manifest is None else manifest
    tables = {name: read_rows(path, name, episode_ids) for name in PER_EPISODE_TABLES}
    items = read_table(path, "items") if items is None else items
    keys = pd.MultiIndex.from_frame(tables["episodes"][["dataset", "item_id"]])
    covered = pd.MultiIndex.from_frame(items[["dataset", "item_id"]]).isin(keys)
    models = read_table(path, "models") if models is None else models
    return Pool(manifest=manifest, items=items[covered].reset_index(drop=True), models=models, **tables)


def column_batches(path: str | os.PathLike[str], name: str, columns: Sequence[str],
                   batch_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
    """Table ``name``'s ``columns``, ``batch_rows`` rows at a time in the table's order (a light pass over the
    pool: a 37M-row table's few columns, never the whole table in memory)."""
    yield from pq.ParquetFile(Path(path) / f"{name}.parquet").iter_batches(batch_size=batch_rows,
                                                                           columns=list(columns))


def first_seen(values: pa.Array | pa.ChunkedArray) -> list:
    """The distinct values of ``values`` in order of first appearance (as ``pandas.unique``), as Python values."""
    return pc.unique(values).to_pylist()
