"""Model-routing metrics on two-model pools: accuracy against the share of strong-model calls.

The model-routing literature (RouteLLM, Ong et al. 2024, ``routellm/evals/evaluate.py``) scores a router
that sends each item either to a cheap *weak* model or to an expensive *strong* one by its curve of
accuracy against the share of items sent to the strong model, between the weak model alone (share 0)
and the strong model alone (share 1):

* **PGR** (performance gap recovered) at a point: ``(accuracy - weak) / (strong - weak)``.
* **APGR**: the area under the PGR curve over the strong-call share, by the trapezoid rule over the
  curve's points, divided by the share range (RouteLLM: ``(AUC - weak_AUC) / (strong_AUC - weak_AUC)``
  with ``np.trapz``). A random router recovers the gap linearly: APGR 0.5 in expectation.
* **CPT(p)** (call-performance threshold): the smallest share of strong calls at which the curve,
  linearly interpolated between its points, reaches ``weak + p (strong - weak)``; CPT(50%) and
  CPT(80%) are the usual ones. RouteLLM interpolates with ``np.interp`` (correct for a rising curve);
  here the first crossing is taken, which equals it on a rising curve and stays defined on a bumpy one.
  NaN when the curve never reaches the level.

A score router routes, at share ``s``, the ``round(s n)`` items with the highest scores to the strong
model (ties broken by item order), the way RouteLLM's thresholds do at quantiles of the router's
"strong win rate". The reference curves are the random router (uniform scores; averaged over draws from
one seed) and the oracle (RouteLLM's ``get_optimal_accuracy``: strong calls go first to the items only
the strong model answers correctly, the rest to items where both models agree; it counts whole calls,
``round(s n)``, as the score router does, where RouteLLM takes ``s n`` unrounded). Everything takes plain arrays, one entry per item: the weak and
strong models' correctness (0/1 or bool) and a router's scores or strong-call decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Strong-call shares of a curve unless given: 0%, 10%, ..., 100% (RouteLLM's ``--num-results 10``).
DEFAULT_SHARES: tuple[float, ...] = tuple(i / 10 for i in range(11))

#: Number of random routers averaged into the random reference curve.
RANDOM_ROUTER_DRAWS = 200


@dataclass(frozen=True)
class RoutingCurve:
    """Accuracy at each strong-call share, with the two models' own accuracies."""

    shares: np.ndarray
    accuracy: np.ndarray
    weak_accuracy: float
    strong_accuracy: float


