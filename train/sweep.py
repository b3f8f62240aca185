"""Accuracy-cost frontiers: learned controllers traced over lambda, fixed policies over their routing parameters.

A *family* is a set of points on the (macro cost, macro accuracy) plane: ``coba`` (CoBa-Routed over N_max and
the number of strong routes; Light, Balanced and Strong are three of its points), ``best_of_n`` (majority vote
over n), on item-grouped episodes (``coba sweep --env route``) ``route_threshold_judge`` and
``route_threshold_agreement`` (the threshold routers over their threshold), or a trained checkpoint evaluated
at several lambdas (``FAMILIES``; each family runs on the grouping its policy is written for). For every family the sweep reports its own
Pareto front; every two families' fronts compared over the cost range both cover (``eval.pareto.compare_fronts``:
the mean best-reachable accuracy over log10 cost there; higher is better); and for every point the points of
other families it dominates.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from agents.base import Policy
from coba_env.costs import COST_TABLE, measure
from eval import bootstrap, metrics, pareto
from eval.bench_data import COST_METRIC
from eval.column_format import column_format, fixed
from eval.intervals import Intervals, bootstrap_intervals
from pools.atomic_write import atomic_write_text
from train.sweep_grid import GridError, grid_settings, parse_grid, point_name, setting_text

#: The cost metrics a sweep point records: every measure of ``coba_env.costs.COST_TABLE`` that every pool records.
SWEEP_METRICS = tuple(m.metric for m in COST_TABLE if not m.needs_prices)

#: CoBa-Routed grid: (N_max, strong routes). (2, 0), (4, 2), (8, 4) are Light, Balanced and Strong.
COBA_GRID: tuple[tuple[int, int], ...] = ((2, 0), (2, 1), (4, 0), (4, 2), (8, 2), (8, 4), (16, 4), (16, 8))
#: Best-of-n majority grid.
BEST_OF_N_GRID: tuple[int, ...] = (1, 2, 4, 8, 16)
#: Threshold-router grid: 0 never calls the strong generator, above 1 always does.
THRESHOLD_GRID: tuple[float, ...] = (*(i / 10 for i in range(11)), 1.01)
#: Fixed families: name -> (the registered policy swept, its parameter overrides one point each, the point's
#: name and label as templates over those parameters).
FAMILIES: dict[str, tuple[str, tuple[dict[str, Any], ...], str, str]] = {
    "coba": ("coba_strong", tuple({"n_max": n, "strong_routes": k} for n, k in COBA_GRID),
             "coba_n{n_max}_k{strong_routes}", "CoBa N{n_max} K{strong_routes}"),
    "best_of_n": ("bon4_majority", tuple({"n": n} for n in BEST_OF_N_GRID), "bon{n}", "Best-of-{n}"),
    "route_threshold_judge": ("route_threshold_judge", tuple({"threshold": t} for t in THRESHOLD_GRID),
                              "judge_t{threshold:g}", "Threshold router (cheap judge) t={threshold:g}"),
    "route_threshold_agreement": ("route_threshold_agreement", tuple({"threshold": t} for t in THRESHOLD_GRID),
                                  "agreement_t{threshold:g}", "Threshold router (agreement) t={threshold:g}"),
}
FIXED_FAMILIES = tuple(FAMILIES)
#: ``--policies`` when none is given, by episode grouping (``EnvConfig.grouping``).
DEFAULT_POLICIES: dict[str, tuple[str, ...]] = {
    "pair": ("coba", "best_of_n"),
    "item": ("route_threshold_judge", "route_threshold_agreement", "route_cascade", "model_switch"),
}
#: The named points the acceptance compares against (registry names).
ANCHORS = ("coba_light", "coba_balanced", "coba_strong", "greedy", "bon4_majority", "bon8_majority",
           "bon16_majority")
DEFAULT_EVAL_LAMBDAS = (0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


class SweepInputError(ValueError):
    """Bad sweep input (unknown family or policy, bad lambda); the CLI exits 2 on it."""


@dataclass
class SweepPoint:
    """One policy of a family: its registry-independent name, family, the parameter it sits at, and a factory."""

    name: str
    family: str
    param: str
    make: Callable[[], Policy]


def _named(policy: Policy, name: str, label: str) -> Policy:
    policy.name, policy.label = name, label
    return policy


def fixed_points(family: str) -> list[SweepPoint]:
    """The sweep points of a fixed family (``FAMILIES``)."""
    from agents.registry import make_policy

    if family not in FAMILIES:
        raise SweepInputError(f"unknown fixed family {family!r}; expected one of {list(FIXED_FAMILIES)}")
    base, grid, name, label = FAMILIES[family]
    return [SweepPoint(name.format(**params), family, ",".join(f"{k}={v:g}" for k, v in params.items()),
                       lambda params=params: _named(make_policy(base, **params), name.format(**params),
                                                    label.format(**params)))
            for params in grid]


def learned_points(loader: Callable[[float], Policy], family: str, lambdas: Sequence[float]) -> list[SweepPoint]:
    """Points of a learned controller: ``loader(lam)`` builds it acting at ``lam``; named ``family@lam``."""
    return [SweepPoint(f"{family}@{lam:g}", family, f"lambda={lam:g}",
                       lambda lam=lam: _named(loader(lam), f"{family}@{lam:g}", f"{family} (lambda={lam:g})"))
            for lam in lambdas]


def anchor_points(names: Sequence[str] = ANCHORS) -> list[SweepPoint]:
    """Registry policies as single-point families (their own names)."""
    from agents.registry import make_policy

    return [SweepPoint(n, n, "", lambda n=n: make_policy(n)) for n in names]


def frontier_points(records: pd.DataFrame, families: dict[str, str], params: dict[str, str] | None = None,
                    cost: str = "p_tokens", spans: Intervals | None = None) -> pd.DataFrame:
    """One row per policy: family, parameter, macro accuracy (%) and macro cost per episode (all measures); with
    ``spans`` (``eval.intervals``) the 95% intervals of accuracy and of the swept cost (``acc_low`` ... ``cost_high``)."""
    mac = metrics.macro(records)
    rows = []
    for name in mac.index:
        row = {"policy": name, "family": families.get(name, name), "param": (params or {}).get(name, ""),
               "acc": float(mac.loc[name, "acc"]), "cost": float(mac.loc[name, COST_METRIC[cost]]),
               **{m: float(mac.loc[name, m]) for m in SWEEP_METRICS}}
        for key, metric in (("acc", "acc"), ("cost", COST_METRIC[cost])):
            span = spans.of(name, metric) if spans is not None else None
            if span is not None:
                row[f"{key}_low"], row[f"{key}_high"] = span
        rows.append(row)
    return pd.DataFrame(rows)


def frontier_summary(points: pd.DataFrame) -> dict[str, Any]:
    """Per family: its front and cost span; fronts compared over common cost ranges; per point: dominance.

    ``common_range`` is the cost range every multi-point family's front covers, and each such family's
    ``mean_acc`` is its mean best-reachable accuracy there (``eval.pareto.mean_front_accuracy``; None when
    the fronts do not all overlap). ``comparisons`` holds every pair of multi-point families over the range
    the two share (``eval.pareto.compare_fronts``). Single-point families (anchors) have no range: they are
    judged by dominance only.
    """
    pts = {r.policy: (r.cost, r.acc) for r in points.itertuples()}
    fam_pts: dict[str, dict[str, tuple[float, float]]] = {}
    sizes: dict[str, int] = {}
    for fam, group in points.groupby("family", sort=False):
        fam_pts[str(fam)] = {r.policy: (r.cost, r.acc) for r in group.itertuples() if r.cost > 0}
        sizes[str(fam)] = len(group)
    fronts = {fam: pareto.pareto_front(p) for fam, p in fam_pts.items()}
    ranged = [fam for fam, front in fronts.items() if len(front) >= 2 and front[0].cost < front[-1].cost]
    common = pareto.common_cost_range([fam_pts[f] for f in ranged]) if len(ranged) >= 2 else None
    families: dict[str, Any] = {}
    for fam, front in fronts.items():
        families[fam] = {"front": [p.name for p in front], "points": sizes[fam],
                         "cost_range": pareto.cost_span(fam_pts[fam]),
                         "mean_acc": pareto.mean_front_accuracy(fam_pts[fam], *common) if common and fam in ranged
                         else None}
    comparisons = []
    for i, a in enumerate(ranged):
        for b in ranged[i + 1:]:
            cmp = pareto.compare_fronts(fam_pts[a], fam_pts[b])
            if cmp is not None:
                comparisons.append({"a": a, "b": b, **cmp})
    return {"common_range": common, "families": families, "comparisons": comparisons,
            "dominates": pareto.dominance(pts), "dominated_by": pareto.dominated_by(pts),
            "global_front": [p.name for p in pareto.pareto_front(pts)]}


def frontier_markdown(points: pd.DataFrame, summary: dict[str, Any], cost_model: str | None = None) -> str:
    """Markdown: every point (sorted by family and cost) with its dominance and 95% intervals, then the fronts
    compared; one number format per column (``eval.column_format``), the cost's unit in its header."""
    has_ci = {"acc_low", "cost_low"} <= set(points.columns)
    fmt = column_format([*points["cost"], *(points["cost_high"] if has_ci else [])])
    acc = fixed(2)
    unit = fmt.unit(measure(cost_model).unit) if cost_model else fmt.unit("")
    cost_head = f"cost ({unit}{', ' + cost_model if cost_model else ''})" if unit else "cost"
    lines = [f"| family | policy | param | macro acc (%) | {cost_head} | dominated by | dominates |",
             "|---|---|---|---|---|---|---|"]
    for r in points.sort_values(["family", "cost"]).itertuples():
        a, c = acc(r.acc), fmt(r.cost)
        if has_ci:
            a, c = f"{a} {acc.interval(r.acc_low, r.acc_high)}".strip(), f"{c} {fmt.interval(r.cost_low, r.cost_high)}".strip()
        lines.append(f"| {r.family} | {r.policy} | {r.param} | {a} | {c} | "
                     f"{', '.join(summary['dominated_by'][r.policy]) or '-'} | "
                     f"{len(summary['dominates'][r.policy])} |")
    if has_ci:
        lines += ["", "Brackets: the 95% interval of each macro figure (percentile bootstrap over items, "
                  f"{bootstrap.RESAMPLES} resamples, seed 0; the resamples a bench of the same points would use)."]
    lines += ["", "Fronts compared over their common cost range: the mean, over log10 cost in the range both "
              "fronts cover, of the best accuracy each reaches at that cost or less (higher is better; "
              "docs/CONTROLLERS.md, 'Comparing fronts'). Single-point families are judged by dominance only.", ""]
    if summary["comparisons"]:
        lines += ["| family A | family B | common cost range | mean acc A | mean acc B | A - B |",
                  "|---|---|---|---|---|---|"]
        for c in summary["comparisons"]:
            lines.append(f"| {c['a']} | {c['b']} | {fmt(c['lo'])} - {fmt(c['hi'])} | {acc(c['a_acc'])} | "
                         f"{acc(c['b_acc'])} | {c['diff']:+.2f} |")
    else:
        lines.append("(no two families with a front spanning a cost range overlap)")
    common = summary["common_range"]
    lines += ["", (f"Per family, over the cost range all multi-point fronts share ({fmt(common[0])} - "
                   f"{fmt(common[1])}):") if common else "Per family (the multi-point fronts share no cost range):",
              "", "| family | points | front cost range | mean acc over the shared range | front |",
              "|---|---|---|---|---|"]
    for fam, info in summary["families"].items():
        span = info["cost_range"]
        lines.append(f"| {fam} | {info['points']} | "
                     f"{f'{fmt(span[0])} - {fmt(span[1])}' if span else '-'} | "
                     f"{'-' if info['mean_acc'] is None else acc(info['mean_acc'])} | "
                     f"{', '.join(info['front'])} |")
    return "\n".join(lines) + "\n"


