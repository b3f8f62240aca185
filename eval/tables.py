"""The paper's tables built from a bench run's aggregates (``eval.metrics``), as ``Table`` objects.

Rendering (Markdown, CSV, LaTeX, HTML) and the number formats live in ``eval.table_render`` and are
re-exported here. Rows come in sections (the oracle always sits alone in the last section, as an upper
bound); bold marks the best non-oracle value where the paper bolds one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from coba_env.costs import CostMeasure, table_measures
from eval.cost_notes import CostEstimates, marked
from eval.records import RecordLayout
from eval.table_render import (  # noqa: F401  (re-exported: callers format with tables.fmt_*)
    Column,
    Table,
    _missing,
    _num,
    fmt_1,
    fmt_2,
    fmt_acc,
    fmt_acc1,
    fmt_k,
    fmt_pct,
    fmt_signed,
    fmt_text,
    fmt_times,
)

#: The policy every bootstrap and relative-cost comparison is made against (CoBa-Routed-Strong).
REFERENCE = "coba_strong"
#: Routing-strength ablation rows (paper Table "ablation"), in order.
ABLATION = ("coba_light", "coba_balanced", "coba_strong", "self_eval_weighted", "pool_oracle")
#: High-accuracy methods compared on cost (paper Table "highcost"), in order.
HIGHCOST = ("coba_strong", "self_eval_weighted", "bon16_majority")
ORACLE_GROUP = "oracle"


# ---------------------------------------------------------------- building the paper's tables

@dataclass
class PolicyInfo:
    """Display facts about a policy: its label and group ("coba", "baseline", "oracle", "learned")."""

    label: str
    group: str


def _is_oracle(name: str, info: Mapping[str, PolicyInfo]) -> bool:
    return name in info and info[name].group == ORACLE_GROUP


def _label(name: str, info: Mapping[str, PolicyInfo]) -> str:
    return info[name].label if name in info else name


def _split_oracle(names: Sequence[str], info: Mapping[str, PolicyInfo]) -> list[list[str]]:
    normal = [n for n in names if not _is_oracle(n, info)]
    oracle = [n for n in names if _is_oracle(n, info)]
    return [s for s in (normal, oracle) if s]


def _bold_best(table: Table, keys: Sequence[str], info: Mapping[str, PolicyInfo], larger: bool = True) -> None:
    """Bold, per column, the best value among non-oracle rows (all ties)."""
    for key in keys:
        cands = [(s, r, row[key]) for s, sec in enumerate(table.sections) for r, row in enumerate(sec)
                 if not _is_oracle(row["policy"], info) and not _missing(row.get(key))]
        if not cands:
            continue
        best = max(v for *_, v in cands) if larger else min(v for *_, v in cands)
        for s, r, v in cands:
            if abs(v - best) < 1e-9:
                table.bold.add((s, r, key))


def _cost_columns(estimates: CostEstimates | None, frame: pd.DataFrame) -> list[Column]:
    """One column per cost measure ``frame`` has (``coba_env.costs.table_measures``: Total Tok., Calls, P-Tok.,
    Latency, then USD on a priced pool, then any other measure), each heading marked when it holds estimates."""
    return [Column(m.metric, marked(m.label, estimates, m.metric), lambda v, m=m: _shown(m, v), "down")
            for m in table_measures(frame.columns)]


def _shown(m: CostMeasure, value: Any) -> str:
    """A cost measure's per-item mean as the tables show it ("-" when missing)."""
    return "-" if value is None or value != value else m.show(value)


def _footnote(estimates: CostEstimates | None) -> str:
    return f" {estimates.footnote}" if estimates is not None and estimates.footnote else ""


