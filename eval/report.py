"""Write a bench run to disk: report.md, tables/, figures/, results.json and the per-episode records.

Every file is written atomically (a temporary file in the same folder, then ``os.replace``), so a reader
never sees a half-written report. On the simulated paper pool (manifest provenance profile "paper") the
report puts the paper's own figures from ``paper-targets.json`` beside ours (``eval.paper_comparison``).
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval import figures as figs
from eval import tables as tabs
from eval.metrics import to_plain
from eval.paper_comparison import PAPER_TARGETS_ENV, load_paper_targets, paper_comparison
from eval.tables import HIGHCOST, REFERENCE, Table
from pools.atomic_write import atomic_write, atomic_write_text  # also re-exported from here

if TYPE_CHECKING:
    from eval.bench import BenchData


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
        "main": tabs.main_table(data.macro, info),
        "pooled": tabs.pooled_table(data.pooled, info),
        "per_dataset": tabs.per_group_table(data.per_dataset, "dataset", info, name="per_dataset",
                                            caption="Per-dataset accuracy averaged over generators. Bold: best "
                                                    "non-oracle method; the oracle is an upper bound.",
                                            order=data.datasets),
        "per_dataset_p_tokens": tabs.per_group_table(data.per_dataset, "dataset", info, name="per_dataset_p_tokens",
                                                     caption="Per-dataset parameter-weighted tokens per item, "
                                                             "averaged over generators.",
                                                     order=data.datasets, metric="p_tokens"),
        "per_generator": tabs.per_group_table(data.per_generator, "generator", info, name="per_generator",
                                              caption="Per-generator accuracy averaged over datasets.",
                                              order=data.generators),
        "ablation": tabs.ablation_table(data.macro, data.allocation_overall, info),
        "highcost": tabs.highcost_table(data.macro, info),
        "allocation": tabs.allocation_table(data.allocation, info, ran, data.datasets),
        "oracle_gap": tabs.oracle_gap_table(data.gap, data.macro, info),
        "oracle_gap_by_dataset": tabs.oracle_gap_by_dataset_table(data.gap_by_dataset, info, ran, data.datasets),
    }
    if len(data.versus):
        out["bootstrap"] = tabs.bootstrap_table(data.versus, info, resamples=data.resamples)
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
    cost = data.cost_metric
    out: dict[str, Callable[[], Any]] = {
        "frontier": lambda: figs.frontier(data.macro, data.info, cost),
        "per_dataset_frontiers": lambda: figs.small_multiples(data.per_dataset, data.info, data.datasets, cost),
        "per_dataset_heatmap": lambda: figs.heatmap(data.per_dataset, data.info, data.datasets),
    }
    coba = _coba_names(data)
    if coba:
        out["action_allocation"] = lambda: figs.allocation(data.allocation, data.info, coba, data.datasets)
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
        runs[r.name] = entry
    pw: dict[str, dict[str, Any]] = {}
    for row in data.pairwise.itertuples(index=False):
        pw.setdefault(row.a, {})[row.b] = {"diff": row.diff, "ci": [row.ci_low, row.ci_high], "p": row.p,
                                           "significant": bool(row.significant)}
    boot = {"unit": data.bootstrap_unit, "resamples": data.resamples, "seed": data.seed, "ci": 0.95,
            "method": "paired percentile bootstrap; p = min(1, 2*min(#{d<=0}+1, #{d>=0}+1)/(B+1))",
            "reference": REFERENCE if REFERENCE in data.ran else None,
            "n_units": int(data.pairwise["n_units"].iloc[0]) if len(data.pairwise) else 0,
            "dropped_units": int(data.pairwise.attrs.get("dropped", 0)) if len(data.pairwise) else 0,
            "vs_reference": pw.get(REFERENCE, {}), "pairwise": pw}
    out = {
        "meta": {
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "pool": {"spec": data.pool_spec, "provenance": manifest.get("provenance") or {},
                     "episodes": int(data.compiled.n_episodes),
                     "items": int(data.pool.items.shape[0]), "datasets": data.datasets,
                     "generators": data.generators, "n_candidates": int(data.compiled.n_candidates),
                     "tiers": list(data.compiled.tiers_present), "is_paper_pool": data.is_paper_pool},
            "cost_model": data.cost_model, "seed": data.seed, "workers": data.run.workers,
            "policies": [r.name for r in data.run.runs], "ran": data.ran,
            "not_applicable": data.run.not_applicable,
            "averaging": "macro = mean over dataset x generator pairs of per-pair means; pooled = mean over "
                         "episodes; per dataset = mean over generators; per generator = mean over datasets",
            "units": {"acc": "percent", "total_tokens": "tokens per item", "p_tokens": "tokens x params (B) "
                      "per item", "calls": "model calls per item", "latency_s": "seconds per item"},
            "timings": data.timings,
        },
        "policies": runs,
        "pareto": data.pareto,
        "bootstrap": boot,
        "paper": paper,
        "files": files,
    }
    return _clean(out)


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return to_plain(obj)


# ---------------------------------------------------------------- report.md

def _md_table(table: Table) -> str:
    return f"*{table.caption}*\n\n{table.to_markdown()}"


def _fig(files: dict[str, Any], stem: str, alt: str) -> str:
    if stem not in files.get("figures", {}):
        return ""
    return f"![{alt}](figures/{stem}.png)\n\n"


def render_report(data: BenchData, tables: dict[str, Table], files: dict[str, Any],
                  paper_state: dict[str, Any], paper_tables: list[Table]) -> str:
    """The Markdown report: setup, main results, paper comparison, per dataset, allocation, statistics."""
    man = data.pool.manifest
    prov = man.get("provenance") or {}
    lines = ["# CoBa bench report", ""]
    ds_counts = data.records.drop_duplicates(["dataset", "item_id"]).groupby("dataset", sort=False).size() \
        if len(data.records) else pd.Series(dtype=int)
    lines += [
        f"- **Pool**: `{data.pool_spec}`; provenance: {json.dumps(prov) if prov else 'none recorded'}",
        f"- **Episodes**: {data.compiled.n_episodes} (item x generator) over "
        f"{len(data.datasets)} datasets x {len(data.generators)} generators = "
        f"{len(data.datasets) * len(data.generators)} pairs; N = {data.compiled.n_candidates} candidates; "
        f"tiers present: {', '.join(data.compiled.tiers_present) or 'none'}",
        "- **Items per dataset**: " + ", ".join(f"{k} {v}" for k, v in ds_counts.items()),
        f"- **Generators**: {', '.join(data.generators)}",
        f"- **Cost model** (frontier x axis): `{data.cost_model}`; seed {data.seed}; "
        f"replay workers {data.run.workers}",
        f"- **Policies run** ({len(data.ran)}): " + ", ".join(f"`{n}`" for n in data.ran),
    ]
    na = data.run.not_applicable
    if na:
        lines.append("- **Not applicable** (not run): " + "; ".join(f"`{k}`: {v}" for k, v in na.items()))
    t = data.timings
    lines.append(f"- **Time**: replay {t.get('replay_s', 0):.1f} s, total {t.get('total_s', 0):.1f} s")
    lines += ["", "Accuracy is in percent; costs are per item (one item-generator evaluation). Headline numbers "
              "are macro averages over dataset x generator pairs, as in the paper; the pooled table weighs every "
              "episode equally. The pool oracle reads correctness labels and is an upper bound only: it never "
              "enters a Pareto front or a best-method choice.", ""]
    if not tables:
        lines += ["No policy ran on this pool, so there are no results.", ""]
        return "\n".join(lines)
    lines += ["## Main results (macro)", "", _md_table(tables["main"]), ""]
    lines.append(_fig(files, "frontier", "accuracy-cost frontier"))
    front = data.pareto.get("front") or []
    if front:
        lines += ["Pareto front (" + data.cost_metric + "): " + " -> ".join(f"`{n}`" for n in front) + ".", ""]
    lines += ["## Comparison with the paper", ""]
    if paper_state.get("status") == "compared":
        lines += [f"Pool provenance profile is `paper`; the paper's reported values are read from "
                  f"`{paper_state['path']}`. The simulated pool is calibrated to the paper, so agreement is "
                  "expected in shape, not to the decimal.", ""]
        for table in paper_tables:
            lines += [_md_table(table), ""]
    else:
        lines += [paper_state.get("message", ""), ""]
    lines += ["## Results by dataset", "", _md_table(tables["per_dataset"]), "",
              _fig(files, "per_dataset_heatmap", "per-dataset accuracy heatmap"),
              _fig(files, "per_dataset_frontiers", "per-dataset frontiers"),
              _md_table(tables["per_dataset_p_tokens"]), "",
              "## Results by generator", "", _md_table(tables["per_generator"]), "",
              "## Per example (pooled)", "", _md_table(tables["pooled"]), ""]
    lines += ["## Adaptive allocation", ""]
    coba = _coba_names(data)
    if coba:
        sub = tabs.allocation_table(data.allocation, data.info, coba, data.datasets)
        lines += [_md_table(sub), "", "All policies: `tables/allocation.md`.", ""]
    lines.append(_fig(files, "action_allocation", "action allocation per dataset"))
    lines += ["## Oracle gap: allocation vs generation errors", "", _md_table(tables["oracle_gap"]), ""]
    focus = coba + [n for n in ("greedy", "bon16_majority") if n in data.ran]
    if focus:
        lines += [_md_table(tabs.oracle_gap_by_dataset_table(data.gap_by_dataset, data.info, focus, data.datasets)),
                  "", "All policies: `tables/oracle_gap_by_dataset.md`.", ""]
    lines += ["## Significance (paired bootstrap)", ""]
    if "bootstrap" in tables:
        n_units = int(data.pairwise["n_units"].iloc[0])
        dropped = int(data.pairwise.attrs.get("dropped", 0))
        lines += [f"Unit: {data.bootstrap_unit} ({n_units} paired units"
                  + (f", {dropped} dropped for incomplete paired coverage" if dropped else "")
                  + f"); {data.resamples} resamples, seed {data.seed}; percentile 95% CI; two-sided p from the "
                  "bootstrap distribution with the +1 correction (floor 2/(B+1)).", "",
                  _md_table(tables["bootstrap"]), "", "Full pairwise matrix: `tables/pairwise.md` / `.csv`.", ""]
    else:
        lines += [f"No comparison against `{REFERENCE}` (it did not run).", ""]
    lines += ["## Routing-strength ablation", "", _md_table(tables["ablation"]), "",
              "## Cost among high-accuracy methods", "", _md_table(tables["highcost"]), "",
              _fig(files, "cost_savings", "cost savings at comparable accuracy")]
    lines += ["## Files", "", "- `results.json`: every number above, keyed by policy and dataset",
              "- `episodes.parquet`, `episodes.csv.gz`: one record per (policy, episode)",
              "- `tables/`: " + ", ".join(f"`{k}`" for k in files.get("tables", {})) + " (.md, .csv, .tex)",
              "- `figures/`: " + (", ".join(f"`{k}`" for k in files.get("figures", {})) or "none") + " (.png, .svg)",
              ""]
    return "\n".join(line for line in lines if line is not None)


# ---------------------------------------------------------------- everything

def write_all(data: BenchData, out_dir: Path, *, figures: bool = True, t0: float | None = None) -> dict[str, Any]:
    """Write every output of a bench run into ``out_dir``; returns the ``results.json`` content."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    files: dict[str, Any] = {"report": "report.md", "results": "results.json",
                             "episodes": ["episodes.parquet", "episodes.csv.gz"], "tables": {}, "figures": {}}
    tables = build_tables(data)
    paper_state: dict[str, Any] = {}
    paper_block, paper_tables = None, []
    if data.is_paper_pool:
        targets, path = load_paper_targets()
        if targets is None:
            paper_state = {"status": "not_found", "path": str(path),
                           "message": f"The pool is the paper profile, but the paper's figures were not found at "
                                      f"`{path}` (set {PAPER_TARGETS_ENV} to point at paper-targets.json)."}
        elif len(data.macro):
            paper_block, paper_tables = paper_comparison(data, targets)
            paper_state = {"status": "compared", "path": str(path)}
            for t in paper_tables:
                tables[t.name] = t
    else:
        profile = (data.pool.manifest.get("provenance") or {}).get("profile")
        paper_state = {"status": "skipped", "message": "No paper comparison: the pool's provenance profile is "
                       f"{profile!r}, not 'paper'."}
    for name, table in tables.items():
        for ext, render in (("md", table.to_markdown), ("csv", table.to_csv), ("tex", table.to_latex)):
            atomic_write_text(out_dir / "tables" / f"{name}.{ext}", render())
        files["tables"][name] = [f"tables/{name}.{ext}" for ext in ("md", "csv", "tex")]
    t_tables = time.perf_counter()
    if figures:
        for stem, make in build_figures(data).items():
            save_figure(make(), out_dir / "figures" / stem)
            files["figures"][stem] = [f"figures/{stem}.png", f"figures/{stem}.svg"]
    t_figs = time.perf_counter()
    records = data.records
    atomic_write(out_dir / "episodes.parquet", lambda tmp: records.to_parquet(tmp, index=False))
    atomic_write(out_dir / "episodes.csv.gz", lambda tmp: records.to_csv(tmp, index=False, compression="gzip"))
    t_eps = time.perf_counter()
    data.timings.update(tables_s=t_tables - start, figures_s=t_figs - t_tables, episodes_s=t_eps - t_figs)
    if t0 is not None:
        data.timings["total_s"] = time.perf_counter() - t0
    if paper_block is not None:
        paper_block = {"targets_path": paper_state["path"], **paper_block}
    elif paper_state:
        paper_block = {k: v for k, v in paper_state.items() if k != "message"} | {"note": paper_state.get("message")}
    results = results_json(data, files, paper_block)
    text = render_report(data, tables, files, paper_state, paper_tables)
    atomic_write_text(out_dir / "results.json", json.dumps(results, indent=1, allow_nan=False) + "\n")
    atomic_write_text(out_dir / "report.md", text)
    return results


