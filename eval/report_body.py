"""What a bench report says, in order, as blocks (text, tables, figures) that ``report.md`` and ``report.html``
both render: setup, main results, paper comparison, per dataset and generator, allocation, oracle gap,
statistics, ablation, cost. Machine paths never enter a block (``public``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coba_env.rules.roles import pool_role_map
from eval import tables as tabs
from eval.bench_data import BenchData
from eval.figures import COMPARABLE_WITHIN
from eval.paper_comparison import DEVIATION_NOTES, TOLERANCE_POINTS
from eval.route_report import route_blocks
from eval.table_render import Column, FigureRef, fmt_pct
from eval.tables import REFERENCE, Table
from pools.verifier_quality import DEFINITIONS


def fmt_3(v: Any) -> str:
    """Three decimals ("-" when missing)."""
    return "-" if v is None or v != v else f"{float(v):.3f}"


#: A report block: Markdown text (headings, bullets, paragraphs), a table, or a figure.
Block = str | Table | FigureRef


def public(value: Any) -> Any:
    """``value`` with every absolute path (or ~ path) replaced by its last component, recursively: a report
    names files, never where they sat on the machine that ran it."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [public(v) for v in value]
    if isinstance(value, str) and (os.path.isabs(value) or value.startswith("~")):
        return Path(value).name or value
    return value


def literal_note(data: BenchData) -> str | None:
    """What the "(literal)" rows are, when any ran."""
    literal = [n for n in data.ran if "(literal)" in data.info[n].label]
    if not literal:
        return None
    return ("Rows marked **(literal)** (" + ", ".join(f"`{n}`" for n in literal) + ") run the paper's "
            "Algorithm 1 word for word: they route candidates to the strong verifier V3 even when every revealed "
            "candidate already has the same answer. The unmarked CoBa rows skip those routes, which cannot change "
            "the selected answer (only which candidate of that answer is picked), so both select the same answers "
            "and the literal rows only cost more (docs/POLICIES.md, 'Paper figures as sanity checks').")


def _short_provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """The provenance with the grader's disagreement list counted, not listed (the import printed it)."""
    agreement = prov.get("grader_agreement")
    if not isinstance(agreement, dict) or not isinstance(agreement.get("disagreements"), list):
        return prov
    return {**prov, "grader_agreement": {**agreement, "disagreements": len(agreement["disagreements"])}}


#: How each grouping's episodes are counted in the setup ({n} episodes, {d} datasets, {g} generators, {per}
#: candidates per generator), and what one costs ("per item (...)").
EPISODES_LINE: dict[str, str] = {
    "pair": "{n} (item x generator) over {d} datasets x {g} generators = {pairs} pairs; N = {per} candidates",
    "item": "{n} (one per item, with all its generators) over {d} datasets x {g} generators; N = {per} candidates "
            "per generator",
}
COST_UNIT: dict[str, str] = {"pair": "one item-generator evaluation", "item": "one problem with all its generators"}
#: What the headline macro average runs over (an item-grouped episode's generator column joins its generators).
MACRO_OVER: dict[str, str] = {"pair": "dataset x generator pairs, as in the paper",
                              "item": "datasets (each episode holds all of a problem's generators)"}
#: What "Results by generator" says first (item-grouped episodes have one generator column: all of them).
BY_GENERATOR_NOTE: dict[str, str] = {
    "pair": "",
    "item": "Each episode holds all of a problem's generators, so there is one column here; how each policy spread "
            "its samples and cost over the generators is in 'Routing between generators'.",
}


def render_blocks(data: BenchData, tables: dict[str, Table], files: dict[str, Any], paper_state: dict[str, Any],
                  paper_tables: list[Table]) -> list[Block]:
    """The report as blocks: setup, main results, paper comparison, per dataset, allocation, statistics, the
    routing section (episodes over several generators), files."""
    out: list[Block] = ["# CoBa bench report", "\n".join(setup_lines(data)),
                        f"Accuracy is in percent; costs are per item ({COST_UNIT[data.grouping]}). Headline "
                        f"numbers are macro averages over {MACRO_OVER[data.grouping]}; the pooled "
                        "tables weigh every episode equally. The pool oracle reads correctness labels and is an "
                        "upper bound only: it never enters a Pareto front or a best-method choice."]
    note = literal_note(data)
    if note:
        out.append(note)
    out += list(data.notes)
    out += verifier_blocks(data)
    if "main" not in tables:  # a route bench's routing tables may be there when no policy ran
        return [*out, "No policy ran on this pool, so there are no results."]
    has = files.get("figures", {})

    def fig(stem: str, alt: str, caption: str = "") -> list[Block]:
        return [FigureRef(stem, alt, caption)] if stem in has else []

    out += ["## Main results (macro)", tables["main"]]
    out += fig("frontier", "accuracy-cost frontier",
               "Each method at its macro accuracy and cost; ringed points form the Pareto front of deployable "
               "methods (dashed staircase); the pool oracle is an upper bound and never on the front.")
    front = data.pareto.get("front") or []
    if front:
        out.append("Pareto front (" + data.cost_metric + "): " + " -> ".join(f"`{n}`" for n in front) + ".")
    out += ["## Comparison with the paper", *_paper_blocks(paper_state, paper_tables)]
    out += _group_blocks(data, tables, fig)
    out += _allocation_blocks(data, tables, fig)
    out += ["## Significance (paired bootstrap)", *_significance_blocks(data, tables)]
    out += _ablation_and_cost_blocks(data, tables, fig)
    return [*out, *route_blocks(data, tables, files), *_files_blocks(files)]


