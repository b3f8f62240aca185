"""Aggregate a finished bench run (``eval.runner.BenchRun``) into ``BenchData``: metrics, allocation, oracle gap,
paired bootstrap against a reference policy, and the Pareto analysis of the accuracy-cost plane."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from coba_env.compiled import CompiledPool
from eval import bootstrap, metrics, pareto
from eval.bench_data import COST_METRIC, BenchData
from eval.compact_records import compact_runs
from eval.cost_notes import CostEstimates, cost_estimates
from eval.intervals import CellSums, Intervals, empty_intervals
from eval.records import RecordLayout
from eval.runner import BenchRun
from eval.tables import ORACLE_GROUP, REFERENCE, PolicyInfo
from pools.store import Pool

#: The policy group of the routing policies (``agents.registry.GROUPS``): the default reference on item episodes.
ROUTING_GROUP = "routing"
#: The paired tests' default reference by episode grouping: (the policy named, if it ran; else the most accurate of
#: these policy groups, if any ran; else the most accurate deployable policy).
DEFAULT_REFERENCE: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "pair": (REFERENCE, ()),
    "item": (None, (ROUTING_GROUP,)),
}
#: The columns of an empty pairwise-bootstrap frame (fewer than two policies ran).
PAIRWISE_COLUMNS = ["a", "b", "diff", "ci_low", "ci_high", "p", "significant", "n_units"]


def policy_info(run: BenchRun) -> dict[str, PolicyInfo]:
    """Label and group of every policy in ``run``."""
    return {r.name: PolicyInfo(label=r.label, group=r.group) for r in run.runs}


def analyse(pool: Pool, compiled: CompiledPool, run: BenchRun, *, cost_model: str = "p_tokens", seed: int = 0,
            pool_spec: str | None = None, unit: str = "item", resamples: int = bootstrap.RESAMPLES,
            estimates: CostEstimates | None = None, notes: Sequence[str] = (),
            reference: str | None = None, grouping: str = "pair") -> BenchData:
    """Aggregate a finished ``BenchRun`` on the episodes of ``compiled``: metrics, allocation, oracle gap, bootstrap
    (every pair, and ``reference`` minus each other policy: by default ``default_reference``), the 95% intervals of
    every macro figure (``eval.intervals``, on the same resamples) and Pareto."""
    start = time.perf_counter()
    # One analysis path: the compact columns of the records (``eval.compact_records``), kept by a streamed replay
    # or taken here from the whole records frame.
    records = run.compact if run.compact is not None else \
        compact_runs([r.records for r in run.runs if r.applicable], RecordLayout.of(compiled))
    info = policy_info(run)
    datasets = list(dict.fromkeys(compiled.dataset.tolist()))
    ran = [r.name for r in run.runs if r.applicable]
    # The metrics, then the paired units (one for the tests and the intervals) and the intervals' unit values, one
    # after the other: each pass over the records (22M at 1M episodes) has its own ~1 GB of temporaries, which side
    # by side set the bench's peak. metrics_s covers all three; bootstrap_s the resampling after them.
    aggregates, summary = _aggregates(records, RecordLayout.of(compiled))
    paired = bootstrap.paired_matrix(records, ran, unit) if ran else None
    sums = CellSums(records, paired, resamples) if paired is not None and paired.values.shape[1] else None
    t_metrics = time.perf_counter()
    pw, spans = _resampled(records, paired, sums, unit=unit, resamples=resamples, seed=seed)
    mac, dset = aggregates["macro"], aggregates["per_dataset"]
    if reference is not None:  # the one asked for, or none when it did not run (the report says so)
        ref = reference if reference in ran else None
    else:
        ref = default_reference(mac, info, ran, grouping, COST_METRIC[cost_model])
    vs = pw[pw["a"] == ref].reset_index(drop=True) if ref else pw.iloc[0:0]
    vs.attrs.update(pw.attrs)
    t_boot = time.perf_counter()
    front = _pareto(mac, dset, info, COST_METRIC[cost_model], datasets) if len(mac) else {}
    data = BenchData(pool=pool, compiled=compiled, pool_spec=pool_spec, run=run, records=records, info=info,
                     cost_model=cost_model, seed=seed, datasets=datasets,
                     generators=list(dict.fromkeys(compiled.generator.tolist())), **aggregates, summary=summary,
                     pairwise=pw, versus=vs, pareto=front, bootstrap_unit=unit, resamples=resamples,
                     cost_estimates=estimates if estimates is not None else cost_estimates(pool), notes=list(notes),
                     reference=ref, intervals=spans)
    data.timings.update(replay_s=run.seconds, metrics_s=t_metrics - start, bootstrap_s=t_boot - t_metrics)
    return data


def _resampled(records: pd.DataFrame, paired: bootstrap.PairedData | None, sums: CellSums | None, *, unit: str,
               resamples: int, seed: int) -> tuple[pd.DataFrame, Intervals]:
    """The paired tests of every pair and the 95% intervals (``sums``: their ``CellSums``, None without paired
    units), fed from one draw of the resamples (``bootstrap.feed_blocks``)."""
    if paired is None or sums is None:
        empty = bootstrap.pairwise(records, paired.policies, unit=unit, resamples=resamples, seed=seed, paired=paired) \
            if paired is not None and len(paired.policies) >= 2 else pd.DataFrame(columns=PAIRWISE_COLUMNS)
        return empty, empty_intervals(unit, resamples, seed)
    tests = bootstrap.ResampledMeans(paired.values, resamples) if len(paired.policies) >= 2 else None
    bootstrap.feed_blocks(paired.values.shape[1], [s for s in (sums, tests) if s is not None], resamples,
                          seed)  # the costliest sink first
    pw = bootstrap.pairwise(records, paired.policies, unit=unit, resamples=resamples, seed=seed, paired=paired,
                            boot=tests.out) if tests is not None else pd.DataFrame(columns=PAIRWISE_COLUMNS)
    return pw, sums.intervals(seed)


def default_reference(mac: pd.DataFrame, info: dict[str, PolicyInfo], ran: Sequence[str], grouping: str,
                      cost: str) -> str | None:
    """The paired tests' reference when none is asked for: CoBa-Routed-Strong on one-generator ("pair") episodes
    when it ran, the most accurate routing policy on routing ("item") episodes; otherwise the most accurate
    deployable policy (no oracle). Ties go to the cheaper one (``cost``), then to the earlier in bench order.
    None when fewer than two policies ran (nothing to compare)."""
    if len(ran) < 2:
        return None
    named, groups = DEFAULT_REFERENCE[grouping]
    if named in ran:
        return named
    deployable = [n for n in ran if info[n].group != ORACLE_GROUP and n in mac.index]
    pick = [n for n in deployable if info[n].group in groups] or deployable
    if not pick:
        return None
    return min(pick, key=lambda n: (-float(mac.loc[n, "acc"]), float(mac.loc[n, cost]), ran.index(n)))


def _aggregates(records: pd.DataFrame, layout: RecordLayout) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Every aggregate ``BenchData`` holds (by its field name) and their plain-dict summary (``metrics.summarize``)."""
    if not len(records):
        return {name: pd.DataFrame() for name in metrics.AGGREGATE_NAMES}, {}
    pairs = metrics.pair_means(records)
    computed = metrics.aggregates(records, layout, pairs)
    return computed, metrics.summarize(records, layout, computed, pairs)


