"""Routing policies on coba/Route-v0: hand-worked episodes, batched == single on the paper and ladder pools,
and the pool oracle over generators against the labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.registry import load_specs, make_policy
from agents.routing_base import is_route_policy
from agents.runner import run_episode
from coba_env.compiled import as_compiled
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv
from eval.batched_replay import replay_batched
from tests.factory import Cand, Ep, build_pool
from tests.test_route_env import MODELS, assert_batched_equals_single, two_generator_pool


def route_env(pool, **kwargs):
    """The one-episode env over ``pool``'s items with all their generators (``coba/Route-v0``)."""
    return CoBaEnv(pool, grouping="item", **kwargs)


def route_venv(num_envs, pool, **kwargs):
    """The vector env over ``pool``'s items with all their generators."""
    return CoBaVectorEnv(num_envs, pool, grouping="item", **kwargs)


#: Every registered route-env policy (routing group and the route oracles).
ROUTE_POLICIES = [n for n in load_specs() if is_route_policy(make_policy(n))]


def small_wrong_pool():
    """One problem: small answers "7" twice (wrong, 100 p_tokens each), big "1/2" (right) then "7" (2000 each)."""
    small = [Cand("7", False, prompt_tokens=50, output_tokens=50, scores={"V1": 0.9}),
             Cand("7", False, prompt_tokens=50, output_tokens=50, scores={"V1": 0.9})]
    big = [Cand("1/2", True, prompt_tokens=100, output_tokens=100, scores={"V1": 0.8}),
           Cand("7", False, prompt_tokens=100, output_tokens=100, scores={"V1": 0.6})]
    return build_pool([Ep(small, generator="small", gold="1/2"), Ep(big, generator="big", gold="1/2")],
                      models=MODELS)


def play(name, pool, **params):
    """One episode of policy ``name`` (``params`` overriding its spec): (action names, final info)."""
    policy = make_policy(name, **params)
    env = route_env(pool, budget=1000.0, **policy.env_kwargs())
    assert policy.applicable(env) == (True, "")
    info = run_episode(env, policy, 0)
    return [env.layout.names[a] for a in info["action_ids"]], info


# The pool of two_generator_pool: small "0.5" (right, V1 0.2), "7" (V1 0.9), 100 p_tokens each; big
# "\frac{1}{2}" (right), "7", 2000 each; a V1 call 110. 0.5 and \frac{1}{2} are one answer.
HAND_WORKED = [
    # cascade k=2: small's two answers differ -> escalate to big, which answers once; its answer is selected.
    ("route_cascade", {}, ["SAMPLE_small", "SAMPLE_small", "SAMPLE_big", "STOP"], 2, True, 2200.0),
    # ModelSwitch m=2: small not unanimous -> 2 from big; majority 0.5|1/2 (2) ties 7 (2): first seen, slot 0.
    ("model_switch", {"m": 2}, ["SAMPLE_small", "SAMPLE_small", "SAMPLE_big", "SAMPLE_big", "STOP"], 0, True,
     4200.0),
    # judge router: small's first candidate scores 0.2 < 0.7 -> big once; selection last = big's answer.
    ("route_threshold_judge", {}, ["SAMPLE_small", "VERIFY_V1", "SAMPLE_big", "STOP"], 1, True, 2210.0),
    # threshold 0.1 <= 0.2: small's answer stands.
    ("route_threshold_judge", {"threshold": 0.1}, ["SAMPLE_small", "VERIFY_V1", "STOP"], 0, True, 210.0),
    # agreement router: small's two answers agree 0.5 < 1.0 -> big.
    ("route_threshold_agreement", {}, ["SAMPLE_small", "SAMPLE_small", "SAMPLE_big", "STOP"], 2, True, 2200.0),
    # the pool oracle: small's first candidate is right and the cheapest correct prefix (100 < 2000).
    ("route_pool_oracle", {}, ["SAMPLE_small", "STOP"], 0, True, 100.0),
    ("route_cost_aware_oracle", {}, ["SAMPLE_small", "STOP"], 0, True, 100.0),
]


@pytest.mark.parametrize(("name", "params", "actions", "selected", "correct", "p_tokens"), HAND_WORKED,
                         ids=[f"{c[0]}{c[1]}" for c in HAND_WORKED])
