"""The structured search over CoBa's parameters (issue 27): choice by hand, Strong as trial 0, whole datasets."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from agents.registry import make_policy
from coba_env.env import as_compiled
from eval.runner import run_policies
from train.coba_search import FAMILIES, SPACE, make_coba, search_method, strong_point
from train.param_search import FittedSearch, ItemCache, in_sample

COBA = FAMILIES["coba_search"]

BASE = {"warmup_k": 2, "n_max": 8, "strong_routes": 4, "share_min": 0.6, "s1_min": 0.7, "use_v2": True}


def _trials(rows):
    return pd.DataFrame([{**BASE, "n_max": n, "item_diff": d, "macro_diff": m, "cost_ratio": c}
                         for n, d, m, c in rows])


@pytest.mark.parametrize(("margin", "n_max"), [
    (0.0, 4),        # cheapest with both differences >= 0 (n_max 3 is cheaper but its macro difference is < 0)
    (0.5, 6),        # only n_max 6 and 8 clear +0.5 on both; 6 is cheaper
    (2.0, 8),        # none clears +2: Strong's parameters
    (math.inf, 8),   # the fallback: Strong's parameters
])
def test_a_point_is_the_cheapest_trial_clearing_its_margin(margin, n_max):
    trials = _trials([(8, 0.0, 0.0, 1.0), (3, 0.2, -0.1, 0.4), (4, 0.1, 0.0, 0.6), (6, 0.6, 0.9, 0.8),
                      (10, 1.0, 1.5, 1.2)])
    params = FittedSearch(trials, COBA, SPACE, strong_point()).params({"margin": margin})
    assert params["n_max"] == n_max
    assert set(params) == set(SPACE)


def _small_paper(per_dataset=10):
    c = as_compiled("paper")
    keep = np.zeros(c.n_episodes, dtype=bool)
    for ds in dict.fromkeys(c.dataset.tolist()):
        keep[np.flatnonzero(c.dataset == ds)[:per_dataset]] = True
    return c.select(keep)


def test_strongs_parameters_replay_as_the_registered_coba_strong():
    pool = _small_paper()
    run = run_policies([make_coba(strong_point(), "mine"), make_policy("coba_strong")], pool, progress=False,
                       workers=1)
    mine, ref = (run.records[run.records["policy"] == n].reset_index(drop=True) for n in ("mine", "coba_strong"))
    assert mine[["correct", "p_tokens", "actions"]].equals(ref[["correct", "p_tokens", "actions"]])


def test_in_sample_figures_by_hand():
    """CoBa-Light's in-sample figures against Strong recomputed from a plain replay of both."""
    pool = _small_paper()
    light = {**strong_point(), "n_max": 2, "strong_routes": 0}
    datasets = ["math500", "aime2024"]
    got = in_sample(ItemCache(pool, COBA), light, strong_point(), datasets)
    rec = run_policies([make_policy("coba_light"), make_policy("coba_strong")],
                       pool.select(np.isin(pool.dataset, datasets)), progress=False, workers=1).records
    items = rec.assign(correct=rec["correct"].astype(float)).groupby(["policy", "dataset", "item_id"])[
        ["correct", "p_tokens"]].mean()
    lt, st = items.loc["coba_light"], items.loc["coba_strong"]
    diff = lt["correct"] - st["correct"]
    assert got["item_diff"] == pytest.approx(100 * diff.mean())
    assert got["macro_diff"] == pytest.approx(100 * diff.groupby(level="dataset").mean().mean())
    assert got["cost_ratio"] == pytest.approx(lt["p_tokens"].sum() / st["p_tokens"].sum())


def test_fit_searches_the_training_datasets_starting_from_strong(tmp_path):
    pool = _small_paper()
    method = search_method("coba_search", n_trials=6)
    train = pool.episode_ids[pool.dataset != "amc2023"]
    fitted = method.fit(pool, train, budget=1.0, seed=0, out_dir=tmp_path, progress=False)
    first = fitted.trials.iloc[0]
    assert {k: first[k] for k in SPACE} == strong_point()
    assert (first["item_diff"], first["macro_diff"], first["cost_ratio"]) == (0.0, 0.0, 1.0)
    assert len(fitted.trials) == 6 and (tmp_path / "trials.csv").is_file()
    assert {d for _, d in method._cache.store} == set(pool.dataset.tolist()) - {"amc2023"}
    # the same seed reproduces the search
    again = search_method("coba_search", n_trials=6).fit(pool, train, budget=1.0, seed=0, out_dir=tmp_path / "b", progress=False)
    assert again.trials.equals(fitted.trials)


def test_fit_refuses_part_of_a_dataset(tmp_path):
    pool = _small_paper()
    with pytest.raises(ValueError, match="whole datasets"):
        search_method("coba_search", n_trials=2).fit(pool, pool.episode_ids[:7], budget=1.0, seed=0, out_dir=tmp_path,
                                         progress=False)
