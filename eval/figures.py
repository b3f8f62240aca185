"""The paper's figures as matplotlib Figures (Agg backend); ``eval.report`` saves them as PNG and SVG.

- ``frontier``: accuracy vs cost (log x), the Pareto front of deployable methods, the oracle as upper bound.
- ``small_multiples``: the same per dataset, points numbered, a key under the panels naming them.
- ``heatmap``: per-dataset accuracy, methods x datasets.
- ``allocation``: stacked bars of the mean actions per item, one panel per dataset, one bar per CoBa variant.
- ``savings``: cost of the methods of comparable accuracy relative to the reference (CoBa-Routed-Strong); the
  threshold for "comparable" (``COMPARABLE_WITHIN``) is printed on the figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from coba_env.costs import COST_TABLE  # noqa: E402
from coba_env.rules.roles import ROLE_NAMES  # noqa: E402
from eval.cost_notes import CostEstimates  # noqa: E402
from eval.label_placement import place_labels  # noqa: E402
from eval.pareto import Point, pareto_front  # noqa: E402
from eval.records import RecordLayout  # noqa: E402
from eval.tables import ORACLE_GROUP, REFERENCE, PolicyInfo  # noqa: E402

#: Marker style of each policy group (``agents.registry.GROUPS``); a group not listed is drawn as a baseline.
GROUP_STYLE = {
    "coba": {"color": "#c0392b", "marker": "o", "size": 70},
    "baseline": {"color": "#2c6fbb", "marker": "s", "size": 40},
    "learned": {"color": "#7d3c98", "marker": "D", "size": 45},
    "routing": {"color": "#1b7f5f", "marker": "^", "size": 60},
    ORACLE_GROUP: {"color": "#222222", "marker": "*", "size": 160},
}
#: Drawing order (later groups on top), legend order, and the groups whose labels are placed first.
GROUP_ORDER = ("baseline", "learned", "routing", "coba", ORACLE_GROUP)
LEGEND_ORDER = ("coba", "routing", "baseline", "learned", ORACLE_GROUP)
LABELLED_FIRST = ("coba", "routing", ORACLE_GROUP)
#: The frontier's x-axis text of each cost metric (``coba_env.costs.COST_TABLE``'s ``axis``).
COST_LABEL = {m.metric: f"{m.axis} (log scale)" for m in COST_TABLE}
#: "Comparable accuracy" in the cost-savings figure: at most this many points below the reference's accuracy.
COMPARABLE_WITHIN = 1.0
#: The colour of the SAMPLE bars, of the first verifier of each role, and of further verifiers in turn.
SAMPLE_COLOR = "#9ecae1"
ROLE_COLOR = {"cheap_judge": "#fdae6b", "process_judge": "#bcbddc", "strong_verifier": "#e6550d",
              "reward_model": "#74c476"}
MORE_COLORS = ("#fdd0a2", "#9e9ac8", "#a63603", "#31a354", "#636363")


def action_style(layout: RecordLayout) -> list[tuple[str, str, str]]:
    """(count column, legend label, colour) of SAMPLE and of every verifier of ``layout`` ("V1 cheap judge")."""
    out = [("n_samples", "Sample", SAMPLE_COLOR)]
    seen: set[str] = set()
    for k, (name, column) in enumerate(layout.counts.items()):
        role = layout.roles[k]
        color = ROLE_COLOR.get(role) if role not in seen else None
        seen.add(role)
        out.append((column, f"{name} {ROLE_NAMES.get(role, role)}", color or MORE_COLORS[k % len(MORE_COLORS)]))
    return out


def _style(name: str, info: Mapping[str, PolicyInfo]) -> dict:
    group = info[name].group if name in info else "baseline"
    return GROUP_STYLE.get(group, GROUP_STYLE["baseline"])


def _label(name: str, info: Mapping[str, PolicyInfo]) -> str:
    return info[name].label if name in info else name


def _is_oracle(name: str, info: Mapping[str, PolicyInfo]) -> bool:
    return name in info and info[name].group == ORACLE_GROUP


GROUP_LEGEND = {"coba": "CoBa routing", "baseline": "baselines", "learned": "learned",
                "routing": "routing between generators", ORACLE_GROUP: "pool oracle (upper bound)"}


def _group(name: str, info: Mapping[str, PolicyInfo]) -> str:
    """The group a policy is drawn as: its own when ``GROUP_STYLE`` has it, else "baseline"."""
    group = info[name].group if name in info else "baseline"
    return group if group in GROUP_STYLE else "baseline"


def _plot_plane(ax, frame: pd.DataFrame, info: Mapping[str, PolicyInfo], cost: str) -> tuple[list[str], list[Point]]:
    """Scatter methods on the accuracy-cost plane with the Pareto front (a dashed staircase from the cheapest to
    the most accurate front point, front points ringed); returns the names plotted and the front."""
    names = [n for n in frame.index if frame.loc[n, cost] > 0]
    pts = [Point(n, float(frame.loc[n, cost]), float(frame.loc[n, "acc"])) for n in names if not _is_oracle(n, info)]
    front = pareto_front(pts)
    if front:
        ax.step([p.cost for p in front], [p.accuracy for p in front], where="post", color="#888888", lw=1.2,
                ls="--", zorder=1)
    on_front = {p.name for p in front}
    for group in GROUP_ORDER:
        sel = [n for n in names if _group(n, info) == group]
        if not sel:
            continue
        st = GROUP_STYLE.get(group, GROUP_STYLE["baseline"])
        ax.scatter([frame.loc[n, cost] for n in sel], [frame.loc[n, "acc"] for n in sel], s=st["size"],
                   marker=st["marker"], color=st["color"], zorder=3, edgecolor="white", linewidth=0.6)
        ring = [n for n in sel if n in on_front]
        if ring:
            ax.scatter([frame.loc[n, cost] for n in ring], [frame.loc[n, "acc"] for n in ring], s=st["size"] * 2.2,
                       marker="o", facecolor="none", edgecolor="#555555", lw=0.8, zorder=2)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor log labels (2x10^5, 3x10^5...) collide
    ax.grid(True, which="major", alpha=0.3)
    return names, front


def _legend_handles(groups: Sequence[str], with_front: bool) -> list:
    """Legend entries: one per group present, then the front's staircase and the ring marking front points."""
    from matplotlib.lines import Line2D

    handles = []
    for group in LEGEND_ORDER:
        if group in groups:
            st = GROUP_STYLE[group]
            handles.append(Line2D([], [], ls="none", marker=st["marker"], color=st["color"], markeredgecolor="white",
                                  markersize=math.sqrt(st["size"]), label=GROUP_LEGEND[group]))
    if with_front:
        handles += [Line2D([], [], color="#888888", lw=1.2, ls="--", label="Pareto front"),
                    Line2D([], [], ls="none", marker="o", markersize=11, markerfacecolor="none",
                           markeredgecolor="#555555", label="on the Pareto front")]
    return handles