def test_hand_worked_route_episode(name, params, actions, selected, correct, p_tokens):
    names, info = play(name, two_generator_pool(), **params)
    assert names == actions
    assert info["selected_candidate"] == selected and info["correct"] is correct
    assert info["costs"]["p_tokens"] == p_tokens


def test_cascade_stops_on_a_unanimous_cheap_model_even_when_it_is_wrong():
    names, info = play("route_cascade", small_wrong_pool())
    assert names == ["SAMPLE_small", "SAMPLE_small", "STOP"]
    assert info["correct"] is False and info["costs"]["p_tokens"] == 200.0


def test_model_switch_keeps_a_unanimous_first_model():
    names, _ = play("model_switch", small_wrong_pool(), m=2)
    assert names == ["SAMPLE_small", "SAMPLE_small", "STOP"]


@pytest.mark.parametrize(("lam", "actions", "correct"), [
    (0.1, ["SAMPLE_big", "STOP"], True),     # 1 - 0.1 * 2000 / 1000 = 0.8 > giving up: -0.1 * 100 / 1000
    (1.0, ["SAMPLE_small", "STOP"], False),  # 1 - 2 = -1 < -0.1: one sample of the cheapest candidate
])
def test_oracles_over_generators_on_a_wrong_cheap_model(lam, actions, correct):
    pool = small_wrong_pool()
    policy = make_policy("route_cost_aware_oracle")
    env = route_env(pool, budget=1000.0, lam=lam, **policy.env_kwargs())
    info = run_episode(env, policy, 0)
    assert [env.layout.names[a] for a in info["action_ids"]] == actions and info["correct"] is correct
    # The pool oracle ignores lambda: big's correct candidate whatever it costs.
    policy = make_policy("route_pool_oracle")
    env = route_env(pool, budget=1000.0, lam=lam, **policy.env_kwargs())
    info = run_episode(env, policy, 0)
    assert [env.layout.names[a] for a in info["action_ids"]] == ["SAMPLE_big", "STOP"] and info["correct"]


@pytest.mark.parametrize("profile", ["paper", "ladder"])
@pytest.mark.parametrize("name", ROUTE_POLICIES)
def test_batched_equals_single_on_route_episodes(name, profile):
    pool = as_compiled(profile)
    policy = make_policy(name)
    env = route_env(pool, **policy.env_kwargs())
    assert env.route.n_generators == 3 and env.route.available.all()
    assert policy.applicable(env) == (True, "")
    single = [run_episode(env, policy, i) for i in range(env.n_episodes)]
    venv = route_venv(997, pool, **policy.env_kwargs())  # rows refill mid-run: 997 does not divide E
    batched = replay_batched(make_policy(name), venv)
    assert_batched_equals_single(single, batched, env.layout.names)
    if make_policy(name).kind in ("route_cascade", "model_switch", "route_threshold"):  # they do route
        assert len({g for r in single for g, k in r["samples_by_generator"].items() if k}) >= 2


def first_correct_within(profile: str, n_max: int) -> pd.DataFrame:
    """Per (dataset, item) and generator: whether one of its first ``n_max`` candidates is right (from the labels)."""
    pool = as_compiled(profile)
    frame = pd.DataFrame({"dataset": pool.dataset, "item_id": pool.item_id, "generator": pool.generator,
                          "hit": pool.labels.correct[:, :n_max].any(axis=1)})
    return frame.pivot_table(index=["dataset", "item_id"], columns="generator", values="hit", aggfunc="max")


@pytest.mark.parametrize("profile", ["paper", "ladder"])
def test_pool_oracle_over_generators_beats_every_single_generator(profile):
    policy = make_policy("route_pool_oracle")
    env = route_env(as_compiled(profile), **policy.env_kwargs())
    correct = np.array([run_episode(env, policy, i)["correct"] for i in range(env.n_episodes)])
    table = first_correct_within(profile, env.n_max_per_generator)
    best_single = table.mean().max()  # the best single generator's pool oracle
    assert correct.mean() == pytest.approx(table.any(axis=1).mean())
    assert correct.mean() >= best_single
    assert correct.mean() > table.mean().min()