def main_table(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], *, estimates: CostEstimates | None = None) -> Table:
    """Paper Table "main": macro accuracy and per-item costs; non-oracle rows by accuracy, oracle last.

    ``estimates`` marks the cost columns that hold estimates and adds its footnote to the caption."""
    costs = _cost_columns(estimates, mac)
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"), *costs,
            Column("policy", "Policy", csv_only=True)]
    order = mac.sort_values(["acc", "p_tokens"], ascending=[True, False]).index.tolist()
    shown = ["acc", *(c.key for c in costs)]
    sections = [[{"method": _label(n, info), "policy": n, **mac.loc[n, shown].to_dict()}
                 for n in sec] for sec in _split_oracle(order, info)]
    table = Table("main", "Main macro results over dataset x generator pairs. Costs are per item "
                  "(one item-generator evaluation); P-Tok. weights tokens by model parameters (billions). The "
                  "oracle is an evaluator-side upper bound." + _footnote(estimates), cols, sections)
    _bold_best(table, ["acc"], info)
    return table


def pooled_table(poo: pd.DataFrame, info: Mapping[str, PolicyInfo], *,
                 estimates: CostEstimates | None = None) -> Table:
    """Per-example (pooled over episodes) accuracy and costs, for comparison with the macro table."""
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"),
            *_cost_columns(estimates, poo), Column("n", "Episodes", lambda v: _num(v, "{:.0f}")), Column("policy", "Policy", csv_only=True)]
    order = poo.sort_values(["acc", "p_tokens"], ascending=[True, False]).index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, **poo.loc[n].to_dict()} for n in sec]
                for sec in _split_oracle(order, info)]
    table = Table("pooled", "Pooled results: plain means over all episodes (every example weighs the same)."
                  + _footnote(estimates), cols, sections)
    _bold_best(table, ["acc"], info)
    return table


def per_group_table(frame: pd.DataFrame, level: str, info: Mapping[str, PolicyInfo], *, name: str,
                    caption: str, order: Sequence[str] | None = None, metric: str = "acc") -> Table:
    """Accuracy (or ``metric``) per policy x dataset / generator (``level``), oracle last, best in bold."""
    wide = frame[metric].unstack(level)
    groups = list(order) if order is not None else list(wide.columns)
    fmt = fmt_acc1 if metric == "acc" else fmt_k
    cols = [Column("method", "Method")] + [Column(g, g, fmt, "up" if metric == "acc" else "down")
                                           for g in groups] + [Column("policy", "Policy", csv_only=True)]
    # Accuracy tables list methods from least to most accurate on average; cost tables from most to least costly.
    names = wide[groups].mean(axis=1).sort_values(ascending=metric == "acc").index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, **{g: wide.loc[n, g] for g in groups}} for n in sec]
                for sec in _split_oracle(names, info)]
    table = Table(name, caption, cols, sections)
    _bold_best(table, groups, info, larger=metric == "acc")
    return table


def ablation_table(mac: pd.DataFrame, alloc: pd.DataFrame, info: Mapping[str, PolicyInfo], layout: RecordLayout,
                   names: Sequence[str] = ABLATION) -> Table:
    """Paper Table "ablation": routing strength; the setting is measured (mean candidates, strong-verifier calls)."""
    present = [n for n in names if n in mac.index]
    strong = layout.standing_for(2) or "V3"
    cols = [Column("method", "Variant"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("calls", "Calls", fmt_2, "down"), Column("p_tokens", "P-Tok.", fmt_k, "down"),
            Column("candidates", "Candidates", fmt_2), Column("strong_calls", f"{strong} calls", fmt_2),
            Column("policy", "Policy", csv_only=True)]
    coba = [n for n in present if info.get(n, PolicyInfo(n, "")).group == "coba"]
    if not coba:  # the ablation is about routing strength: without a CoBa variant there is nothing to ablate
        return Table("ablation", "Routing-strength ablation: no CoBa variant ran, so there is nothing to compare.",
                     cols, [])
    other = [n for n in present if n not in coba and not _is_oracle(n, info)]
    oracle = [n for n in present if _is_oracle(n, info)]
    sections = []
    for sec in (coba, other, oracle):
        if sec:
            sections.append([{"method": _label(n, info), "policy": n, "acc": mac.loc[n, "acc"],
                              "calls": mac.loc[n, "calls"], "p_tokens": mac.loc[n, "p_tokens"],
                              "candidates": alloc.loc[n, "n_samples"] if n in alloc.index else None,
                              "strong_calls": alloc.loc[n, layout.strong]
                              if n in alloc.index and layout.strong is not None else None}
                             for n in sec])
    table = Table("ablation", f"Routing-strength ablation. Candidates and {strong} calls are measured means per "
                  "item.", cols, sections)
    _bold_best(table, ["acc"], info)
    return table


def highcost_table(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str] = HIGHCOST,
                   reference: str = REFERENCE) -> Table:
    """Paper Table "highcost": high-accuracy methods with p-token cost relative to ``reference``."""
    present = [n for n in names if n in mac.index]
    ref = mac.loc[reference, "p_tokens"] if reference in mac.index else float("nan")
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("calls", "Calls", fmt_2, "down"), Column("total_tokens", "Tok.", fmt_k, "down"),
            Column("p_tokens", "P-Tok.", fmt_k, "down"), Column("rel_cost", "Rel. cost", fmt_times, "down"),
            Column("policy", "Policy", csv_only=True)]
    rows = [{"method": _label(n, info), "policy": n, "acc": mac.loc[n, "acc"], "calls": mac.loc[n, "calls"],
             "total_tokens": mac.loc[n, "total_tokens"], "p_tokens": mac.loc[n, "p_tokens"],
             "rel_cost": mac.loc[n, "p_tokens"] / ref if ref and not math.isnan(ref) else None} for n in present]
    table = Table("highcost", f"Cost among high-accuracy methods. Relative cost is against {_label(reference, info)}"
                  " in parameter-weighted tokens.", cols, [rows] if rows else [])
    _bold_best(table, ["acc"], info)
    return table