def setup_lines(data: BenchData) -> list[str]:
    """The report's setup bullets: pool, episodes, items, generators, cost model, policies, roles, time."""
    prov = public(_short_provenance(data.pool.manifest.get("provenance") or {}))
    ds_counts = data.records.drop_duplicates(["dataset", "item_id"]).groupby("dataset", sort=False).size() \
        if len(data.records) else pd.Series(dtype=int)
    gens, n_ds = data.pool_generators, len(data.datasets)
    episodes = EPISODES_LINE[data.grouping].format(n=data.compiled.n_episodes, d=n_ds, g=len(gens),
                                                   pairs=n_ds * len(gens), per=data.candidates_per_generator)
    held = data.pair_counts
    if held is not None:  # pairs of different sizes: N is the most (docs/POOLS.md)
        episodes += (f" at most (an item-generator pair holds {int(held.min())} to {int(held.max())}, median "
                     f"{float(np.median(held)):g})")
    setup = [
        f"- **Pool**: `{public(data.pool_spec)}`; provenance: {json.dumps(prov) if prov else 'none recorded'}",
        f"- **Episodes**: {episodes}; tiers present: {', '.join(data.compiled.tiers_present) or 'none'}",
        "- **Items per dataset**: " + ", ".join(f"{k} {v}" for k, v in ds_counts.items()),
        f"- **Generators**: {', '.join(gens)}",
        f"- **Cost model** (frontier x axis): `{data.cost_model}`; seed {data.seed}; "
        f"replay workers {data.run.workers}",
        f"- **Policies run** ({len(data.ran)}): " + ", ".join(f"`{n}`" for n in data.ran),
        "- **Verifier roles** (which verifier serves each role policies ask for; docs/POLICIES.md, "
        "'Verifier roles'): " + "; ".join(pool_role_map(data.compiled).describe()),
    ]
    na = data.run.not_applicable
    if na:
        setup.append("- **Not applicable** (not run): " + "; ".join(f"`{k}`: {v}" for k, v in na.items()))
    t = data.timings
    setup.append(f"- **Time**: replay {t.get('replay_s', 0):.1f} s, total {t.get('total_s', 0):.1f} s")
    return setup


def verifier_blocks(data: BenchData) -> list[Block]:
    """The pool section's verifier table: each verifier's coverage, AUROC, calibration error and best-of-N
    accuracy on the benched episodes (``pools.verifier_quality``); nothing for a pool without verifiers."""
    if not data.verifiers:
        return []
    n = data.candidates_per_generator
    cols = [Column("name", "Verifier"), Column("model", "Model", lambda v: v or "-"), Column("role", "Role"),
            Column("coverage", "Coverage", fmt_pct),
            Column("auroc", "AUROC", fmt_3, "up"), Column("ece", "ECE", fmt_3, "down"),
            Column("best_of_n_accuracy", f"pick@{n}", fmt_pct, "up"),
            Column("best_of_n_episodes", "Episodes", lambda v: "-" if v is None else f"{v:.0f}")]
    rows = [{"name": name, **d} for name, d in data.verifiers.items()]
    return [Table("verifiers", f"Verifiers of the pool on the benched episodes, from its correctness labels "
                  f"(evaluator-side). {DEFINITIONS}.", cols, [rows])]


def _group_blocks(data: BenchData, tables: dict[str, Table], fig: Any) -> list[Block]:
    """Results by dataset and by generator, and per example (pooled)."""
    out: list[Block] = ["## Results by dataset", tables["per_dataset"]]
    out += fig("per_dataset_heatmap", "per-dataset accuracy heatmap")
    out += fig("per_dataset_frontiers", "per-dataset frontiers",
               "One panel per dataset (accuracy and cost averaged over generators). Numbers label the points; "
               "the key under the panels names them. Ringed points form each panel's Pareto front.")
    out += [tables["per_dataset_p_tokens"], "## Results by generator", BY_GENERATOR_NOTE[data.grouping]]
    return [*out, tables["per_generator"], "## Per example (pooled)", tables["pooled"]]


def _allocation_blocks(data: BenchData, tables: dict[str, Table], fig: Any) -> list[Block]:
    """The action-allocation audit of the CoBa variants and the oracle-gap split."""
    out: list[Block] = ["## Adaptive allocation"]
    coba = [n for n in data.ran if data.info[n].group == "coba"]
    if coba:
        out += [tabs.allocation_table(data.allocation, data.info, coba, data.datasets, data.layout),
                "All policies: `tables/allocation.md`."]
    else:
        out.append("No CoBa variant ran, so there is no allocation to show; all policies: `tables/allocation.md`.")
    out += fig("action_allocation", "action allocation per dataset",
               "Mean number of each action per item, per dataset, one bar per CoBa variant.")
    out += ["## Oracle gap: allocation vs generation errors", tables["oracle_gap"]]
    focus = coba + [n for n in ("greedy", "bon16_majority") if n in data.ran]
    if focus:
        out += [tabs.oracle_gap_by_dataset_table(data.gap_by_dataset, data.info, focus, data.datasets),
                "All policies: `tables/oracle_gap_by_dataset.md`."]
    return out