def test_routing_policies_refuse_the_replay_env_and_one_generator_pools():
    from agents.runner import make_env

    pool = build_pool([Ep([Cand("1", True), Cand("2")], generator="only")])
    for name in ROUTE_POLICIES:
        policy = make_policy(name)
        ok, why = policy.applicable(make_env(policy, pool))
        assert not ok and "route env" in why
        if name not in ("route_pool_oracle", "route_cost_aware_oracle", "route_cheapest_coba", "route_largest_coba"):
            ok, why = policy.applicable(route_env(pool, **policy.env_kwargs()))
            assert not ok and "2 or more generators" in why


@pytest.mark.parametrize(("kind", "params", "match"), [
    ("route_cascade", {"k": 1}, "k must be >= 2"),
    ("route_cascade", {"final_k": 0}, "final_k must be >= 1"),
    ("model_switch", {"m": 1}, "m must be >= 2"),
    ("route_threshold", {"signal": "entropy"}, "signal must be one of"),
    ("route_threshold", {"signal": "agreement", "probe": 1}, "needs probe >= 2"),
    ("route_threshold", {"probe": 0}, "probe and strong_samples must be >= 1"),
    ("route_threshold", {"threshold": "high"}, "expected a finite number"),
])
def test_bad_routing_parameters_are_refused(kind, params, match):
    from agents.configured import POLICY_CLASSES

    with pytest.raises(ValueError, match=match):
        POLICY_CLASSES[kind](**params)


def test_a_named_generator_that_the_pool_lacks_is_reported():
    policy = make_policy("model_switch", second="nope")
    ok, why = policy.applicable(route_env(two_generator_pool()))
    assert not ok and "unknown generator 'nope'" in why


def partly_available_pool():
    """Three problems: i0 answered by small and big, i1 by big only, i2 by small only (2 candidates each)."""
    def cands(answer, ok):
        return [Cand(answer, ok, prompt_tokens=50, output_tokens=50, scores={"V1": 0.5, "V3": 0.5}),
                Cand("9", False, prompt_tokens=50, output_tokens=50, scores={"V1": 0.4, "V3": 0.4})]

    return build_pool([Ep(cands("1", True), item_id="i0", generator="small"),
                       Ep(cands("2", False), item_id="i0", generator="big"),
                       Ep(cands("1", True), item_id="i1", generator="big"),
                       Ep(cands("1", True), item_id="i2", generator="small")], models=MODELS)


@pytest.mark.parametrize("name", ROUTE_POLICIES)
def test_problems_missing_a_generator_are_routed_around(name):
    """A generator without candidates for a problem is never sampled; batched equals single there too."""
    policy = make_policy(name)
    env = route_env(partly_available_pool(), **policy.env_kwargs())
    if name in ("route_cheapest_coba", "route_largest_coba"):  # CoBa on one generator needs it everywhere
        ok, why = policy.applicable(env)
        assert not ok and "has no candidates for some problems" in why
        return
    single = [run_episode(env, policy, i) for i in range(3)]
    assert single[1]["samples_by_generator"]["small"] == 0 and single[2]["samples_by_generator"]["big"] == 0
    venv = route_venv(2, partly_available_pool(), **policy.env_kwargs())
    batched = replay_batched(make_policy(name), venv)
    assert [r["action_ids"] for r in single] == [[a for a in row if a >= 0] for row in batched["actions"].tolist()]
    assert [r["correct"] for r in single] == batched["correct"].tolist()


@pytest.mark.parametrize("name", ["route_cascade", "model_switch", "route_pool_oracle"])
def test_batched_equals_single_on_a_priced_route_pool(name):
    """Dollars too: on a pool pricing every model, each route episode's usd is the same single and batched."""
    import dataclasses

    from coba_env.compiled import compile_pool
    from coba_env.costs import USD
    from pools.default import resolve_pool
    from pools.prices import PRICES_KEY

    base = resolve_pool("ladder")
    prices = {m: {"input": 1.0 + k, "output": 3.0 + k} for k, m in enumerate(base.models["name"].astype(str))}
    pool = compile_pool(dataclasses.replace(base, manifest={**base.manifest, PRICES_KEY: prices}))
    policy = make_policy(name)
    env = route_env(pool, **policy.env_kwargs())
    single = [run_episode(env, policy, i) for i in range(env.n_episodes)]
    batched = replay_batched(make_policy(name), route_venv(997, pool, **policy.env_kwargs()))
    single_costs = np.array([list(r["costs"].values()) for r in single])
    assert (single_costs[:, USD] > 0).all()  # every episode samples at least once, and every call is priced
    assert np.array_equal(single_costs, batched["costs"])