def _front_boxes(ax, front: Sequence[Point], pad: float = 2.0) -> list[tuple[float, float, float, float]]:
    """The front's staircase as thin boxes in display pixels (labels placed later keep off the line)."""
    to_px = ax.transData.transform
    boxes = []
    for a, b in zip(front, front[1:], strict=False):
        (x0, y0), (x1, y1) = to_px((a.cost, a.accuracy)), to_px((b.cost, b.accuracy))
        boxes.append((min(x0, x1) - pad, y0 - pad, max(x0, x1) + pad, y0 + pad))  # horizontal at a's accuracy
        boxes.append((x1 - pad, min(y0, y1) - pad, x1 + pad, max(y0, y1) + pad))  # vertical at b's cost
    return boxes


def cost_axis_label(cost: str, estimates: CostEstimates | None = None) -> str:
    """The x-axis label of a cost metric; marked, with how, when the metric holds estimates (``eval.cost_notes``)."""
    label = COST_LABEL.get(cost, cost)
    if estimates is None or not estimates.mark(cost):
        return label
    return f"{label} {estimates.why(cost)} (see the report's footnote)"


def frontier(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], cost: str = "p_tokens",
             title: str = "Accuracy-cost frontier (macro over dataset x generator pairs)", *,
             estimates: CostEstimates | None = None) -> Figure:
    """Accuracy vs cost per method (log x), Pareto front of deployable methods, oracle marked as upper bound."""
    fig, ax = plt.subplots(figsize=(9.5, 6.0), dpi=150)
    names, front = _plot_plane(ax, mac, info, cost)
    ax.set_xlabel(cost_axis_label(cost, estimates))
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=11)
    xmin, xmax = ax.get_xlim()
    ax.set_xlim(xmin / 1.3, xmax * 1.5)  # room for labels left and right of the extreme points
    ymin, ymax = ax.get_ylim()
    ax.set_ylim(ymin - 0.03 * (ymax - ymin), ymax + 0.05 * (ymax - ymin))
    # "best": the corner where the legend hides the fewest markers (a fixed corner hid route benches' points).
    legend = ax.legend(handles=_legend_handles({_group(n, info) for n in names}, bool(front)), loc="best",
                       fontsize=8, frameon=True, framealpha=0.9)
    fig.tight_layout()
    # Label after the layout is final, so the text extents measured are the ones drawn.
    order = sorted(names, key=lambda n: (_group(n, info) not in LABELLED_FIRST, -float(mac.loc[n, "acc"])))
    renderer = fig.canvas.get_renderer()
    place_labels(ax, [float(mac.loc[n, cost]) for n in order], [float(mac.loc[n, "acc"]) for n in order],
                 [_label(n, info) + (" (upper bound)" if _is_oracle(n, info) else "") for n in order],
                 [_style(n, info)["color"] for n in order],
                 avoid=[legend.get_window_extent(renderer), *_front_boxes(ax, front)])
    return fig


