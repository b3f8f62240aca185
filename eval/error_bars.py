"""95% intervals drawn as error bars on an accuracy-cost plane (the bench's frontiers and the sweep's fronts).

Each point gets a bar on both axes from its interval's low to its high end (``eval.intervals``: percentile
intervals of the bootstrap over the paired units). The bars' container carries the names of its points in its
label (``"_ci95:a,b"``; the leading "_" keeps it out of legends), so the figure's own data can be checked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: The label prefix of an error-bar container (then the comma-joined point names).
LABEL = "_ci95:"
#: The id prefix of the bars' groups in an SVG file.
GID = "ci95"


def error_bars(ax, frame: pd.DataFrame, names: Sequence[str], cost: str, spans: pd.DataFrame | None,
               color: str) -> None:
    """Draw each point's 95% intervals (``spans``: rows by name, columns ``<metric>_low`` / ``_high``) as error
    bars on both axes; a point without an interval gets none. The bars' ends are the intervals' ends (clipped at
    the point in the rare case a percentile interval does not hold it)."""
    if spans is None or not len(spans):
        return
    sel = [n for n in names if n in spans.index and np.isfinite(spans.loc[n, ["acc_low", f"{cost}_low"]]
                                                                   .to_numpy(dtype=float)).all()]
    if not sel:
        return
    x = np.array([float(frame.loc[n, cost]) for n in sel])
    y = np.array([float(frame.loc[n, "acc"]) for n in sel])
    x_lo, x_hi = (spans.loc[sel, f"{cost}_{end}"].to_numpy(dtype=float) for end in ("low", "high"))
    y_lo, y_hi = (spans.loc[sel, f"acc_{end}"].to_numpy(dtype=float) for end in ("low", "high"))
    # Percentile intervals need not hold the point (a skewed resample distribution): clip the bar at the point.
    xerr = np.vstack([np.clip(x - x_lo, 0, None), np.clip(x_hi - x, 0, None)])
    yerr = np.vstack([np.clip(y - y_lo, 0, None), np.clip(y_hi - y, 0, None)])
    bars = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=color, elinewidth=0.9, alpha=0.55,
                       capsize=2, zorder=2)
    bars.set_label(LABEL + ",".join(sel))  # "_": kept out of legends; the names tell a test which bar is whose
    for k, lines in enumerate(bars.lines[2]):  # the x and the y bars: named groups in an SVG ("ci95-x-...")
        lines.set_gid(f"{GID}-{'xy'[k]}-{sel[0]}")