def _pareto(mac: pd.DataFrame, dset: pd.DataFrame, info: dict[str, PolicyInfo], cost: str,
            datasets: Sequence[str]) -> dict[str, Any]:
    def analyse_plane(frame: pd.DataFrame) -> dict[str, Any]:
        deployable = [n for n in frame.index if info.get(n, PolicyInfo(n, "")).group != ORACLE_GROUP]
        pts = {n: (float(frame.loc[n, cost]), float(frame.loc[n, "acc"])) for n in deployable}
        front = pareto.pareto_front(pts)
        positive = {n: v for n, v in pts.items() if v[0] > 0}
        span = pareto.cost_span(positive)
        # Mean best-reachable accuracy over the front's own cost range (log10 cost): one number per plane.
        mean_acc = pareto.mean_front_accuracy(positive, *span) if span else None
        return {"front": [p.name for p in front], "dominates": pareto.dominance(pts),
                "dominated_by": pareto.dominated_by(pts), "front_cost_range": span, "front_mean_acc": mean_acc,
                "excluded_upper_bounds": [n for n in frame.index if n not in deployable]}

    out = {"cost": cost, **analyse_plane(mac)}
    out["per_dataset"] = {ds: analyse_plane(dset.xs(ds, level="dataset")) for ds in datasets
                          if ds in dset.index.get_level_values("dataset")}
    return out
