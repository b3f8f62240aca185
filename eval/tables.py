"""The paper's tables, each rendered as Markdown, CSV and LaTeX (booktabs).

A ``Table`` holds raw values; formatting happens per renderer, so the CSV keeps full precision while the
Markdown and LaTeX use the paper's formats (accuracy 2 decimals, tokens in thousands "58.0k", calls 2
decimals, latency 1 decimal). Rows come in sections separated by a rule (the oracle always sits alone in
the last section, as an upper bound). Bold marks the best non-oracle value where the paper bolds one.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: The policy every bootstrap and relative-cost comparison is made against (CoBa-Routed-Strong).
REFERENCE = "coba_strong"
#: Routing-strength ablation rows (paper Table "ablation"), in order.
ABLATION = ("coba_light", "coba_balanced", "coba_strong", "self_eval_weighted", "pool_oracle")
#: High-accuracy methods compared on cost (paper Table "highcost"), in order.
HIGHCOST = ("coba_strong", "self_eval_weighted", "bon16_majority")
ORACLE_GROUP = "oracle"


def fmt_acc(v: Any) -> str:
    """Accuracy in percent, 2 decimals."""
    return _num(v, "{:.2f}")


def fmt_acc1(v: Any) -> str:
    """Accuracy in percent, 1 decimal (per-dataset tables)."""
    return _num(v, "{:.1f}")


def fmt_k(v: Any) -> str:
    """A token count in thousands with one decimal: 58013 -> '58.0k'."""
    if _missing(v):
        return "-"
    return f"{float(v) / 1000:.1f}k"


def fmt_2(v: Any) -> str:
    """Two decimals."""
    return _num(v, "{:.2f}")


def fmt_1(v: Any) -> str:
    """One decimal."""
    return _num(v, "{:.1f}")


def fmt_signed(v: Any) -> str:
    """A signed difference with 2 decimals: '+3.74'."""
    return _num(v, "{:+.2f}")


def fmt_times(v: Any) -> str:
    """A ratio as '2.43x'."""
    return _num(v, "{:.2f}x")


def fmt_pct(v: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return "-" if _missing(v) else f"{100 * float(v):.1f}%"


def fmt_text(v: Any) -> str:
    """Plain text."""
    return "" if v is None else str(v)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _num(v: Any, pattern: str) -> str:
    return "-" if _missing(v) else pattern.format(float(v))


@dataclass
class Column:
    """One column: the row key it shows, its header, formatter, and which direction is better."""

    key: str
    header: str
    fmt: Callable[[Any], str] = fmt_text
    better: str | None = None  # "up", "down" or None
    csv_only: bool = False  # raw keys such as the policy name: in the CSV, not in Markdown or LaTeX

    def title(self, arrows: bool = True) -> str:
        """The header, with an up/down arrow when ``better`` is set."""
        if not arrows or self.better is None:
            return self.header
        return f"{self.header} {'↑' if self.better == 'up' else '↓'}"


@dataclass
class Table:
    """A table: named columns, rows (dicts of raw values) in sections, bold cells, caption and notes."""

    name: str
    caption: str
    columns: list[Column]
    sections: list[list[dict[str, Any]]]
    bold: set[tuple[int, int, str]] = field(default_factory=set)  # (section, row, column key)
    notes: str = ""

    @property
    def shown(self) -> list[Column]:
        """The columns Markdown and LaTeX show (all but ``csv_only`` ones)."""
        return [c for c in self.columns if not c.csv_only]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """All rows, sections flattened."""
        return [r for s in self.sections for r in s]

    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown (no section rules; bold as **x**)."""
        shown = self.shown
        head = "| " + " | ".join(c.title() for c in shown) + " |"
        align = "|" + "|".join(":---" if i == 0 else "---:" for i, _ in enumerate(shown)) + "|"
        lines = [head, align]
        for s, section in enumerate(self.sections):
            for r, row in enumerate(section):
                cells = []
                for c in shown:
                    text = c.fmt(row.get(c.key)).replace("|", "\\|")
                    cells.append(f"**{text}**" if (s, r, c.key) in self.bold and text else text)
                lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """CSV with raw (unformatted) values and the column keys as the header."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c.key for c in self.columns])
        for row in self.rows:
            writer.writerow(["" if _missing(row.get(c.key)) else row.get(c.key) for c in self.columns])
        return buf.getvalue()

    def to_latex(self) -> str:
        """A booktabs ``table`` environment with caption and label ``tab:<name>``."""
        shown = self.shown
        spec = "@{}l" + "c" * (len(shown) - 1) + "@{}"
        head = " & ".join(r"\textbf{" + _tex(c.header) + "}" + _arrow_tex(c.better) for c in shown)
        lines = [r"\begin{table}[!t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                 head + r" \\", r"\midrule"]
        for s, section in enumerate(self.sections):
            if s > 0:
                lines.append(r"\midrule")
            for r, row in enumerate(section):
                cells = []
                for c in shown:
                    text = _tex(c.fmt(row.get(c.key)))
                    cells.append(r"\textbf{" + text + "}" if (s, r, c.key) in self.bold and text else text)
                lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{_tex(self.caption)}}}",
                  rf"\label{{tab:{self.name}}}", r"\end{table}"]
        return "\n".join(lines) + "\n"


def _arrow_tex(better: str | None) -> str:
    if better == "up":
        return r"~$\uparrow$"
    if better == "down":
        return r"~$\downarrow$"
    return ""


_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "↑": r"$\uparrow$", "↓": r"$\downarrow$", "≤": r"$\le$", "−": "-"}


def _tex(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))


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


def main_table(mac: pd.DataFrame, info: Mapping[str, PolicyInfo]) -> Table:
    """Paper Table "main": macro accuracy and per-item costs; non-oracle rows by accuracy, oracle last."""
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("total_tokens", "Total Tok.", fmt_k, "down"), Column("calls", "Calls", fmt_2, "down"),
            Column("p_tokens", "P-Tok.", fmt_k, "down"), Column("latency_s", "Latency", fmt_1, "down"),
            Column("policy", "Policy", csv_only=True)]
    order = mac.sort_values(["acc", "p_tokens"], ascending=[True, False]).index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, **mac.loc[n, ["acc", "total_tokens", "calls",
                                                                        "p_tokens", "latency_s"]].to_dict()}
                 for n in sec] for sec in _split_oracle(order, info)]
    table = Table("main", "Main macro results over dataset x generator pairs. Costs are per item "
                  "(one item-generator evaluation); P-Tok. weights tokens by model parameters (billions). The "
                  "oracle is an evaluator-side upper bound.", cols, sections)
    _bold_best(table, ["acc"], info)
    return table


def pooled_table(poo: pd.DataFrame, info: Mapping[str, PolicyInfo]) -> Table:
    """Per-example (pooled over episodes) accuracy and costs, for comparison with the macro table."""
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("total_tokens", "Total Tok.", fmt_k, "down"), Column("calls", "Calls", fmt_2, "down"),
            Column("p_tokens", "P-Tok.", fmt_k, "down"), Column("latency_s", "Latency", fmt_1, "down"),
            Column("n", "Episodes", lambda v: _num(v, "{:.0f}")), Column("policy", "Policy", csv_only=True)]
    order = poo.sort_values(["acc", "p_tokens"], ascending=[True, False]).index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, **poo.loc[n].to_dict()} for n in sec]
                for sec in _split_oracle(order, info)]
    table = Table("pooled", "Pooled results: plain means over all episodes (every example weighs the same).",
                  cols, sections)
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


def ablation_table(mac: pd.DataFrame, alloc: pd.DataFrame, info: Mapping[str, PolicyInfo],
                   names: Sequence[str] = ABLATION) -> Table:
    """Paper Table "ablation": routing strength; the setting is measured (mean candidates, V3 calls)."""
    present = [n for n in names if n in mac.index]
    cols = [Column("method", "Variant"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("calls", "Calls", fmt_2, "down"), Column("p_tokens", "P-Tok.", fmt_k, "down"),
            Column("candidates", "Candidates", fmt_2), Column("strong_calls", "V3 calls", fmt_2),
            Column("policy", "Policy", csv_only=True)]
    coba = [n for n in present if info.get(n, PolicyInfo(n, "")).group == "coba"]
    other = [n for n in present if n not in coba and not _is_oracle(n, info)]
    oracle = [n for n in present if _is_oracle(n, info)]
    sections = []
    for sec in (coba, other, oracle):
        if sec:
            sections.append([{"method": _label(n, info), "policy": n, "acc": mac.loc[n, "acc"],
                              "calls": mac.loc[n, "calls"], "p_tokens": mac.loc[n, "p_tokens"],
                              "candidates": alloc.loc[n, "n_samples"] if n in alloc.index else None,
                              "strong_calls": alloc.loc[n, "n_v3"] if n in alloc.index else None}
                             for n in sec])
    table = Table("ablation", "Routing-strength ablation. Candidates and V3 calls are measured means per item.",
                  cols, sections)
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
                     datasets: Sequence[str]) -> Table:
    """Action-allocation audit per dataset: share of each action, mean candidates, mean V3 calls."""
    cols = [Column("dataset", "Dataset"), Column("method", "Method"), Column("share_S", "Sample", fmt_pct),
            Column("share_V1", "V1", fmt_pct), Column("share_V2", "V2", fmt_pct), Column("share_V3", "V3", fmt_pct),
            Column("candidates", "Candidates", fmt_2), Column("n_v1", "V1 calls", fmt_2),
            Column("strong_calls", "V3 calls", fmt_2), Column("policy", "Policy", csv_only=True)]
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


def oracle_gap_table(gap: pd.DataFrame, mac: pd.DataFrame, info: Mapping[str, PolicyInfo]) -> Table:
    """Errors split into allocation errors (a correct candidate was in the pool) and generation errors."""
    cols = [Column("method", "Method"), Column("acc", "Acc.", fmt_acc, "up"),
            Column("wrong_rate", "Wrong %", fmt_1, "down"),
            Column("allocation_errors_rate", "Allocation err. %", fmt_1, "down"),
            Column("generation_errors_rate", "Generation err. %", fmt_1, "down"),
            Column("allocation_share", "Alloc. share of errors", fmt_pct),
            Column("allocation_errors", "Allocation err.", lambda v: _num(v, "{:.0f}")),
            Column("generation_errors", "Generation err.", lambda v: _num(v, "{:.0f}")),
            Column("n", "Episodes", lambda v: _num(v, "{:.0f}")), Column("policy", "Policy", csv_only=True)]
    order = mac.sort_values("acc").index.tolist()
    sections = [[{"method": _label(n, info), "policy": n, "acc": mac.loc[n, "acc"], **gap.loc[n].to_dict()}
                 for n in sec if n in gap.index] for sec in _split_oracle(order, info)]
    return Table("oracle_gap", "Oracle-gap split (pooled over episodes): allocation errors are wrong answers "
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