def _numbering(names: Sequence[str], info: Mapping[str, PolicyInfo]) -> dict[str, int]:
    """Point numbers for the per-dataset panels: CoBa variants first, then baselines, learned, the oracle."""
    rank = {"coba": 0, "routing": 0, "baseline": 1, "learned": 2, ORACLE_GROUP: 3}
    ordered = sorted(names, key=lambda n: (rank.get(_group(n, info), 1), list(names).index(n)))
    return {n: k + 1 for k, n in enumerate(ordered)}


def small_multiples(per_ds: pd.DataFrame, info: Mapping[str, PolicyInfo], datasets: Sequence[str],
                    cost: str = "p_tokens", *, estimates: CostEstimates | None = None) -> Figure:
    """One accuracy-cost panel per dataset (values averaged over generators), each with its Pareto front.

    Points carry numbers (placed clear of each other and of the front's line); a key under the panels names
    them, so every method is identified however many share a panel."""
    n = len(datasets)
    ncols = min(3, max(1, n))
    nrows = math.ceil(n / ncols)
    names_all = list(dict.fromkeys(per_ds.index.get_level_values("policy")))
    number = _numbering(names_all, info)
    fig_w = max(3.4 * ncols, 8.0)
    # Key columns as wide as the longest entry (about 0.066 in per character at 8.5 pt), as many as fit.
    longest = max((len(_label(m, info)) + (14 if _is_oracle(m, info) else 0) for m in number), default=10)
    col_w = 0.066 * (longest + 5)
    key_cols = max(1, min(4, int((fig_w - 0.3) // col_w)))
    key_rows = math.ceil(len(number) / key_cols)
    legend_rows = 1 if fig_w >= 9.5 else 2
    legend_h = 0.3 * legend_rows + 0.1
    key_h = 0.2 * key_rows + legend_h + 0.15  # inches: the legend rows, then the key lines
    fig_h = 3.1 * nrows + key_h + 0.4
    fig, axes = plt.subplots(nrows, ncols, figsize=(fig_w, fig_h), dpi=150, squeeze=False)
    panels = []
    groups: set[str] = set()
    any_front = False
    for k, ds in enumerate(datasets):
        ax = axes[k // ncols][k % ncols]
        frame = per_ds.xs(ds, level="dataset")
        names, front = _plot_plane(ax, frame, info, cost)
        panels.append((ax, frame, names, front))
        groups |= {_group(m, info) for m in names}
        any_front |= bool(front)
        ax.set_title(ds, fontsize=10)
        ax.tick_params(labelsize=8)
        ymin, ymax = ax.get_ylim()
        ax.set_ylim(ymin - 0.04 * (ymax - ymin), ymax + 0.06 * (ymax - ymin))
        xmin, xmax = ax.get_xlim()
        ax.set_xlim(xmin / 1.15, xmax * 1.15)
        if k % ncols == 0:
            ax.set_ylabel("accuracy (%)", fontsize=9)
        if k + ncols >= n:  # nothing below this panel
            ax.set_xlabel(COST_LABEL.get(cost, cost).replace(" per item (log scale)", " (log)")
                          + (estimates.why(cost) if estimates is not None else ""), fontsize=9)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    fig.suptitle("Accuracy-cost frontiers per dataset (averaged over generators)", fontsize=11)
    bottom = key_h / fig_h
    fig.tight_layout(rect=(0, bottom, 1, 0.97))
    for ax, frame, names, front in panels:
        place_labels(ax, [float(frame.loc[m, cost]) for m in names], [float(frame.loc[m, "acc"]) for m in names],
                     [str(number[m]) for m in names], [_style(m, info)["color"] for m in names], fontsize=8,
                     avoid=_front_boxes(ax, front))
    handles = _legend_handles(groups, any_front)
    fig.legend(handles=handles, loc="upper center", ncol=math.ceil(len(handles) / legend_rows), fontsize=8.5,
               frameon=False, bbox_to_anchor=(0.5, bottom - 0.05 / fig_h))
    # The key: "n  label" in columns, coloured by group, under the legend, filled row by row in number order.
    line_h = 0.2 / fig_h
    left = max(0.02, (1 - key_cols * col_w / fig_w) / 2)
    for k, (name, num) in enumerate(number.items()):
        row, col = k // key_cols, k % key_cols
        text = f"{num:>2}  {_label(name, info)}" + (" (upper bound)" if _is_oracle(name, info) else "")
        fig.text(left + col * col_w / fig_w, bottom - (legend_h + 0.05) / fig_h - (row + 1) * line_h, text,
                 fontsize=8.5, color=_style(name, info)["color"], ha="left", va="bottom")
    return fig


def heatmap(per_ds: pd.DataFrame, info: Mapping[str, PolicyInfo], datasets: Sequence[str]) -> Figure:
    """Per-dataset accuracy as a methods x datasets heatmap (oracle last, as an upper bound)."""
    wide = per_ds["acc"].unstack("dataset")[list(datasets)]
    normal = [n for n in wide.mean(axis=1).sort_values(ascending=False).index if not _is_oracle(n, info)]
    order = normal + [n for n in wide.index if _is_oracle(n, info)]
    wide = wide.loc[order]
    fig, ax = plt.subplots(figsize=(1.3 * len(datasets) + 3.2, 0.36 * len(order) + 1.4), dpi=150)
    values = wide.to_numpy(dtype=float)
    im = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(datasets)), labels=list(datasets), fontsize=8)
    ax.set_yticks(range(len(order)),
                  labels=[_label(n, info) + (" (upper bound)" if _is_oracle(n, info) else "") for n in order],
                  fontsize=8)
    lo, hi = np.nanmin(values), np.nanmax(values)
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            if np.isfinite(v):
                dark = (v - lo) / ((hi - lo) or 1) < 0.6
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
    if normal and len(order) > len(normal):
        ax.axhline(len(normal) - 0.5, color="white", lw=2)
    fig.colorbar(im, ax=ax, label="accuracy (%)", fraction=0.04)
    ax.set_title("Per-dataset accuracy (averaged over generators)", fontsize=10)
    fig.tight_layout()
    return fig


def _short(name: str, info: Mapping[str, PolicyInfo]) -> str:
    """A CoBa variant's short name: "Light", "Balanced", "Strong", "Strong (literal)"."""
    label = _label(name, info)
    return label.replace("CoBa-Routed-", "").replace("CoBa-Routed", "Balanced").replace("CoBa ", "").strip()


def allocation(alloc: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
               datasets: Sequence[str], layout: RecordLayout) -> Figure:
    """Stacked bars of the mean number of each action per item: one panel per dataset, one bar per policy
    (named under it), the actions stacked in the legend's colours."""
    names = [n for n in names if n in alloc.index.get_level_values("policy")]
    n_ds = max(1, len(datasets))
    ncols = min(5, n_ds)
    nrows = math.ceil(n_ds / ncols)
    longest = max((len(_short(n, info)) for n in names), default=6)
    label_h = 0.09 * longest  # inches taken by the 45-degree bar names
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.0, 2.0 * ncols), (2.9 + label_h) * nrows + 0.8),
                             dpi=150, sharey=True, squeeze=False)
    xs = np.arange(len(names))
    top = 0.0
    style = action_style(layout)
    for k, ds in enumerate(datasets):
        ax = axes[k // ncols][k % ncols]
        bottom = np.zeros(len(names))
        for col, lab, color in style:
            vals = np.array([alloc.loc[(n, ds), col] if (n, ds) in alloc.index else 0.0 for n in names])
            ax.bar(xs, vals, 0.75, bottom=bottom, color=color, edgecolor="#333333", lw=0.4, label=lab)
            bottom += vals
        top = max(top, float(bottom.max()) if len(bottom) else 0.0)
        ax.set_xticks(xs, labels=[_short(n, info) for n in names], rotation=45, ha="right",
                      rotation_mode="anchor", fontsize=8.5)
        ax.set_title(ds, fontsize=10)
        ax.tick_params(axis="y", labelsize=8.5)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        if k % ncols == 0:
            ax.set_ylabel("mean actions per item", fontsize=9)
    for k in range(n_ds, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    axes[0][0].set_ylim(0, top * 1.08 if top > 0 else 1.0)
    fig.legend(handles=[Patch(facecolor=c, edgecolor="#333333", lw=0.4, label=lab) for _, lab, c in style],
               loc="upper center", ncol=min(4, len(style)), fontsize=9, frameon=False, bbox_to_anchor=(0.5, 0.94))
    fig.suptitle("Action allocation per dataset: mean actions per item for each CoBa variant", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.90))
    return fig


def savings(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
            reference: str = REFERENCE, within: float = COMPARABLE_WITHIN) -> Figure:
    """Total and parameter-weighted tokens of methods of comparable accuracy, as multiples of ``reference``.

    The subtitle states what "comparable" means: macro accuracy at least the reference's minus ``within``
    points (``comparable_methods``), plus the paper's high-cost comparisons whatever their accuracy."""
    names = [n for n in names if n in mac.index]
    fig, ax = plt.subplots(figsize=(8.0, 1.6 + 0.62 * len(names)), dpi=150)
    ys = np.arange(len(names))[::-1].astype(float)
    height = 0.38
    series = (("total_tokens", "total tokens", "#9ecae1"), ("p_tokens", "parameter-weighted tokens", "#2c6fbb"))
    top = 1.0
    for k, (col, lab, color) in enumerate(series):
        ref = float(mac.loc[reference, col]) if reference in mac.index else float("nan")
        rel = [float(mac.loc[n, col]) / ref if ref > 0 else float("nan") for n in names]
        offs = ys + (height / 2 if k == 0 else -height / 2)
        ax.barh(offs, rel, height * 0.95, color=color, label=lab,
                edgecolor=["#c0392b" if n == reference else "none" for n in names], linewidth=1.2)
        for y, v, n in zip(offs, rel, names, strict=True):
            if np.isfinite(v):
                ax.text(v + 0.02, y, f"{v:.2f}x ({float(mac.loc[n, col]) / 1000:.1f}k)", va="center", fontsize=8)
                top = max(top, v)
    ax.axvline(1.0, color="#c0392b", lw=1, ls="--")
    ax.set_yticks(ys, labels=[f"{_label(n, info)}\nacc {float(mac.loc[n, 'acc']):.2f}%" for n in names], fontsize=8.5)
    ax.set_xlim(0, top * 1.38)
    ax.set_xlabel(f"cost per item relative to {_label(reference, info)}")
    ax.legend(handles=[Patch(color=c, label=lab) for _, lab, c in series], fontsize=8.5, frameon=False,
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2)
    ax.grid(True, axis="x", alpha=0.3)
    ref_label = _label(reference, info)
    if reference in mac.index:
        floor = float(mac.loc[reference, "acc"]) - within
        rule = (f"comparable accuracy: macro accuracy >= {floor:.2f}% ({ref_label}'s "
                f"{float(mac.loc[reference, 'acc']):.2f}% minus {within:g} point),\nplus the paper's high-cost "
                "comparisons (self-evaluation vote, best-of-16) whatever their accuracy")
    else:
        rule = f"{ref_label} did not run: the paper's high-cost comparisons only"
    fig.suptitle(f"Cost at comparable accuracy, relative to {ref_label}", fontsize=10.5)
    ax.set_title(rule, fontsize=8.5, color="#444444", pad=24)
    fig.tight_layout()
    return fig


def comparable_methods(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], reference: str = REFERENCE,
                       within: float = COMPARABLE_WITHIN, always: Sequence[str] = ()) -> list[str]:
    """Non-oracle methods whose macro accuracy is at least the reference's minus ``within`` points."""
    if reference not in mac.index:
        return [n for n in always if n in mac.index]
    floor = float(mac.loc[reference, "acc"]) - within
    chosen = [n for n in mac.index if not _is_oracle(n, info) and float(mac.loc[n, "acc"]) >= floor]
    chosen += [n for n in always if n in mac.index and n not in chosen]
    return sorted(chosen, key=lambda n: (n != reference, float(mac.loc[n, "p_tokens"])))