def bootstrap_table(vs: pd.DataFrame, info: Mapping[str, PolicyInfo], reference: str = REFERENCE,
                    resamples: int = 2000) -> Table:
    """Paired bootstrap of ``reference`` minus every other policy: difference, 95% CI, p, significance."""
    from eval.bootstrap import format_p

    cols = [Column("comparison", "Comparison"), Column("diff", "Diff. (pts)", fmt_signed),
            Column("ci", "95% CI"), Column("p_text", "p"), Column("sig", "Significant"),
            Column("n_units", "Paired units", lambda v: _num(v, "{:.0f}")), Column("b", "Policy", csv_only=True),
            Column("ci_low", "CI low", fmt_signed, csv_only=True),
            Column("ci_high", "CI high", fmt_signed, csv_only=True),
            Column("p", "p (raw)", lambda v: _num(v, "{:.4f}"), csv_only=True)]
    rows = []
    for r in vs.itertuples(index=False):
        rows.append({"comparison": f"{_label(reference, info)} - {_label(r.b, info)}", "b": r.b,
                     "diff": r.diff, "ci": f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]", "ci_low": r.ci_low,
                     "ci_high": r.ci_high, "p": r.p, "p_text": format_p(r.p, resamples),
                     "sig": "yes" if r.significant else "no", "n_units": r.n_units})
    unit = vs.attrs.get("unit", "item")
    return Table("bootstrap", f"Paired bootstrap over {unit}s ({resamples} resamples): accuracy difference "
                 f"{_label(reference, info)} minus each method, in points. Significant when the 95% CI "
                 "excludes zero.", cols, [rows] if rows else [])


def pairwise_table(pw: pd.DataFrame, info: Mapping[str, PolicyInfo], order: Sequence[str]) -> Table:
    """The full pairwise matrix: row minus column accuracy difference in points, '*' when significant."""
    names = [n for n in order if n in set(pw["a"])]
    lookup = {(r.a, r.b): r for r in pw.itertuples(index=False)}
    cols = [Column("method", "Row - column")] + [Column(n, _label(n, info)) for n in names]
    rows = []
    for a in names:
        row: dict[str, Any] = {"method": _label(a, info), "policy": a}
        for b in names:
            r = lookup.get((a, b))
            row[b] = "" if r is None else f"{r.diff:+.2f}{'*' if r.significant else ''}"
        rows.append(row)
    return Table("pairwise", "Pairwise paired-bootstrap accuracy differences (row minus column, points); "
                 "* marks a 95% CI that excludes zero.", cols, [rows] if rows else [])


