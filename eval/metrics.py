"""Aggregate episode records into the paper's metrics.

Averaging follows the paper (Section 5): the headline numbers are **macro** averages, the mean over
dataset x generator pairs of the per-pair means, so a 30-item AIME pair weighs as much as a 500-item
MATH-500 pair. **Pooled** numbers (the plain mean over episodes) are reported beside them. Per dataset,
a value is the mean over generators of the per-pair means (paper Table "per-dataset"); per generator, the
mean over datasets of the per-pair means.

Accuracy is in percent; token, parameter-weighted token, call and latency figures are per episode (one
item-generator evaluation), matching ``paper-targets.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from coba_env.costs import COST_TABLE
from eval.compact_records import grouped
from eval.records import GRADED_COLUMN, RecordLayout

#: Metric name -> the episode-record column it averages (accuracy is scaled to percent; every cost measure of
#: ``coba_env.costs.COST_TABLE`` that every record holds; the priced ones join where the records have them).
METRICS: dict[str, str] = {"acc": "correct", **{m.metric: m.name for m in COST_TABLE if not m.needs_prices}}


def action_columns(layout: RecordLayout) -> dict[str, str]:
    """The action-count columns of records of ``layout`` and the code each counts: ``n_samples`` (S), then each
    verifier's calls (its name: ``n_v1`` -> V1 on the paper's verifiers)."""
    return {"n_samples": "S", **{column: name for name, column in layout.counts.items()}}

PAIR = ["dataset", "generator"]


#: The measures averaged only where the records have them (a pool with prices, ``pools.prices``): metric -> column.
PRICED_METRICS: dict[str, str] = {m.metric: m.name for m in COST_TABLE if m.needs_prices}


#: The second accuracy measure of a pool with graded scores: the mean graded score of the selected answers, in
#: percent (``eval.records.GRADED_COLUMN``; where a candidate has no graded score its 0/1 label counts).
GRADED_METRIC = "graded_acc"


def metrics_of(records: pd.DataFrame) -> dict[str, str]:
    """``METRICS``, plus the priced measures and ``graded_acc`` when the records carry them."""
    extra = {**PRICED_METRICS, GRADED_METRIC: GRADED_COLUMN}
    return {**METRICS, **{k: v for k, v in extra.items() if v in records.columns}}


def _metric_columns(records: pd.DataFrame) -> dict[str, np.ndarray]:
    """Metric name -> its values per record (``metrics_of``; accuracy and graded accuracy in percent)."""
    out = {}
    for metric, column in metrics_of(records).items():
        values = records[column].to_numpy()
        out[metric] = values.astype(float) * 100.0 if column in ("correct", GRADED_COLUMN) else values
    return out


def pair_means(records: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, dataset, generator) means of every metric, with the episode count ``n``."""
    return grouped(records, ["policy", *PAIR], _metric_columns(records)).reset_index()


def _metric_names(frame: pd.DataFrame) -> list[str]:
    return [m for m in (*METRICS, *PRICED_METRICS, GRADED_METRIC) if m in frame.columns]


