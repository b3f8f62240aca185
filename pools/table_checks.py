"""The passes over a stored pool's candidate and verification tables that ``pools.stored_validation`` makes.

``CandidatePass`` and ``VerificationPass`` read one record batch at a time: ``validate_pool``'s row checks
(``pools.row_checks``), and the compact arrays its whole-table checks need: per episode the candidate count,
smallest and largest index and first row (candidate indices 0..k-1), whether the table's keys strictly increase
(then no key repeats, and the cluster order is checked batch by batch with the last episode carried over; else
both are checked at the end on the key columns read again), and per verifier name, model and (verifier, model)
pair the first row holding it. The verification pass also tallies the verifier diagnostics
(``pools.verifier_tally``) from the candidates' correctness labels, an int8 [episodes, N] array.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pools.limits import MAX_CLUSTER
from pools.row_checks import (
    STEPS,
    C,
    RowRecord,
    V,
    check_kinds,
    notnull,
    numbers,
    range_masks,
    run_steps,
)
from pools.schema import OUTCOME_STATUS
from pools.verifier_tally import VerifierTally


def ints(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """An integer column as int64 (its kind checked first)."""
    return pc.cast(batch.column(name), pa.int64()).to_numpy(zero_copy_only=False)


def increasing(keys: list[np.ndarray], last: tuple | None) -> bool:
    """Whether the rows' keys (lexicographic over ``keys``) strictly increase, from ``last`` (the previous batch's
    last key) on."""
    if last is not None and len(keys[0]):
        keys = [np.concatenate([[v], k]) for v, k in zip(last, keys, strict=True)]
    ahead, tied = np.zeros(len(keys[0]) - 1 if len(keys[0]) else 0, bool), None
    for k in keys:
        step_up, same = k[1:] > k[:-1], k[1:] == k[:-1]
        ahead |= step_up if tied is None else tied & step_up
        tied = same if tied is None else tied & same
    return bool(ahead.all())


def first_codes(codes: np.ndarray, values: list, start: int, into: dict) -> None:
    """Record in ``into`` each value's first row (``codes`` index ``values``; rows from ``start``)."""
    for code in np.flatnonzero(np.bincount(codes, minlength=len(values))).tolist():  # few distinct values
        if values[code] not in into:
            into[values[code]] = start + int(np.argmax(codes == code))


