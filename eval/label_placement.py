"""Place text labels next to scatter points without overlaps (matplotlib, Agg renderer).

Used by ``eval.figures``: each label tries offsets around its marker and keeps the first that overlaps no
earlier label, no marker, no obstacle (legend, the Pareto front's line) and stays inside the axes.
"""

from __future__ import annotations

from collections.abc import Sequence

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


Box = tuple[float, float, float, float]
Segment = tuple[tuple[float, float], tuple[float, float]]
#: A leader line crossing a label or another leader counts like this many px2 of overlap.
LINE_COST = 40.0


def place_labels(ax, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], colors: Sequence[str],
                 fontsize: float = 7.5, avoid: Sequence = ()) -> None:
    """Label points without overlaps where possible: try offsets around each marker, keep the first free one.

    Text extents come from the Agg renderer; a label must not overlap an earlier label, any marker, an
    obstacle of ``avoid`` or a leader line, its leader line (for far offsets) must not cross a label or another
    leader, and it must not leave the axes. When every offset collides, the one with the least overlap is used.
    Each label is an annotation whose ``xy`` is its point (far ones draw a leader line to it).
    """
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    markers = [(px - 5, py - 5, px + 5, py + 5) for px, py in (to_px((x, y)) for x, y in zip(xs, ys, strict=True))]
    axes_box = ax.get_window_extent(renderer)
    bounds = (axes_box.x0, axes_box.y0, axes_box.x1, axes_box.y1)
    # Obstacles: Bboxes (the legend) or (x0, y0, x1, y1) tuples in display pixels (e.g. the front's line).
    placed: list[Box] = [tuple(b) if isinstance(b, tuple) else (b.x0, b.y0, b.x1, b.y1) for b in avoid]
    leaders: list[Segment] = []
    pt = fig.dpi / 72.0
    for i, (x, y, text, color) in enumerate(zip(xs, ys, texts, colors, strict=True)):
        # Measure the text once; every candidate box is then placed arithmetically (creating and measuring an
        # annotation per candidate costs ~1 s per figure).
        probe = ax.text(0, 0, text, fontsize=fontsize, transform=None)
        bb = probe.get_window_extent(renderer)
        probe.remove()
        px, py = to_px((x, y))
        others = [m for j, m in enumerate(markers) if j != i]
        (dx, dy, ha, va), box, far = _best_offset((px, py), (bb.width, bb.height), pt, markers[i], others, placed,
                                                  leaders, bounds)
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=fontsize,
                    color=color, arrowprops={"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.6,
                                             "shrinkA": 0, "shrinkB": 4} if far else None)
        placed.append(box)
        if far:
            leaders.append(((px, py), (px + dx * pt, py + dy * pt)))


def line_boxes(ax, step: float = 6.0, pad: float = 2.0) -> list[Box]:
    """Small boxes (display pixels) every ``step`` px along each line drawn on ``ax``: obstacles that keep labels
    off the curves (``place_labels(avoid=...)``). Call after the layout is final."""
    import numpy as np

    boxes: list[Box] = []
    for line in ax.get_lines():
        xy = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:], strict=True):
            n = max(1, int(np.hypot(x1 - x0, y1 - y0) // step))
            for k in range(n + 1):
                x, y = x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n
                boxes.append((x - pad, y - pad, x + pad, y + pad))
    return boxes


def _best_offset(point: tuple[float, float], size: tuple[float, float], pt: float, own: Box, others: list[Box],
                 placed: list[Box], leaders: list[Segment], bounds: Box) -> tuple[tuple, Box, bool]:
    """The first offset of ``_OFFSETS`` with nothing in the way, else the least bad: (offset, its box, far)."""
    (px, py), (width, height) = point, size
    best = None
    for dx, dy, ha, va in _OFFSETS:
        far = abs(dx) + abs(dy) > 20
        ax0 = px + dx * pt - {"left": 0.0, "center": width / 2, "right": width}[ha]
        ay0 = py + dy * pt - {"bottom": 0.0, "center": height / 2, "top": height}[va]
        box = (ax0 - 3, ay0 - 1, ax0 + width + 3, ay0 + height + 1)  # keep neighbours apart: "13" "20" not "1320"
        outside = (box[0] < bounds[0]) + (box[2] > bounds[2]) + (box[1] < bounds[1]) + (box[3] > bounds[3])
        clash = sum(_overlap(box, p) for p in placed) + sum(_overlap(box, m) for m in others)
        clash += LINE_COST * sum(_inside(seg, box) for seg in leaders)
        if far:
            seg = ((px, py), (px + dx * pt, py + dy * pt))
            clash += LINE_COST * (sum(_inside(seg, p) for p in placed) + sum(_crosses(*seg, *o) for o in leaders))
        # A label should sit closer to its own marker than to any other, unless a leader line shows which.
        ambiguous = 0 if far else sum(1 for m in others if _gap(box, m) < _gap(box, own) + 4)
        cost = (outside, clash, ambiguous)
        if best is None or cost < best[0]:
            best = (cost, (dx, dy, ha, va), box, far)
        if cost == (0, 0.0, 0):
            break
    return best[1], best[2], best[3]


def _gap(box: Box, marker: Box) -> float:
    """Distance from a marker box's centre to a label box (0 when inside)."""
    cx, cy = (marker[0] + marker[2]) / 2, (marker[1] + marker[3]) / 2
    dx = max(box[0] - cx, 0.0, cx - box[2])
    dy = max(box[1] - cy, 0.0, cy - box[3])
    return (dx * dx + dy * dy) ** 0.5


def _overlap(a: Box, b: Box) -> float:
    """The area two boxes share (px2)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _crosses(p, q, r, t) -> bool:
    """Whether segments p-q and r-t properly intersect (orientation test)."""
    def orient(a, b, c) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
    return orient(p, q, r) * orient(p, q, t) < 0 and orient(r, t, p) * orient(r, t, q) < 0


def _inside(seg: Segment, box: Box) -> int:
    """How many of 10 points along the segment fall inside the box (a leader line running under a label)."""
    (x0, y0), (x1, y1) = seg
    return sum(1 for k in range(1, 10) if box[0] <= x0 + (x1 - x0) * k / 10 <= box[2]
               and box[1] <= y0 + (y1 - y0) * k / 10 <= box[3])