def macro(records: pd.DataFrame, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per policy: the mean over dataset x generator pairs of the per-pair means (the paper's headline; ``pairs``:
    ``pair_means(records)`` when the caller has it)."""
    pairs = pair_means(records) if pairs is None else pairs
    out = pairs.groupby("policy", sort=False)[_metric_names(pairs)].mean()
    out["pairs"] = pairs.groupby("policy", sort=False).size()
    out["n"] = pairs.groupby("policy", sort=False)["n"].sum()
    return out


def pooled(records: pd.DataFrame) -> pd.DataFrame:
    """Per policy: the plain mean over episodes (every episode weighs the same)."""
    return grouped(records, ["policy"], _metric_columns(records))


def per_dataset(records: pd.DataFrame, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (policy, dataset): the mean over generators of the per-pair means (``pairs`` as in ``macro``)."""
    pairs = pair_means(records) if pairs is None else pairs
    out = pairs.groupby(["policy", "dataset"], sort=False)[_metric_names(pairs)].mean()
    out["n"] = pairs.groupby(["policy", "dataset"], sort=False)["n"].sum()
    return out


def per_generator(records: pd.DataFrame, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (policy, generator): the mean over datasets of the per-pair means (``pairs`` as in ``macro``)."""
    pairs = pair_means(records) if pairs is None else pairs
    out = pairs.groupby(["policy", "generator"], sort=False)[_metric_names(pairs)].mean()
    out["n"] = pairs.groupby(["policy", "generator"], sort=False)["n"].sum()
    return out


def allocation(records: pd.DataFrame, layout: RecordLayout, counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Action-allocation audit per (policy, dataset): mean count of each action and its share of all actions.

    Counts are means over generators of the per-pair means (like every per-dataset number). ``share_<code>`` is
    an action's share of the non-STOP actions (``action_columns``); ``candidates`` is the mean number of
    candidates drawn and ``strong_calls`` the mean number of calls of the verifier standing for the strong
    verifier V3 (``RecordLayout.strong``; 0 without one). ``counts``: ``pair_counts(records, layout)`` when the
    caller has it.
    """
    out = _action_shares(records, layout, ["policy", "dataset"], counts)
    out["candidates"] = out["n_samples"]
    out["strong_calls"] = out[layout.strong] if layout.strong is not None else 0.0
    return out


def allocation_overall(records: pd.DataFrame, layout: RecordLayout,
                       counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """The allocation audit per policy over all pairs (macro: mean over pairs; ``counts`` as in ``allocation``)."""
    return _action_shares(records, layout, ["policy"], counts)


def pair_counts(records: pd.DataFrame, layout: RecordLayout) -> pd.DataFrame:
    """Per (policy, dataset, generator) the mean of each action count (``action_columns``)."""
    cols = list(action_columns(layout))
    return grouped(records, ["policy", *PAIR], {c: records[c].to_numpy() for c in cols}).drop(columns="n").reset_index()


def _action_shares(records: pd.DataFrame, layout: RecordLayout, by: list[str],
                   counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean action counts per ``by`` group (means of the per-pair means) and each action's ``share_<code>``."""
    codes = action_columns(layout)
    cols = list(codes)
    counts = pair_counts(records, layout) if counts is None else counts
    out = counts.groupby(by, sort=False)[cols].mean()
    total = out[cols].sum(axis=1).replace(0.0, np.nan)
    for col, code in codes.items():
        out[f"share_{code}"] = (out[col] / total).fillna(0.0)
    return out


def oracle_gap(records: pd.DataFrame, by: str | None = "dataset") -> pd.DataFrame:
    """Split every policy's errors into allocation errors and generation errors.

    An *allocation error* is a wrong answer although the pool held a correct candidate (better routing or
    selection could have found it); a *generation error* is a wrong answer with no correct candidate in the
    pool (only better generation helps). Counts are pooled over episodes; ``*_rate`` is the count as a
    percentage of the episodes. ``by`` groups further ("dataset", "generator" or None for overall).
    """
    wrong = ~records["correct"].to_numpy().astype(bool)
    avail = records["oracle_available"].to_numpy().astype(bool)
    counts = {"wrong": wrong, "allocation_errors": wrong & avail, "generation_errors": wrong & ~avail,
              "oracle_available": avail}
    out = grouped(records, ["policy"] + ([by] if by else []), counts, how="sum")
    out[list(counts)] = out[list(counts)].astype(int)
    for col in ("wrong", "allocation_errors", "generation_errors", "oracle_available"):
        out[f"{col}_rate"] = 100.0 * out[col] / out["n"]
    out["allocation_share"] = (out["allocation_errors"] / out["wrong"].replace(0, np.nan)).fillna(0.0)
    return out


#: The aggregates ``summarize`` reports, by the name ``computed`` passes them under (``aggregates``).
AGGREGATE_NAMES = ("macro", "pooled", "per_dataset", "per_generator", "allocation", "allocation_overall", "gap",
                   "gap_by_dataset")


def aggregates(records: pd.DataFrame, layout: RecordLayout,
               pairs: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every aggregate ``summarize`` reports, by its name (``AGGREGATE_NAMES``), the per-pair means (``pairs``:
    ``pair_means(records)`` when the caller has it) and the per-pair action counts grouped once for all of them
    (each is a pass over every record: at 1M episodes x 22 policies ~1 s and ~1 GB of temporaries)."""
    pairs = pair_means(records) if pairs is None else pairs
    counts = pair_counts(records, layout)
    return {"macro": macro(records, pairs), "pooled": pooled(records), "per_dataset": per_dataset(records, pairs),
            "per_generator": per_generator(records, pairs), "allocation": allocation(records, layout, counts),
            "allocation_overall": allocation_overall(records, layout, counts), "gap": oracle_gap(records, None),
            "gap_by_dataset": oracle_gap(records, "dataset")}


def summarize(records: pd.DataFrame, layout: RecordLayout, computed: dict[str, pd.DataFrame] | None = None,
              pairs: pd.DataFrame | None = None) -> dict[str, Any]:
    """Every aggregate above as nested plain dicts keyed by policy (then dataset / generator).

    ``computed``: the ``aggregates`` of ``records`` when the caller has them (all of them: a dict with every name
    of ``AGGREGATE_NAMES``); ``pairs``: their ``pair_means``."""
    out: dict[str, Any] = {}
    if not len(records):
        return out
    pairs = pair_means(records) if pairs is None else pairs
    agg = computed if computed is not None else aggregates(records, layout, pairs)
    pairs = pairs.copy(deep=False)  # the caller's frame keeps its index
    pairs.index = pd.MultiIndex.from_arrays([pairs["policy"], pairs["dataset"] + "/" + pairs["generator"]])
    tables = {
        "macro": _nested(agg["macro"]), "pooled": _nested(agg["pooled"]),
        "per_dataset": _nested(agg["per_dataset"]), "per_generator": _nested(agg["per_generator"]),
        "per_pair": _nested(pairs.drop(columns=["policy", "dataset", "generator"])),
    }
    alloc_all, alloc = _nested(agg["allocation_overall"]), _nested(agg["allocation"])
    gap_all, gap = _nested(agg["gap"]), _nested(agg["gap_by_dataset"])
    for policy in tables["macro"]:
        out[policy] = {name: table.get(policy, {}) for name, table in tables.items()}
        out[policy]["allocation"] = {"overall": alloc_all.get(policy, {}), **alloc.get(policy, {})}
        out[policy]["oracle_gap"] = {"overall": gap_all.get(policy, {}), **gap.get(policy, {})}
    return out


def _nested(frame: pd.DataFrame) -> dict[str, Any]:
    """{policy: {column: value}} for a policy-indexed frame, {policy: {key: {column: value}}} for two levels."""
    out: dict[str, Any] = {}
    for key, row in frame.to_dict(orient="index").items():
        clean = {str(k): to_plain(v) for k, v in row.items()}
        if isinstance(key, tuple):
            out.setdefault(str(key[0]), {})[str(key[1])] = clean
        else:
            out[str(key)] = clean
    return out


def to_plain(v: Any) -> Any:
    """A numpy scalar as the plain Python value (NaN / inf -> None); anything else unchanged."""
    if isinstance(v, np.integer | int) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, np.floating | float):
        return None if not np.isfinite(v) else float(v)
    if isinstance(v, np.bool_ | bool):
        return bool(v)
    return v