@dataclass
class CandidatePass:
    """The candidate table's pass (see the module docstring)."""

    ids: np.ndarray  # the episodes table's episode ids, sorted and unique
    n: int
    rows: int = 0
    estimated: int = 0
    ordered: bool = True
    last: tuple | None = None
    contiguous: bool = False
    carry: tuple[int, int] | None = None  # the last episode's id and running cluster maximum
    order_failure: tuple[int, int, int] | None = None  # (row, cluster, expected) of the first cluster out of order
    stats: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        e = len(self.ids)
        self.stats = dict(size=np.zeros(e, np.int64), low=np.full(e, np.iinfo(np.int64).max),
                          high=np.full(e, np.iinfo(np.int64).min), first=np.full(e, np.iinfo(np.int64).max))
        self.label = np.full((e, max(self.n, 1)), -1, dtype=np.int8)
        self.contiguous = bool(e == 0 or self.ids[-1] - self.ids[0] == e - 1)

    def locate(self, episode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's episode position in ``ids`` and whether the episode is there."""
        if self.contiguous:  # ids lo, lo + 1, ...: a row's position is its id less lo
            at = episode - (self.ids[0] if len(self.ids) else 0)
            known = (at >= 0) & (at < len(self.ids))
            return np.where(known, at, 0), known
        at = np.minimum(np.searchsorted(self.ids, episode), max(len(self.ids) - 1, 0))
        return at, (self.ids[at] == episode) if len(self.ids) else np.zeros(len(episode), bool)

    def add(self, batch: pa.RecordBatch, start: int, record: RowRecord, whole_nulls: dict[str, bool]) -> None:
        """Check one batch and add it to the compact arrays."""
        if not check_kinds(record, C, batch, start, whole_nulls):
            return
        e, c, cluster = ints(batch, "episode_id"), ints(batch, "candidate"), ints(batch, "cluster")
        self.rows += len(e)
        self.estimated += int(pc.sum(batch.column("tokens_estimated")).as_py() or 0)
        self.ordered = self.ordered and increasing([e, c], self.last)
        self.last = (e[-1], c[-1]) if len(e) else self.last
        at, known = self.locate(e)
        key = notnull(batch, "answer_key")
        masks = [*range_masks(C, batch), (("negative", C, "candidate"), c < 0),
                 (("finite", C, "latency_s"), lambda: ~np.isfinite(numbers(batch, "latency_s"))),
                 (("unit", C, "repetition_score"), lambda: _outside_unit(numbers(batch, "repetition_score"), True)),
                 (("graded", C, "graded_score"), lambda: _outside_unit(numbers(batch, "graded_score"), False)),
                 (("usd", C, "cost_usd"), lambda: _bad_usd(numbers(batch, "cost_usd"))),
                 (("outcome_key", C, "answer_key"), lambda: _is_outcome(batch) & key),
                 (("episode_ref", C, "episode_id"), ~known),
                 (("cluster_range", C, "cluster"), (cluster < -1) | (cluster > MAX_CLUSTER)),
                 (("cluster_minus1", C, "cluster"), (cluster == -1) & key),
                 (("cluster_null", C, "cluster"), (cluster != -1) & ~key)]
        run_steps(record, start, masks)
        if record.wants(("whole_indices", C, "candidate")):
            self._count(at[known], c[known], np.flatnonzero(known) + start, batch.column("correct"), known)
        if self.ordered and record.wants(("whole_order", C, "cluster")):
            self._order(e, cluster, start)

    def _count(self, at: np.ndarray, c: np.ndarray, rows: np.ndarray, correct: pa.Array, known: np.ndarray) -> None:
        s = self.stats
        s["size"] += np.bincount(at, minlength=len(self.ids))
        np.minimum.at(s["low"], at, c)
        np.maximum.at(s["high"], at, c)
        np.minimum.at(s["first"], at, rows)
        label = pc.fill_null(pc.cast(correct, pa.int8()), -1).to_numpy(zero_copy_only=False)[known]
        inside = (c >= 0) & (c < self.n)
        self.label[at[inside], c[inside]] = label[inside]

    def _order(self, e: np.ndarray, cluster: np.ndarray, start: int) -> None:
        """The cluster-order check on rows in (episode, candidate) order, the last episode carried over."""
        if not len(e) or self.order_failure is not None:
            return
        carried = self.carry is not None and self.carry[0] == e[0]
        ext_e = np.concatenate([[self.carry[0]], e]) if carried else e
        ext_c = np.concatenate([[self.carry[1]], cluster]) if carried else cluster
        new = np.r_[True, ext_e[1:] != ext_e[:-1]]
        span = MAX_CLUSTER + 2
        base = np.cumsum(new) * span
        run = np.maximum.accumulate(base + np.clip(ext_c, -1, span - 2) + 1) - base - 1
        before = np.where(new, -1, np.r_[-1, run[:-1]])
        bad = ext_c > before + 1
        bad[0] &= not carried
        if bad.any():
            k = int(np.argmax(bad))
            self.order_failure = (start + k - int(carried), int(ext_c[k]), int(before[k]) + 1)
        self.carry = (int(ext_e[-1]), int(run[-1]))


def _outside_unit(values: np.ndarray, nan_is_bad: bool) -> np.ndarray:
    inside = (values >= 0) & (values <= 1)
    return ~inside if nan_is_bad else (values < 0) | (values > 1)


def _bad_usd(values: np.ndarray) -> np.ndarray:
    return (values < 0) | np.isinf(values)


def _is_outcome(batch: pa.RecordBatch) -> np.ndarray:
    column = batch.column("extraction_status")
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return pc.fill_null(pc.equal(column, OUTCOME_STATUS), False).to_numpy(zero_copy_only=False)


@dataclass
class VerificationPass:
    """The verification table's pass (see the module docstring)."""

    candidates: CandidatePass
    tally: VerifierTally
    rows: int = 0
    ordered: bool = True
    last: tuple | None = None
    first: dict[str, dict[Any, int]] = field(default_factory=lambda: {"tier": {}, "model": {}, "pair": {}})

    def add(self, batch: pa.RecordBatch, start: int, record: RowRecord, whole_nulls: dict[str, bool]) -> None:
        """Check one batch, note its names' first rows, tally its scores."""
        self.rows += batch.num_rows
        if not check_kinds(record, V, batch, start, whole_nulls):
            return
        e, c = ints(batch, "episode_id"), ints(batch, "candidate")
        tier, model = (_codes(batch.column(name)) for name in ("tier", "model"))
        first_codes(tier[0], tier[1], start, self.first["tier"])
        first_codes(model[0], model[1], start, self.first["model"])
        pairs = [(t, m) for t in tier[1] for m in model[1]]
        first_codes(tier[0] * len(model[1]) + model[0], pairs, start, self.first["pair"])
        self.ordered = self.ordered and _keys_increase(e, c, tier, self.last)
        self.last = (int(e[-1]), int(c[-1]), tier[1][tier[0][-1]]) if len(e) else self.last
        at, known = self.candidates.locate(e)
        size = self.candidates.stats["size"][at]
        score = numbers(batch, "score")
        masks = [*range_masks(V, batch), (("score", V, "score"), (score < 0) | (score > 1)),
                 (("finite", V, "latency_s"), lambda: ~np.isfinite(numbers(batch, "latency_s"))),
                 (("candidate_ref", V, "candidate"), ~(known & (c >= 0) & (c < size)))]
        if run_steps(record, start, masks) and record.limit == len(STEPS):
            self.tally.add(tier, model, at, c, score, self.candidates.label)


def _keys_increase(e: np.ndarray, c: np.ndarray, tier: tuple[np.ndarray, list], last: tuple | None) -> bool:
    """Whether the (episode, candidate, verifier name) keys strictly increase (names in text order), from the
    previous batch's ``last`` key on."""
    names = tier[1]
    rank = np.empty(len(names), np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    if not len(e):
        return True
    if last is not None and (e[0], c[0], names[tier[0][0]]) <= last:
        return False
    return increasing([e, c, rank[tier[0]]], None)


def _codes(column: pa.Array) -> tuple[np.ndarray, list]:
    """A string column as (codes, values): dictionary-encoded when read so, else encoded here."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    return column.indices.to_numpy(zero_copy_only=False).astype(np.int64), column.dictionary.to_pylist()
