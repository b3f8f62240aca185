"""Accuracy-cost Pareto frontiers: which points are efficient, which dominate which, and frontier area.

A point (cost, accuracy) *dominates* another when it costs no more and is at least as accurate, and is
strictly better in one of the two. The front is the set of points no other point dominates. Points marked
as upper bounds (the pool oracle) are shown but never enter a front: they are not deployable methods.
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


def frontier_area(points: Mapping[str, tuple[float, float]] | Sequence[Point], *,
                  x_range: tuple[float, float] | None = None, log_x: bool = True) -> float:
    """Mean best-reachable accuracy over a cost range: the area under the front's staircase / range width.

    The staircase is the best accuracy any front point reaches at cost <= x (and the cheapest point's
    accuracy to its left is 0, i.e. nothing is reachable below the cheapest method). With ``log_x`` the
    integral runs over log10(cost). ``x_range`` defaults to the front's own cost range; a front of a single
    point (or a zero-width range) returns that point's accuracy. Higher is better; compare fronts only over
    the same ``x_range``.
    """
    front = pareto_front(points)
    if not front:
        return float("nan")

    def tx(x: float) -> float:
        if not log_x:
            return x
        if x <= 0:
            raise ValueError(f"log_x needs positive costs, got {x}")
        return math.log10(x)

    lo, hi = x_range if x_range is not None else (front[0].cost, front[-1].cost)
    a, b = tx(lo), tx(hi)
    if b <= a:
        reach = [p.accuracy for p in front if p.cost <= hi]
        return max(reach) if reach else 0.0
    area, best = 0.0, 0.0
    # Walk the steps: at each front point's cost the reachable accuracy jumps to its accuracy.
    edges = [(tx(p.cost), p.accuracy) for p in front]
    x_prev = a
    for x, acc in edges:
        if x > a:
            seg_end = min(x, b)
            if seg_end > x_prev:
                area += best * (seg_end - x_prev)
                x_prev = seg_end
        best = max(best, acc)
        if x >= b:
            break
    if b > x_prev:
        area += best * (b - x_prev)
    return area / (b - a)
