"""Model-routing metrics (eval.routing_metrics): CPT(50%), CPT(80%), APGR, the random router and the oracle.

A four-item case is worked out by hand; the real RouteLLM GSM8K pair (../shared/data/pools/routellm-gsm8k,
read straight from the CSV's own labels) checks the reference curves: a random router recovers the gap
linearly (APGR 0.50), the oracle reaches the "at least one correct" rate 0.9287 of SOURCES.md.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from eval.routing_metrics import (
    RoutingCurve,
    aiq,
    apgr,
    call_performance_threshold,
    curve_from_points,
    non_decreasing_hull,
    oracle_curve,
    random_router_curve,
    routed_point,
    routing_summary,
    score_router_curve,
)

# Hand-worked: weak right on item 0 only (0.25), strong right on items 0-2 (0.75), gap 0.5.
WEAK = [1, 0, 0, 0]
STRONG = [1, 1, 1, 0]
SCORES = [0.1, 0.9, 0.2, 0.8]  # strong calls in order: item 1 (+1), item 3 (+0), item 2 (+1), item 0 (+0)
SHARES = [0.0, 0.25, 0.5, 0.75, 1.0]


def test_hand_worked_score_router() -> None:
    curve = score_router_curve(WEAK, STRONG, SCORES, SHARES)
    assert curve.accuracy.tolist() == [0.25, 0.5, 0.5, 0.75, 0.75]
    assert (curve.weak_accuracy, curve.strong_accuracy) == (0.25, 0.75)
    # PGR 0, .5, .5, 1, 1 -> trapezoids .25 * (.25 + .5 + .75 + 1) = .625
    assert apgr(curve) == pytest.approx(0.625)
    # 50% of the gap (accuracy .5) is first reached at share .25
    assert call_performance_threshold(curve, 0.5) == pytest.approx(0.25)
    # 80% (accuracy .65) lies between share .5 (.5) and .75 (.75): .5 + .25 * .15 / .25 = .65
    assert call_performance_threshold(curve, 0.8) == pytest.approx(0.65)
    summary = routing_summary(curve)
    # AIQ over the share: the non-decreasing convex hull drops (.5, .5), which lies under the chord from
    # (.25, .5) to (.75, .75) (.625 there), and stays at .75 after .75:
    # .25 * (.25 + .5) / 2 + .5 * (.5 + .75) / 2 + .25 * .75 = .09375 + .3125 + .1875 = .59375 over a width of 1.
    assert summary == pytest.approx({"weak_accuracy": 0.25, "strong_accuracy": 0.75, "cpt50": 0.25,
                                     "cpt80": 0.65, "apgr": 0.625, "aiq": 0.59375})


def test_aiq_of_a_hand_worked_cost_quality_curve() -> None:
    """RouterBench's AIQ: the mean of the non-decreasing convex hull over the cost range, worked by hand."""
    # Given out of order; (3, .5) lies under the hull (.75 at cost 3 on the chord (2, .6)-(4, .9)); (5, .7) is
    # past the best point, so the hull stays at .9 from cost 4 to 5.
    costs, quality = [4.0, 1.0, 3.0, 2.0, 5.0], [0.9, 0.2, 0.5, 0.6, 0.7]
    hx, hy = non_decreasing_hull(costs, quality)
    assert hx.tolist() == [1.0, 2.0, 4.0] and hy.tolist() == [0.2, 0.6, 0.9]
    # Over [1, 5]: (.2 + .6) / 2 * 1 + (.6 + .9) / 2 * 2 + .9 * 1 = .4 + 1.5 + .9 = 2.8, / 4 = .7
    assert aiq(costs, quality) == pytest.approx(0.7)
    # Over [2, 4]: (.6 + .9) / 2 * 2 / 2 = .75; a zero-width range is the hull's value there (at 3: .75)
    assert aiq(costs, quality, lo=2.0, hi=4.0) == pytest.approx(0.75)
    assert aiq(costs, quality, lo=3.0, hi=3.0) == pytest.approx(0.75)
    # Equal costs keep the better point; one point is its own hull.
    assert non_decreasing_hull([1.0, 1.0, 2.0], [0.3, 0.5, 0.4])[1].tolist() == [0.5]
    assert aiq([2.0], [0.4]) == pytest.approx(0.4)


@pytest.mark.parametrize(("lo", "hi"), [(0.5, 5.0), (4.0, 3.0)])
def test_aiq_refuses_a_range_below_the_cheapest_point(lo, hi) -> None:
    with pytest.raises(ValueError, match=r"must start at or above the cheapest point \(1\)"):
        aiq([1.0, 2.0], [0.2, 0.6], lo=lo, hi=hi)


