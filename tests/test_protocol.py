"""The learning protocol: selection rule, statistics and verdict by hand; folds never see held-out data; the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.registry import make_policy
from coba_cli.main import main
from coba_env.env import as_compiled
from train.protocol import (
    REFERENCE,
    SELECT_ITEM_MARGIN,
    SELECT_RATIO_HIGH_MAX,
    run_protocol,
    validation_summary,
)
from train.protocol_stats import COST_RATIO_CI_HIGH_MAX, Coverage, compare, verdict
from train.rollout import RolloutMethod


def _records(table):
    """Records from (policy, dataset, item, correct, p_tokens) tuples (one generator per item)."""
    return pd.DataFrame([{"policy": p, "dataset": d, "item_id": i, "generator": "g", "correct": bool(c),
                          "p_tokens": float(k)} for p, d, i, c, k in table])


def _two_datasets():
    """Dataset "big": 4 items, "small": 2. x is right on every item at half Strong's cost; Strong misses both
    items of "small". Macro diff (0 + 100) / 2 = 50 points, item-pooled 2 / 6 = 33.3 points."""
    rows = []
    for ds, n, strong_ok in (("big", 4, True), ("small", 2, False)):
        for k in range(n):
            rows += [("x", ds, f"{ds}{k}", True, 50.0), (REFERENCE, ds, f"{ds}{k}", strong_ok, 100.0)]
    return _records(rows)


def test_validation_summary_by_hand():
    table = validation_summary(_two_datasets(), ["x"], resamples=200).iloc[0]
    assert table["macro_diff"] == pytest.approx(50.0)
    assert table["item_diff"] == pytest.approx(100.0 * 2 / 6)
    assert table["cost_ratio"] == pytest.approx(0.5) and table["ratio_high"] == pytest.approx(0.5)
    # the item-pooled CI's lower end: a resample of 6 items with no "small" item gives 0
    assert 0.0 <= table["item_ci_low"] < 100.0 * 2 / 6


def test_compare_by_hand():
    """Point values by hand; a constant cost ratio and identical per-dataset outcomes give zero-width CIs."""
    stats = compare(_two_datasets(), "x", REFERENCE, resamples=200).set_index("scope")
    assert stats.loc["MACRO", "diff"] == pytest.approx(50.0)
    assert stats.loc["ALL", "diff"] == pytest.approx(100.0 * 2 / 6)
    assert stats.loc["big", "diff"] == 0.0 and stats.loc["small", "diff"] == pytest.approx(100.0)
    assert stats.loc["small", "ci_low"] == pytest.approx(100.0) and stats.loc["MACRO", "ci_low"] == pytest.approx(50.0)
    for scope in ("MACRO", "ALL", "big", "small"):
        assert stats.loc[scope, ["cost_ratio", "ratio_low", "ratio_high"]].tolist() == pytest.approx([0.5] * 3)
    assert stats.loc["ALL", "n_items"] == 6 and stats.loc["small", "n_items"] == 2


def _stats(item_diff, ci_low, macro_diff, ratio_high, seeds=("0", "1", "2")):
    rows = [{"seed": seed, "scope": "ALL", "diff": 9.0, "ci_low": 9.0, "ci_high": 9.0, "cost_ratio": 0.1,
             "ratio_low": 0.1, "ratio_high": 0.1} for seed in seeds]
    rows += [{"seed": "mean", "scope": "ALL", "diff": item_diff, "ci_low": ci_low, "ci_high": item_diff + 1,
             "cost_ratio": 0.5, "ratio_low": 0.4, "ratio_high": ratio_high},
            {"seed": "mean", "scope": "MACRO", "diff": macro_diff, "ci_low": macro_diff - 1, "ci_high": macro_diff + 1,
             "cost_ratio": 0.5, "ratio_low": 0.4, "ratio_high": ratio_high}]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("args", "beats"), [
    ((0.0, -0.5, 0.0, 0.89), True),      # every bound met exactly
    ((-0.01, -0.4, 0.1, 0.5), False),    # item-pooled difference below 0
    ((0.2, -0.51, 0.1, 0.5), False),     # CI lower end below -0.5 points
    ((0.2, -0.1, -0.01, 0.5), False),    # macro difference below 0
    ((0.2, -0.1, 0.1, COST_RATIO_CI_HIGH_MAX), False),  # cost ratio CI upper end not below 0.9
])
def test_verdict_by_hand(args, beats):
    assert verdict(_stats(*args), "x", _coverage((0, 1, 2)))["beats"] is beats


def _coverage(seeds, folds=("a", "b", "c")):
    return Coverage(pool="p", seeds=tuple(seeds), folds=tuple(folds), all_folds=("a", "b", "c"))


@pytest.mark.parametrize(("seeds", "beats"), [((0, 1, 2), True), ((0, 1), False), ((7,), False)])
def test_verdict_needs_three_seeds(seeds, beats):
    """Every bound met on the seed-mean, but fewer than 3 seeds is a partial run: never "beats"."""
    result = verdict(_stats(0.5, 0.0, 0.5, 0.5, seeds=tuple(map(str, seeds))), "x", _coverage(seeds))
    assert result["beats"] is beats
    assert ("partial" in result["text"]) is (not beats)


def _paper_subset(per_dataset: int):
    c = as_compiled("paper")
    keep = np.zeros(c.n_episodes, dtype=bool)
    for ds in dict.fromkeys(c.dataset.tolist()):
        keep[np.flatnonzero(c.dataset == ds)[:per_dataset]] = True
    return c.select(keep)


class _Fixed:
    """Fitted stand-in: point 0 is CoBa-Light, point 1 CoBa-Strong (label-free fixed policies)."""

    def policy(self, point):
        return make_policy("coba_light" if point["which"] == 0 else REFERENCE)


class SpyMethod:
    """A method that records every fit's training episodes and budget."""

    name = "spy"

    def __init__(self):
        self.fits = []

    def grid(self):
        return [{"which": 0.0}, {"which": 1.0}]

    def fit(self, compiled, train_ids, *, budget, seed, out_dir, progress):
        self.fits.append((np.asarray(train_ids).copy(), budget, seed))
        return _Fixed()


