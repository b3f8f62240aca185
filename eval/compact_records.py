"""The columns of the episode records the analysis reads, compact: what a bench keeps in memory (issue 37).

A bench's full records (``eval.records``: text columns such as ``actions`` and ``selected_answer``, one row per
(policy, episode)) go to the episode files; the analysis (``eval.metrics``, ``eval.bootstrap``, ``eval.intervals``)
reads only the keys (policy, dataset, generator, item), ``correct``, ``oracle_available``, the action counts and the
cost measures. ``compact_records`` keeps those columns, the keys as pandas categoricals over fixed, sorted categories
(``KeyCategories``: one byte or four per record instead of a string) and the counts as int32; the cost measures stay
float64, so every mean is the same float. Grouping on a categorical (``observed``, ``sort=False``) gives the groups
in order of first appearance, as on the strings, and sorting gives the strings' order (the categories are sorted),
so the analysis of the compact frame equals that of the full one. At 1M episodes x 22 policies: ~1.3 GB instead of
~4.2 GB.

A streamed bench (``eval.chunked_replay``) compacts each chunk's records as they are produced
(``compact_records(frame, layout, categories)`` with the whole pool's categories) and copies the chunks into
the bench's columns as they come (``eval.chunked_replay.ChunkJoin``); the whole-pool path compacts its records frame
a policy at a time and joins them (``compact_runs``, ``join_compact``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from eval.records import GRADED_COLUMN, MEASURES, PRICED_MEASURES, RecordLayout

#: The key columns, kept as categoricals.
KEYS = ("policy", "dataset", "generator", "item_id")
#: The flags kept as booleans.
FLAGS = ("correct", "oracle_available")


def compact_columns(layout: RecordLayout) -> list[str]:
    """The record columns ``compact_records`` keeps for records of ``layout``, in order."""
    measures = [*MEASURES, *(PRICED_MEASURES if layout.priced else ()), *((GRADED_COLUMN,) if layout.graded else ())]
    return [*KEYS, *FLAGS, *count_columns(layout), *measures]


def count_columns(layout: RecordLayout) -> list[str]:
    """The action-count columns (kept as int32): ``n_samples`` and each verifier's calls."""
    return ["n_samples", *layout.counts.values()]


@dataclass(frozen=True)
class KeyCategories:
    """The sorted categories of each key column (``KEYS``) of a bench's records."""

    policy: pd.Index
    dataset: pd.Index
    generator: pd.Index
    item_id: pd.Index

    @classmethod
    def of(cls, policies: Sequence[str], dataset: Sequence[str], generator: Sequence[str],
           item_id: Sequence[str]) -> KeyCategories:
        """The categories of records of ``policies`` on episodes with these datasets, generators and items."""
        def sorted_unique(values: Sequence[str]) -> pd.Index:
            return pd.Index(sorted(set(map(str, pd.unique(np.asarray(values, dtype=object))))), dtype="str")

        return cls(sorted_unique(policies), sorted_unique(dataset), sorted_unique(generator), sorted_unique(item_id))

    @classmethod
    def of_frames(cls, frames: Sequence[pd.DataFrame]) -> KeyCategories:
        """The categories of the key columns of the records ``frames``."""
        return cls.of(*([v for f in frames for v in pd.unique(f[key])] for key in KEYS))

    def codes(self, key: str, values: pd.Series | np.ndarray) -> np.ndarray:
        """The codes of ``values`` among ``key``'s categories (ValueError naming a value that has none)."""
        categories: pd.Index = getattr(self, key)
        codes = categories.get_indexer(pd.Index(np.asarray(values, dtype=object)).astype("str"))
        if (codes < 0).any():
            raise ValueError(f"{key} {np.asarray(values)[codes < 0][0]!r} is not among the bench's {key} values")
        return codes.astype(np.int8 if len(categories) < 128 else np.int32)


def compact_records(records: pd.DataFrame, layout: RecordLayout,
                    categories: KeyCategories | None = None) -> pd.DataFrame:
    """The compact columns (``compact_columns``) of ``records``: keys as categoricals over ``categories`` (default:
    those of ``records``), flags as booleans, counts as int32, measures as float64."""
    categories = categories or KeyCategories.of_frames([records])
    columns: dict[str, pd.Series | np.ndarray] = {}
    for key in KEYS:
        codes = _repeated_codes(records[key], categories, key)
        columns[key] = pd.Categorical.from_codes(codes, categories=getattr(categories, key))
    for name in compact_columns(layout)[len(KEYS):]:
        dtype = bool if name in FLAGS else np.int32 if name in count_columns(layout) else np.float64
        columns[name] = np.asarray(records[name], dtype=dtype)
    return pd.DataFrame(columns, copy=False)


