"""The structured search on the route env (issue 27, item 3): the space built from the pool, the cascade as trial 0
and fallback, in-sample figures by hand, the choice by hand, a partial protocol run, refused input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from agents.registry import make_policy
from agents.routing_base import is_route_policy
from agents.routing_ladder import LadderCascadePolicy
from eval.runner import replay_policy, run_policies
from tests.factory import Cand, Ep, build_pool
from tests.test_route_env import MODELS
from tests.test_route_ladder import paper_problems
from train import param_search
from train.coba_search import (
    FAMILIES,
    canonical,
    cascade_point,
    ladder_rungs,
    make_ladder,
    route_space,
    search_method,
)
from train.protocol import run_protocol
from train.protocol_arena import ROUTE

LADDER = FAMILIES["route_search"]


def route_search_method(**settings):
    """The route kind's method, as `coba train route_search` builds it."""
    return search_method("route_search", **settings)


CASCADE = {"k_rung1": 2, "k_rung2": 2, "votes": 2, "final_k": 1, "early_escalate": False, "judge": False,
           "judge_accept": 1.0, "judge_escalate": 0.0, "answer": "last"}


def test_the_space_has_one_rung_parameter_per_rung_of_the_pool():
    pool = paper_problems(2)
    assert ladder_rungs(pool) == 2  # three generators on the paper pool
    assert set(route_space(2)) == set(CASCADE)
    assert cascade_point(2) == CASCADE
    assert [k for k in route_space(4) if k.startswith("k_rung")] == ["k_rung1", "k_rung2", "k_rung3", "k_rung4"]


def test_the_cascade_point_is_route_cascade():
    policy = make_ladder(CASCADE, "x")
    assert is_route_policy(policy) and policy.batched
    assert (policy.rung_k, policy.votes, policy.final_k, policy.judge, policy.selection) == ([2, 2], 2, 1, False,
                                                                                               "last")
    pool = paper_problems(15)
    run = run_policies([policy, make_policy("route_cascade")], pool, grouping="item", workers=1, progress=False).records
    mine, ref = (run[run["policy"] == n].reset_index(drop=True) for n in ("x", "route_cascade"))
    assert mine[["correct", "p_tokens", "actions"]].equals(ref[["correct", "p_tokens", "actions"]])


@pytest.mark.parametrize(("params", "expected"), [
    # no judge: its thresholds take the cascade's values
    ({**CASCADE, "judge_accept": 0.7, "judge_escalate": 0.3}, CASCADE),
    # votes above every rung's samples act as the largest k (at least 2)
    ({**CASCADE, "votes": 4}, CASCADE),
    ({**CASCADE, "k_rung1": 3, "k_rung2": 1, "votes": 4}, {**CASCADE, "k_rung1": 3, "k_rung2": 1, "votes": 3}),
    # every rung skipped: nothing to judge
    ({**CASCADE, "k_rung1": 0, "k_rung2": 0, "judge": True, "judge_accept": 0.6},
     {**CASCADE, "k_rung1": 0, "k_rung2": 0}),
    # a judge with a rung keeps its thresholds
    ({**CASCADE, "judge": True, "judge_accept": 0.6, "judge_escalate": 0.2},
     {**CASCADE, "judge": True, "judge_accept": 0.6, "judge_escalate": 0.2}),
])
def test_canonical_configurations(params, expected):
    assert canonical(params) == expected


def _trials(rows):
    return pd.DataFrame([{**CASCADE, "k_rung1": k, "item_diff": d, "macro_diff": m, "cost_ratio": c}
                         for k, d, m, c in rows])