def terminal_summary(data: BenchData, out_dir: Path) -> str:
    """A short fixed-width summary (macro accuracy and costs per policy) and where the report is."""
    buf = io.StringIO()
    if not len(data.macro):
        buf.write("no policy ran on this pool\n")
    else:
        targets = None
        if data.is_paper_pool:
            targets, _ = load_paper_targets()
        paper_rows = ((targets or {}).get("main_table") or {}).get("rows") or {}
        paper_cols = ((targets or {}).get("main_table") or {}).get("columns") or []
        acc_i = paper_cols.index("acc") if "acc" in paper_cols else None
        head = f"{'policy':<27} {'acc %':>7} {'p_tokens':>10} {'tokens':>9} {'calls':>6} {'latency':>8}"
        if paper_rows and acc_i is not None:
            head += f" {'paper acc':>9}"
        buf.write(head + "\n" + "-" * len(head) + "\n")
        order = data.macro.sort_values("acc", ascending=False).index
        for n in order:
            r = data.macro.loc[n]
            tag = " (upper bound)" if data.info[n].group == "oracle" else ""
            line = (f"{(n + tag)[:27]:<27} {r['acc']:>7.2f} {r['p_tokens'] / 1000:>9.1f}k "
                    f"{r['total_tokens'] / 1000:>8.1f}k {r['calls']:>6.2f} {r['latency_s']:>8.1f}")
            if paper_rows and acc_i is not None:
                line += f" {paper_rows[n][acc_i]:>9.2f}" if n in paper_rows else f" {'':>9}"
            buf.write(line + "\n")
    for name, reason in data.run.not_applicable.items():
        buf.write(f"not applicable: {name}: {reason}\n")
    t = data.timings
    buf.write(f"bench: {data.compiled.n_episodes} episodes x {len(data.ran)} policies in "
              f"{t.get('total_s', float('nan')):.1f} s (replay {t.get('replay_s', float('nan')):.1f} s)\n")
    buf.write(f"report: {Path(out_dir) / 'report.md'}\n")
    return buf.getvalue()
