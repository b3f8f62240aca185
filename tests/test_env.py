"""CoBaEnv: every action on hand-built pools, masks at the edges, reward arithmetic per cost model, API checks."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import coba_env  # noqa: F401  (registers coba/Replay-v0)
from coba_env import CoBaEnv, compile_pool
from coba_env.rules.features import FEATURE_NAMES
from coba_env.splits import leave_one_dataset_out
from tests.factory import MODELS, Cand, Ep, build_pool

SAMPLE, V1, V2, V3, STOP = range(5)


def cand(answer, correct=False, v1=0.5, v3=0.5, v2="absent", **kw):
    scores = {"V1": v1, "V3": v3}
    if v2 != "absent":
        scores["V2"] = v2
    return Cand(answer, correct, scores=scores, **kw)


@pytest.fixture
def pool():
    """Two episodes, N = 4. Episode 0: answers 7, 8, 8, 7 (7 correct). Episode 1: no answer, 5, 5, 6."""
    return build_pool([
        Ep([cand("7", True, v1=0.9, v3=0.8, v2=0.6, prompt_tokens=100, output_tokens=900, latency_s=12.0),
            cand("8", v1=0.2, v3=0.1, v2=None, prompt_tokens=100, output_tokens=1900, latency_s=20.0),
            cand("8", v1=0.3, v3=0.2), cand("7", True, v1=0.8, v3=0.9)], dataset="a", item_id="x"),
        Ep([cand(None, cap_hit=True, output_tokens=4000), cand("5", True, v1=0.7), cand("5", True, v1=0.6),
            cand("6")], dataset="b", item_id="y"),
    ])


def test_sample_reveals_candidates_in_order_and_stop_selects_by_fusion(pool):
    env = CoBaEnv(pool, lam=0.0)
    obs, info = env.reset(options={"episode": 0})
    assert obs[FEATURE_NAMES.index("revealed_frac")] == 0
    assert info["action_mask"].tolist() == [1, 0, 0, 0, 0]  # STOP is illegal before the first sample
    env.step(SAMPLE)
    obs, *_ = env.step(SAMPLE)
    # Two candidates, answers 7 and 8: the tie goes to the first answer seen.
    assert obs[FEATURE_NAMES.index("top_answer_share")] == pytest.approx(0.5)
    assert obs[FEATURE_NAMES.index("distinct_answers_frac")] == pytest.approx(2 / 4)
    assert obs[FEATURE_NAMES.index("answer_entropy")] == pytest.approx(math.log(2) / math.log(4))
    obs, reward, terminated, truncated, info = env.step(STOP)
    assert terminated and not truncated
    assert info["selected_candidate"] == 0 and info["selected_answer"] == "7" and info["correct"]
    assert reward == 1.0
    assert info["actions"] == ["SAMPLE", "SAMPLE", "STOP"]


def test_verify_targets_best_fusion_rank_and_reveals_score(pool):
    env = CoBaEnv(pool, lam=0.0)
    env.reset(options={"episode": 0})
    for _ in range(3):
        env.step(SAMPLE)  # answers 7, 8, 8: f = 1/3, 2/3, 2/3
    # Before any score, R = f: candidates 1 and 2 tie at 2/3, the earliest (1) is the V1 target.
    assert env.verify_target(0) == 1
    env.step(V1)
    assert env.evidence.scores[1][0] == pytest.approx(0.2)
    # Now R(1) = (.2 * 2/3 + .3 * .2) / .5 = 0.3867; R(2) = 2/3 unscored; R(0) = 1/3 -> target 2.
    assert env.verify_target(0) == 2
    env.step(V1)
    # R(0) = 1/3 (f only) is the last one left at V1.
    assert env.verify_target(0) == 0
    _, _, _, _, info = env.step(V1)
    assert info["action_mask"][V1] == 0  # nothing left to verify at V1
    # V2: the pool holds V2 rows for candidates 0 and 1 only; candidate 1's V2 call gives no usable score.
    # R(0) = (.2/3 + .3*.9)/.5 = 0.6733 > R(2) = (.2*2/3 + .3*.3)/.5 = 0.4467 > R(1) -> V2 goes to 0.
    assert env.verify_target(1) == 0
    env.step(V2)
    env.step(V2)
    assert math.isnan(env.evidence.scores[1][1])
    obs, reward, terminated, _, info = env.step(STOP)
    # Final R: c0 = (.2/3 + .3*.9 + .15*.6)/.65 = 0.6564; c1 = (.2*2/3 + .3*.2)/.5 = 0.3867 (V2 NaN dropped);
    # c2 = (.2*2/3 + .3*.3)/.5 = 0.4467 -> selects candidate 0 (answer 7, correct).
    assert info["selected_candidate"] == 0 and info["correct"]
    assert obs[FEATURE_NAMES.index("top_fusion_score")] == pytest.approx((0.2 / 3 + 0.27 + 0.09) / 0.65, rel=1e-6)
    assert [s["action"] for s in info["trace"]] == ["SAMPLE"] * 3 + ["VERIFY_V1"] * 3 + ["VERIFY_V2"] * 2 + ["STOP"]
    assert info["trace"][4]["evidence"] == {"tier": "V1", "score": 0.3}
    assert info["trace"][7]["evidence"]["score"] is None


def test_strong_verifier_can_overturn_the_majority(pool):
    env = CoBaEnv(pool, lam=0.0)
    env.reset(options={"episode": 0})
    for _ in range(3):
        env.step(SAMPLE)
    for _ in range(3):
        env.step(V3)  # V3: c0 .8, c1 .1, c2 .2
    _, reward, _, _, info = env.step(STOP)
    # R(0) = (.2/3 + .45*.8)/.65 = 0.6564; R(1) = (.4/3 + .045)/.65 = 0.2744; R(2) = (.4/3 + .09)/.65 = 0.3436
    assert info["selected_candidate"] == 0 and reward == 1.0


def test_no_answer_candidates_are_never_selected(pool):
    env = CoBaEnv(pool, lam=0.0)
    env.reset(options={"episode": 1})
    env.step(SAMPLE)  # cap hit, no answer
    _, reward, _, _, info = env.step(STOP)
    assert info["selected_candidate"] == -1 and info["selected_answer"] is None and reward == 0.0
    env.reset(options={"episode": 1})
    obs, *_ = env.step(SAMPLE)
    assert obs[FEATURE_NAMES.index("no_answer_share")] == 1.0
    assert obs[FEATURE_NAMES.index("cap_hit_share")] == 1.0
    env.step(SAMPLE)
    _, reward, _, _, info = env.step(STOP)
    assert info["selected_candidate"] == 1 and reward == 1.0


@pytest.mark.parametrize("cost_model, c0_cost, v1_cost", [
    ("tokens", 100 + 900, 50 + 5),
    ("p_tokens", (100 + 900) * MODELS["G"], (50 + 5) * MODELS["J1"]),
    ("calls", 1, 1),
    ("latency", 12.0, 1.0),
])
def test_reward_arithmetic_per_cost_model(pool, cost_model, c0_cost, v1_cost):
    budget, lam = 1000.0, 0.5
    env = CoBaEnv(pool, lam=lam, budget=budget, cost_model=cost_model)
    env.reset(options={"episode": 0})
    _, r1, *_ = env.step(SAMPLE)
    _, r2, *_ = env.step(V1)
    _, r3, _, _, info = env.step(STOP)
    assert r1 == pytest.approx(-lam * c0_cost / budget)
    assert r2 == pytest.approx(-lam * v1_cost / budget)
    assert r3 == pytest.approx(1.0)  # candidate 0 is correct
    assert r1 + r2 + r3 == pytest.approx(1.0 - lam * (c0_cost + v1_cost) / budget)
    # Every cost measure is accumulated whatever the cost model (usd is 0: this pool has no prices).
    assert info["costs"] == pytest.approx({"tokens": 1055, "p_tokens": 1000 * MODELS["G"] + 55 * MODELS["J1"],
                                           "calls": 2, "latency": 13.0, "usd": 0.0})


def test_default_budget_is_mean_cost_of_n_max_samples(pool):
    env = CoBaEnv(pool, cost_model="calls", n_max=3)
    assert env.budget == 3.0
    env = CoBaEnv(pool, cost_model="tokens")
    ep0 = 1000 + 2000 + 1100 + 1100
    ep1 = 4100 + 1100 * 3
    assert env.budget == pytest.approx((ep0 + ep1) / 2)


def test_masks_at_the_edges(pool):
    env = CoBaEnv(pool, n_max=2, tiers=("V1",))
    _, info = env.reset(options={"episode": 0})
    env.step(SAMPLE)
    _, _, _, _, info = env.step(SAMPLE)
    # N_max reached: no SAMPLE; V2/V3 disabled by `tiers`; V1 pending for two candidates.
    assert info["action_mask"].tolist() == [0, 1, 0, 0, 1]
    env.step(V1)
    _, _, _, _, info = env.step(V1)
    assert info["action_mask"].tolist() == [0, 0, 0, 0, 1]  # nothing left to verify
    # Pool exhausted (N = 4).
    env = CoBaEnv(pool)
    env.reset(options={"episode": 1})
    for _ in range(4):
        _, _, _, _, info = env.step(SAMPLE)
    assert info["action_mask"][SAMPLE] == 0
    # Hard budget spent: only STOP.
    env = CoBaEnv(pool, cost_model="calls", max_cost=2)
    env.reset(options={"episode": 0})
    env.step(SAMPLE)
    _, _, _, _, info = env.step(V1)
    assert info["action_mask"].tolist() == [0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match=r"hard budget max_cost=2 \(calls\) is spent"):
        env.step(SAMPLE)


@pytest.mark.parametrize("setup, action, match", [
    ([], STOP, r"action 4 \(STOP\) is not allowed now: no candidate has been revealed"),
    ([], V1, r"action 1 \(VERIFY_V1\) is not allowed now: no revealed candidate is left to verify at V1"),
    ([SAMPLE, SAMPLE, SAMPLE, SAMPLE], SAMPLE, r"action 0 \(SAMPLE\) is not allowed now: N_max=4"),
    ([SAMPLE], 7, r"action 7 is outside the action space 0\.\.4"),
])
def test_illegal_actions_raise_clear_errors(pool, setup, action, match):
    env = CoBaEnv(pool)
    env.reset(options={"episode": 0})
    for a in setup:
        env.step(a)
    with pytest.raises(ValueError, match=match):
        env.step(action)


def test_tier_absent_from_pool_is_masked_with_reason():
    pool = build_pool([Ep([Cand("1", True, scores={"V1": 0.5}), Cand("2", scores={"V1": 0.4})])])
    env = CoBaEnv(pool)
    assert env.enabled_tiers == ("V1",)
    env.reset()
    env.step(SAMPLE)
    with pytest.raises(ValueError, match="tier V3 is disabled or absent from the pool"):
        env.step(V3)


def test_step_after_episode_end_raises(pool):
    env = CoBaEnv(pool)
    env.reset()
    env.step(SAMPLE)
    env.step(STOP)
    with pytest.raises(RuntimeError, match=r"step\(\) called after the episode ended"):
        env.step(SAMPLE)


@pytest.mark.parametrize("value", [0.1, 1 / 3, -0.0, 1e-46, 3.4028235e38, 3.4028236e38, 1e300, math.inf, math.nan])
def test_observation_float32_cast_is_numpys(value):
    """The step's float32 packing of its feature list gives numpy's own cast, bit for bit (overflow -> inf)."""
    env = CoBaEnv("tiny")
    features = [value] * env.features.n_features
    with np.errstate(over="ignore"):
        expected = np.array(features, dtype=np.float64).astype(np.float32)
    got = env._as_observation(features)
    assert got.dtype == np.float32 and got.flags.writeable and got.flags.owndata
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("env_id", ["coba/Replay-v0", "coba/Route-v0"])
def test_gym_make_env_enforces_reset_before_step_itself(env_id):
    """gymnasium.make adds no OrderEnforcing wrapper (a call per step): the env itself refuses a step before reset."""
    env = gym.make(env_id, pool="tiny")
    assert not isinstance(env, gym.Wrapper)
    assert env.render() is None
    with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\); call reset\(\) first"):
        env.step(0)
    with pytest.raises(gym.error.ResetNeeded):  # what gymnasium's OrderEnforcing wrapper raised
        env.step(0)
    env.reset(seed=0)
    env.step(0)  # a SAMPLE is legal at the start of every episode


@pytest.mark.parametrize("env_id", ["coba/Replay-v0", "coba/Route-v0"])
def test_a_pickled_env_steps_as_the_original(env_id):
    """An env sent to another process (pickled mid-episode) returns the same bytes as the one that stayed."""
    import pickle

    env = gym.make(env_id, pool="tiny")
    env.reset(seed=0)
    env.step(0)
    twin = pickle.loads(pickle.dumps(env))
    for action in (0, env.unwrapped.layout.stop_action):
        outs = [e.step(action) for e in (env, twin)]
        assert outs[0][0].tobytes() == outs[1][0].tobytes() and outs[0][1:4] == outs[1][1:4]
        assert outs[0][4]["action_mask"].tolist() == outs[1][4]["action_mask"].tolist()
    assert outs[0][4]["costs"] == outs[1][4]["costs"] and outs[0][4]["actions"] == outs[1][4]["actions"]


@pytest.mark.parametrize("kwargs, match", [
    ({"cost_model": "dollars"}, "unknown cost model 'dollars'"),
    ({"n_max": 9}, r"n_max must be in 1\.\.4"),
    ({"datasets": ["zzz"]}, r"unknown dataset\(s\) \['zzz'\]"),
    ({"tiers": ("V9",)}, r"unknown tier\(s\) \['V9'\]"),
    ({"order": "backwards"}, "unknown episode order 'backwards'"),
    ({"lambda_range": (0.5, 0.1)}, "lambda_range must be"),
    ({"selection": "coin_flip"}, "unknown selection rule 'coin_flip'"),
])
def test_bad_arguments(pool, kwargs, match):
    with pytest.raises(ValueError, match=match):
        CoBaEnv(pool, **kwargs)


def test_episode_subsets_and_order(pool):
    env = CoBaEnv(pool, datasets=["b"])
    assert env.n_episodes == 1
    _, info = env.reset()
    env.step(SAMPLE)
    *_, info = env.step(STOP)
    assert info["dataset"] == "b" and info["item_id"] == "y"
    env = CoBaEnv(pool, order="sequential")
    seen = [env.reset()[1]["episode"] for _ in range(4)]
    assert seen == [0, 1, 0, 1]
    env = CoBaEnv(pool, order="shuffle")
    env.reset(seed=3)
    firsts = [env.reset()[1]["episode"] for _ in range(3)]
    assert sorted(firsts[:1] + [env.reset()[1]["episode"]]) in ([0, 1], [0, 0], [1, 1])  # a pass is a permutation
    del firsts


def test_lambda_conditioning_draws_per_episode_and_is_observed(pool):
    env = CoBaEnv(pool, lambda_range=(0.1, 0.9))
    lams = []
    for i in range(20):
        obs, _ = env.reset(seed=i if i == 0 else None)
        lams.append(float(obs[FEATURE_NAMES.index("lambda")]))
    assert all(0.1 <= v <= 0.9 for v in lams) and len(set(lams)) > 10


def test_gymnasium_and_sb3_env_checkers_pass(pool):
    gym_check_env(CoBaEnv(pool))
    sb3_check_env(CoBaEnv(pool), warn=True)


def test_gymnasium_make_registered_id(pool):
    env = gym.make("coba/Replay-v0", pool=pool, lam=0.2)
    obs, info = env.reset(seed=0)
    assert obs.shape == (len(FEATURE_NAMES),) and obs.dtype == np.float32
    assert env.unwrapped.action_masks().tolist() == [True, False, False, False, False]


def test_label_permutation_changes_accuracy_not_observations(pool):
    compiled = compile_pool(pool)
    flipped = dataclasses.replace(compiled, labels=dataclasses.replace(
        compiled.labels, correct=~compiled.labels.correct, gold_cluster=compiled.labels.gold_cluster[::-1].copy()),
        _episode_rows=None)
    actions = [SAMPLE, SAMPLE, V1, V3, SAMPLE, V1, STOP]
    runs = []
    for p in (compiled, flipped):
        env = CoBaEnv(p)
        obs, info = env.reset(options={"episode": 0})
        seen, total = [obs], 0.0
        for a in actions:
            obs, r, _, _, info = env.step(a)
            seen.append(obs)
            total += r
        runs.append((np.stack(seen), info["correct"], info["selected_candidate"]))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert runs[0][2] == runs[1][2]
    assert runs[0][1] != runs[1][1]


def test_leave_one_dataset_out(pool):
    splits = leave_one_dataset_out(compile_pool(pool))
    assert [s.held_out for s in splits] == ["a", "b"]
    assert splits[0].eval_episode_ids.tolist() == [0] and splits[0].train_episode_ids.tolist() == [1]


@pytest.mark.parametrize("selection", ["fusion", "majority"])
def test_incremental_observation_equals_a_rebuild_from_the_evidence(selection):
    """step() patches the observation in place; rebuilding it from the evidence always gives the same vector."""
    from pools.default import resolve_pool

    env = CoBaEnv(compile_pool(resolve_pool("tiny")), lam=0.2, selection=selection, order="shuffle")
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=1)
    for _ in range(3000):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, _, done, _, info = env.step(action)
        if done:
            obs, info = env.reset()
        else:
            np.testing.assert_array_equal(obs, env._observation().astype(np.float32))


#: Dollars per million tokens of every model of the hand-made pool (prices_usd_per_million_tokens).
HAND_PRICES = {"G": {"input": 2.0, "output": 10.0}, "J1": {"input": 1.0, "output": 3.0},
               "J2": {"input": 1.0, "output": 3.0}, "J3": {"input": 5.0, "output": 5.0}}


@pytest.mark.parametrize("cost_model", ["usd", "tokens"])
def test_usd_is_accumulated_in_the_one_episode_env(pool, cost_model):
    pool.manifest["prices_usd_per_million_tokens"] = HAND_PRICES
    budget, lam = 0.01, 0.5
    env = CoBaEnv(pool, lam=lam, budget=budget, cost_model=cost_model)
    env.reset(options={"episode": 0})
    _, r1, *_ = env.step(SAMPLE)  # G: 100 prompt tokens at $2/M + 900 output at $10/M = $0.0092
    _, r2, *_ = env.step(V1)  # J1: 50 at $1/M + 5 at $3/M = $0.000065
    *_, info = env.step(STOP)
    assert info["costs"]["usd"] == pytest.approx(0.0092 + 0.000065)
    if cost_model == "usd":
        assert (r1, r2) == pytest.approx((-lam * 0.0092 / budget, -lam * 0.000065 / budget))
