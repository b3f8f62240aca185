"""The paper's figures as matplotlib Figures (Agg backend); ``eval.report`` saves them as PNG and SVG.

- ``frontier``: accuracy vs cost (log x), the Pareto front of deployable methods, the oracle as upper bound.
- ``small_multiples``: the same per dataset.
- ``heatmap``: per-dataset accuracy, methods x datasets.
- ``allocation``: stacked bars of the mean actions per item, per dataset, for the CoBa variants.
- ``savings``: cost of the methods of comparable accuracy relative to the reference (CoBa-Routed-Strong).
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

from eval.pareto import Point, pareto_front  # noqa: E402
from eval.tables import ORACLE_GROUP, REFERENCE, PolicyInfo  # noqa: E402

GROUP_STYLE = {
    "coba": {"color": "#c0392b", "marker": "o", "size": 70},
    "baseline": {"color": "#2c6fbb", "marker": "s", "size": 40},
    "learned": {"color": "#7d3c98", "marker": "D", "size": 45},
    ORACLE_GROUP: {"color": "#222222", "marker": "*", "size": 160},
}
COST_LABEL = {"p_tokens": "parameter-weighted tokens per item (log scale)",
              "total_tokens": "total tokens per item (log scale)", "calls": "model calls per item (log scale)",
              "latency_s": "latency per item, s (log scale)"}
ACTION_STYLE = (("n_samples", "Sample", "#9ecae1"), ("n_v1", "V1 cheap judge", "#fdae6b"),
                ("n_v2", "V2 process judge", "#bcbddc"), ("n_v3", "V3 strong verifier", "#e6550d"))


def _style(name: str, info: Mapping[str, PolicyInfo]) -> dict:
    group = info[name].group if name in info else "baseline"
    return GROUP_STYLE.get(group, GROUP_STYLE["baseline"])


def _label(name: str, info: Mapping[str, PolicyInfo]) -> str:
    return info[name].label if name in info else name


def _is_oracle(name: str, info: Mapping[str, PolicyInfo]) -> bool:
    return name in info and info[name].group == ORACLE_GROUP


#: Label offsets (points) tried in order around a marker: right, left, above, below, the diagonals, then
#: farther positions that get a leader line.
_OFFSETS = ((7, 0, "left", "center"), (-7, 0, "right", "center"), (0, 8, "center", "bottom"),
            (0, -8, "center", "top"), (7, 7, "left", "bottom"), (7, -7, "left", "top"),
            (-7, 7, "right", "bottom"), (-7, -7, "right", "top"), (20, 16, "left", "bottom"),
            (20, -16, "left", "top"), (-20, 16, "right", "bottom"), (-20, -16, "right", "top"),
            (0, 24, "center", "bottom"), (0, -24, "center", "top"), (34, 28, "left", "bottom"),
            (34, -28, "left", "top"), (-34, 28, "right", "bottom"), (-34, -28, "right", "top"),
            (0, 40, "center", "bottom"), (0, -40, "center", "top"), (50, 40, "left", "bottom"),
            (50, -40, "left", "top"), (-50, 40, "right", "bottom"), (-50, -40, "right", "top"))


def place_labels(ax, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], colors: Sequence[str],
                 fontsize: float = 7.5, avoid: Sequence = ()) -> None:
    """Label points without overlaps where possible: try offsets around each marker, keep the first free one.

    Text extents come from the Agg renderer; a label must not overlap an earlier label, any marker, or
    leave the axes. When every offset collides, the one with the least overlap is used.
    """
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    marker_boxes = []
    for x, y in zip(xs, ys, strict=True):
        px, py = to_px((x, y))
        marker_boxes.append((px - 5, py - 5, px + 5, py + 5))
    axes_box = ax.get_window_extent(renderer)
    placed: list[tuple[float, float, float, float]] = [(b.x0, b.y0, b.x1, b.y1) for b in avoid]

    def gap(box, m) -> float:
        # Distance from a marker box's centre to a label box (0 when inside).
        cx, cy = (m[0] + m[2]) / 2, (m[1] + m[3]) / 2
        dx = max(box[0] - cx, 0.0, cx - box[2])
        dy = max(box[1] - cy, 0.0, cy - box[3])
        return (dx * dx + dy * dy) ** 0.5

    def overlap(a, b) -> float:
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    pt = fig.dpi / 72.0
    for i, (x, y, text, color) in enumerate(zip(xs, ys, texts, colors, strict=True)):
        # Measure the text once; every candidate box is then placed arithmetically (creating and measuring an
        # annotation per candidate costs ~1 s per figure).
        probe = ax.text(0, 0, text, fontsize=fontsize, transform=None)
        bb = probe.get_window_extent(renderer)
        width, height = bb.width, bb.height
        probe.remove()
        px, py = to_px((x, y))
        best = None
        for dx, dy, ha, va in _OFFSETS:
            far = abs(dx) + abs(dy) > 20
            ax0 = px + dx * pt - {"left": 0.0, "center": width / 2, "right": width}[ha]
            ay0 = py + dy * pt - {"bottom": 0.0, "center": height / 2, "top": height}[va]
            box = (ax0 - 1, ay0 - 1, ax0 + width + 1, ay0 + height + 1)
            outside = (box[0] < axes_box.x0) + (box[2] > axes_box.x1) + (box[1] < axes_box.y0) + \
                (box[3] > axes_box.y1)
            clash = sum(overlap(box, p) for p in placed) + \
                sum(overlap(box, m) for j, m in enumerate(marker_boxes) if j != i)
            # A label should sit closer to its own marker than to any other, unless a leader line shows which.
            ambiguous = 0 if far else sum(1 for j, m in enumerate(marker_boxes)
                                          if j != i and gap(box, m) < gap(box, marker_boxes[i]) + 4)
            cost = (outside, clash, ambiguous)
            if best is None or cost < best[0]:
                best = (cost, (dx, dy, ha, va, far), box)
            if cost == (0, 0.0, 0):
                break
        dx, dy, ha, va, far = best[1]
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize,
                    color=color, arrowprops={"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.6,
                                             "shrinkA": 0, "shrinkB": 4} if far else None)
        placed.append(best[2])


def _plot_plane(ax, frame: pd.DataFrame, info: Mapping[str, PolicyInfo], cost: str) -> list[str]:
    """Scatter methods on the accuracy-cost plane with the Pareto front; returns the names plotted."""
    names = [n for n in frame.index if frame.loc[n, cost] > 0]
    pts = [Point(n, float(frame.loc[n, cost]), float(frame.loc[n, "acc"])) for n in names if not _is_oracle(n, info)]
    front = pareto_front(pts)
    if front:
        xs = [p.cost for p in front]
        ys = [p.accuracy for p in front]
        ax.step(xs + [xs[-1] * 1.6], ys + [ys[-1]], where="post", color="#888888", lw=1.2, ls="--", zorder=1,
                label="Pareto front")
    on_front = {p.name for p in front}
    for group in (["baseline", "learned", "coba", ORACLE_GROUP]):
        sel = [n for n in names if (info[n].group if n in info else "baseline") == group]
        if not sel:
            continue
        st = GROUP_STYLE.get(group, GROUP_STYLE["baseline"])
        ax.scatter([frame.loc[n, cost] for n in sel], [frame.loc[n, "acc"] for n in sel], s=st["size"],
                   marker=st["marker"], color=st["color"], zorder=3, edgecolor="white", linewidth=0.6,
                   label={"coba": "CoBa routing", "baseline": "baselines", "learned": "learned",
                          ORACLE_GROUP: "pool oracle (upper bound)"}.get(group, group))
        for n in sel:
            if n in on_front:
                ax.scatter([frame.loc[n, cost]], [frame.loc[n, "acc"]], s=st["size"] * 2.2, marker="o",
                           facecolor="none", edgecolor="#555555", lw=0.8, zorder=2)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor log labels (2x10^5, 3x10^5...) collide
    ax.grid(True, which="major", alpha=0.3)
    return names


def frontier(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], cost: str = "p_tokens",
             title: str = "Accuracy-cost frontier (macro over dataset x generator pairs)") -> Figure:
    """Accuracy vs cost per method (log x), Pareto front of deployable methods, oracle marked as upper bound."""
    fig, ax = plt.subplots(figsize=(9.5, 6.0), dpi=150)
    names = _plot_plane(ax, mac, info, cost)
    ax.set_xlabel(COST_LABEL.get(cost, cost))
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=11)
    xmin, xmax = ax.get_xlim()
    ax.set_xlim(xmin / 1.3, xmax * 1.5)  # room for labels left and right of the extreme points
    ymin, ymax = ax.get_ylim()
    ax.set_ylim(ymin - 0.03 * (ymax - ymin), ymax + 0.05 * (ymax - ymin))
    legend = ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
    fig.tight_layout()
    # Label after the layout is final, so the text extents measured are the ones drawn.
    order = sorted(names, key=lambda n: (not _is_oracle(n, info) and info.get(n, PolicyInfo(n, "")).group != "coba",
                                         -float(mac.loc[n, "acc"])))
    place_labels(ax, [float(mac.loc[n, cost]) for n in order], [float(mac.loc[n, "acc"]) for n in order],
                 [_label(n, info) + (" (upper bound)" if _is_oracle(n, info) else "") for n in order],
                 [_style(n, info)["color"] for n in order],
                 avoid=[legend.get_window_extent(fig.canvas.get_renderer())])
    return fig


def small_multiples(per_ds: pd.DataFrame, info: Mapping[str, PolicyInfo], datasets: Sequence[str],
                    cost: str = "p_tokens") -> Figure:
    """One accuracy-cost panel per dataset (values averaged over generators), each with its Pareto front."""
    n = len(datasets)
    ncols = min(3, max(1, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), dpi=130, squeeze=False)
    for k, ds in enumerate(datasets):
        ax = axes[k // ncols][k % ncols]
        frame = per_ds.xs(ds, level="dataset")
        _plot_plane(ax, frame, info, cost)
        for n_ in frame.index:
            if info.get(n_, PolicyInfo(n_, "")).group == "coba":
                short = _label(n_, info).replace("CoBa-Routed-", "").replace("CoBa-Routed", "Balanced")
                ax.annotate(short, (frame.loc[n_, cost], frame.loc[n_, "acc"]), xytext=(4, -9),
                            textcoords="offset points", fontsize=6.5, color=_style(n_, info)["color"])
        ax.set_title(ds, fontsize=10)
        ax.tick_params(labelsize=7)
        if k % ncols == 0:
            ax.set_ylabel("accuracy (%)", fontsize=8)
        if k + ncols >= n:  # nothing below this panel
            ax.set_xlabel(COST_LABEL.get(cost, cost).replace(" per item (log scale)", " (log)"), fontsize=8)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle("Accuracy-cost frontiers per dataset (averaged over generators)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
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


def allocation(alloc: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
               datasets: Sequence[str]) -> Figure:
    """Stacked bars of the mean number of each action per item, per dataset, one bar per policy."""
    names = [n for n in names if n in alloc.index.get_level_values("policy")]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(datasets) * max(1, len(names)) / 2.2), 4.4), dpi=150)
    width = 0.8 / max(1, len(names))
    hatches = ["", "//", "..", "xx", "\\\\"]
    for k, n in enumerate(names):
        xs = np.arange(len(datasets)) + (k - (len(names) - 1) / 2) * width
        bottom = np.zeros(len(datasets))
        for col, lab, color in ACTION_STYLE:
            vals = np.array([alloc.loc[(n, ds), col] if (n, ds) in alloc.index else 0.0 for ds in datasets])
            ax.bar(xs, vals, width * 0.92, bottom=bottom, color=color, edgecolor="#333333", lw=0.4,
                   hatch=hatches[k % len(hatches)], label=lab if k == 0 else None)
            bottom += vals
        for x, top in zip(xs, bottom, strict=True):
            ax.text(x, top + 0.08, _label(n, info).replace("CoBa-Routed-", "").replace("CoBa ", ""),
                    ha="center", va="bottom", fontsize=6.5, rotation=90)
    ax.set_xticks(range(len(datasets)), labels=list(datasets), fontsize=9)
    ax.set_ylabel("mean actions per item")
    ymax = ax.get_ylim()[1]
    ax.set_ylim(0, ymax * 1.25)
    ax.legend(fontsize=8, frameon=False, loc="upper left", ncol=4)
    ax.set_title("Action allocation per dataset (" + ", ".join(_label(n, info) for n in names) + ")", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def savings(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], names: Sequence[str],
            reference: str = REFERENCE) -> Figure:
    """Total and parameter-weighted tokens of methods of comparable accuracy, as multiples of ``reference``."""
    names = [n for n in names if n in mac.index]
    fig, ax = plt.subplots(figsize=(8.0, 1.2 + 0.62 * len(names)), dpi=150)
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
                ax.text(v, y, f" {v:.2f}x ({float(mac.loc[n, col]) / 1000:.1f}k)", va="center", fontsize=7)
                top = max(top, v)
    ax.axvline(1.0, color="#c0392b", lw=1, ls="--")
    ax.set_yticks(ys, labels=[f"{_label(n, info)}\nacc {float(mac.loc[n, 'acc']):.2f}%" for n in names], fontsize=8)
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel(f"cost per item relative to {_label(reference, info)}")
    ax.legend(handles=[Patch(color=c, label=lab) for _, lab, c in series], fontsize=8, frameon=False,
              loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(f"Cost at comparable accuracy (relative to {_label(reference, info)})", fontsize=10)
    fig.tight_layout()
    return fig


def comparable_methods(mac: pd.DataFrame, info: Mapping[str, PolicyInfo], reference: str = REFERENCE,
                       within: float = 1.0, always: Sequence[str] = ()) -> list[str]:
    """Non-oracle methods whose macro accuracy is at least the reference's minus ``within`` points."""
    if reference not in mac.index:
        return [n for n in always if n in mac.index]
    floor = float(mac.loc[reference, "acc"]) - within
    chosen = [n for n in mac.index if not _is_oracle(n, info) and float(mac.loc[n, "acc"]) >= floor]
    chosen += [n for n in always if n in mac.index and n not in chosen]
    return sorted(chosen, key=lambda n: (n != reference, float(mac.loc[n, "p_tokens"])))
