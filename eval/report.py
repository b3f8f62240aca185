"""Write a bench run to disk: report.md, report.html, tables/, figures/, results.json and the episode records.

Every file is written atomically (a temporary file in the same folder, then ``os.replace``), so a reader
never sees a half-written report. On the simulated paper pool (manifest provenance profile "paper") the
report puts the paper's published figures, shipped with the package, beside ours (``eval.paper_comparison``).
What the report says is laid out in ``eval.report_body``; ``eval.report_html`` makes the one-page HTML.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coba_env.costs import supported_measures
from eval import figures as figs
from eval import tables as tabs
from eval.bench_data import BenchData
from eval.episode_files import write_episode_files
from eval.metrics import to_plain
from eval.paper_comparison import load_paper_targets, paper_comparison
from eval.report_body import public, render_blocks, to_markdown
from eval.report_html import render_html
from eval.route_report import route_figures, route_tables
from eval.tables import HIGHCOST, Table
from eval.terminal_summary import terminal_summary  # noqa: F401  (re-exported: the bench prints it)
from pools.atomic_write import atomic_write, atomic_write_text  # also re-exported from here

#: Why a bench is not compared with the paper, by its episodes' grouping (results.json ``paper.note``).
NOT_THE_PAPER: dict[str, str] = {
    "pair": "the pool's provenance profile is {profile!r}, not 'paper'",
    "item": "a route bench has one episode per problem, the paper one per problem and generator",
}
#: The frontier figure's title: what its macro average runs over.
FRONTIER_TITLE: dict[str, str] = {
    "pair": "Accuracy-cost frontier (macro over dataset x generator pairs)",
    "item": "Accuracy-cost frontier (macro over datasets; each episode holds all of a problem's generators)",
}

# ---------------------------------------------------------------- atomic files

def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Save ``fig`` as ``stem``.png and ``stem``.svg (atomically) and close it."""
    import matplotlib.pyplot as plt

    out = []
    try:
        for ext in ("png", "svg"):
            out.append(atomic_write(stem.with_suffix(f".{ext}"),
                                    lambda tmp, ext=ext: fig.savefig(tmp, format=ext)))
    finally:
        plt.close(fig)
    return out


# ---------------------------------------------------------------- tables and figures

def build_tables(data: BenchData) -> dict[str, Table]:
    """Every bench table, by file stem."""
    if not len(data.macro):
        return {}
    info, ran = data.info, data.ran
    out = {
        "main": tabs.main_table(data.macro, info, estimates=data.cost_estimates, intervals=data.intervals),
        "pooled": tabs.pooled_table(data.pooled, info, estimates=data.cost_estimates),
        "per_dataset": tabs.per_group_table(data.per_dataset, "dataset", info, name="per_dataset",
                                            caption="Per-dataset accuracy averaged over generators. Bold: best "
                                                    "non-oracle method; the oracle is an upper bound.",
                                            order=data.datasets, intervals=data.intervals),
        "per_dataset_p_tokens": tabs.per_group_table(data.per_dataset, "dataset", info, name="per_dataset_p_tokens",
                                                     caption="Per-dataset parameter-weighted tokens per item, "
                                                             "averaged over generators.",
                                                     order=data.datasets, metric="p_tokens",
                                                     intervals=data.intervals),
        "per_generator": tabs.per_group_table(data.per_generator, "generator", info, name="per_generator",
                                              caption="Per-generator accuracy averaged over datasets.",
                                              order=data.generators),
        "highcost": tabs.highcost_table(data.macro, info),
        "allocation": tabs.allocation_table(data.allocation, info, ran, data.datasets, data.layout),
        "oracle_gap": tabs.oracle_gap_table(data.gap, info),
        "oracle_gap_by_dataset": tabs.oracle_gap_by_dataset_table(data.gap_by_dataset, info, ran, data.datasets),
    }
    if _coba_names(data):  # the routing-strength ablation compares CoBa variants; without one it says nothing
        out["ablation"] = tabs.ablation_table(data.macro, data.allocation_overall, info, data.layout)
    if len(data.versus):
        out["bootstrap"] = tabs.bootstrap_table(data.versus, info, reference=data.reference, resamples=data.resamples)
    if len(data.pairwise):
        order = list(data.macro.sort_values("acc", ascending=False).index)
        out["pairwise"] = tabs.pairwise_table(data.pairwise, info, order)
    return out


def _coba_names(data: BenchData) -> list[str]:
    return [n for n in data.ran if data.info[n].group == "coba"]


