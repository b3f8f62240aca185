"""Issue 27: a verdict that cannot mislead (partial runs, seed variance, one cost unit, a margin in the selection).

Each test was written against the protocol of issue 19 and fails there: that verdict printed BEATS for a
``--held-out`` run of 3 seeds, resampled items only (seeds that disagree but cancel per item gave a zero-width
interval), gave every fold its own budget B, and selected the cheapest point with inner point estimates >= 0.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from agents.registry import make_policy
from coba_env.env import as_compiled
from train import protocol_stats
from train.protocol import REFERENCE, run_protocol, select_point
from train.protocol_stats import compare_seeds

POOL_NAME = "paper-first-5-per-dataset"


def _paper_subset(per_dataset: int = 5):
    c = as_compiled("paper")
    keep = np.zeros(c.n_episodes, dtype=bool)
    for ds in dict.fromkeys(c.dataset.tolist()):
        keep[np.flatnonzero(c.dataset == ds)[:per_dataset]] = True
    return c.select(keep)


class _StrongFitted:
    def policy(self, point):
        return make_policy(REFERENCE)


class _BudgetSpy:
    """A method that replays Strong at its one point and records every fit's budget."""

    name = "spy"

    def __init__(self):
        self.budgets = []

    def grid(self):
        return [{"which": 1.0}]

    def fit(self, compiled, train_ids, *, budget, seed, out_dir, progress):
        self.budgets.append(budget)
        return _StrongFitted()


def _passing_stats(records, name, reference, **kw):
    """Statistics that meet every bound of the verdict on the seed-mean and on every seed."""
    rows = []
    for seed in [*map(str, sorted(records["seed"].unique())), "mean"]:
        for scope in ("MACRO", "ALL"):
            rows.append({"seed": seed, "scope": scope, "n_items": 10, "acc": 90.0, "ref_acc": 89.0, "diff": 1.0,
                         "ci_low": 0.5, "ci_high": 1.5, "cost_ratio": 0.5, "ratio_low": 0.4, "ratio_high": 0.6})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("held_out", "seeds", "reason"), [
    (["amc2023"], (0, 1, 2), "folds"),               # --held-out: one outer fold of five
    (None, (0, 1), "seeds"),                           # every fold, fewer than 3 seeds
    (["math500", "aime2024"], (5,), "folds"),         # both
])
def test_a_partial_run_never_beats_even_when_every_bound_is_met(tmp_path, monkeypatch, held_out, seeds, reason):
    monkeypatch.setattr(protocol_stats, "compare_seeds", _passing_stats)
    result = run_protocol(_paper_subset(), _BudgetSpy(), seeds=seeds, out_dir=tmp_path, progress=False,
                          held_out=held_out, resamples=50, pool_name=POOL_NAME)
    assert result.verdict["beats"] is False
    assert result.verdict["scope"] == "partial" and reason in result.verdict["partial_reason"]
    text = (tmp_path / "verdict.md").read_text()
    assert "BEATS" not in text and "partial" in text
    saved = json.loads((tmp_path / "protocol.json").read_text())
    assert saved["verdict"]["beats"] is False and saved["verdict"]["scope"] == "partial"


def test_a_full_run_with_every_bound_met_beats_and_names_pool_seeds_and_folds(tmp_path, monkeypatch):
    monkeypatch.setattr(protocol_stats, "compare_seeds", _passing_stats)
    pool = _paper_subset()
    result = run_protocol(pool, _BudgetSpy(), seeds=(0, 1, 2), out_dir=tmp_path, progress=False, resamples=50,
                          pool_name=POOL_NAME)
    assert result.verdict["beats"] is True and result.verdict["scope"] == "full"
    text = (tmp_path / "verdict.md").read_text()
    assert "BEATS" in text
    datasets = list(dict.fromkeys(pool.dataset.tolist()))
    for what in (POOL_NAME, "seeds 0, 1, 2", ", ".join(datasets)):
        assert what in text
    saved = json.loads((tmp_path / "protocol.json").read_text())["verdict"]
    assert saved["pool"] == POOL_NAME and saved["seeds"] == [0, 1, 2] and saved["folds"] == datasets


def test_the_verdict_of_a_partial_run_names_what_it_covers_and_what_is_missing(tmp_path):
    pool = _paper_subset()
    result = run_protocol(pool, _BudgetSpy(), seeds=(0,), out_dir=tmp_path, progress=False, resamples=50,
                          held_out=["aime2025"], pool_name=POOL_NAME)
    text = (tmp_path / "verdict.md").read_text()
    assert POOL_NAME in text and "seeds 0" in text and "aime2025" in text
    missing = [d for d in dict.fromkeys(pool.dataset.tolist()) if d != "aime2025"]
    assert result.verdict["missing_folds"] == missing
    assert "fewer than 3 seeds" in result.verdict["partial_reason"]