def allocation_table(alloc: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
                     datasets: Sequence[str], layout: RecordLayout) -> Table:
    """Action-allocation audit per dataset: share of each action (every verifier of ``layout``), mean candidates,
    mean calls of the verifiers standing for the cheap judge V1 and the strong verifier V3."""
    cheap, strong = layout.standing_for(0), layout.standing_for(2)
    cols = [Column("dataset", "Dataset"), Column("method", "Method"), Column("share_S", "Sample", fmt_pct),
            *(Column(f"share_{v}", v, fmt_pct) for v in layout.verifiers), Column("candidates", "Candidates", fmt_2),
            *([Column(layout.counts[cheap], f"{cheap} calls", fmt_2)] if cheap is not None else []),
            *([Column("strong_calls", f"{strong} calls", fmt_2)] if strong is not None else []),
            Column("policy", "Policy", csv_only=True)]
    sections = []
    for ds in datasets:
        rows = []
        for n in names:
            if (n, ds) in alloc.index:
                r = alloc.loc[(n, ds)]
                rows.append({"dataset": ds, "method": _label(n, info), "policy": n, **r.to_dict()})
        if rows:
            sections.append(rows)
    return Table("allocation", "Action-allocation audit per dataset: each action's share of the non-STOP "
                 "actions, mean candidates drawn and mean verifier calls per item.", cols, sections)


def oracle_gap_table(gap: pd.DataFrame, info: Mapping[str, PolicyInfo]) -> Table:
    """Errors split into allocation errors (a correct candidate was in the pool) and generation errors.

    Every column is pooled over episodes, the accuracy too (100 - wrong %), so the row adds up: accuracy +
    allocation errors + generation errors = 100. The macro accuracy of the main table weighs the
    dataset x generator pairs equally instead and differs from this one."""
    cols = [Column("method", "Method"), Column("acc", "Acc. (pooled) %", fmt_acc, "up"),
            Column("allocation_errors_rate", "Allocation err. %", fmt_1, "down"),
            Column("generation_errors_rate", "Generation err. %", fmt_1, "down"),
            Column("wrong_rate", "Wrong %", fmt_1, "down"),
            Column("allocation_share", "Alloc. share of errors", fmt_pct),
            Column("allocation_errors", "Allocation err.", lambda v: _num(v, "{:.0f}")),
            Column("generation_errors", "Generation err.", lambda v: _num(v, "{:.0f}")),
            Column("n", "Episodes", lambda v: _num(v, "{:.0f}")), Column("policy", "Policy", csv_only=True)]
    acc = 100.0 - gap["wrong_rate"]
    order = acc.sort_values(kind="stable").index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, "acc": float(acc[n]), **gap.loc[n].to_dict()}
                 for n in sec] for sec in _split_oracle(order, info)]
    return Table("oracle_gap", "Oracle-gap split, pooled over episodes (every episode weighs the same, so "
                 "accuracy + allocation errors + generation errors = 100%): allocation errors are wrong answers "
                 "although a correct candidate was in the pool; generation errors had none.", cols,
                 [s for s in sections if s])


def oracle_gap_by_dataset_table(gap_ds: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
                                datasets: Sequence[str]) -> Table:
    """The oracle-gap split per dataset for the given policies."""
    cols = [Column("dataset", "Dataset"), Column("method", "Method"),
            Column("allocation_errors_rate", "Allocation err. %", fmt_1, "down"),
            Column("generation_errors_rate", "Generation err. %", fmt_1, "down"),
            Column("oracle_available_rate", "Pool has correct %", fmt_1),
            Column("n", "Episodes", lambda v: _num(v, "{:.0f}")), Column("policy", "Policy", csv_only=True)]
    sections = []
    for ds in datasets:
        rows = [{"dataset": ds, "method": _label(n, info), "policy": n, **gap_ds.loc[(n, ds)].to_dict()}
                for n in names if (n, ds) in gap_ds.index]
        if rows:
            sections.append(rows)
    return Table("oracle_gap_by_dataset", "Oracle-gap split per dataset (pooled over the dataset's episodes).",
                 cols, sections)
