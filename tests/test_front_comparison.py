"""Comparing accuracy-cost fronts over their common cost range (``eval.pareto``, ``train.sweep``).

Every expected value is worked by hand on a log10 cost axis from the points written in the test.
"""

from __future__ import annotations

import pandas as pd
import pytest

from eval import pareto
from train import sweep


def _points(rows):
    return pd.DataFrame([{"policy": p, "family": f, "param": "", "acc": a, "cost": c} for p, f, c, a in rows])


def test_mean_front_accuracy_by_hand():
    pts = {"a": (1.0, 50.0), "b": (10.0, 60.0), "c": (100.0, 70.0)}
    # log10 cost [0, 2]: 50 on [0, 1), 60 on [1, 2) -> mean 55 (the last point only counts at the end itself)
    assert pareto.mean_front_accuracy(pts, 1.0, 100.0) == pytest.approx(55.0)
    # [log10 5, 2]: 50 over [0.699, 1), 60 over [1, 2)
    lo = 5.0
    import math
    w = 2 - math.log10(lo)
    assert pareto.mean_front_accuracy(pts, lo, 100.0) == pytest.approx((50 * (1 - math.log10(lo)) + 60 * 1) / w)
    # linear cost axis: 50 on [1, 10), 60 on [10, 100)
    assert pareto.mean_front_accuracy(pts, 1.0, 100.0, log_x=False) == pytest.approx((50 * 9 + 60 * 90) / 99)
    assert pareto.mean_front_accuracy(pts, 10.0, 10.0) == 60.0  # zero-width range: the staircase at that cost


@pytest.mark.parametrize("lo, hi", [(0.5, 100.0), (10.0, 5.0)])
def test_mean_front_accuracy_rejects_ranges_the_front_does_not_cover(lo, hi):
    with pytest.raises(ValueError, match="must start at or above the front's cheapest point"):
        pareto.mean_front_accuracy({"a": (1.0, 50.0), "b": (10.0, 60.0)}, lo, hi)


def test_common_cost_range_and_no_overlap():
    a = {"a1": (1.0, 50.0), "a2": (100.0, 80.0)}
    b = {"b1": (10.0, 40.0), "b2": (1000.0, 90.0)}
    assert pareto.common_cost_range([a, b]) == (10.0, 100.0)
    assert pareto.common_cost_range([a, {"c": (200.0, 90.0), "d": (300.0, 91.0)}]) is None
    assert pareto.compare_fronts(a, {"single": (10.0, 70.0)}) is None  # one point spans no range


# Points shaped like the simulated paper pool (thousands of p_tokens, macro accuracy %): the CoBa family starts
# above best-of-1/2's cost and dominates best-of-8 and best-of-16.
BEST_OF_N = [("bon1", 94.0, 75.7), ("bon2", 190.0, 76.0), ("bon4", 383.0, 80.6), ("bon8", 768.0, 84.5),
             ("bon16", 1533.0, 85.1)]
COBA = [("light", 253.0, 78.9), ("balanced", 392.0, 82.9), ("strong", 630.0, 85.1), ("n16k4", 1229.0, 87.0)]


def test_coba_ranks_above_best_of_n_where_it_dominates():
    import math

    rows = [(n, "best_of_n", c, a) for n, c, a in BEST_OF_N] + [(n, "coba", c, a) for n, c, a in COBA]
    summary = sweep.frontier_summary(_points(rows))
    assert set(summary["dominated_by"]["bon8"]) >= {"strong"} and "n16k4" in summary["dominated_by"]["bon16"]
    # Common range: CoBa's cheapest (253) to its costliest (1229), the part both families cover.
    assert summary["common_range"] == (253.0, 1229.0)
    lg = math.log10
    width = lg(1229) - lg(253)
    coba = (78.9 * (lg(392) - lg(253)) + 82.9 * (lg(630) - lg(392)) + 85.1 * (lg(1229) - lg(630))) / width
    bon = (76.0 * (lg(383) - lg(253)) + 80.6 * (lg(768) - lg(383)) + 84.5 * (lg(1229) - lg(768))) / width
    assert summary["families"]["coba"]["mean_acc"] == pytest.approx(coba)
    assert summary["families"]["best_of_n"]["mean_acc"] == pytest.approx(bon)
    assert coba > bon
    (cmp,) = summary["comparisons"]
    assert (cmp["a"], cmp["b"]) == ("best_of_n", "coba")
    assert cmp["diff"] == pytest.approx(bon - coba) and cmp["diff"] < 0


def test_sweep_markdown_states_the_measure():
    rows = [(n, "best_of_n", c, a) for n, c, a in BEST_OF_N] + [(n, "coba", c, a) for n, c, a in COBA] + \
        [("greedy", "greedy", 94.0, 75.7)]
    table = _points(rows)
    text = sweep.frontier_markdown(table, sweep.frontier_summary(table))
    assert "common cost range" in text and "253 - 1,229" in text
    assert "| best_of_n | coba | 253 - 1,229 |" in text
    # One format per column: every cost of the point table with the decimals of its largest value (1,533: none).
    costs = [line.split(" | ")[4] for line in text.splitlines() if line.startswith("| best_of_n | bon")]
    assert costs == ["94", "190", "383", "768", "1,533"]
    assert "area" not in text.lower()
    # The single-point family has no range and no mean accuracy.
    assert "| greedy | 1 | 94 - 94 | - | greedy |" in text


@pytest.mark.parametrize(("values", "expected"), [
    # dollars from 8.046e-05 to 0.001186: six decimals, so the largest keeps four significant digits
    ([0.001186, 0.0008376, 8.046e-05], ["0.001186", "0.000838", "0.000080"]),
    # tokens from 4,447 to 17,460: thousands (the header says "k"), two decimals
    ([4447.0, 17460.0], ["4.45", "17.46"]),
    ([12.34, 1.5, float("nan")], ["12.34", "1.50", "-"]),
])
def test_a_column_keeps_one_format_from_its_largest_value(values, expected):
    from eval.column_format import column_format

    fmt = column_format(values)
    assert [fmt(v) for v in values] == expected
    assert fmt.unit("tokens") == ("k tokens" if max(values) >= 1e4 else "tokens")
