"""The rollout controller: exact Q^Strong on a hand-worked episode, Strong replayed from the state, tau = inf."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from agents.learned_rollout import RolloutController, StrongFromState
from agents.registry import make_policy
from coba_env import compile_pool
from coba_env.env import as_compiled
from coba_env.rules.features import REVEALED
from eval.runner import run_policies
from tests.factory import MODELS, Cand, Ep, build_pool
from train.rollout import RolloutMethod, collect, make_env, q_strong

# The paper layout's ids (docs/ENV.md): SAMPLE 0, VERIFY_V1..V3 1..3, STOP 4; 5 actions.
SAMPLE, V1, V2, V3, STOP = range(5)
N_ACTIONS = 5
# p_tokens by hand (tests/factory.py): a candidate (100 + 1000 tokens) x 10B = 11000; a verifier call 55 tokens
# x 2B (V1) = 110, x 4B (V2) = 220, x 20B (V3) = 1100.
GEN = 1100 * MODELS["G"]
CALL = {t: 55 * MODELS[m] for t, m in ((V1, "J1"), (V2, "J2"), (V3, "J3"))}
SCORES = {"V1": 0.9, "V2": 0.8, "V3": 0.9}


@pytest.fixture(scope="module")
def episode_env():
    """One episode: two correct candidates with answer "1", then a wrong one with answer "2"."""
    cands = [Cand("1", True, scores=SCORES), Cand("1", True, scores=SCORES),
             Cand("2", False, scores={"V1": 0.1, "V2": 0.1, "V3": 0.1})]
    return make_env(compile_pool(build_pool([Ep(cands)])))


def test_strong_on_the_hand_worked_episode(episode_env):
    """Strong: two warm-up samples, V1 on both, V2 on both, then stable (share 1, V1 0.9) and unanimous: STOP."""
    run = run_policies(["coba_strong"], episode_env.pool, progress=False, workers=1).records.iloc[0]
    assert run["actions"] == "S S V1 V1 V2 V2 STOP"
    assert run["p_tokens"] == pytest.approx(2 * GEN + 2 * CALL[V1] + 2 * CALL[V2])
    assert bool(run["correct"])


def test_q_strong_is_exact_on_the_hand_worked_episode(episode_env):
    """Every legal first and second action, continued by Strong to STOP, worked out by hand."""
    strong_cost = 2 * GEN + 2 * CALL[V1] + 2 * CALL[V2]
    correct, cost = q_strong(episode_env, 0, ())
    legal = np.flatnonzero(np.isfinite(correct))
    assert set(legal) <= {SAMPLE, STOP} and SAMPLE in legal
    assert (correct[SAMPLE], cost[SAMPLE]) == (1.0, pytest.approx(strong_cost))
    if STOP in legal:  # nothing revealed: nothing to select
        assert (correct[STOP], cost[STOP]) == (0.0, 0.0)

    correct, cost = q_strong(episode_env, 0, (SAMPLE,))
    assert set(np.flatnonzero(np.isfinite(correct))) == {SAMPLE, V1, V2, V3, STOP}
    # STOP now selects candidate 0 (correct) having paid one sample.
    assert (correct[STOP], cost[STOP]) == (1.0, pytest.approx(GEN))
    # SAMPLE, V1 or V2 first: Strong then does the rest of its own episode, same calls in another order.
    for a in (SAMPLE, V1, V2):
        assert (correct[a], cost[a]) == (1.0, pytest.approx(strong_cost))
    # V3 first: Strong reads "one candidate routed" from the state, so it no longer expands past its warm-up
    # and routes the other warm-up candidate too (2 V3 calls in all), then stops.
    assert (correct[V3], cost[V3]) == (1.0, pytest.approx(strong_cost + 2 * CALL[V3]))


def test_collect_rows_are_differences_to_strongs_action(episode_env):
    """Round-0 rows: one per legal non-Strong action of every visited state, with the hand-worked differences."""
    rows = collect(episode_env, 0, StrongFromState())
    action = rows.x[:, -2 * N_ACTIONS:-N_ACTIONS].argmax(axis=1)
    strong = rows.x[:, -N_ACTIONS:].argmax(axis=1)
    assert (action != strong).all()
    # The state after one SAMPLE: STOP saves everything but the first sample and loses nothing (c0 is right).
    after_one = np.flatnonzero((strong == SAMPLE) & (action == STOP) & (rows.x[:, REVEALED] > 0))
    assert len(after_one) == 1
    assert rows.d_correct[after_one] == 0.0
    assert rows.d_cost[after_one] == pytest.approx(GEN - (2 * GEN + 2 * CALL[V1] + 2 * CALL[V2]))


def _paper_subset(per_dataset: int = 6):
    c = as_compiled("paper")
    keep = np.zeros(c.n_episodes, dtype=bool)
    for ds in dict.fromkeys(c.dataset.tolist()):
        keep[np.flatnonzero(c.dataset == ds)[:per_dataset]] = True
    return c.select(keep)


def test_strong_from_state_replays_coba_strong_on_the_paper_pool():
    """On Strong's own trajectory the state holds exactly Strong's memory: identical records on every episode."""
    pool = as_compiled("paper")
    records = run_policies(["coba_strong", StrongFromState()], pool, progress=False, workers=1).records
    a = records[records["policy"] == "coba_strong"].drop(columns="policy").reset_index(drop=True)
    b = records[records["policy"] != "coba_strong"].drop(columns="policy").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_rollout_with_tau_infinity_replays_as_coba_strong():
    """A fitted controller at tau = inf is Strong itself; at tau = 0 and lam = 1 it deviates somewhere."""
    pool = _paper_subset()
    method = RolloutMethod(lambdas=(1.0,), taus=(0.0,), dagger_rounds=1, dagger_episodes=8,
                           regressor={"epochs": 3})
    fitted = method.fit(pool, pool.episode_ids, budget=1e6, seed=0, out_dir=None, progress=False)
    inf_policy, zero_policy = fitted.policy({"lam": 0.0, "tau": math.inf}), fitted.policy({"lam": 1.0, "tau": 0.0})
    zero_policy.name = "rollout0"
    records = run_policies([make_policy("coba_strong"), inf_policy, zero_policy], pool, progress=False,
                           workers=1).records
    strong = records[records["policy"] == "coba_strong"].drop(columns="policy").reset_index(drop=True)
    same = records[records["policy"] == "rollout"].drop(columns="policy").reset_index(drop=True)
    pd.testing.assert_frame_equal(strong, same)
    moved = records[records["policy"] == "rollout0"].reset_index(drop=True)
    assert (moved["actions"] != strong["actions"]).any()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"budget": 0.0, "lam": 0.1, "tau": 0.0}, "budget > 0"),
    ({"budget": 1.0, "lam": -0.1, "tau": 0.0}, "lam >= 0"),
    ({"budget": 1.0, "lam": 0.1, "tau": math.nan}, "tau"),
])
def test_bad_controller_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RolloutController(None, max_output_tokens=1.0, **kwargs)


def _replay_both(policy_factory, pool, monkeypatch):
    """(one-episode records, batched records) of fresh policies, failing unless the batched path really ran."""
    from eval import runner

    single = runner.replay_policy(policy_factory(), pool, replay="single").records
    calls = []
    real = runner.replay_batched
    monkeypatch.setattr(runner, "replay_batched", lambda *a, **k: calls.append(1) or real(*a, **k))
    batched = runner.replay_policy(policy_factory(), pool, replay="batched", batch=61).records
    assert calls, "the batched replay did not run"
    return single, batched


def test_strong_from_state_replays_batched_as_one_episode_at_a_time(monkeypatch):
    pool = as_compiled("paper")
    single, batched = _replay_both(StrongFromState, pool, monkeypatch)
    assert len(batched) == pool.n_episodes
    pd.testing.assert_frame_equal(batched, single, check_exact=True)


@pytest.mark.parametrize("spec", ["tiny", "paper"])
def test_rollout_controller_replays_batched_as_one_episode_at_a_time(spec, monkeypatch):
    """Finite tau (deviating from Strong) and tau = inf: the batched records equal the one-episode ones."""
    pool = as_compiled(spec)
    fit_on = _paper_subset() if spec == "paper" else pool
    method = RolloutMethod(lambdas=(1.0,), taus=(0.0,), dagger_rounds=1, dagger_episodes=8,
                           regressor={"epochs": 3})
    fitted = method.fit(fit_on, fit_on.episode_ids, budget=1e6, seed=0, out_dir=None, progress=False)
    strong = run_policies(["coba_strong"], pool, progress=False, workers=1).records
    # The stacked forward pass differs from the per-state one in the last bit (~1e-16) on most rows; on these
    # pools no advantage lies that close to tau or to the runner-up, so the decisions and records are equal.
    for lam, tau in ((1.0, 0.0), (0.0, 0.0), (0.0, 0.03), (0.0, math.inf)):
        # A fresh prediction cache per replay: neither replay reads the other's predictions.
        def make(lam=lam, tau=tau):
            return RolloutController(fitted.model, budget=fitted.budget, lam=lam, tau=tau,
                                     max_output_tokens=fitted.max_output_tokens)

        single, batched = _replay_both(make, pool, monkeypatch)
        monkeypatch.undo()
        assert len(batched) == pool.n_episodes
        pd.testing.assert_frame_equal(batched, single, check_exact=True)
        deviates = (single["actions"] != strong["actions"]).any()
        assert deviates == (not math.isinf(tau)), (lam, tau)