def test_no_fit_sees_its_validation_or_held_out_dataset_and_every_fit_gets_the_pool_cost_unit(tmp_path):
    pool = _paper_subset(5)
    method = SpyMethod()
    tasks = []

    def recording_map(fn, items):
        items = list(items)
        tasks.extend(items)
        return map(fn, items)

    result = run_protocol(pool, method, seeds=(0, 1), out_dir=tmp_path,
                          progress=False, fold_map=recording_map, resamples=50)
    datasets = list(dict.fromkeys(pool.dataset.tolist()))
    assert [(s, split.held_out) for s, split in tasks] == [(s, d) for s in (0, 1) for d in datasets]
    # per (seed, outer fold): 4 inner fits on 3 datasets, then one refit on 4; one cost unit by hand from gen_cost
    assert len(method.fits) == 2 * 5 * 5
    ds_of = dict(zip(pool.episode_ids.tolist(), pool.dataset.tolist(), strict=True))
    for k, (ids, budget, _) in enumerate(method.fits):
        seen = {ds_of[int(i)] for i in ids}
        assert len(seen) == (4 if k % 5 == 4 else 3)
        assert budget == pytest.approx(pool.gen_cost[:, :, 1].sum(axis=1).mean())
    for s in (0, 1):
        for k, held in enumerate(datasets):
            refit = method.fits[(s * 5 + k) * 5 + 4][0]
            assert held not in {ds_of[int(i)] for i in refit}
    # every episode once per seed, beside the reference on the same episodes
    rec = result.records
    for s in (0, 1):
        mine = rec[(rec["seed"] == s) & (rec["policy"] == "spy")]
        assert sorted(mine["episode_id"]) == sorted(pool.episode_ids.tolist())
    # the choice follows the rule on the inner table: Strong (point 1) never qualifies (ratio 1 is not < 0.9), so
    # Light is chosen when its CI clears the margin at a ratio below 0.9, else (no fallback) the higher CI low end
    for (_, _), inner in result.inner.groupby(["seed", "held_out"]):
        assert inner["chosen"].sum() == 1
        light, strong = inner.iloc[0], inner.iloc[1]
        assert strong["item_ci_low"] == 0.0 and strong["ratio_high"] == pytest.approx(1.0)
        light_ok = light["item_ci_low"] >= -SELECT_ITEM_MARGIN and light["ratio_high"] < SELECT_RATIO_HIGH_MAX
        expected = 0 if light_ok or light["item_ci_low"] >= 0.0 else 1  # a tie at 0: Light is cheaper
        assert inner["chosen"].tolist() == [k == expected for k in range(2)]
    assert set(result.stats["seed"]) == {"0", "1", "mean"}
    assert result.verdict["beats"] is False and result.verdict["scope"] == "partial"  # 2 seeds