def build_figures(data: BenchData) -> dict[str, Callable[[], Any]]:
    """Figure builders by file stem (called one at a time so only one figure is open)."""
    if not len(data.macro):
        return {}
    cost, spans = data.cost_metric, data.intervals
    out: dict[str, Callable[[], Any]] = {
        "frontier": lambda: figs.frontier(data.macro, data.info, cost, FRONTIER_TITLE[data.grouping],
                                          estimates=data.cost_estimates, spans=spans.macro if spans else None),
        "per_dataset_frontiers": lambda: figs.small_multiples(data.per_dataset, data.info, data.datasets, cost,
                                                              estimates=data.cost_estimates,
                                                              spans=spans.per_dataset if spans else None),
        "per_dataset_heatmap": lambda: figs.heatmap(data.per_dataset, data.info, data.datasets),
    }
    coba = _coba_names(data)
    if coba:
        out["action_allocation"] = lambda: figs.allocation(data.allocation, data.info, coba, data.datasets,
                                                                   data.layout)
    comparable = figs.comparable_methods(data.macro, data.info, always=HIGHCOST)
    if len(comparable) >= 2:
        out["cost_savings"] = lambda: figs.savings(data.macro, data.info, comparable)
    return out


# ---------------------------------------------------------------- results.json

def results_json(data: BenchData, files: dict[str, Any], paper: dict[str, Any] | None) -> dict[str, Any]:
    """Every number of the run, keyed by policy (then dataset / generator), plus metadata and statistics."""
    manifest = data.pool.manifest
    runs = {}
    for r in data.run.runs:
        entry = {"label": r.label, "group": r.group, "uses_labels": r.uses_labels, "applicable": r.applicable,
                 "not_applicable": r.not_applicable, "replay_seconds": r.seconds, "description": r.description}
        entry.update(data.summary.get(r.name, {}))
        entry.update(interval_entry(data, r.name))
        runs[r.name] = entry
    pw: dict[str, dict[str, Any]] = {}
    for row in data.pairwise.itertuples(index=False):
        pw.setdefault(row.a, {})[row.b] = {"diff": row.diff, "ci": [row.ci_low, row.ci_high], "p": row.p,
                                           "significant": bool(row.significant)}
    boot = {"unit": data.bootstrap_unit, "resamples": data.resamples, "seed": data.seed, "ci": 0.95,
            "method": "paired percentile bootstrap; p = min(1, 2*min(#{d<=0}+1, #{d>=0}+1)/(B+1))",
            "reference": data.reference,
            "n_units": int(data.pairwise["n_units"].iloc[0]) if len(data.pairwise) else 0,
            "dropped_units": int(data.pairwise.attrs.get("dropped", 0)) if len(data.pairwise) else 0,
            "vs_reference": pw.get(data.reference, {}) if data.reference else {}, "pairwise": pw,
            "reference_rule": REFERENCE_RULE if data.requested_reference is None else "asked for (--reference)",
            "intervals": INTERVALS_METHOD}
    out = {
        "meta": {
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "pool": {"spec": public(data.pool_spec), "provenance": public(manifest.get("provenance") or {}),
                     "episodes": int(data.compiled.n_episodes),
                     "items": int(data.pool.items.shape[0]), "datasets": data.datasets,
                     "generators": data.generators, "n_candidates": int(data.compiled.n_candidates),
                     "tiers": list(data.compiled.tiers_present), "is_paper_pool": data.is_paper_pool,
                     "verifiers": data.verifiers},
            "cost_model": data.cost_model, "seed": data.seed, "workers": data.run.workers,
            "policies": [r.name for r in data.run.runs], "ran": data.ran,
            "not_applicable": data.run.not_applicable,
            "averaging": "macro = mean over dataset x generator pairs of per-pair means; pooled = mean over "
                         "episodes; per dataset = mean over generators; per generator = mean over datasets",
            "units": {"acc": "percent", **{m.metric: m.per_item for m in supported_measures(data.compiled)}},
            "timings": data.timings,
        },
        "policies": runs,
        "pareto": data.pareto,
        "bootstrap": boot,
        "paper": paper,
        "files": files,
    }
    if data.routing is not None:
        out["routing"] = data.routing
    return _clean(out)


#: How results.json's ``ci95`` intervals are drawn (``eval.intervals``).
INTERVALS_METHOD = ("per policy ci95 / ci95_per_dataset: percentile 95% interval of the macro (per-dataset) value "
                    "recomputed on each bootstrap resample of the paired units, the same resamples as the paired tests")
#: How the paired tests' reference is chosen when ``--reference`` is not given (``eval.analysis.default_reference``).
REFERENCE_RULE = ("default: coba_strong on one-generator episodes when it ran, the most accurate routing policy on "
                  "routing episodes, else the most accurate deployable policy (ties: the cheaper)")


def interval_entry(data: BenchData, name: str) -> dict[str, Any]:
    """A policy's ``ci95`` (macro) and ``ci95_per_dataset`` intervals for results.json (none when not computed)."""
    spans = data.intervals
    if spans is None or name not in spans.macro.index:
        return {}
    per_ds = {ds: {m: list(spans.of(name, m, ds) or ()) for m in spans.to_json(name)} for ds in data.datasets
              if (name, ds) in spans.per_dataset.index}
    return {"ci95": spans.to_json(name), "ci95_per_dataset": per_ds}


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return to_plain(obj)


# ---------------------------------------------------------------- everything

