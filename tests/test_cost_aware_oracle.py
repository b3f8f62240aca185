"""The cost-aware oracle: an upper bound on every policy's return, exact against brute force, replayable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.registry import make_policy
from agents.runner import make_env, run_episode
from coba_env import compile_pool
from coba_env.env import CoBaEnv
from pools.default import resolve_pool
from train.cost_aware_oracle import CostAwareOracle, oracle_plan

# Every policy here runs on the tiny pool (N_max = 8); self_eval_weighted needs 16 candidates, so it is not listed.
POLICIES = ["greedy", "coba_light", "coba_balanced", "coba_strong", "bon4_majority", "k_stable_stop",
            "outcome_evaluator"]
LAMBDAS = [0.0, 0.1, 1.0]


@pytest.fixture(scope="module")
def tiny():
    """The tiny simulated pool, compiled."""
    return compile_pool(resolve_pool("tiny"))


@pytest.mark.parametrize("name", POLICIES)
def test_oracle_value_is_never_below_a_policys_return(tiny, name):
    """On every episode and lambda, the oracle's value >= the policy's realized return in the same env."""
    policy = make_policy(name)
    for lam_index, lam in enumerate(LAMBDAS):
        env = make_env(policy, tiny, lam=lam)
        ok, why = policy.applicable(env)
        assert ok, (name, why)  # a policy that cannot run would make this test pass without checking anything
        oracle = CostAwareOracle.for_env(env)
        for e in range(lam_index % 2, env.n_episodes, 2):  # half the episodes per lambda, alternating
            realized = run_episode(env, policy, e)["return"]
            plan = oracle.plan(e, lam)
            assert plan.value >= realized - 1e-9, (name, lam, e, plan.value, realized)


def _replay(env: CoBaEnv, episode: int, lam: float, actions: list[int]) -> float:
    env.reset(options={"episode": episode, "lam": lam})
    total = 0.0
    for a in actions:
        _, r, done, _, _ = env.step(a)
        total += r
    assert done
    return total


@pytest.mark.parametrize("lam", [0.0, 0.1, 1.0])
def test_plan_replays_in_the_env_to_its_value(tiny, lam):
    """The env, stepping the oracle's actions, pays exactly the value the oracle claims."""
    env = CoBaEnv(tiny, lam=lam)
    oracle = CostAwareOracle.for_env(env)
    for e in range(0, env.n_episodes, 3):
        plan = oracle.plan(e, lam)
        assert plan.exact
        assert _replay(env, e, lam, plan.actions) == pytest.approx(plan.value, abs=1e-9)


def _brute_force(env: CoBaEnv, episode: int, lam: float) -> float:
    """Best return over every legal action sequence, by exhaustive search through the real env."""
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
        if env.STOP in legal:  # stop here (uses the env's current state, so before any deeper visit)
            _, r, _, _, _ = env.step(env.STOP)
            best = max(best, total + r)
        for a in legal:
            if a != env.STOP:
                visit([*prefix, a])

    visit([])
    return best


@pytest.mark.parametrize("lam", [0.0, 0.2, 2.0])
def test_oracle_equals_brute_force_on_small_episodes(tiny, lam):
    """With N_max = 2 every action sequence can be enumerated: the oracle's value is the exhaustive maximum."""
    env = CoBaEnv(tiny, lam=lam, n_max=2)
    oracle = CostAwareOracle.for_env(env)
    for e in range(0, env.n_episodes, 4):
        assert oracle.plan(e, lam).value == pytest.approx(_brute_force(env, e, lam), abs=1e-9), e


def test_lambda_zero_value_is_one_exactly_when_a_correct_selection_is_reachable(tiny):
    """Hand-worked: at lambda 0 cost is free, so the value is 1 if any reachable state selects a correct
    answer; an episode without any correct candidate is worth 0."""
    env = CoBaEnv(tiny, lam=0.0)
    oracle = CostAwareOracle.for_env(env)
    none_correct = np.flatnonzero(~tiny.labels.correct.any(axis=1))
    assert len(none_correct) > 0
    for e in none_correct:
        assert oracle.plan(int(e), 0.0).value == 0.0
    # Greedy (first candidate) correct -> STOP after one SAMPLE is worth exactly 1 - lam * c0 / B.
    first_ok = np.flatnonzero(tiny.labels.correct[:, 0] & (tiny.cluster[:, 0] >= 0))
    e = int(first_ok[0])
    lam = 0.5
    c0 = float(tiny.gen_cost[e, 0, 1])
    assert oracle_plan(tiny, e, lam, budget=env.budget).value == pytest.approx(1 - lam * c0 / env.budget)


def test_action_values_agree_with_the_plan(tiny):
    """The best action value from a state equals the plan's value, and STOP's value is the stop-now return."""
    env = CoBaEnv(tiny, lam=0.1)
    oracle = CostAwareOracle.for_env(env)
    for e in range(0, env.n_episodes, 6):
        q = oracle.action_values(e, [0.1], [0])
        assert q.max() == pytest.approx(oracle.plan(e, 0.1, [0]).value, abs=1e-9)
        assert q[0, 4] == pytest.approx(_replay(env, e, 0.1, [0, 4]), abs=1e-9)


@pytest.mark.parametrize(("prefix", "match"), [([4], "not allowed"), ([0, 0, 9], "not allowed")])
def test_illegal_prefix_is_rejected(tiny, prefix, match):
    """A prefix with an illegal (or ending) action raises ValueError naming its position."""
    with pytest.raises(ValueError, match=match):
        CostAwareOracle.for_pool(tiny).start_state(0, prefix)


def test_negative_lambda_is_rejected(tiny):
    """Lambda must be >= 0."""
    with pytest.raises(ValueError, match="lambda must be >= 0"):
        CostAwareOracle.for_pool(tiny).plan(0, -0.1)


def test_plans_are_legal_with_unanswered_candidates():
    """On a pool with answerless (cap-hit) candidates, which the env never lets a VERIFY target, every plan
    replays legally in the env and pays exactly its value (regression: the oracle once targeted them)."""
    from tests.test_label_leak import random_pool

    compiled = compile_pool(random_pool(episodes=12, n=6))
    assert (compiled.cluster < 0).any()
    for lam in (0.0, 0.05):
        env = CoBaEnv(compiled, lam=lam)
        oracle = CostAwareOracle.for_env(env, node_limit=300)
        for e in range(env.n_episodes):
            plan = oracle.plan(e, lam)
            assert _replay(env, e, lam, plan.actions) == pytest.approx(plan.value, abs=1e-9)
            for k in range(1, len(plan.actions)):  # and from every state along it
                sub = oracle.plan(e, lam, plan.actions[:k])
                assert _replay(env, e, lam, [*plan.actions[:k], *sub.actions]) == pytest.approx(sub.value, abs=1e-9)
