"""The figure of ``coba sweep``: every sweep point on the accuracy-cost plane, each family's own Pareto front, and
each point's 95% intervals as error bars (``eval.error_bars``).

A family (``train.sweep``: CoBa over its routing parameters, best-of-n over n, a checkpoint over lambda, a policy
over a ``--grid`` parameter, or one named policy) gets one colour and marker; a family of several points has its
front drawn as a staircase in its colour (from its cheapest to its most accurate front point); points of a
one-point family are labelled with their names, points of a family of up to ``MAX_LABELLED`` points with their
setting (``param``: "k=4"), so a reader can tell which value made which point.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from eval.error_bars import error_bars  # noqa: E402
from eval.label_placement import place_labels  # noqa: E402
from eval.pareto import pareto_front  # noqa: E402

#: Markers cycled over families (colours follow matplotlib's tab10 cycle).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
#: A family of more points than this is drawn without point labels (its front line and the table say it).
MAX_LABELLED = 12


def fronts_figure(points: pd.DataFrame, cost_axis: str, title: str = "Accuracy-cost fronts of the sweep") -> Figure:
    """The sweep's figure from its points (``train.sweep.frontier_points``: columns ``policy``, ``family``,
    ``cost``, ``acc`` and, when computed, ``acc_low/high`` and ``cost_low/high``); x on a log scale when every
    cost is positive."""
    fig, ax = plt.subplots(figsize=(9.5, 6.0), dpi=150)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    frame = points.set_index("policy")
    spans = frame if {"acc_low", "cost_low"} <= set(frame.columns) else None
    labels: list[tuple[str, str, str]] = []  # (point, text, colour)
    for k, (family, group) in enumerate(frame.groupby("family", sort=False)):
        color, marker = colors[k % len(colors)], MARKERS[k % len(MARKERS)]
        names = list(group.index)
        error_bars(ax, frame, names, "cost", spans, color)
        ax.scatter(group["cost"], group["acc"], color=color, marker=marker, s=36, zorder=3, edgecolor="white",
                   linewidth=0.5, label=f"{family} ({len(names)} point{'s' if len(names) > 1 else ''})")
        front = pareto_front({n: (float(group.loc[n, "cost"]), float(group.loc[n, "acc"])) for n in names
                              if group.loc[n, "cost"] > 0})
        if len(front) >= 2:
            ax.step([p.cost for p in front], [p.accuracy for p in front], where="post", color=color, lw=1.1,
                    zorder=1)
        if len(names) == 1:
            labels.append((names[0], names[0], "#333333"))
        elif len(names) <= MAX_LABELLED and "param" in group.columns:
            labels += [(n, str(group.loc[n, "param"]), color) for n in names
                       if pd.notna(group.loc[n, "param"]) and str(group.loc[n, "param"])]
    if (frame["cost"] > 0).all():
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(cost_axis)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    legend = ax.legend(fontsize=8, loc="best", title="family (its front: solid line; bars: 95% intervals)",
                       title_fontsize=8)
    fig.tight_layout()
    if labels:
        place_labels(ax, [float(frame.loc[n, "cost"]) for n, _, _ in labels],
                     [float(frame.loc[n, "acc"]) for n, _, _ in labels], [t for _, t, _ in labels],
                     [c for _, _, c in labels], avoid=[legend.get_window_extent(fig.canvas.get_renderer())])
    return fig