def _paper(data: BenchData, tables: dict[str, Table]) -> tuple[dict[str, Any], dict[str, Any] | None, list[Table]]:
    """The paper comparison: its state for the report, its block for results.json, and its tables."""
    if not data.is_paper_pool:
        profile = (data.pool.manifest.get("provenance") or {}).get("profile")
        why = NOT_THE_PAPER[data.grouping].format(profile=profile)
        state = {"status": "skipped", "message": f"No paper comparison: {why}."}
        return state, {"status": "skipped", "note": state["message"]}, []
    targets, source = load_paper_targets()
    if targets is None:
        state = {"status": "not_found", "source": source,
                 "message": f"The pool is the paper profile, but the paper's figures could not be read from "
                            f"{source}."}
        return state, {"status": "not_found", "source": source, "note": state["message"]}, []
    if not len(data.macro):
        return {"status": "no_results", "message": "No policy ran, so there is nothing to compare."}, None, []
    block, shown = paper_comparison(data, targets)
    for t in shown:
        tables[t.name] = t
    off = {name: entry["acc"]["delta"] for name, entry in (block.get("main_table") or {}).items()
           if entry.get("beyond_tolerance")}
    state = {"status": "compared", "source": source, "off": off}
    return state, {"status": "compared", "source": source, "sources": targets.get("sources") or {}, **block}, shown


def write_all(data: BenchData, out_dir: Path, *, figures: bool = True, t0: float | None = None,
              progress: bool = False) -> dict[str, Any]:
    """Write every output of a bench run into ``out_dir``; returns the ``results.json`` content.

    With ``progress`` a bar counts the files as they are written (tables, each figure, the episode records,
    the reports), so the seconds after the replay are not silent."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    files: dict[str, Any] = {"report": "report.md", "html": "report.html", "results": "results.json",
                             "episodes": ["episodes.parquet", "episodes.csv.gz"], "tables": {}, "figures": {}}
    tables = build_tables(data)
    tables.update(route_tables(data))
    paper_state, paper_block, paper_tables = _paper(data, tables)
    makers = {**build_figures(data), **route_figures(data)} if figures else {}
    bar = _stage_bar(len(tables) + len(makers) + 2, progress)
    written = None
    try:
        for name, table in tables.items():
            _stage(bar, f"table {name}")
            for ext, render in (("md", table.to_markdown), ("csv", table.to_csv), ("tex", table.to_latex)):
                atomic_write_text(out_dir / "tables" / f"{name}.{ext}", render())
            files["tables"][name] = [f"tables/{name}.{ext}" for ext in ("md", "csv", "tex")]
        t_tables = time.perf_counter()
        # The episode files are written on a second thread while the figures render: Arrow's CSV writer and
        # zlib release the GIL, so on 2 cores the ~5 s of writing at 100k episodes hides behind the figures.
        frames = [r.records for r in data.run.runs if r.applicable and len(r.records)]
        pieces = data.episode_pieces  # a streamed replay wrote them already, a piece per policy and chunk

        def write(parquet: Path, csv: Path) -> int:
            return pieces.join(parquet, csv) if pieces is not None else \
                write_episode_files(frames, parquet, csv, layout=data.layout)

        episodes = ThreadPoolExecutor(max_workers=1)
        written = episodes.submit(atomic_write, out_dir / "episodes.parquet", lambda parquet: atomic_write(
            out_dir / "episodes.csv.gz", lambda csv: write(parquet, csv)))
        episodes.shutdown(wait=False)
        for stem, make in makers.items():
            _stage(bar, f"figure {stem}")
            save_figure(make(), out_dir / "figures" / stem)
            files["figures"][stem] = [f"figures/{stem}.png", f"figures/{stem}.svg"]
        t_figs = time.perf_counter()
        _stage(bar, "episode records")
        written.result()  # re-raises a failure of the writing thread here; episodes_s is the wait after the figures
        t_eps = time.perf_counter()
        _stage(bar, "report.md, report.html, results.json")
        data.timings.update(tables_s=t_tables - start, figures_s=t_figs - t_tables, episodes_s=t_eps - t_figs)
        if t0 is not None:
            data.timings["total_s"] = time.perf_counter() - t0
        results = results_json(data, files, paper_block)
        blocks = render_blocks(data, tables, files, paper_state, paper_tables)
        atomic_write_text(out_dir / "results.json", json.dumps(results, indent=1, allow_nan=False) + "\n")
        atomic_write_text(out_dir / "report.md", to_markdown(blocks))
        atomic_write_text(out_dir / "report.html", render_html(blocks, out_dir))
        if bar is not None:
            bar.update(1)
    finally:
        if written is not None:
            wait([written])  # on an error or Ctrl-C too: never leave the thread writing into a folder being removed
        if bar is not None:
            bar.close()
    return results


def _stage_bar(total: int, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="writing report", unit="file", leave=False,
                bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")


def _stage(bar: Any, what: str) -> None:
    """Count the previous stage as done and name the next one on the bar."""
    if bar is None:
        return
    if bar.postfix:
        bar.update(1)
    bar.set_postfix_str(what)