def write_frontier(points: pd.DataFrame, summary: dict[str, Any], out_dir: str | Path, stem: str = "frontier",
                   cost_model: str | None = None, figure: bool = True) -> None:
    """Write ``<stem>.csv`` (points), ``<stem>.md`` (points, dominance and areas) and, with ``figure``, the fronts
    with their error bars as ``<stem>.png`` / ``.svg`` (``eval.front_figure``) to ``out_dir``."""
    out = Path(out_dir)
    atomic_write_text(out / f"{stem}.csv", points.to_csv(index=False))
    atomic_write_text(out / f"{stem}.md", frontier_markdown(points, summary, cost_model))
    if figure and len(points):
        from eval.figures import cost_axis_label
        from eval.front_figure import fronts_figure
        from eval.report import save_figure

        axis = cost_axis_label(COST_METRIC[cost_model]) if cost_model else "cost per item"
        save_figure(fronts_figure(points, axis), out / stem)


def resolve_sweep(specs: Sequence[str], lambdas: Sequence[float], grid: Sequence[str] = ()) -> list[SweepPoint]:
    """Sweep points for ``--policies`` items: a fixed family name, a checkpoint directory (traced over
    ``lambdas``), a registered policy name, the policies of a YAML spec file, or a ``FILE.py:Class`` /
    ``module:Class`` reference (one point each). With ``grid`` (``--grid NAME=v1,v2,...``, ``train.sweep_grid``)
    every named policy becomes a family of one point per setting instead."""
    from agents.learned import is_checkpoint, load_checkpoint
    from agents.plugins import entry_point_refs, is_class_ref
    from agents.registry import load_specs
    from eval.policy_selection import BenchInputError, parse_policies

    try:
        settings = grid_settings(parse_grid(grid)) if grid else []
        names, files = parse_policies(list(specs))
        table = load_specs(files)
    except (GridError, BenchInputError, ValueError) as exc:
        raise SweepInputError(str(exc)) from None
    out: list[SweepPoint] = []
    for spec in names or []:
        if (spec in FIXED_FAMILIES or is_checkpoint(spec)) and settings:
            what = (f"the family {spec!r} has its own grid; name its policy ({FAMILIES[spec][0]})"
                    if spec in FIXED_FAMILIES else f"checkpoint {spec} is traced over --lambdas; name a policy")
            raise SweepInputError(f"--grid sweeps a parameter of a policy: {what} to sweep one of its parameters")
        if spec in FIXED_FAMILIES:
            out += fixed_points(spec)
        elif is_checkpoint(spec):
            family = Path(spec).name or "checkpoint"
            try:  # load once now: a damaged checkpoint fails before any replay, naming its file
                load_checkpoint(spec)
            except (ValueError, OSError) as exc:
                raise SweepInputError(f"checkpoint {spec}: {exc}") from None
            out += learned_points(lambda lam, spec=spec: load_checkpoint(spec, lam=lam), family, lambdas)
        elif spec in table or spec in entry_point_refs() or is_class_ref(spec):  # registered, YAML, plugin or class
            out += policy_points(spec, table, settings)
        elif Path(spec).is_dir():
            raise SweepInputError(f"{spec}: a folder without controller.json; expected a checkpoint directory "
                                  "written by `coba train`")
        else:
            raise SweepInputError(f"unknown sweep policy {spec!r}: expected a family {list(FIXED_FAMILIES)}, a "
                                  f"checkpoint directory (with controller.json), a registered policy name or FILE.py:Class")
    names = [p.name for p in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SweepInputError(f"sweep point names repeat: {dupes} (give each checkpoint a distinct folder name)")
    return out


def policy_points(spec: str, table: dict[str, dict], settings: Sequence[dict[str, Any]] = ()) -> list[SweepPoint]:
    """One point for the policy ``spec`` of ``table`` (or a class reference), or, with ``settings``, its family:
    one point per setting, built with those parameters and named ``<policy>[NAME=value]``. Every point is built
    once here, so a parameter the policy does not take fails before any replay, naming it."""
    from agents.registry import make_policy

    def build(setting: dict[str, Any]) -> Policy:
        try:
            return make_policy(spec, specs=table, **setting)
        except (ValueError, TypeError) as exc:
            where = f"--grid {setting_text(setting)}: " if setting else ""
            raise SweepInputError(f"{where}policy {spec!r}: {' '.join(str(exc).split())}") from None

    base = build({})
    if not settings:
        return [SweepPoint(base.name, base.name, "", lambda: build({}))]
    points = []
    for setting in settings:
        build(setting)
        name, label = point_name(base.name, setting), f"{base.label or base.name} {setting_text(setting)}"
        points.append(SweepPoint(name, base.name, setting_text(setting),
                                 lambda setting=setting, name=name, label=label: _named(build(setting), name, label)))
    return points


def _beyond_pool(points: Sequence[SweepPoint], policies: Sequence[Policy], n_pool: int) -> dict[str, str]:
    """The CoBa grid points whose n_max exceeds the pool's N, with why: such a point would run capped at N and
    repeat another point, so it is left out and listed, like best-of-16 on an N = 8 pool."""
    return {p.name: f"n_max={pol.n_max} is above the pool's N={n_pool}; it would run as n_max={n_pool} and "
            "repeat that point" for p, pol in zip(points, policies, strict=True)
            if p.family == "coba" and getattr(pol, "n_max", 0) > n_pool}


def _print_short_notes(policies: Sequence[Policy], run: Any, compiled: Any, grouping: str) -> None:
    """Print the bench's note per policy defined by n candidates that met episodes holding fewer
    (``eval.short_episodes``) on stderr; none on a pool whose episodes all hold N."""
    if not compiled.ragged:
        return
    from coba_env.rules.config import EnvConfig
    from eval.short_episodes import short_episode_notes

    for line in short_episode_notes(policies, run, EnvConfig.build(compiled, grouping=grouping).sample_caps):
        print(line, file=sys.stderr)


def run_sweep(pool: Any, specs: Sequence[str], lambdas: Sequence[float] = DEFAULT_EVAL_LAMBDAS, *,
              out_dir: str | Path = "sweep-out", cost_model: str | None = None, episode_ids: Sequence[int] | None = None,
              progress: bool = True, workers: int | None = None, datasets: Sequence[str] | None = None,
              ray_address: str | None = None, grouping: str = "pair", grid: Sequence[str] = (),
              figure: bool = True) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Evaluate every sweep point on the episodes of ``pool`` grouped by ``grouping`` ("pair": ``coba/Replay-v0``,
    "item": ``coba/Route-v0``; optionally only ``episode_ids`` / ``datasets``) in ``cost_model`` (None: the pool's
    default, ``coba_env.costs.default_cost_model``) and write the frontier table and, with ``figure``, its figure
    (``eval.front_figure``); a checkpoint evaluated on datasets it was trained on gets a warning line on stderr.
    ``grid``: ``--grid NAME=v1,v2,...`` options (``resolve_sweep``); ``ray_address``: one Ray task per point."""
    import math

    import numpy as np

    from coba_env.costs import cost_model_or_default
    from coba_env.env import as_compiled
    from coba_env.rules.config import check_cost_model_priced
    from eval.dataset_scope import in_sample_warnings, restrict_datasets
    from eval.policy_selection import grouping_problem
    from eval.runner import run_policies
    from pools.atomic_write import atomic_dir
    from pools.output_paths import OutputPathError, check_output_dir

    if not lambdas or any(not (math.isfinite(lam) and lam >= 0) for lam in lambdas):
        raise SweepInputError(f"lambdas must be finite numbers >= 0, got {list(lambdas)}")
    try:  # a sweep folder is a result a re-run replaces whole; a folder holding anything else is refused
        out = check_output_dir(out_dir, force=True, option="--out", kind="sweep",
                               inputs=[pool if isinstance(pool, str | Path) else None])
    except OutputPathError as exc:
        raise SweepInputError(str(exc)) from None
    points = resolve_sweep(specs, lambdas, grid)
    compiled = as_compiled(pool)
    if episode_ids is not None:
        compiled = compiled.select(np.isin(compiled.episode_ids, list(episode_ids)))
    try:
        compiled = restrict_datasets(compiled, datasets)
        cost_model = cost_model_or_default(compiled, cost_model)
        check_cost_model_priced(compiled, cost_model)
        policies = [p.make() for p in points]
    except (ValueError, OSError) as exc:
        raise SweepInputError(str(exc)) from None
    problem = grouping_problem(policies, grouping)
    if problem:
        raise SweepInputError(problem)
    beyond = _beyond_pool(points, policies, compiled.n_candidates)
    if beyond and len(beyond) == len(points):
        raise SweepInputError(f"no sweep point fits this pool ({'; '.join(f'{k}: {v}' for k, v in beyond.items())})")
    kept = [i for i, p in enumerate(points) if p.name not in beyond]
    points, policies = [points[i] for i in kept], [policies[i] for i in kept]
    for line in in_sample_warnings(policies, list(dict.fromkeys(compiled.dataset.tolist()))):
        print(line, file=sys.stderr)
    if ray_address is None:
        run = run_policies(policies, compiled, grouping=grouping, cost_model=cost_model, progress=progress,
                           workers=workers)
    else:
        from eval.ray_bench import run_policies_on_ray

        run = run_policies_on_ray(policies, compiled, ray_address=ray_address, split="policies",
                                  cost_model=cost_model, progress=progress, grouping=grouping)
    skipped = run.not_applicable
    # A point the user named (a checkpoint, a registered policy) that cannot run is an error, as is a sweep
    # where nothing ran; grid points of a fixed family beyond the pool (best-of-16 on N = 8) are reported.
    named = {p.name: why for p in points if p.family not in FIXED_FAMILIES and (why := skipped.get(p.name))}
    if named or len(skipped) == len(points):
        bad = named or skipped
        reasons = "; ".join(f"{name}: {why}" for name, why in bad.items())
        raise SweepInputError(f"{len(bad)} sweep point(s) cannot run on this pool ({reasons}); remove them "
                              "from --policies or use a pool they can run on")
    _print_short_notes(policies, run, compiled, grouping)
    spans = bootstrap_intervals(run.records, ran) if (ran := [r.name for r in run.runs if r.applicable]) else None
    table = frontier_points(run.records, {p.name: p.family for p in points}, {p.name: p.param for p in points},
                            cost=cost_model, spans=spans)
    summary = {**frontier_summary(table), "not_applicable": {**beyond, **skipped}, "cost_model": cost_model}

    def fill(tmp: Path) -> None:
        write_frontier(table, summary, tmp, cost_model=cost_model, figure=figure)
        atomic_write_text(tmp / "episodes.csv", run.records.to_csv(index=False))

    atomic_dir(out, fill, marker="sweep")
    return table, summary
