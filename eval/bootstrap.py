"""Paired bootstrap over examples (paper Section 5, "Statistics"): accuracy differences, 95% CIs, p-values.

Unit. By default the resampling unit is the **item** (dataset, item_id), as in the paper ("paired bootstrap
over examples ... 1,042 paired examples"): a policy's per-item correctness is its accuracy averaged over the
item's generators. Items are kept only when every policy compared ran on every generator the item has and
the item has as many generators as the most covered item of its dataset (incomplete paired coverage is
dropped, as the paper drops one item). ``unit="episode"`` resamples (item, generator) episodes instead.

Method. One (B x n) matrix of resampled indices (seeded) is drawn once and reused for every policy, so
all comparisons share the same resamples. Because a resample mean is linear, each policy's B resampled
accuracies are one matrix product (counts @ correctness); a pair's bootstrap distribution is the difference
of two rows. The CI is the percentile interval. The two-sided p-value is the percentile-bootstrap sign
test with the usual +1 correction, ``p = min(1, 2 * min(#{d*<=0}+1, #{d*>=0}+1) / (B+1))``: it is never
exactly 0 (its floor is 2/(B+1), about 0.001 for B = 2,000). Differences are in accuracy points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from eval.compact_records import key_codes, key_index
from eval.dense_codes import distinct_counts, sorted_factorize

RESAMPLES = 2000
CI = 0.95


@dataclass
class PairedData:
    """Aligned per-unit correctness: ``values[p, u]`` for policy ``policies[p]`` and unit ``units[u]``."""

    policies: list[str]
    units: pd.DataFrame
    values: np.ndarray
    unit: str
    dropped: int
    #: The records of ``policies`` (``rows``: their positions in the records; None: every record), each one's
    #: policy (its index in ``policies``) and paired unit (its index in ``units``; -1: a dropped unit), what
    #: ``eval.intervals`` groups the same records by.
    rows: np.ndarray | None = None
    row_policy: np.ndarray | None = None
    row_unit: np.ndarray | None = None


def paired_matrix(records: pd.DataFrame, policies: Sequence[str] | None = None, unit: str = "item") -> PairedData:
    """Per-unit correctness of every policy, aligned on the units all of them cover (counted on integer codes,
    ``eval.compact_records.key_codes``)."""
    if unit not in ("item", "episode"):
        raise ValueError(f"unknown bootstrap unit {unit!r}; expected 'item' or 'episode'")
    if policies is None:
        policies = list(dict.fromkeys(records["policy"]))
    policies = list(policies)
    rows = policy_positions(records, policies)
    frame = records if rows is None else records.iloc[rows]
    keys = ["dataset", "item_id", *(["generator"] if unit == "episode" else [])]
    # The units in the order of the tables the tests were first written on: items by their dataset's and their
    # own first appearance (pandas' unstack of a groupby(sort=False)), episodes by their key strings (pivot_table).
    code, names = key_codes(frame, keys, sort=unit == "episode")
    row_unit, unit_codes = sorted_factorize(code, int(np.prod([max(len(k), 1) for k in names])))
    del code  # at 22M records each int64 array of them is 176 MB: none is kept past its use
    n_units, n_pol = len(unit_codes), len(policies)
    pcode, pnames = key_codes(frame, ["policy"])
    at = {name: k for k, name in enumerate(policies)}
    small = np.int16 if n_pol < np.iinfo(np.int16).max else np.int64  # kept for the intervals: 44 MB, not 176, at 22M
    row_policy = np.array([at.get(n, -1) for n in pnames[0]], dtype=small)[pcode]  # every row's is >= 0
    cell = row_unit * n_pol + row_policy
    count = np.bincount(cell, minlength=n_units * n_pol).reshape(n_units, n_pol)
    # The correct records counted per cell: the same floats as summing 1.0 weights, without a float copy of them.
    hits = np.bincount(cell[frame["correct"].to_numpy(dtype=bool)], minlength=n_units * n_pol).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = hits.reshape(n_units, n_pol) / count
    keep = (count > 0).all(axis=1)
    if unit == "item":
        keep &= _complete_items(frame, row_unit, cell, unit_codes // max(len(names[1]), 1), n_units, n_pol)
    kept = np.where(keep, np.cumsum(keep) - 1, -1)
    units = key_index(unit_codes[keep], names).to_frame(index=False)
    return PairedData(policies=policies, units=units, values=mean[keep].T.astype(float), unit=unit,
                      dropped=int(n_units - keep.sum()), rows=rows, row_policy=row_policy,
                      row_unit=kept[row_unit].astype(np.int64, copy=False))


def _complete_items(frame: pd.DataFrame, row_unit: np.ndarray, cell: np.ndarray, unit_dataset: np.ndarray,
                    n_units: int, n_pol: int) -> np.ndarray:
    """Per item, complete paired coverage: every policy covers every generator the item has, and the item has as
    many generators as the best-covered item of its dataset. (Counting distinct generators per item and per
    (item, policy) is enough: a policy's generators are a subset of the item's.)"""
    gcode, gnames = key_codes(frame, ["generator"])
    n_gen = max(len(gnames[0]), 1)
    item_gens = distinct_counts(row_unit, gcode, n_units, n_gen)
    cell_gens = distinct_counts(cell, gcode, n_units * n_pol, n_gen)
    complete = (cell_gens.reshape(n_units, n_pol) == item_gens[:, None]).all(axis=1)
    best = np.zeros(int(unit_dataset.max()) + 1 if n_units else 0, dtype=np.int64)
    np.maximum.at(best, unit_dataset, item_gens)
    return complete & (item_gens == best[unit_dataset])


def policy_positions(records: pd.DataFrame, policies: Sequence[str]) -> np.ndarray | None:
    """The positions of the records of ``policies``, or None when every record is one of theirs (a bench's
    records at 1M episodes x 22 policies are never copied then)."""
    column = records["policy"]
    if isinstance(column.dtype, pd.CategoricalDtype):  # compact records: look each name up once, not 22M times
        wanted = np.append(column.cat.categories.isin(list(policies)), False)  # code -1 (missing): not wanted
        mask = wanted[column.cat.codes.to_numpy()]
    else:
        mask = column.isin(policies).to_numpy()
    return None if mask.all() else np.flatnonzero(mask)


def policy_rows(records: pd.DataFrame, policies: Sequence[str], columns: Sequence[str]) -> pd.DataFrame:
    """The ``columns`` of the records of ``policies``: only those columns are copied, and none when every record
    is one of theirs (a bench's records at 100k items x 38 policies are ~1 GB)."""
    frame = records[list(columns)]
    rows = policy_positions(records, policies)
    return frame if rows is None else frame.iloc[rows]


def resample_counts(n: int, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """A (resamples x n) matrix: how often each unit appears in each bootstrap resample (seeded)."""
    return draw_counts(np.random.default_rng(seed), np.empty((resamples, n)))


def draw_counts(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (k x n) with the next k resamples' counts from ``rng`` and return it.

    A resample (row) at a time: its n draws are bincounted into n bins, small enough to stay in cache (a whole
    block's bincount over k x n bins, with its offsets and float copy, was 2-10x slower at 333k units). The draws
    are the same stream as ``rng.integers(0, n, size=(k, n))`` (bounded integers are drawn one after another)."""
    n = out.shape[1]
    for row in out:
        row[:] = np.bincount(rng.integers(0, n, size=n), minlength=n)
    return out


def bootstrap_means(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Resampled means, shape (policies x resamples), of ``values`` (policies x n) under ``counts``."""
    n = values.shape[1]
    return values @ counts.T / n


#: Resamples drawn and counted per block by ``feed_blocks``: the count matrix of a block stays small
#: (a full resamples x n matrix is 2000 x 333k x 8 bytes = 5.3 GB at 1M episodes).
_BLOCK = 64
#: A statistic fed the resample counts block by block: called with (first resample, k x n counts); the counts
#: array is reused for a later block once it returns.
BlockSink = Callable[[int, np.ndarray], None]


class ResampledMeans:
    """``bootstrap_means(values, counts)`` of every block of counts, as a ``BlockSink``: ``out`` (rows x
    resamples) is filled block by block."""

    def __init__(self, values: np.ndarray, resamples: int = RESAMPLES) -> None:
        self.values = values
        self.out = np.empty((values.shape[0], resamples))

    def __call__(self, start: int, counts: np.ndarray) -> None:
        """Fill the resamples ``start`` .. ``start + len(counts)``."""
        self.out[:, start:start + len(counts)] = self.values @ counts.T / self.values.shape[1]


def resampled_means(values: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """``bootstrap_means(values, resample_counts(n, resamples, seed))`` computed block by block of resamples
    (``feed_blocks``): the same result, without the whole count matrix in memory."""
    means = ResampledMeans(values, resamples)
    feed_blocks(values.shape[1], [means], resamples, seed)
    return means.out


def feed_blocks(n: int, sinks: Sequence[BlockSink], resamples: int = RESAMPLES, seed: int = 0) -> None:
    """Pass the rows of ``resample_counts(n, resamples, seed)``, block by block in order, to every one of ``sinks``:
    every statistic of a bench that resamples its paired units (the paired tests, ``eval.intervals``) is fed from
    one draw, so they share the same resamples and draw them once.

    The next block is drawn on a second thread while the sinks use the current one, and the sinks of a block run
    side by side (the draws and the sinks' matrix products release the GIL): put the costliest sink first (it
    runs on the calling thread). Two count buffers are reused throughout. One BLAS thread: these products are
    small, and OpenBLAS threads on a busy 2-core machine made them 25x slower (threadpoolctl comes with
    scikit-learn)."""
    rng = np.random.default_rng(seed)
    starts = list(range(0, resamples, _BLOCK))
    if not starts or not sinks:
        return
    buffers = [np.empty((min(_BLOCK, resamples), n)) for _ in range(min(2, len(starts)))]  # drawn, in use

    def block(k: int) -> np.ndarray:
        return buffers[k % len(buffers)][:min(_BLOCK, resamples - starts[k])]

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=2) as pool:
        pending = pool.submit(draw_counts, rng, block(0))
        for k, start in enumerate(starts):
            counts = pending.result()
            if k + 1 < len(starts):
                pending = pool.submit(draw_counts, rng, block(k + 1))
            # The sinks after the first on the pool (its second thread, beside the draw), the first one here.
            others = [pool.submit(sink, start, counts) for sink in sinks[1:]]
            sinks[0](start, counts)
            for other in others:
                other.result()


def compare(a: np.ndarray, b: np.ndarray, *, resamples: int = RESAMPLES, seed: int = 0,
            ci: float = CI) -> dict[str, float]:
    """Paired bootstrap of mean(a) - mean(b) in points (x100): diff, CI bounds, two-sided p."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two aligned 1-d vectors, got shapes {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("cannot bootstrap zero paired units")
    counts = resample_counts(a.size, resamples, seed)
    boot = bootstrap_means(np.vstack([a, b]), counts)
    return summary(a.mean() - b.mean(), boot[0] - boot[1], ci)


def summary(diff: float, boot_diff: np.ndarray, ci: float = CI) -> dict[str, float]:
    """One paired comparison in points (x100): ``diff``, the percentile CI of ``boot_diff`` (the resampled
    differences), the two-sided p-value (see the module docstring) and whether the CI excludes 0."""
    b = boot_diff.size
    # Exact zeros: identical vectors give differences like 1e-17 from the matrix product; round them away.
    boot_diff = np.round(boot_diff, 12)
    lo, hi = np.quantile(boot_diff, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    le = int((boot_diff <= 0).sum())
    ge = int((boot_diff >= 0).sum())
    p = min(1.0, 2.0 * min(le + 1, ge + 1) / (b + 1))
    return {"diff": 100.0 * float(np.round(diff, 12)), "ci_low": 100.0 * float(lo), "ci_high": 100.0 * float(hi),
            "p": float(p), "significant": bool(lo > 0 or hi < 0)}


def pairwise(records: pd.DataFrame, policies: Sequence[str] | None = None, *, unit: str = "item",
             resamples: int = RESAMPLES, seed: int = 0, ci: float = CI,
             paired: PairedData | None = None, boot: np.ndarray | None = None) -> pd.DataFrame:
    """Every ordered pair (a, b), a != b: paired difference acc(a) - acc(b) with CI and p (long format).
    ``paired``: ``paired_matrix(records, policies, unit)`` when the caller has it already; ``boot``: its
    ``resampled_means(paired.values, resamples, seed)`` when the caller drew them (``ResampledMeans``)."""
    data = paired if paired is not None else paired_matrix(records, policies, unit)
    rows = []
    if data.values.shape[1] == 0:
        return pd.DataFrame(columns=["a", "b", "diff", "ci_low", "ci_high", "p", "significant", "n_units"])
    boot = boot if boot is not None else resampled_means(data.values, resamples, seed)
    means = data.values.mean(axis=1)
    for i, a in enumerate(data.policies):
        for j, b in enumerate(data.policies):
            if i == j:
                continue
            rows.append({"a": a, "b": b, **summary(means[i] - means[j], boot[i] - boot[j], ci),
                         "n_units": data.values.shape[1]})
    out = pd.DataFrame(rows)
    out.attrs.update(unit=unit, resamples=resamples, seed=seed, ci=ci, dropped=data.dropped)
    return out


def versus(records: pd.DataFrame, reference: str, policies: Sequence[str] | None = None, *, unit: str = "item",
           resamples: int = RESAMPLES, seed: int = 0, ci: float = CI) -> pd.DataFrame:
    """``reference`` minus every other policy (rows of ``pairwise`` with a == reference)."""
    if policies is None:
        policies = list(dict.fromkeys(records["policy"]))
    if reference not in policies:
        raise ValueError(f"reference policy {reference!r} has no records")
    table = pairwise(records, policies, unit=unit, resamples=resamples, seed=seed, ci=ci)
    out = table[table["a"] == reference].reset_index(drop=True)
    out.attrs.update(table.attrs)
    return out


def format_p(p: float, resamples: int = RESAMPLES) -> str:
    """A p-value as the paper writes it: '<.001' below 0.001, else three decimals without the leading 0."""
    if p < 0.001 or p <= 2.0 / (resamples + 1) + 1e-12:
        return "<.001"
    return f"{p:.3f}".lstrip("0") if p < 1 else "1.000"