def test_every_fit_gets_one_cost_unit_for_the_pool(tmp_path):
    """B is the pool's mean cost of N candidates over all its episodes (by hand from gen_cost), the same in
    every inner fit and every refit, so lambda means the same trade-off in each."""
    pool = _paper_subset()
    spy = _BudgetSpy()
    run_protocol(pool, spy, seeds=(0,), out_dir=tmp_path, progress=False, resamples=50, pool_name=POOL_NAME)
    by_hand = pool.gen_cost[:, :, 1].sum(axis=1).mean()
    assert len(spy.budgets) == 5 * 5
    assert spy.budgets == pytest.approx([by_hand] * 25)


def _seed_records(pattern):
    """Records of 30 items, one generator: policy x correct where ``pattern(seed, item)``; Strong never correct,
    both always cost 1."""
    rows = []
    for seed in (0, 1, 2):
        for i in range(30):
            for policy, ok in (("x", pattern(seed, i)), (REFERENCE, False)):
                rows.append({"seed": seed, "policy": policy, "dataset": "d", "item_id": i, "generator": "g",
                             "correct": bool(ok), "p_tokens": 1.0})
    return pd.DataFrame(rows)


def test_seeds_that_disagree_widen_the_seed_mean_interval():
    """Every item's seed-mean is 1/3 in both cases. Disagreeing seeds (seed 0 right everywhere, seeds 1 and 2
    nowhere): resampling 3 seeds gives seed-means 0, 1/3, 2/3, 1 with probabilities 8/27, 12/27, 6/27, 1/27, so
    the 95% interval is [0, 100] points by hand. Agreeing seeds (each right on a third of the items) keep the
    item-level interval, far narrower. Resampling items only gives [33.3, 33.3] in the first case."""
    disagree = compare_seeds(_seed_records(lambda s, i: s == 0), "x", REFERENCE, resamples=2000)
    agree = compare_seeds(_seed_records(lambda s, i: (i + s) % 3 == 0), "x", REFERENCE, resamples=2000)
    d = disagree[(disagree["seed"] == "mean") & (disagree["scope"] == "ALL")].iloc[0]
    a = agree[(agree["seed"] == "mean") & (agree["scope"] == "ALL")].iloc[0]
    assert d["diff"] == pytest.approx(100 / 3) and a["diff"] == pytest.approx(100 / 3)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((0.0, 100.0))
    assert a["ci_high"] - a["ci_low"] < 60.0
    # a single seed's own row is the item bootstrap: seed 0 right everywhere is +100 exactly
    s0 = disagree[(disagree["seed"] == "0") & (disagree["scope"] == "ALL")].iloc[0]
    assert (s0["ci_low"], s0["ci_high"]) == pytest.approx((100.0, 100.0))


def _summary(rows):
    return pd.DataFrame([{"policy": f"p{i}", "item_diff": d, "item_ci_low": lo, "macro_diff": m,
                          "cost_ratio": c, "ratio_high": rh}
                         for i, (d, lo, m, c, rh) in enumerate(rows)])


GRID = [{"k": 0.0}, {"k": 1.0}, {"k": 2.0}]


@pytest.mark.parametrize(("rows", "fallback", "expected"), [
    # p0's point estimates are >= 0 (the old rule took it, cheapest) but its inner CI reaches -0.8 < -0.5;
    # p1 qualifies (CI low -0.3, macro -0.2 >= -0.5, ratio high 0.85 < 0.9)
    ([(0.1, -0.8, 0.1, 0.5, 0.6), (-0.1, -0.3, -0.2, 0.8, 0.85), (0.0, 0.0, 0.0, 1.0, 1.0)], None, (1, "rule")),
    # both qualify: the higher CI low end wins, not the cheaper point
    ([(0.0, -0.4, 0.0, 0.6, 0.7), (0.1, -0.2, 0.0, 0.8, 0.85), (0.0, 0.0, 0.0, 1.0, 1.0)], None, (1, "rule")),
    # equal CI low ends: the lower ratio upper end wins
    ([(0.0, -0.2, 0.0, 0.8, 0.88), (0.1, -0.2, 0.0, 0.7, 0.8), (0.0, 0.0, 0.0, 1.0, 1.0)], None, (1, "rule")),
    # the cost bound: ratio high 0.9 is not < 0.9; macro -0.6 is below -0.5; nothing qualifies -> fallback
    ([(0.5, 0.1, 0.5, 0.5, 0.9), (0.5, 0.1, -0.6, 0.5, 0.6), (0.0, 0.0, 0.0, 1.0, 1.0)], {"k": 2.0},
     (2, "fallback")),
    # ... and without a fallback the highest CI low end
    ([(0.5, 0.1, 0.5, 0.5, 0.9), (0.5, 0.2, -0.6, 0.5, 0.6), (0.0, 0.0, 0.0, 1.0, 1.0)], None,
     (1, "highest item_ci_low")),
])
def test_selection_needs_the_inner_interval_to_clear_the_stated_margin(rows, fallback, expected):
    assert select_point(_summary(rows), GRID, fallback) == expected