def save_small_paper_pool(folder: Path, per_dataset: int = 4) -> Path:
    """The paper pool's first ``per_dataset`` episodes of each of its 5 datasets, saved to ``folder``."""
    from pools.default import resolve_pool
    from pools.store import Pool, save_pool

    full = resolve_pool("paper")
    eps = full.episodes.groupby("dataset", sort=False).head(per_dataset)
    keep = set(eps["episode_id"])
    items = full.items.merge(eps[["dataset", "item_id"]].drop_duplicates(), on=["dataset", "item_id"])
    sub = Pool(items=items, models=full.models, episodes=eps.reset_index(drop=True),
               candidates=full.candidates[full.candidates["episode_id"].isin(keep)].reset_index(drop=True),
               verifications=full.verifications[full.verifications["episode_id"].isin(keep)].reset_index(drop=True),
               manifest=dict(full.manifest))
    sub.refresh_manifest()
    save_pool(sub, folder)
    return folder


def test_rollout_protocol_cli_prints_the_table_and_verdict(tmp_path, capsys):
    """``coba train rollout --lodo`` on a saved 5-dataset pool (4 episodes each), one seed, one held-out fold."""
    save_small_paper_pool(tmp_path / "pool")
    out = tmp_path / "run"
    assert main(["train", "rollout", "--pool", str(tmp_path / "pool"), "--lodo", "--seeds", "3", "--held-out",
                 "amc2023", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "partial run (held out: amc2023)" in printed and "BEATS" not in printed
    chosen = pd.read_csv(out / "chosen.csv")
    assert chosen[["seed", "held_out"]].values.tolist() == [[3, "amc2023"]]
    assert len(pd.read_csv(out / "inner.csv")) == len(RolloutMethod().grid())
    for name in ("episodes.csv", "stats.md", "verdict.md", "protocol.json"):
        assert (out / name).is_file()
    assert math.isfinite(float(chosen["budget"].iloc[0]))


def test_mlp_method_budget_comes_from_its_training_episodes(tmp_path):
    """train_mlp without a budget takes B from its training episodes (no held-out leak); the protocol's MLP
    method passes the fold's B through and acts at each grid lambda."""
    import json

    from train.imitation import train_mlp
    from train.protocol_mlp import MLPMethod

    pool = as_compiled("tiny")
    ids = pool.episode_ids[pool.dataset == "math500"]
    by_hand = pool.gen_cost[pool.dataset == "math500", :, 1].sum(axis=1).mean()
    assert by_hand != pytest.approx(pool.gen_cost[:, :, 1].sum(axis=1).mean())  # the datasets differ
    ckpt = train_mlp(pool, tmp_path / "a", episode_ids=ids.tolist(), lambdas=(0.1,), dagger_rounds=0, epochs=1,
                     episodes_per_round=5, progress=False, tensorboard=False)
    assert json.loads((ckpt / "controller.json").read_text())["budget"] == pytest.approx(by_hand)
    method = MLPMethod(lambdas=(0.1, 1.0), settings={"dagger_rounds": 0, "epochs": 1, "episodes_per_round": 5,
                                                     "balance_datasets": True, "tensorboard": False})
    fitted = method.fit(pool, pool.episode_ids, budget=123.0, seed=0, out_dir=tmp_path / "b", progress=False)
    policies = [fitted.policy(p) for p in method.grid()]
    assert [p.lam for p in policies] == [0.1, 1.0] and {p.budget for p in policies} == {123.0}
