"""Accuracy-cost Pareto frontiers: which points are efficient, which dominate which, and how fronts compare.

A point (cost, accuracy) *dominates* another when it costs no more and is at least as accurate, and is
strictly better in one of the two. The front is the set of points no other point dominates. Points marked
as upper bounds (the pool oracle) are shown but never enter a front: they are not deployable methods.
Two fronts are compared by their mean best-reachable accuracy over the cost range both cover
(``compare_fronts``); outside that range one of them has no point, so there is nothing to compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """A method on the accuracy-cost plane."""

    name: str
    cost: float
    accuracy: float


def dominates(a: Point, b: Point) -> bool:
    """Whether ``a`` dominates ``b`` (cost <= and accuracy >=, at least one strictly)."""
    return a.cost <= b.cost and a.accuracy >= b.accuracy and (a.cost < b.cost or a.accuracy > b.accuracy)


def as_points(values: Mapping[str, tuple[float, float]] | Sequence[Point]) -> list[Point]:
    """Points from a mapping name -> (cost, accuracy), or a sequence of ``Point`` as is."""
    if isinstance(values, Mapping):
        return [Point(str(k), float(c), float(a)) for k, (c, a) in values.items()]
    return list(values)


def pareto_front(points: Mapping[str, tuple[float, float]] | Sequence[Point]) -> list[Point]:
    """The non-dominated points, sorted by increasing cost (equal points are all kept)."""
    pts = as_points(points)
    front = [p for p in pts if not any(dominates(q, p) for q in pts)]
    return sorted(front, key=lambda p: (p.cost, -p.accuracy, p.name))


def dominance(points: Mapping[str, tuple[float, float]] | Sequence[Point]) -> dict[str, list[str]]:
    """For every point, the names of the points it dominates (sorted)."""
    pts = as_points(points)
    return {p.name: sorted(q.name for q in pts if dominates(p, q)) for p in pts}


def dominated_by(points: Mapping[str, tuple[float, float]] | Sequence[Point]) -> dict[str, list[str]]:
    """For every point, the names of the points that dominate it (empty for front points)."""
    pts = as_points(points)
    return {p.name: sorted(q.name for q in pts if dominates(q, p)) for p in pts}


def mean_front_accuracy(points: Mapping[str, tuple[float, float]] | Sequence[Point], lo: float, hi: float, *,
                        log_x: bool = True) -> float:
    """Mean best-reachable accuracy of a front over the cost range [``lo``, ``hi``].

    The front's staircase S(x) is the best accuracy of any point costing at most x; the result is the mean
    of S over [lo, hi] (over log10 cost with ``log_x``), i.e. the area under the staircase divided by the
    range's width. ``lo`` must not lie below the front's cheapest point: there S is undefined (nothing is
    reachable), and counting it as 0 accuracy would penalise a family for what it does not cover rather than
    for what it achieves. A zero-width range gives S(hi). Compare fronts only over the same range
    (``common_cost_range``, ``compare_fronts``).
    """
    front = pareto_front(points)
    if not front:
        return float("nan")
    if lo < front[0].cost or hi < lo:
        raise ValueError(f"cost range [{lo:g}, {hi:g}] must start at or above the front's cheapest point "
                         f"({front[0].cost:g}) and end at or above its start")

    def tx(x: float) -> float:
        if not log_x:
            return x
        if x <= 0:
            raise ValueError(f"log_x needs positive costs, got {x}")
        return math.log10(x)

    a, b = tx(lo), tx(hi)
    if b <= a:
        return max(p.accuracy for p in front if p.cost <= hi)
    area, best, x_prev = 0.0, 0.0, a
    # Walk the steps: at each front point's cost the reachable accuracy jumps to that point's accuracy.
    for p in front:
        x = tx(p.cost)
        if x > a:
            seg_end = min(x, b)
            if seg_end > x_prev:
                area += best * (seg_end - x_prev)
                x_prev = seg_end
        if x >= b:
            break
        best = max(best, p.accuracy)
    if b > x_prev:
        area += best * (b - x_prev)
    return area / (b - a)


def cost_span(points: Mapping[str, tuple[float, float]] | Sequence[Point]) -> tuple[float, float] | None:
    """The cost range a front covers: its cheapest and its costliest point (None for no point)."""
    front = pareto_front(points)
    return (front[0].cost, front[-1].cost) if front else None


def common_cost_range(fronts: Sequence[Mapping[str, tuple[float, float]] | Sequence[Point]]
                      ) -> tuple[float, float] | None:
    """The cost range every front covers (latest start, earliest end), or None when they do not overlap."""
    spans = [cost_span(f) for f in fronts]
    if not spans or any(s is None for s in spans):
        return None
    lo, hi = max(s[0] for s in spans), min(s[1] for s in spans)  # type: ignore[index]
    return (lo, hi) if hi > lo else None


def compare_fronts(a: Mapping[str, tuple[float, float]] | Sequence[Point],
                   b: Mapping[str, tuple[float, float]] | Sequence[Point], *, log_x: bool = True
                   ) -> dict[str, float] | None:
    """Two fronts over their common cost range: each one's mean best-reachable accuracy there and a - b.

    None when the fronts' cost ranges do not overlap (e.g. one of them is a single point).
    """
    rng = common_cost_range([a, b])
    if rng is None:
        return None
    acc_a = mean_front_accuracy(a, *rng, log_x=log_x)
    acc_b = mean_front_accuracy(b, *rng, log_x=log_x)
    return {"lo": rng[0], "hi": rng[1], "a_acc": acc_a, "b_acc": acc_b, "diff": acc_a - acc_b}