def test_hand_worked_oracle_and_decisions() -> None:
    # Two items only the strong model solves (1, 2): .25 + min(k, 2) / 4 -> .25, .5, .75, .75, .75
    curve = oracle_curve(WEAK, STRONG, SHARES)
    assert curve.accuracy.tolist() == [0.25, 0.5, 0.75, 0.75, 0.75]
    assert apgr(curve) == pytest.approx(0.75)  # .25 * (.25 + .75 + 1 + 1)
    assert call_performance_threshold(curve, 1.0) == pytest.approx(0.5)
    assert routed_point(WEAK, STRONG, np.array([False, True, False, True])) == (0.5, 0.5)


def test_curve_from_measured_points() -> None:
    # A routing policy measured at three thresholds, given out of order, plus the two single-model runs.
    curve = curve_from_points([0.5, 0.0, 1.0, 0.2, 0.2], [0.7, 0.6, 0.8, 0.62, 0.66], 0.6, 0.8)
    assert curve.shares.tolist() == [0.0, 0.2, 0.2, 0.5, 1.0]
    # PGR 0, .1, .3, .5, 1 -> .2 * .05 + 0 + .3 * .4 + .5 * .75 = .01 + .12 + .375 = .505
    assert apgr(curve) == pytest.approx(0.505)
    assert call_performance_threshold(curve, 0.3) == pytest.approx(0.2)  # reached on the vertical step
    assert call_performance_threshold(curve, 0.75) == pytest.approx(0.75)  # .5 + .5 * (.75 - .5) / .5


def test_cpt_is_nan_when_the_level_is_never_reached() -> None:
    curve = RoutingCurve(np.array([0.0, 0.5]), np.array([0.2, 0.3]), 0.2, 0.6)  # only a quarter of the gap
    assert math.isnan(call_performance_threshold(curve, 0.5))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: score_router_curve([1, 0], [1], [0.1, 0.2]), "weak_correct has 2 items but strong_correct has 1"),
        (lambda: score_router_curve([1, 2], [1, 1], [0.1, 0.2]), "weak_correct: expected 0/1"),
        (lambda: score_router_curve([1, 0], [1, 1], [0.1, float("nan")]), "scores: expected 2 finite numbers"),
        (lambda: score_router_curve([1, 0], [1, 1], [0.1, 0.2], [0.5, 0.2]), "shares: expected at least two"),
        (lambda: apgr(oracle_curve([1, 1], [0, 1])), "is not more accurate than the weak one"),
        (lambda: routed_point([1, 0], [1, 1], [1, 0]), "to_strong: expected 2 booleans"),
        (lambda: call_performance_threshold(oracle_curve(WEAK, STRONG), 1.5), r"fraction: expected a number in \[0, 1\]"),
        (lambda: random_router_curve(WEAK, STRONG, seed=0, draws=0), "draws: expected an integer >= 1"),
        (lambda: curve_from_points([0.1, 0.2], [0.5], 0.4, 0.6), "expected two 1-D arrays of the same length"),
        (lambda: curve_from_points([0.1, 1.2], [0.5, 0.6], 0.4, 0.6), r"finite numbers in \[0, 1\]"),
        (lambda: curve_from_points([0.3, 0.3], [0.5, 0.6], 0.4, 0.6), "points at two or more strong-call shares"),
    ],
)
def test_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def _gsm8k_labels(shared_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(shared_dir / "data" / "pools" / "routellm-gsm8k" / "gsm8k_responses.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    weak = np.array([r["mistralai/Mixtral-8x7B-Instruct-v0.1"] == "True" for r in rows])
    strong = np.array([r["gpt-4-1106-preview"] == "True" for r in rows])
    return weak, strong


def test_random_router_and_oracle_on_routellm_gsm8k(shared_dir: Path) -> None:
    weak, strong = _gsm8k_labels(shared_dir)
    random_curve = random_router_curve(weak, strong, seed=0)
    assert random_curve.weak_accuracy == pytest.approx(0.6384, abs=5e-5)  # SOURCES.md
    assert random_curve.strong_accuracy == pytest.approx(0.8567, abs=5e-5)
    assert apgr(random_curve) == pytest.approx(0.50, abs=0.02)
    # A random router's CPT(p) is p: it recovers the gap linearly.
    assert call_performance_threshold(random_curve, 0.5) == pytest.approx(0.5, abs=0.05)
    assert call_performance_threshold(random_curve, 0.8) == pytest.approx(0.8, abs=0.05)
    oracle = oracle_curve(weak, strong)
    # The oracle's extra calls go where both models agree: from 383 strong calls (29%) on it holds "at least
    # one correct", 0.9287 (SOURCES.md), up to share 1.
    assert oracle.accuracy[-1] == pytest.approx(0.9287, abs=5e-5)
    assert oracle.accuracy[3] == pytest.approx(0.9287, abs=5e-5) and oracle.accuracy[2] < 0.9287
    assert apgr(oracle) > apgr(random_curve)
    # A router that calls the strong model first where only it is right matches the oracle while such items last.
    informed = score_router_curve(weak, strong, (~weak & strong).astype(float))
    assert informed.accuracy[:3] == pytest.approx(oracle.accuracy[:3])