def _correctness(values: object, name: str) -> np.ndarray:
    """A 1-D float array of 0/1 values; anything else raises ValueError naming ``name``."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array of per-item correctness, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.float64)
    arr = arr.astype(np.float64)
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name}: expected 0/1 or true/false per item, got other values")
    return arr


def _pair(weak_correct: object, strong_correct: object) -> tuple[np.ndarray, np.ndarray]:
    weak = _correctness(weak_correct, "weak_correct")
    strong = _correctness(strong_correct, "strong_correct")
    if weak.shape != strong.shape:
        raise ValueError(f"weak_correct has {weak.size} items but strong_correct has {strong.size}; expected the same")
    return weak, strong


def _shares(shares: object) -> np.ndarray:
    arr = np.asarray(DEFAULT_SHARES if shares is None else shares, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1 \
            or np.any(np.diff(arr) <= 0):
        raise ValueError("shares: expected at least two strictly increasing strong-call shares in [0, 1]")
    return arr


def routed_point(weak_correct: object, strong_correct: object, to_strong: object) -> tuple[float, float]:
    """(strong-call share, accuracy) of one routing: item i goes to the strong model when ``to_strong[i]``."""
    weak, strong = _pair(weak_correct, strong_correct)
    decisions = np.asarray(to_strong)
    if decisions.shape != weak.shape or decisions.dtype != bool:
        raise ValueError(f"to_strong: expected {weak.size} booleans (one per item)")
    return float(decisions.mean()), float(np.where(decisions, strong, weak).mean())


def score_router_curve(weak_correct: object, strong_correct: object, scores: object,
                       shares: object = None) -> RoutingCurve:
    """The curve of a router that sends the highest-scored items to the strong model first."""
    weak, strong = _pair(weak_correct, strong_correct)
    score = np.asarray(scores, dtype=np.float64)
    if score.shape != weak.shape or not np.all(np.isfinite(score)):
        raise ValueError(f"scores: expected {weak.size} finite numbers (one per item)")
    grid = _shares(shares)
    order = np.argsort(-score, kind="stable")  # highest score first; ties in item order
    gain = np.concatenate([[0.0], np.cumsum(strong[order] - weak[order])])
    counts = np.rint(grid * weak.size).astype(np.int64)
    accuracy = (weak.sum() + gain[counts]) / weak.size
    return RoutingCurve(grid, accuracy, float(weak.mean()), float(strong.mean()))


def curve_from_points(shares: object, accuracies: object, weak_accuracy: float,
                      strong_accuracy: float) -> RoutingCurve:
    """A curve from measured (strong-call share, accuracy) points, e.g. one per threshold of a routing policy.

    The points are sorted by share (equal shares keep their order: a vertical step). No point is added:
    include the weak-only (0, weak) and strong-only (1, strong) runs when they belong to the curve.
    """
    x = np.asarray(shares, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError("shares and accuracies: expected two 1-D arrays of the same length, at least 2 points")
    values = np.concatenate([x, y, [weak_accuracy, strong_accuracy]])
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1:
        raise ValueError("shares and accuracies: expected finite numbers in [0, 1]")
    if x.max() == x.min():
        raise ValueError("shares: expected points at two or more strong-call shares")
    order = np.argsort(x, kind="stable")
    return RoutingCurve(x[order], y[order], float(weak_accuracy), float(strong_accuracy))


def random_router_curve(weak_correct: object, strong_correct: object, seed: int, shares: object = None,
                        draws: int = RANDOM_ROUTER_DRAWS) -> RoutingCurve:
    """The mean curve of ``draws`` random routers (uniform scores) drawn from ``seed``."""
    weak, strong = _pair(weak_correct, strong_correct)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws: expected an integer >= 1, got {draws!r}")
    rng = np.random.default_rng(seed)
    curves = [score_router_curve(weak, strong, rng.random(weak.size), shares) for _ in range(draws)]
    return RoutingCurve(curves[0].shares, np.mean([c.accuracy for c in curves], axis=0),
                        curves[0].weak_accuracy, curves[0].strong_accuracy)


def oracle_curve(weak_correct: object, strong_correct: object, shares: object = None) -> RoutingCurve:
    """The best curve any router can reach: strong calls go to items only the strong model gets right."""
    weak, strong = _pair(weak_correct, strong_correct)
    grid = _shares(shares)
    only_strong = float(((strong == 1) & (weak == 0)).sum())
    accuracy = (weak.sum() + np.minimum(np.rint(grid * weak.size), only_strong)) / weak.size
    return RoutingCurve(grid, accuracy, float(weak.mean()), float(strong.mean()))


def _gap(curve: RoutingCurve) -> float:
    gap = curve.strong_accuracy - curve.weak_accuracy
    if gap <= 0:
        raise ValueError(f"the strong model ({curve.strong_accuracy:.4f}) is not more accurate than the weak one "
                         f"({curve.weak_accuracy:.4f}); the performance gap is undefined")
    return gap


def performance_gap_recovered(curve: RoutingCurve) -> np.ndarray:
    """PGR at each point of ``curve``: (accuracy - weak) / (strong - weak)."""
    return (curve.accuracy - curve.weak_accuracy) / _gap(curve)


def apgr(curve: RoutingCurve) -> float:
    """Average performance gap recovered: trapezoid area under PGR over the share range."""
    pgr = performance_gap_recovered(curve)
    widths = np.diff(curve.shares)
    area = float(np.sum(widths * (pgr[1:] + pgr[:-1]) / 2))
    return area / float(curve.shares[-1] - curve.shares[0])


def call_performance_threshold(curve: RoutingCurve, fraction: float) -> float:
    """CPT(fraction): the first strong-call share where the curve reaches that fraction of the gap (NaN if never)."""
    if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and 0 <= fraction <= 1):
        raise ValueError(f"fraction: expected a number in [0, 1], got {fraction!r}")
    pgr = performance_gap_recovered(curve)
    if pgr[0] >= fraction:
        return float(curve.shares[0])
    for i in range(1, len(pgr)):
        if pgr[i] >= fraction:  # the crossing lies in (shares[i-1], shares[i]]: interpolate linearly
            if curve.shares[i] == curve.shares[i - 1]:
                return float(curve.shares[i])
            t = (fraction - pgr[i - 1]) / (pgr[i] - pgr[i - 1])
            return float(curve.shares[i - 1] + t * (curve.shares[i] - curve.shares[i - 1]))
    return math.nan


def non_decreasing_hull(costs: object, quality: object) -> tuple[np.ndarray, np.ndarray]:
    """RouterBench's non-decreasing convex hull of (cost, quality) points: the upper convex hull, up to its best
    quality (beyond it the hull only falls, and a costlier setting can always fall back on the best cheaper one).

    Mixing two settings of a router at random reaches every point between them, so the hull's segments are
    attainable; a point under the hull is not worth running. Returns the hull's (cost, quality) corners by cost."""
    x = np.asarray(costs, dtype=np.float64)
    y = np.asarray(quality, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0 or not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise ValueError("costs and quality: expected two 1-D arrays of finite numbers of the same length")
    hull: list[tuple[float, float]] = []
    for cx, cy in sorted(zip(x.tolist(), y.tolist(), strict=True), key=lambda p: (p[0], -p[1])):
        if hull and hull[-1][0] == cx:  # the best quality at each cost (sorted first)
            continue
        # Upper hull (Andrew's monotone chain): drop the last corner while it lies on or under the new chord.
        while len(hull) >= 2 and ((hull[-1][0] - hull[-2][0]) * (cy - hull[-2][1])
                                  - (hull[-1][1] - hull[-2][1]) * (cx - hull[-2][0])) >= 0:
            hull.pop()
        hull.append((cx, cy))
    corners = np.array(hull)
    best = int(np.argmax(corners[:, 1]))  # the upper hull rises to its best point, then only falls
    return corners[: best + 1, 0], corners[: best + 1, 1]


def aiq(costs: object, quality: object, lo: float | None = None, hi: float | None = None) -> float:
    """RouterBench's AIQ (Hu et al. 2024, "RouterBench", Section 3): the mean of the router's non-decreasing convex
    hull (``non_decreasing_hull``) over the cost range [``lo``, ``hi``], i.e. its area divided by ``hi - lo``.

    Default range: the points' own cheapest to costliest cost. Past the hull's last corner the hull stays at its
    best quality (as RouterBench's reference code extends every router to the largest cost compared); below its
    first corner nothing is reachable, so ``lo`` may not lie there. A zero-width range gives the hull's value there."""
    hx, hy = non_decreasing_hull(costs, quality)
    x = np.asarray(costs, dtype=np.float64)
    lo = float(hx[0]) if lo is None else float(lo)
    hi = float(x.max()) if hi is None else float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo < hx[0] or hi < lo:
        raise ValueError(f"cost range [{lo:g}, {hi:g}] must start at or above the cheapest point ({hx[0]:g}) and "
                         "end at or above its start")
    if hi == lo:
        return float(np.interp(lo, hx, hy))
    # The hull is piecewise linear (flat past its last corner): the trapezoid rule over its corners is exact.
    xs = np.concatenate([[lo], hx[(hx > lo) & (hx < hi)], [hi]])
    ys = np.interp(xs, hx, hy)  # np.interp holds the last value past the last corner
    return float(np.sum(np.diff(xs) * (ys[1:] + ys[:-1]) / 2) / (hi - lo))


def routing_summary(curve: RoutingCurve) -> dict[str, float]:
    """The usual figures of a curve: CPT(50%), CPT(80%), APGR and AIQ over the strong-call share (with one model
    call per item the cost is linear in that share, and AIQ, a mean over the cost range, does not change under a
    linear change of the cost axis), with the two models' accuracies."""
    return {"weak_accuracy": curve.weak_accuracy, "strong_accuracy": curve.strong_accuracy,
            "cpt50": call_performance_threshold(curve, 0.5), "cpt80": call_performance_threshold(curve, 0.8),
            "apgr": apgr(curve), "aiq": aiq(curve.shares, curve.accuracy)}
