"""95% confidence intervals of every policy's macro accuracy and costs: the percentile bootstrap over the bench's
paired units, on the same resamples as the paired tests (``eval.bootstrap``).

Units. The paired tests' units (``bootstrap.paired_matrix``: items, or (item, generator) episodes with
``unit="episode"``, kept where every policy compared covers them). Each unit carries, per policy, its accuracy
(percent) and every cost measure of the records (``coba_env.costs.COST_TABLE``), averaged over the unit's episodes.

Statistic. Each resample recomputes the headline macro average from the resampled units. A unit belongs to a
*cell*: its dataset and the set of generators its episodes ran on; a cell weighs as many (dataset, generator) pairs
as it has generators (an item of a one-generator-per-episode bench with G generators weighs G, an episode 1, an item
of a route bench 1). A cell's value is the mean of its resampled units; the macro value is the weighted mean of the
cells, the per-dataset value that of the dataset's cells. On complete paired coverage (no unit dropped) this is
exactly the table's macro (``eval.metrics.macro``) and per-dataset average, computed on the resample; a cell that
draws no unit in a resample is left out of that resample's average, as ``metrics.macro`` leaves out a missing pair.
The interval is the percentile interval of the ``resamples`` values (2.5th and 97.5th percentiles for 95%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from coba_env.costs import COST_TABLE
from eval import bootstrap
from eval.compact_records import key_codes
from eval.dense_codes import seen_pairs

#: The suffixes of an interval's two columns (``acc_low``, ``acc_high``, ``p_tokens_low``, ...).
LOW, HIGH = "_low", "_high"


def interval_metrics(records: pd.DataFrame) -> dict[str, str]:
    """Metric -> the record column it averages: accuracy, then every cost measure of ``COST_TABLE`` the records hold."""
    return {"acc": "correct", **{m.metric: m.name for m in COST_TABLE if m.name in records.columns}}


@dataclass
class Intervals:
    """Percentile intervals per policy (``macro``: index policy) and per (policy, dataset) (``per_dataset``), each
    metric as two columns ``<metric>_low`` and ``<metric>_high``; how they were drawn."""

    macro: pd.DataFrame
    per_dataset: pd.DataFrame
    n_units: int
    unit: str
    resamples: int
    seed: int
    ci: float

    def of(self, policy: str, metric: str, dataset: str | None = None) -> tuple[float, float] | None:
        """(low, high) of ``metric`` for ``policy`` (on ``dataset``), or None when not computed."""
        frame, key = (self.macro, policy) if dataset is None else (self.per_dataset, (policy, dataset))
        if key not in frame.index or f"{metric}{LOW}" not in frame.columns:
            return None
        return float(frame.loc[key, f"{metric}{LOW}"]), float(frame.loc[key, f"{metric}{HIGH}"])

    def to_json(self, policy: str) -> dict[str, list[float]]:
        """{metric: [low, high]} of ``policy`` (empty when it has none)."""
        if policy not in self.macro.index:
            return {}
        row = self.macro.loc[policy]
        metrics = [c[: -len(LOW)] for c in self.macro.columns if c.endswith(LOW)]
        return {m: [float(row[f"{m}{LOW}"]), float(row[f"{m}{HIGH}"])] for m in metrics}


def empty_intervals(unit: str = "item", resamples: int = bootstrap.RESAMPLES, seed: int = 0,
                    ci: float = bootstrap.CI) -> Intervals:
    """No interval (no policy ran)."""
    return Intervals(pd.DataFrame(), pd.DataFrame(), 0, unit, resamples, seed, ci)


def bootstrap_intervals(records: pd.DataFrame, policies: Sequence[str], *, unit: str = "item",
                        resamples: int = bootstrap.RESAMPLES, seed: int = 0, ci: float = bootstrap.CI,
                        paired: bootstrap.PairedData | None = None) -> Intervals:
    """Macro and per-dataset percentile intervals of accuracy and every cost measure for ``policies``
    (``paired``: ``bootstrap.paired_matrix(records, policies, unit)`` when the caller has it already)."""
    policies = list(policies)
    paired = paired if paired is not None else bootstrap.paired_matrix(records, policies, unit)
    n = paired.values.shape[1]
    if not policies or n == 0:
        return empty_intervals(unit, resamples, seed, ci)
    sums = CellSums(records, paired, resamples)
    bootstrap.feed_blocks(n, [sums], resamples, seed)
    return sums.intervals(seed, ci)


class CellSums:
    """The resampled sums behind ``bootstrap_intervals``, as a ``bootstrap.BlockSink``: per cell, the sum of each
    metric's unit values over the units drawn in each resample, and how many were drawn; ``intervals`` once every
    block was fed (``bootstrap.feed_blocks``: the paired tests' resamples)."""

    def __init__(self, records: pd.DataFrame, paired: bootstrap.PairedData,
                 resamples: int = bootstrap.RESAMPLES) -> None:
        self.paired, self.resamples = paired, resamples
        self.metrics = interval_metrics(records)
        values = _unit_values(records, paired, self.metrics)  # (metrics x policies, units)
        cells, self.weights, self.cell_dataset = _cells(records, paired)
        n_cells = len(self.weights)
        order = np.argsort(cells, kind="stable")
        # Units already in cell order (each dataset's items together, one generator set each): no gather.
        self.order = None if np.array_equal(order, np.arange(len(order))) else order
        self.values = values if self.order is None else values[:, order]
        self.bounds = np.searchsorted(cells[order], np.arange(n_cells + 1))
        self.sums = np.empty((n_cells, values.shape[0], resamples))
        self.drawn = np.empty((n_cells, resamples))

    def __call__(self, start: int, counts: np.ndarray) -> None:
        """Add the resamples ``start`` .. ``start + len(counts)``."""
        # Column-major counts, as the reordering gather gives them: BLAS sums a product of the other layout in
        # another order for some shapes (the last bit of a paper-pool interval moved).
        counts = np.asfortranarray(counts) if self.order is None else counts[:, self.order]
        stop = start + len(counts)
        for c in range(len(self.weights)):
            block = counts[:, self.bounds[c]:self.bounds[c + 1]]
            self.sums[c, :, start:stop] = self.values[:, self.bounds[c]:self.bounds[c + 1]] @ block.T
            self.drawn[c, start:stop] = block.sum(axis=1)

    def intervals(self, seed: int, ci: float = bootstrap.CI) -> Intervals:
        """The macro and per-dataset percentile intervals of every metric."""
        with np.errstate(invalid="ignore", divide="ignore"):  # (cells, rows, B): a cell's mean (NaN: none drawn)
            means = self.sums / np.where(self.drawn > 0, self.drawn, np.nan)[:, None, :]
        policies, metrics, cell_dataset, weights = self.paired.policies, self.metrics, self.cell_dataset, self.weights
        datasets = list(dict.fromkeys(cell_dataset))
        lo_q, hi_q = (1 - ci) / 2, 1 - (1 - ci) / 2
        macro_rows = _weighted(means, weights)
        per_ds = {d: _weighted(means[cell_dataset == d], weights[cell_dataset == d]) for d in datasets}
        shape = (len(metrics), len(policies))

        def frame(samples: np.ndarray, index: pd.Index) -> pd.DataFrame:
            # A resample that drew no unit of a dataset has no value for it (NaN): it is left out of that interval.
            with np.errstate(invalid="ignore"):
                lo, hi = np.nanquantile(samples, [lo_q, hi_q], axis=-1).reshape(2, *shape)
            columns = {}
            for k, metric in enumerate(metrics):
                columns[f"{metric}{LOW}"], columns[f"{metric}{HIGH}"] = lo[k], hi[k]
            return pd.DataFrame(columns, index=index)

        macro = frame(macro_rows, pd.Index(policies, name="policy"))
        by_ds = pd.concat([frame(per_ds[d], pd.MultiIndex.from_product([policies, [d]], names=["policy", "dataset"]))
                           for d in datasets])
        by_ds = by_ds.reindex(pd.MultiIndex.from_product([policies, datasets], names=["policy", "dataset"]))
        return Intervals(macro, by_ds, self.paired.values.shape[1], self.paired.unit, self.resamples, seed, ci)


def _unit_values(records: pd.DataFrame, paired: bootstrap.PairedData, metrics: dict[str, str]) -> np.ndarray:
    """Per metric and policy, each paired unit's mean over its episodes (accuracy in percent): grouped on one
    integer per (unit, policy) (``paired.row_unit``, ``paired.row_policy``), the same floats as on the key strings."""
    frame = records if paired.rows is None else records.iloc[paired.rows]
    n_pol, n_units = len(paired.policies), paired.values.shape[1]
    cell = np.multiply(paired.row_unit, n_pol, dtype=np.int64)  # in place below: one array of the records' size
    cell += paired.row_policy
    cell[paired.row_unit < 0] = -1
    columns = {c: frame[c].to_numpy().astype(float) * 100.0 if c == "correct" else frame[c].to_numpy()
               for c in dict.fromkeys(metrics.values())}
    per = pd.DataFrame(columns, copy=False).groupby(cell, sort=False).mean()
    per = per[per.index >= 0]
    unit_of, policy_of = np.divmod(per.index.to_numpy(), n_pol)
    out = np.full((len(metrics), n_pol, n_units), np.nan)
    for k, column in enumerate(metrics.values()):
        out[k, policy_of, unit_of] = per[column].to_numpy(float)
    return out.reshape(len(metrics) * n_pol, n_units)


def _cells(records: pd.DataFrame, paired: bootstrap.PairedData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each unit's cell (an index), each cell's weight (its number of generators) and dataset."""
    frame = records if paired.rows is None else records.iloc[paired.rows]
    gcode, gnames = key_codes(frame, ["generator"])
    n_gen = max(len(gnames[0]), 1)
    kept = paired.row_unit >= 0
    # Each unit's generators as a row of booleans; the distinct rows (few) named once, by unit then generator name.
    seen = seen_pairs(paired.row_unit[kept], gcode[kept], len(paired.units), n_gen)
    patterns, which = np.unique(seen, axis=0, return_inverse=True)
    names = gnames[0].to_numpy(dtype=object)
    genset = np.array(["\x1f".join(names[row]) for row in patterns], dtype=object)[which.ravel()]
    label = paired.units["dataset"].astype(str).to_numpy() + "\x1e" + genset.astype(str)
    cells, labels = pd.factorize(label)
    weights = np.array([len(name.split("\x1e", 1)[1].split("\x1f")) for name in labels], dtype=np.float64)
    dataset = np.array([name.split("\x1e", 1)[0] for name in labels], dtype=object)
    return cells, weights, dataset


def _weighted(means: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(rows, resamples): the weighted mean over cells, leaving out a cell with no unit in a resample."""
    present = np.isfinite(means)
    w = weights[:, None, None] * present
    with np.errstate(invalid="ignore", divide="ignore"):  # no cell drawn at all: NaN (``frame`` leaves it out)
        return (np.where(present, means, 0.0) * w).sum(axis=0) / w.sum(axis=0)