@pytest.mark.parametrize(("margin", "k_rung1"), [
    (0.0, 1),        # cheapest with both differences >= 0 (k 0 is cheaper but its macro difference is < 0)
    (0.5, 3),        # only k 3 and 4 clear +0.5 on both; 3 is cheaper
    (2.0, 2),        # none clears +2: the cascade's parameters
    (math.inf, 2),   # the fallback: the cascade's parameters
])
def test_a_point_is_the_cheapest_trial_clearing_its_margin(margin, k_rung1):
    trials = _trials([(2, 0.0, 0.0, 1.0), (0, 0.3, -0.2, 0.5), (1, 0.1, 0.0, 0.7), (3, 0.6, 0.9, 1.1),
                      (4, 1.0, 1.5, 1.3)])
    fitted = param_search.FittedSearch(trials, LADDER, route_space(2), CASCADE)
    params = fitted.params({"margin": margin})
    assert params["k_rung1"] == k_rung1 and set(params) == set(CASCADE)
    assert isinstance(params["judge"], bool) and isinstance(params["k_rung2"], int)
    assert fitted.policy({"margin": margin}).rung_k == [k_rung1, 2]


def test_in_sample_figures_by_hand():
    """A cheaper ladder's in-sample figures against the cascade recomputed from a plain route replay of both."""
    pool = paper_problems(20)
    cheap = {**CASCADE, "k_rung1": 0, "final_k": 1}  # Phi-4 twice, then Qwen3-14B
    datasets = ["math500", "amc2023"]
    got = param_search.in_sample(param_search.ItemCache(pool, LADDER), cheap, CASCADE, datasets)
    sub = pool.select(np.isin(pool.dataset, datasets))
    rec = run_policies([LadderCascadePolicy(name="route_ladder", rung_k=[0, 2]), make_policy("route_cascade")], sub,
                       grouping="item", workers=1, progress=False).records
    items = rec.assign(correct=rec["correct"].astype(float)).set_index(["policy", "dataset", "item_id"])
    mine, ref = items.loc["route_ladder"].sort_index(), items.loc["route_cascade"].sort_index()
    diff = mine["correct"] - ref["correct"]
    assert got["item_diff"] == pytest.approx(100 * diff.mean())
    assert got["macro_diff"] == pytest.approx(100 * diff.groupby(level="dataset").mean().mean())
    assert got["cost_ratio"] == pytest.approx(mine["p_tokens"].sum() / ref["p_tokens"].sum())
    assert got["cost_ratio"] != 1.0


def test_fit_searches_the_training_datasets_starting_from_the_cascade(tmp_path):
    pool = paper_problems(10)
    method = route_search_method(n_trials=6)
    train = pool.episode_ids[pool.dataset != "amc2023"]
    fitted = method.fit(pool, train, budget=1.0, seed=0, out_dir=tmp_path, progress=False)
    first = fitted.trials.iloc[0]
    assert param_search.typed(first, route_space(2)) == CASCADE
    assert (first["item_diff"], first["macro_diff"], first["cost_ratio"]) == (0.0, 0.0, 1.0)
    assert len(fitted.trials) == 6 and (tmp_path / "trials.csv").is_file()
    assert {d for _, d in method._cache.store} == {"math500", "aime2024", "rgym_hard"}
    # the same seed reproduces the search; the fallback is the cascade
    again = route_search_method(n_trials=6).fit(pool, train, budget=1.0, seed=0, out_dir=tmp_path / "b",
                                              progress=False)
    assert again.trials.equals(fitted.trials)
    assert method.fallback() == {"margin": math.inf} == method.grid()[-1]
    assert again.params(method.fallback()) == CASCADE


def test_fit_refuses_part_of_a_dataset(tmp_path):
    pool = paper_problems(5)
    with pytest.raises(ValueError, match="route_search fits on whole datasets"):
        route_search_method(n_trials=2).fit(pool, pool.episode_ids[:7], budget=1.0, seed=0, out_dir=tmp_path,
                                          progress=False)


def _pool(generators_by_dataset):
    eps = [Ep([Cand("1", True, prompt_tokens=50, output_tokens=50)] * 2, dataset=d, item_id=f"{d}-0", generator=g)
           for d, gens in generators_by_dataset.items() for g in gens]
    from coba_env.compiled import as_compiled

    return as_compiled(build_pool(eps, models=MODELS))


