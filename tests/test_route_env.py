"""coba/Route-v0: one episode per problem, one SAMPLE per generator, answers clustered across generators."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest

import coba_env  # noqa: F401  (registers the envs)
from coba_env import CoBaEnv, compile_pool
from coba_env.route_pool import compile_route_pool
from coba_env.vector_env import CoBaVectorEnv
from tests.factory import Cand, Ep, build_pool

MODELS = {"small": 1.0, "big": 10.0, "J1": 2.0, "J2": 4.0, "J3": 20.0}


def two_generator_pool():
    """One problem, two generators with two candidates each; the correct answer written two ways.

    small: "0.5" (correct, V1 0.2), "7" (V1 0.9); 50 + 50 tokens each, 1B parameters -> 100 p_tokens.
    big:   "\\frac{1}{2}" (correct, V1 0.8), "7" (V1 0.6); 100 + 100 tokens each, 10B -> 2000 p_tokens.
    A V1 call (judge J1, 2B) costs 50 + 5 tokens -> 110 p_tokens.
    """
    small = [Cand("0.5", True, prompt_tokens=50, output_tokens=50, scores={"V1": 0.2}),
             Cand("7", False, prompt_tokens=50, output_tokens=50, scores={"V1": 0.9})]
    big = [Cand("\\frac{1}{2}", True, prompt_tokens=100, output_tokens=100, scores={"V1": 0.8}),
           Cand("7", False, prompt_tokens=100, output_tokens=100, scores={"V1": 0.6})]
    return build_pool([Ep(small, generator="small", gold="1/2"), Ep(big, generator="big", gold="1/2")],
                      models=MODELS)


def test_route_pool_joins_clusters_across_generators_with_the_grading_code():
    route = compile_route_pool(compile_pool(two_generator_pool()))
    assert route.generators == ("small", "big")
    assert route.generator_params == (1.0, 10.0)
    # Slots generator-major: small 0.5, small 7, big \frac{1}{2}, big 7. 0.5 and 1/2 are one answer.
    assert route.pool.cluster.tolist() == [[0, 1, 0, 1]]
    assert route.pool.gen_cost[0, :, 1].tolist() == [100.0, 100.0, 2000.0, 2000.0]
    assert route.pool.labels.gold_cluster.tolist() == [0]


def test_hand_worked_two_generator_episode():
    env = CoBaEnv(two_generator_pool(), grouping="item", budget=1000.0, lam=0.1)
    lay = env.layout
    assert lay.names == ("SAMPLE_small", "SAMPLE_big", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP")
    assert [lay.action_id(n) for n in lay.names] == [0, 1, 2, 3, 4, 5]
    _, info = env.reset(seed=0)
    # Nothing revealed: only the two SAMPLEs.
    assert info["action_mask"].tolist() == [1, 1, 0, 0, 0, 0]
    rewards = []
    for name in ("SAMPLE_big", "SAMPLE_small", "SAMPLE_small"):
        _, r, _, _, info = env.step(lay.action_id(name))
        rewards.append(r)
    # small has no candidate left; V1 calls are held for the revealed answers; V2/V3 hold none.
    assert info["action_mask"].tolist() == [0, 1, 1, 0, 0, 1]
    ev = env.evidence
    assert ev.clusters == [0, 0, 1]  # big's 1/2 and small's 0.5 share a cluster
    assert ev.gen_revealed == [2, 1]
    assert ev.agreement(0) == 0.5 and ev.agreement(1) == 1.0
    # Fusion R before any score is the answer share: 2/3, 2/3, 1/3; VERIFY_V1 takes the earliest top one.
    _, r, _, _, _ = env.step(lay.action_id("VERIFY_V1"))
    rewards.append(r)
    assert ev.scores[0][0] == 0.8  # slot 0 = big's \frac{1}{2}
    _, r, _, _, _ = env.step(lay.action_id("VERIFY_V1"))
    rewards.append(r)
    assert ev.scores[1][0] == 0.2  # slot 1 = small's 0.5 (R 2/3 beats the 7's 1/3)
    assert ev.score_mean(0, 0) == 0.2 and ev.score_mean(1, 0) == 0.8
    # R = (0.2 * 2/3 + 0.3 * s1) / 0.5: slot 0 0.7467, slot 1 0.3867, slot 2 (7, no score) 1/3.
    _, r, terminated, _, info = env.step(lay.action_id("STOP"))
    assert terminated
    assert info["selected_candidate"] == 0 and info["selected_generator"] == "big"
    assert info["selected_answer"] == "\\frac{1}{2}" and info["correct"] is True
    assert info["costs"]["p_tokens"] == 2000 + 100 + 100 + 110 + 110
    assert info["samples_by_generator"] == {"small": 2, "big": 1}
    assert info["spend_by_generator"]["small"]["p_tokens"] == 200.0
    assert info["spend_by_generator"]["big"]["p_tokens"] == 2000.0
    assert [step["action"] for step in info["trace"]] == ["SAMPLE_big", "SAMPLE_small", "SAMPLE_small",
                                                          "VERIFY_V1", "VERIFY_V1", "STOP"]
    assert info["trace"][0]["evidence"]["generator"] == "big"
    # The trace reads each slot's pool candidate: slot 0 big's 1/2, slots 1-2 small's 0.5 and 7.
    assert [step["evidence"].get("answer") for step in info["trace"][:3]] == ["\\frac{1}{2}", "0.5", "7"]
    assert [step["evidence"]["generator"] for step in info["trace"][:3]] == ["big", "small", "small"]
    assert [(step["candidate"], step["evidence"]["score"], step["cost"]["p_tokens"])
            for step in info["trace"][3:5]] == [(0, 0.8, 110.0), (1, 0.2, 110.0)]
    assert info["trace"][5]["evidence"] == {"selected_candidate": 0}
    rewards_by_trace = [-0.1 * step["cost"]["p_tokens"] / 1000.0 for step in info["trace"][:5]]
    assert rewards == pytest.approx(rewards_by_trace)
    assert rewards == pytest.approx([-0.2, -0.01, -0.01, -0.011, -0.011])
    assert r == 1.0
    assert sum(rewards) + r == pytest.approx(1 - 0.1 * 2420 / 1000)


def test_a_generator_never_sampled_spent_nothing():
    """The final info names every generator; one never sampled has a zero record of its own every episode."""
    env = CoBaEnv(two_generator_pool(), grouping="item", budget=1000.0, lam=0.1)
    spends = []
    for _ in range(2):
        env.reset()
        env.step(env.layout.action_id("SAMPLE_small"))
        _, _, _, _, info = env.step(env.layout.stop_action)
        assert info["samples_by_generator"] == {"small": 1, "big": 0}
        assert info["spend_by_generator"]["big"] == {"tokens": 0.0, "p_tokens": 0.0, "calls": 0.0, "latency": 0.0,
                                                     "usd": 0.0}
        assert info["spend_by_generator"]["small"]["p_tokens"] == 100.0
        spends.append(info["spend_by_generator"]["big"])
    spends[0]["p_tokens"] = 1.0  # a caller's edit of one episode's record reaches no other
    assert spends[1]["p_tokens"] == 0.0


def test_route_observation_table_comes_from_the_layout():
    env = CoBaEnv(two_generator_pool(), grouping="item", budget=1000.0)
    names = env.feature_names
    assert names[:7] == ("revealed_small", "remaining_small", "agreement_small", "mean_V1_small", "mean_V2_small",
                         "mean_V3_small", "spend_small")
    assert names[7] == "revealed_big" and names[14] == "revealed_frac"
    obs, _ = env.reset(seed=0)
    assert obs.shape == (len(names),) == env.observation_space.shape
    assert obs[names.index("remaining_small")] == 1.0 and obs[env.lambda_index] == np.float32(0.1)
    obs, *_ = env.step(env.layout.action_id("SAMPLE_big"))
    assert obs[names.index("revealed_big")] == 0.5 and obs[names.index("spend_big")] == 2.0
    assert obs[names.index("revealed_frac")] == 0.25  # 1 of G * N_max = 4


def test_gymnasium_make_and_make_vec_build_the_route_envs():
    pool = two_generator_pool()
    env = gym.make("coba/Route-v0", pool=pool, budget=1000.0)
    assert isinstance(env.unwrapped, CoBaEnv) and env.unwrapped.config.grouping == "item"
    venv = gym.make_vec("coba/Route-v0", num_envs=3, vectorization_mode="vector_entry_point", pool=pool)
    assert isinstance(venv.unwrapped, CoBaVectorEnv) and venv.unwrapped.config.grouping == "item"
    assert venv.single_action_space.n == 6


def lockstep_hashes(pool, num_envs: int, n_steps: int, seed: int, **kw) -> tuple[str, str, int]:
    """(hash of the vector env's outputs, hash of the one-episode envs' outputs, episodes finished).

    Each vector row is mirrored by a ``CoBaEnv`` (item grouping) playing the same episodes (the vector env's ``episode`` info
    says which) with the same uniform random legal actions; every observation, mask, reward, selection and
    cost goes into the hashes.
    """
    rng = np.random.default_rng(seed)
    venv = CoBaVectorEnv(num_envs, pool, grouping="item", **kw)
    obs_v, info_v = venv.reset(seed=seed)
    singles = [CoBaEnv(pool, grouping="item", **kw) for _ in range(num_envs)]
    _ = [env.reset(options={"episode": int(e)})[0] for env, e in zip(singles, info_v["episode"], strict=True)]
    hv, hs = hashlib.sha256(), hashlib.sha256()
    mask = info_v["action_mask"]
    finished = 0
    for _ in range(n_steps):
        u = rng.random(num_envs)
        a = np.array([np.flatnonzero(mask[i])[int(u[i] * mask[i].sum())] for i in range(num_envs)])
        obs_v, r_v, term_v, _, info_v = venv.step(a)
        for i, env in enumerate(singles):
            o, r, term, _, info = env.step(int(a[i]))
            assert term == term_v[i]
            final_v = info_v["final_observation"][i] if term else obs_v[i]
            hv.update(final_v.tobytes() + repr(float(r_v[i])).encode())
            hs.update(o.tobytes() + repr(float(r)).encode())
            if term:
                finished += 1
                costs = info["costs"]
                hs.update(repr((info["selected_candidate"], [costs[m] for m in costs])).encode())
                hv.update(repr((int(info_v["selected_candidate"][i]),
                                [float(x) for x in info_v["final_costs"][i]])).encode())
                o, info = env.reset(options={"episode": int(info_v["episode"][i])})
                hs.update(o.tobytes())
                hv.update(obs_v[i].tobytes())
            hs.update(info["action_mask"].tobytes())
            hv.update(info_v["action_mask"][i].tobytes())
        mask = info_v["action_mask"]
    return hv.hexdigest(), hs.hexdigest(), finished


@pytest.mark.parametrize("kw", [{}, {"n_max": 3, "lam": 0.5}, {"selection": "majority"},
                                {"selection": {"rule": "max_score", "tier": "V3"}}, {"tiers": ["V1"]},
                                {"max_cost": 30000.0, "cost_model": "tokens"}], ids=str)
def test_vector_route_env_equals_the_single_one(kw):
    from tests.conftest import make_synthetic_pool

    pool = make_synthetic_pool({"d1": 6, "d2": 5}, {"gA": 1.5, "gB": 7.0, "gC": 72.0}, n_candidates=5, seed=3)
    vector, single, finished = lockstep_hashes(pool, num_envs=7, n_steps=60, seed=1, **kw)
    assert finished > 20
    assert vector == single


ROUTING = ["route_cheapest_coba", "route_largest_coba"]


@pytest.mark.parametrize("name", ROUTING)
def test_routing_policies_batched_equal_single_on_the_paper_pool(name):
    from agents.registry import make_policy
    from agents.runner import replay
    from coba_env.compiled import as_compiled
    from eval.batched_replay import replay_batched

    paper = as_compiled("paper")
    policy = make_policy(name)
    env = CoBaEnv(paper, grouping="item", **policy.env_kwargs())
    assert env.route.n_generators == 3 and env.route.available.all()  # the paper pool: 3 generators per problem
    single = replay(policy, env)
    venv = CoBaVectorEnv(997, paper, grouping="item", **policy.env_kwargs())  # rows refill mid-run: 997 does not divide E
    batched = replay_batched(make_policy(name), venv)
    assert_batched_equals_single(single, batched, env.layout.names)
    # Every SAMPLE draws from the one chosen generator (by parameters: label-free).
    params = env.route.generator_params
    chosen = int(np.argmin(params)) if name == "route_cheapest_coba" else int(np.argmax(params))
    assert {a for r in single for a in r["action_ids"] if env.layout.is_sample(a)} == {chosen}


@pytest.mark.parametrize("n_verifiers", [0, 1, 5, 6])
def test_vector_route_env_equals_the_single_one_with_any_number_of_verifiers(n_verifiers):
    """3 generators and V verifiers: the generator block is 3 * (4 + V) wide, not always a multiple of 7."""
    from tests.test_many_generators import pool_with_verifiers

    pool = pool_with_verifiers(3, n_verifiers)
    venv = gym.make_vec("coba/Route-v0", num_envs=2, vectorization_mode="vector_entry_point", pool=pool)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (2, CoBaEnv(pool, grouping="item").observation_space.shape[0])
    vector, single, finished = lockstep_hashes(pool, num_envs=5, n_steps=60, seed=2)
    assert finished > 10
    assert vector == single


def assert_batched_equals_single(single: list[dict], batched: dict, names: tuple[str, ...]) -> None:
    """The batched replay's actions, selections, correctness and costs equal the one-episode replay's records."""
    assert [[names[a] for a in r["action_ids"]] for r in single] == \
        [[names[a] for a in row if a >= 0] for row in batched["actions"].tolist()]
    assert [r["selected_candidate"] for r in single] == batched["selected_candidate"].tolist()
    assert [r["correct"] for r in single] == batched["correct"].tolist()
    assert np.array_equal(np.array([list(r["costs"].values()) for r in single]), batched["costs"])