def _ablation_and_cost_blocks(data: BenchData, tables: dict[str, Table], fig: Any) -> list[Block]:
    """The routing-strength ablation and the cost among high-accuracy methods."""
    out: list[Block] = ["## Routing-strength ablation"]
    out.append(tables["ablation"] if "ablation" in tables else
               "No CoBa variant ran, so there is no routing-strength ablation (it compares CoBa's Light, Balanced "
               "and Strong settings).")
    out += ["## Cost among high-accuracy methods", tables["highcost"]]
    ref = data.info[REFERENCE].label if REFERENCE in data.info else REFERENCE
    if REFERENCE in data.macro.index:
        floor = float(data.macro.loc[REFERENCE, "acc"]) - COMPARABLE_WITHIN
        threshold = (f"Comparable accuracy: a macro accuracy of at least {floor:.2f}% ({ref}'s "
                     f"{float(data.macro.loc[REFERENCE, 'acc']):.2f}% minus {COMPARABLE_WITHIN:g} point), plus the "
                     "paper's high-cost comparisons (self-evaluation vote, best-of-16) whatever their accuracy.")
    else:
        threshold = f"{ref} did not run: the paper's high-cost comparisons only."
    return out + fig("cost_savings", "cost savings at comparable accuracy", threshold)


def _files_blocks(files: dict[str, Any]) -> list[Block]:
    """What the bench folder holds."""
    return ["## Files", "\n".join([
        "- `report.html`: this report as one self-contained page (figures embedded, tables sortable)",
        "- `results.json`: every number above, keyed by policy and dataset",
        "- `episodes.parquet`, `episodes.csv.gz`: one record per (policy, episode)",
        "- `tables/`: " + ", ".join(f"`{k}`" for k in files.get("tables", {})) + " (.md, .csv, .tex)",
        "- `figures/`: " + (", ".join(f"`{k}`" for k in files.get("figures", {})) or "none") + " (.png, .svg)"])]


def _paper_blocks(paper_state: dict[str, Any], paper_tables: list[Table]) -> list[Block]:
    if paper_state.get("status") != "compared":
        return [paper_state.get("message", "")]
    out: list[Block] = [f"Pool provenance profile is `paper`; the paper's published values come from "
                        f"{paper_state['source']}. The simulated pool is calibrated to the paper, so agreement is "
                        "expected in shape, not to the decimal.", *paper_tables]
    off = paper_state.get("off") or {}
    if off:
        lines = [f"Rows marked 'off' miss the paper's accuracy by more than the simulator's tolerance "
                 f"({TOLERANCE_POINTS:g} point):"]
        for name, delta in off.items():
            why = DEVIATION_NOTES.get(name, "no explanation recorded; treat the row with care.")
            lines.append(f"- `{name}` ({delta:+.2f} points): {why}")
        out.append("\n".join(lines))
    return out


def _significance_blocks(data: BenchData, tables: dict[str, Table]) -> list[Block]:
    """The paired bootstrap: every policy against the reference, or (no reference ran) the pairwise matrix."""
    if "pairwise" not in tables:
        return ["Fewer than two policies ran, so there is nothing to compare."]
    n_units = int(data.pairwise["n_units"].iloc[0])
    dropped = int(data.pairwise.attrs.get("dropped", 0))
    method = (f"Unit: {data.bootstrap_unit} ({n_units} paired units"
              + (f", {dropped} dropped for incomplete paired coverage" if dropped else "")
              + f"); {data.resamples} resamples, seed {data.seed}; percentile 95% CI; two-sided p from the "
              "bootstrap distribution with the +1 correction (floor 2/(B+1)).")
    if "bootstrap" in tables:
        return [method, tables["bootstrap"], "Full pairwise matrix: `tables/pairwise.md` / `.csv`."]
    why = ("it did not run" if data.requested_reference is None else "it is not applicable here")
    return [f"No reference policy (`{data.requested_reference or REFERENCE}`: {why}); every pair instead, row minus "
            "column. `coba bench --reference NAME` tests every policy against NAME.", method, tables["pairwise"]]


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as GitHub-flavoured Markdown (tables with their caption in italics above)."""
    parts = []
    for block in blocks:
        if isinstance(block, Table):
            parts.append(f"*{block.caption}*\n\n{block.to_markdown().rstrip()}")
        elif isinstance(block, FigureRef):
            parts.append(f"![{block.alt}](figures/{block.stem}.png)" + (f"\n\n*{block.caption}*" if block.caption
                                                                          else ""))
        elif block:
            parts.append(block)
    return "\n\n".join(parts) + "\n"
