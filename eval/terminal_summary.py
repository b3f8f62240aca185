"""What ``coba bench`` prints: the macro table with 95% intervals, the paired tests against the reference, notes.

The table lists the upper bounds (oracles, marked "(upper bound)") first, then every other policy by accuracy; each
name in full (the name column is as wide as the longest). Each policy takes two lines: its macro accuracy and
costs, and under each value its 95% interval (``eval.intervals``). The cost columns are the cost measures of
``coba_env.costs.COST_TABLE`` the run has, headed by their label with their unit on the second header line; every
column keeps one number format (``eval.column_format``). Under the table: the paired bootstrap of the reference
minus every other policy, as in the report's significance table.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from coba_env.costs import COST_TABLE
from coba_env.rules.roles import pool_role_map
from eval.bench_data import BenchData
from eval.bootstrap import format_p
from eval.column_format import ColumnFormat, column_format, fixed
from eval.paper_comparison import TOLERANCE_POINTS, load_paper_targets
from eval.route_report import route_summary_lines
from eval.tables import ORACLE_GROUP

#: What marks an upper bound's name.
UPPER_BOUND = " (upper bound)"
#: Space between two columns.
GAP = "  "


def _columns(data: BenchData) -> list[tuple[str, str, str, ColumnFormat]]:
    """(metric, label, unit, format) of the accuracy and of each cost measure the run has, in ``COST_TABLE`` order."""
    mac, spans = data.macro, data.intervals
    mark = data.cost_estimates.mark
    out = [("acc", "acc", "%", fixed(2))]
    if "graded_acc" in mac.columns:  # a pool with graded scores: the second accuracy measure
        out.append(("graded_acc", "graded", "%", fixed(2)))
    for m in COST_TABLE:
        if m.metric not in mac.columns:
            continue
        values = list(mac[m.metric])
        if spans is not None and f"{m.metric}_high" in spans.macro.columns:
            values += list(spans.macro[f"{m.metric}_high"])
        fmt = column_format(values)
        out.append((m.metric, m.label + mark(m.metric), fmt.unit(m.unit), fmt))
    return out


def _order(data: BenchData) -> tuple[list[str], list[str]]:
    """(upper bounds, the other policies), each by macro accuracy, best first."""
    order = data.macro.sort_values("acc", ascending=False, kind="stable").index.tolist()
    bounds = [n for n in order if data.info[n].group == ORACLE_GROUP]
    return bounds, [n for n in order if n not in bounds]


def policy_table(data: BenchData) -> list[str]:
    """The macro table: header (labels, units), a rule, the upper bounds, a rule, the other policies."""
    targets = load_paper_targets()[0] if data.is_paper_pool else None
    main = (targets or {}).get("main_table") or {}
    paper_rows, paper_cols = main.get("rows") or {}, main.get("columns") or []
    paper_acc = paper_cols.index("acc") if paper_rows and "acc" in paper_cols else None
    columns = _columns(data)
    bounds, others = _order(data)
    name_w = max(len("policy"), *(len(n) + (len(UPPER_BOUND) if n in bounds else 0) for n in [*bounds, *others]))
    spans = data.intervals

    def cells(name: str) -> tuple[list[str], list[str]]:
        row = data.macro.loc[name]
        values, ranges = [], []
        for metric, _, _, fmt in columns:
            values.append(fmt(row[metric]))
            span = spans.of(name, metric) if spans is not None else None
            ranges.append(fmt.interval(*span) if span else "")
        return values, ranges

    rows = {n: cells(n) for n in [*bounds, *others]}
    widths = [max(len(label), len(unit), *(max(len(v[k]), len(r[k])) for v, r in rows.values()))
              for k, (_, label, unit, _) in enumerate(columns)]
    extra_head, extra_unit = ("paper acc", "%") if paper_acc is not None else ("", "")
    head = ["policy".ljust(name_w), *(label.rjust(w) for (_, label, _, _), w in zip(columns, widths, strict=True))]
    units = ["".ljust(name_w), *(unit.rjust(w) for (_, _, unit, _), w in zip(columns, widths, strict=True))]
    if extra_head:
        head.append(extra_head)
        units.append(extra_unit.rjust(len(extra_head)))
    lines = [GAP.join(head).rstrip(), GAP.join(units).rstrip()]
    rule = "-" * len(lines[0])
    lines.append(rule)
    off = False
    for k, name in enumerate([*bounds, *others]):
        if k == len(bounds) and bounds:
            lines.append(rule)
        values, ranges = rows[name]
        title = name + (UPPER_BOUND if name in bounds else "")
        line = GAP.join([title.ljust(name_w), *(v.rjust(w) for v, w in zip(values, widths, strict=True))])
        if paper_acc is not None and name in paper_rows:
            paper = paper_rows[name][paper_acc]
            line += GAP + f"{paper:.2f}".rjust(len(extra_head))
            if abs(float(data.macro.loc[name, "acc"]) - paper) > TOLERANCE_POINTS:
                line, off = line + " off", True
        lines.append(line)
        if any(ranges):
            lines.append(GAP.join(["".ljust(name_w), *(r.rjust(w) for r, w in zip(ranges, widths, strict=True))])
                         .rstrip())
    lines.append(f"under each value its 95% interval (bootstrap over {data.bootstrap_unit}s, {data.resamples} "
                 "resamples, the paired tests' resamples); costs per item")
    if off:
        lines.append(f"off: more than {TOLERANCE_POINTS:g} point from the paper's accuracy (beyond the simulator's "
                     "tolerance); the report says why")
    return lines


def significance_lines(data: BenchData) -> list[str]:
    """The paired bootstrap of the reference minus every other policy, one line each (none without a reference)."""
    vs = data.versus
    if data.reference is None or not len(vs):
        if data.requested_reference is not None:
            return [f"paired bootstrap: --reference {data.requested_reference} did not run; no test against it"]
        return []
    how = "asked for" if data.requested_reference is not None else "the default"
    lines = [f"paired bootstrap, {data.reference} ({how}) minus each policy, accuracy points, 95% CI, two-sided p "
             f"({int(vs['n_units'].iloc[0])} {data.bootstrap_unit}s, {data.resamples} resamples):"]
    diff = fixed(2, signed=True)
    bounds, others = _order(data)
    rank = {n: k for k, n in enumerate([*bounds, *others])}
    rows = sorted(vs.itertuples(index=False), key=lambda r: rank.get(r.b, len(rank)))
    cells = [(str(r.b), diff(r.diff), diff.interval(r.ci_low, r.ci_high), format_p(r.p, data.resamples),
              "significant" if r.significant else "not significant") for r in rows]
    widths = [max(len(c[k]) for c in cells) for k in range(4)]
    for name, d, ci, p, verdict in cells:
        p_text = f"p {p}" if p.startswith("<") else f"p = {p}"
        lines.append(f"  {name.ljust(widths[0])}  {d.rjust(widths[1])}  {ci.rjust(widths[2])}  "
                     f"{p_text.ljust(widths[3] + 4)}  {verdict}")
    return lines


def terminal_summary(data: BenchData, out_dir: Path) -> str:
    """The summary ``coba bench`` prints: the table, the paired tests, notes, roles, routing, where the report is."""
    buf = io.StringIO()
    lines: list[Any] = []
    if len(data.macro):
        lines += policy_table(data)
        if data.cost_estimates.footnote:
            lines.append(data.cost_estimates.footnote)
        lines += significance_lines(data)
    else:
        lines.append("no policy ran on this pool")
    lines += list(data.notes)
    lines += [f"verifier role {line}" for line in pool_role_map(data.compiled).describe()]
    lines += route_summary_lines(data)
    lines += [f"not applicable: {name}: {reason}" for name, reason in data.run.not_applicable.items()]
    t = data.timings
    lines.append(f"bench: {data.compiled.n_episodes} episodes x {len(data.ran)} policies in "
                 f"{t.get('total_s', float('nan')):.1f} s (replay {t.get('replay_s', float('nan')):.1f} s)")
    lines.append(f"report: {Path(out_dir) / 'report.md'} (one page: {Path(out_dir) / 'report.html'})")
    for line in lines:
        buf.write(f"{line}\n")
    return buf.getvalue()