@pytest.mark.parametrize(("layout", "match"), [
    ({"d1": ["small", "big"], "d2": ["small"]}, r"every generator in every dataset; dataset 'd2' has none of \['big'\]"),
    ({"d1": ["small"], "d2": ["small"]}, r"2 or more generators; the pool has \['small'\]"),
])
def test_pools_without_one_ladder_are_refused(layout, match, tmp_path):
    pool = _pool(layout)
    with pytest.raises(ValueError, match=match):
        route_search_method(n_trials=2).fit(pool, pool.episode_ids, budget=1.0, seed=0, out_dir=tmp_path,
                                          progress=False)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_trials": 0}, r"n_trials must be an integer >= 1, got 0"),
    ({"n_trials": 2.5}, r"n_trials must be an integer >= 1, got 2.5"),
    ({"n_trials": True}, r"n_trials must be an integer >= 1, got True"),
    ({"margins": ()}, r"margins must be finite numbers >= 0"),
    ({"margins": (0.0, math.inf)}, r"margins must be finite numbers >= 0 \(points; infinity is the fallback\)"),
    ({"margins": (float("nan"),)}, r"margins must be finite numbers >= 0"),
    ({"margins": (-0.5,)}, r"margins must be finite numbers >= 0"),
    ({"margins": ("0",)}, r"margins must be finite numbers >= 0"),
])
def test_bad_constructor_input_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        route_search_method(**kwargs)


def test_the_cli_builds_the_method_with_the_stated_settings():
    from coba_cli.train_cmd import protocol_method

    method = protocol_method("route_search", "route")
    assert isinstance(method, param_search.SearchMethod) and method.family is LADDER
    assert method.grid() == [{"margin": 0.0}, {"margin": 0.5}, {"margin": 1.0}, {"margin": math.inf}]
    assert method.n_trials == 300


def test_a_partial_protocol_run_on_the_route_arena(tmp_path):
    """One seed, one held-out fold on a small pool without aime2025: a partial verdict, and the held-out records
    are the replay of the point chosen, recomputed from the written trials."""
    pool = paper_problems(6)
    result = run_protocol(pool, route_search_method(n_trials=8), seeds=(0,), held_out=["amc2023"], progress=False,
                          out_dir=tmp_path, pool_name="paper, 6 problems of 4 datasets", arena=ROUTE, resamples=200)
    v = result.verdict
    assert (v["env"], v["reference"], v["scope"], v["beats"]) == ("route", "route_cascade", "partial", False)
    assert "partial run, no verdict" in v["text"]
    assert (tmp_path / "verdict.md").is_file() and (tmp_path / "protocol.json").is_file()
    assert len(result.inner) == 4 and result.inner["chosen"].sum() == 1  # the grid's 4 points, one chosen
    assert set(result.records["policy"]) == {"route_search", "route_cascade"}
    held = result.records[result.records["policy"] == "route_search"].set_index("item_id").sort_index()
    assert len(held) == 6 and set(held["dataset"]) == {"amc2023"}
    # recompute the held-out records: the chosen margin's cheapest trial of the final search, replayed
    margin = float(result.chosen["point_margin"].iloc[0])
    trials = pd.read_csv(tmp_path / "seed0" / "amc2023" / "final" / "trials.csv")
    assert len(trials) == 8
    ok = trials[(trials["item_diff"] >= margin) & (trials["macro_diff"] >= margin)] if math.isfinite(margin) else []
    row = ok.sort_values("cost_ratio", kind="stable").iloc[0] if len(ok) else pd.Series(CASCADE)
    policy = LadderCascadePolicy(rung_k=[int(row["k_rung1"]), int(row["k_rung2"])], votes=int(row["votes"]),
                                 final_k=int(row["final_k"]), early_escalate=bool(row["early_escalate"]),
                                 judge=bool(row["judge"]), judge_accept=float(row["judge_accept"]),
                                 judge_escalate=float(row["judge_escalate"]), answer=str(row["answer"]))
    again = replay_policy(policy, pool.select(pool.dataset == "amc2023"), grouping="item").records.set_index("item_id")
    assert held["correct"].tolist() == again.sort_index()["correct"].tolist()
    assert held["p_tokens"].tolist() == again.sort_index()["p_tokens"].tolist()