def _repeated_codes(values: pd.Series, categories: KeyCategories, key: str) -> np.ndarray:
    """``categories.codes`` of a key column, looking each distinct value up once (a policy's records repeat one
    name; an item's generators repeat its id)."""
    inverse, uniques = pd.factorize(values)
    return categories.codes(key, np.asarray(uniques, dtype=object))[inverse]


def compact_runs(frames: Sequence[pd.DataFrame], layout: RecordLayout) -> pd.DataFrame:
    """The compact columns of the records ``frames`` (one per policy, in order) joined: the whole-pool path's
    compact records, built a policy at a time (never a full copy of every record beside them)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return compact_records(pd.DataFrame({c: pd.Series(dtype=object) for c in layout.columns}), layout)
    categories = KeyCategories.of_frames(frames)
    return join_compact([compact_records(f, layout, categories) for f in frames])


def join_compact(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Compact frames of one set of categories joined in order, column by column, each column deleted from the
    frames once joined (they are the chunks' own: at 22M records the join then holds one column twice, not every
    record twice)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    columns: dict[str, pd.Series | np.ndarray] = {}
    for name in list(frames[0].columns):
        first = frames[0][name]
        if isinstance(first.dtype, pd.CategoricalDtype):
            codes = np.concatenate([f[name].cat.codes.to_numpy() for f in frames])
            columns[name] = pd.Categorical.from_codes(codes, dtype=first.dtype)
        else:
            columns[name] = np.concatenate([f[name].to_numpy() for f in frames])
        for f in frames:
            del f[name]
    return pd.DataFrame(columns, copy=False)


# ---------------------------------------------------------------- grouping on codes

def key_codes(records: pd.DataFrame, keys: Sequence[str], *,
              sort: bool = True) -> tuple[np.ndarray, list[pd.Index]]:
    """Per record one int64 code of its ``keys`` values, and each key's names: grouping on the codes groups as on
    the key tuples; ordering them orders the tuples by each key's names sorted (``sort``) or in order of first
    appearance (as the levels of pandas' ``groupby(sort=False)`` result). A categorical key (compact records)
    gives its codes at no cost, any other column is factorized (the full records of a whole-pool run)."""
    code = np.zeros(len(records), dtype=np.int64)
    names = []
    for key in keys:
        column = records[key]
        if isinstance(column.dtype, pd.CategoricalDtype) and column.cat.categories.is_monotonic_increasing:
            codes, uniques = column.cat.codes.to_numpy(), column.cat.categories
            if not sort:  # the categories ranked by first appearance
                codes, seen = pd.factorize(codes)
                uniques = uniques[seen]
        else:
            codes, uniques = pd.factorize(column.astype("str"), sort=sort)
        code *= max(len(uniques), 1)  # in place: at 22M records each step's new array would be 176 MB more
        code += codes
        names.append(pd.Index(uniques, dtype="str", name=key))
    return code, names


def key_index(codes: np.ndarray, names: Sequence[pd.Index]) -> pd.Index:
    """The key tuples (an Index of one key, else a MultiIndex named by the keys) of ``key_codes``' ``codes``."""
    levels = []
    rest = np.asarray(codes, dtype=np.int64)
    for index in reversed(names):
        rest, own = np.divmod(rest, max(len(index), 1))
        levels.append(index[own])
    levels.reverse()
    if len(levels) == 1:
        return pd.Index(levels[0], dtype="str", name=names[0].name)
    return pd.MultiIndex.from_arrays(levels, names=[index.name for index in names])


def grouped(records: pd.DataFrame, keys: Sequence[str], columns: dict[str, np.ndarray | pd.Series],
            how: str = "mean") -> pd.DataFrame:
    """``pd.DataFrame(columns).groupby(keys, sort=False)`` aggregated by ``how`` ("mean", "sum") with the group
    sizes as ``n``: groups in order of first appearance, each the same float as on the string keys (pandas'
    grouped sums run over the same rows in the same order), grouped on one int64 code instead of the key columns."""
    code, names = key_codes(records, keys)
    frame = pd.DataFrame(dict(columns), copy=False)
    by = frame.groupby(code, sort=False)
    out = getattr(by, how)()
    out["n"] = by.size()
    out.index = key_index(out.index.to_numpy(), names)
    return out
