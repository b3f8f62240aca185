"""The cost-aware oracle over route episodes: a hand-worked two-generator episode, exact against brute force
through the real env (item grouping), an upper bound on every routing policy, and the pool oracle over generators."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.registry import load_specs, make_policy
from agents.routing_base import is_route_policy
from agents.runner import run_episode
from coba_env import compile_pool
from coba_env.env import CoBaEnv
from tests.conftest import make_synthetic_pool
from tests.factory import Cand, Ep, build_pool
from tests.test_route_env import MODELS
from tests.test_routing_policies import partly_available_pool
from train.cost_aware_oracle import CostAwareOracle

ROUTE_POLICIES = [n for n in load_specs() if is_route_policy(make_policy(n))]


def verify_first_pool():
    """One problem, two generators with two candidates each (B = 1000 p_tokens in the tests).

    small (1B): "7" (wrong, V1 0.3), "0.5" (right, V1 0.9); 50 + 50 tokens -> 100 p_tokens each.
    big (10B):  "7" (wrong, V1 0.6), "1/2" (right, V1 0.8); 100 + 100 tokens -> 2000 p_tokens each.
    A V1 call (judge J1, 2B) costs 50 + 5 tokens -> 110 p_tokens. "0.5" and "1/2" are one answer.
    """
    small = [Cand("7", False, prompt_tokens=50, output_tokens=50, scores={"V1": 0.3}),
             Cand("0.5", True, prompt_tokens=50, output_tokens=50, scores={"V1": 0.9})]
    big = [Cand("7", False, prompt_tokens=100, output_tokens=100, scores={"V1": 0.6}),
           Cand("1/2", True, prompt_tokens=100, output_tokens=100, scores={"V1": 0.8})]
    return build_pool([Ep(small, generator="small", gold="1/2"), Ep(big, generator="big", gold="1/2")],
                      models=MODELS)


def _replay(env: CoBaEnv, episode: int, lam: float, actions: list[int]) -> float:
    env.reset(options={"episode": episode, "lam": lam})
    total, done = 0.0, False
    for a in actions:
        _, r, done, _, _ = env.step(a)
        total += r
    assert done
    return total


# Hand-worked (fusion weights f 0.2, V1 0.3): a correct selection needs small's "0.5" (big's "1/2" costs
# 4000), so small's "7" too (same generator, revealed first). With both, R is 0.5 for each and the tie goes to
# the earliest slot, the wrong "7"; VERIFY_V1 targets that same slot (the tie again) and scores 0.3:
# R = (0.2 * 0.5 + 0.3 * 0.3) / 0.5 = 0.38 < 0.5, so STOP selects "0.5". Cost 100 + 100 + 110 = 310; every
# state holding a big candidate costs >= 2000. Giving up costs one small sample (100, "7" is wrong): value
# -lambda / 10. The correct plan wins while 1 - 0.31 lambda >= -0.1 lambda, i.e. lambda <= 1 / 0.21 = 4.76.
HAND = [
    (0.0, ["SAMPLE_small", "SAMPLE_small", "VERIFY_V1", "STOP"], 1.0),
    (0.1, ["SAMPLE_small", "SAMPLE_small", "VERIFY_V1", "STOP"], 1 - 0.1 * 310 / 1000),
    (4.0, ["SAMPLE_small", "SAMPLE_small", "VERIFY_V1", "STOP"], 1 - 4.0 * 310 / 1000),
    (5.0, ["SAMPLE_small", "STOP"], -5.0 * 100 / 1000),
]


@pytest.mark.parametrize(("lam", "actions", "value"), HAND)
def test_hand_worked_two_generator_episode(lam, actions, value):
    env = CoBaEnv(verify_first_pool(), grouping="item", budget=1000.0, lam=lam)
    plan = CostAwareOracle.for_env(env).plan(0, lam)
    assert [env.layout.names[a] for a in plan.actions] == actions
    assert plan.value == pytest.approx(value, abs=1e-12)
    assert plan.exact
    assert _replay(env, 0, lam, plan.actions) == pytest.approx(value, abs=1e-12)


def test_hand_worked_action_values():
    """From the state after SAMPLE_small, SAMPLE_small at lambda 0.1: STOP is worth -0.02 (the tied "7" is
    selected), VERIFY_V1 0.969 (the plan above). SAMPLE_big reveals big's "7": R = 2/3, 1/3, 2/3 for the slots
    "7", "0.5", "7". Then V1 scores slot 0 (tie, earliest: 0.3 -> R 0.4467), slot 2 (0.6 -> 0.6267), slot 1
    (0.9 -> R = (0.2 / 3 + 0.27) / 0.5 = 0.6733, now the highest): correct after three V1 calls, cost
    200 + 2000 + 330 = 2530, worth 0.747 (big's "1/2" instead would cost another 2000)."""
    env = CoBaEnv(verify_first_pool(), grouping="item", budget=1000.0, lam=0.1)
    oracle = CostAwareOracle.for_env(env)
    lay = env.layout
    q = oracle.action_values(0, [0.1], [lay.action_id("SAMPLE_small")] * 2)[0]
    assert q[lay.action_id("STOP")] == pytest.approx(-0.02)
    assert q[lay.action_id("VERIFY_V1")] == pytest.approx(0.969)
    assert q[lay.action_id("SAMPLE_small")] == -math.inf  # small has no candidate left
    assert q[lay.action_id("SAMPLE_big")] == pytest.approx(1 - 0.1 * 2530 / 1000)


def small_route_pool():
    """Six problems, two generators, N = 3 (the simulator's labels and scores)."""
    return compile_pool(make_synthetic_pool({"d": 6}, {"gA": 1.5, "gB": 7.0}, n_candidates=3, seed=3))


def _brute_force(env: CoBaEnv, episode: int, lam: float) -> float:
    """Best return over every legal action sequence, by exhaustive search through the real route env."""
    best = -math.inf

    def visit(prefix: list[int]) -> None:
        nonlocal best
        _, info = env.reset(options={"episode": episode, "lam": lam})
        total, mask = 0.0, info["action_mask"]
        for a in prefix:
            _, r, _, _, info = env.step(a)
            total += r
            mask = info["action_mask"]
        legal = [int(a) for a in np.flatnonzero(mask)]
        if env.STOP in legal:
            _, r, _, _, _ = env.step(env.STOP)
            best = max(best, total + r)
        for a in legal:
            if a != env.STOP:
                visit([*prefix, a])

    visit([])
    return best


@pytest.mark.parametrize(("tiers", "lam"), [(["V3"], 0.0), (["V3"], 3.0), (["V1", "V3"], 0.3)])
def test_oracle_equals_brute_force_on_small_route_episodes(tiers, lam):
    """With 2 candidates per generator and one or two verifiers every action sequence can be enumerated: the
    oracle's value is the exhaustive maximum (every interleaving of the generators included)."""
    env = CoBaEnv(small_route_pool(), grouping="item", lam=lam, n_max=2, tiers=tiers)
    oracle = CostAwareOracle.for_env(env)
    episodes = range(env.n_episodes) if len(tiers) == 1 else (1, 3)  # two verifiers: 3 s per episode
    for e in episodes:
        plan = oracle.plan(e, lam)
        assert plan.exact
        assert plan.value == pytest.approx(_brute_force(env, e, lam), abs=1e-9), e


@pytest.mark.parametrize("pool", ["synthetic", "partly_available"])
@pytest.mark.parametrize("lam", [0.0, 0.1])
@pytest.mark.parametrize("name", ROUTE_POLICIES)
def test_oracle_value_is_never_below_a_routing_policys_return(name, lam, pool):
    """On every episode, the oracle's value (in the env the policy runs in: its selection rule) >= the
    policy's realized return, and the plan replays in that env to exactly its value."""
    compiled = small_route_pool() if pool == "synthetic" else compile_pool(partly_available_pool())
    policy = make_policy(name)
    env = CoBaEnv(compiled, grouping="item", lam=lam, **policy.env_kwargs())
    if name in ("route_cheapest_coba", "route_largest_coba") and pool == "partly_available":
        assert not policy.applicable(env)[0]  # CoBa on one generator needs it in every problem
        return
    assert policy.applicable(env) == (True, "")
    oracle = CostAwareOracle.for_env(env)
    for e in range(env.n_episodes):
        realized = run_episode(env, policy, e)["return"]
        plan = oracle.plan(e, lam)
        assert plan.exact, (name, e)
        assert plan.value >= realized - 1e-9, (name, lam, e, plan.value, realized)
        assert _replay(env, e, lam, plan.actions) == pytest.approx(plan.value, abs=1e-9)


@pytest.mark.parametrize("pool", ["synthetic", "partly_available"])
def test_lambda_zero_equals_the_pool_oracle_over_generators(pool):
    """At lambda 0 under selection ``last`` (the pool oracle's env) the oracle's value equals the pool oracle's
    return and the labels' answer: 1 exactly when some generator holds a correct candidate within N_max. Under
    the env's fusion selection it is never above it (fusion may be unable to select a correct candidate)."""
    compiled = small_route_pool() if pool == "synthetic" else compile_pool(partly_available_pool())
    pool_oracle = make_policy("route_pool_oracle")
    env = CoBaEnv(compiled, grouping="item", lam=0.0, **pool_oracle.env_kwargs())
    oracle = CostAwareOracle.for_env(env)
    fusion_oracle = CostAwareOracle.for_env(CoBaEnv(compiled, grouping="item", lam=0.0))
    any_correct = compiled.labels.correct.any(axis=1)  # replay rows; join them by item below
    solvable = {}
    for row, (d, i) in enumerate(zip(compiled.dataset.tolist(), compiled.item_id.tolist(), strict=True)):
        solvable[(d, i)] = solvable.get((d, i), False) or bool(any_correct[row])
    route = env.route.pool
    for e in range(env.n_episodes):
        expected = 1.0 if solvable[(route.dataset[e], route.item_id[e])] else 0.0
        assert run_episode(env, pool_oracle, e)["return"] == expected
        assert oracle.plan(e, 0.0).value == expected
        assert fusion_oracle.plan(e, 0.0).value <= expected
    assert 0.0 < np.mean([fusion_oracle.plan(e, 0.0).value for e in range(env.n_episodes)])


@pytest.mark.parametrize("lam", [0.0, 0.1, 1.0])
def test_selection_last_equals_the_closed_form_route_oracle(lam):
    """Under selection ``last`` the search finds the closed-form optimum of ``route_cost_aware_oracle``
    (cheapest correct prefix of one generator, or one cheapest sample): two independent derivations."""
    policy = make_policy("route_cost_aware_oracle")
    env = CoBaEnv(small_route_pool(), grouping="item", lam=lam, **policy.env_kwargs())
    oracle = CostAwareOracle.for_env(env)
    for e in range(env.n_episodes):
        assert oracle.plan(e, lam).value == pytest.approx(run_episode(env, policy, e)["return"], abs=1e-9), e


def test_the_oracle_policy_plans_route_episodes():
    """``CostAwareOraclePolicy`` on an item-grouped env plays the hand-worked plan (the route search, labels read on the
    evaluator side) and earns its value."""
    from train.oracle_policy import CostAwareOraclePolicy

    env = CoBaEnv(verify_first_pool(), grouping="item", budget=1000.0, lam=0.1)
    info = run_episode(env, CostAwareOraclePolicy(), 0)
    assert [env.layout.names[a] for a in info["action_ids"]] == HAND[1][1]
    assert info["return"] == pytest.approx(HAND[1][2])
