"""CoBaVectorEnv returns exactly what one CoBaEnv per episode returns for the same actions."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env import CoBaEnv, compile_pool
from coba_env.vector_env import CoBaVectorEnv
from tests.factory import Cand, Ep, build_pool


@pytest.fixture(scope="module")
def random_pool():
    """40 episodes x 8 candidates with 3 competing answers, missing answers, sparse V2 and some NaN V3."""
    rng = np.random.default_rng(0)
    eps = []
    for e in range(40):
        cands = []
        for j in range(8):
            answer = str(rng.integers(3)) if rng.random() > 0.15 else None
            scores = {"V1": float(rng.random()), "V3": float(rng.random()) if rng.random() > 0.2 else None}
            if j < 2:
                scores["V2"] = None if rng.random() < 0.5 else float(rng.random())
            cands.append(Cand(answer, answer == "0", output_tokens=int(rng.integers(100, 3000)),
                              cap_hit=answer is None, scores=scores))
        eps.append(Ep(cands, item_id=str(e), dataset="d1" if e % 2 else "d2"))
    return compile_pool(build_pool(eps))


@pytest.fixture(scope="module")
def role_swapped_pool(random_pool):
    """The same pool with V1 declared a reward model and V3 a cheap judge: weights and rule tiers move."""
    from dataclasses import replace

    return replace(random_pool, verifier_roles=("reward_model", "process_judge", "cheap_judge"))


@pytest.mark.parametrize("pool_name", ["random_pool", "role_swapped_pool"])
@pytest.mark.parametrize("selection", ["fusion", "majority", {"rule": "weighted_vote", "tier": "V1"},
                                       {"rule": "max_score", "tier": "V3"}, "last"])
def test_vector_env_equals_single_env(request, pool_name, selection):
    random_pool = request.getfixturevalue(pool_name)
    n_envs = random_pool.n_episodes
    rng = np.random.default_rng(1)
    venv = CoBaVectorEnv(n_envs, random_pool, lam=0.3, selection=selection, cost_model="tokens")
    obs_v, info_v = venv.reset(seed=0, options={"episodes": np.arange(n_envs)})
    envs = [CoBaEnv(random_pool, lam=0.3, selection=selection, cost_model="tokens") for _ in range(n_envs)]
    first = [env.reset(options={"episode": i}) for i, env in enumerate(envs)]
    assert np.array_equal(obs_v, np.stack([o for o, _ in first]))
    done = np.zeros(n_envs, dtype=bool)
    masks = info_v["action_mask"]
    compared = 0
    while not done.all():
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs_v, rew_v, term_v, trunc_v, info_v = venv.step(actions)
        for i in np.flatnonzero(~done):
            obs, rew, term, trunc, info = envs[i].step(int(actions[i]))
            expected_obs = info_v["final_observation"][i] if term_v[i] else obs_v[i]
            assert np.array_equal(obs, expected_obs), f"env {i}: observations differ"
            assert rew == rew_v[i] and term == term_v[i] and trunc == trunc_v[i]
            if term:
                assert info["selected_candidate"] == info_v["selected_candidate"][i]
                assert info["correct"] == info_v["correct"][i]
                assert np.array_equal(np.array(list(info["costs"].values())), info_v["final_costs"][i])
                done[i] = True
            else:
                assert np.array_equal(info["action_mask"], info_v["action_mask"][i])
            compared += 1
        masks = info_v["action_mask"]
    assert compared > 3 * n_envs


def test_vector_env_autoresets_and_rejects_illegal_actions(random_pool):
    venv = CoBaVectorEnv(4, random_pool)
    _, info = venv.reset(seed=0)
    assert info["episode"].tolist() == [0, 1, 2, 3]
    venv.step(np.zeros(4, dtype=int))
    _, reward, term, _, info = venv.step(np.full(4, 4))
    assert term.all() and info["episode"].tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match=r"sub-env 0: action 4 is not allowed now"):
        venv.step(np.full(4, 4))
