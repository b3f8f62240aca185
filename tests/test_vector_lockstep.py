"""The vector envs against one single env per row, step by step across autoresets, on the deep paths.

Actions lean towards SAMPLE so that rows reveal many slots: past the vector envs' 8-slot fusion band (the flat
path), past the count update's first slots, and on pools whose N (replay) or slot count S (route) sits on both
sides of the int8 / int64 switch of the counters (127). Every observation, reward, termination, mask, STOP
selection, correctness, final cost and fresh first observation must be the same bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from coba_env import CoBaEnv, compile_pool
from coba_env.vector_env import CoBaVectorEnv
from tests.conftest import make_synthetic_pool

GENERATORS = {"gA": 1.5, "gB": 7.0, "gC": 72.0}
NEGATIVE_WEIGHTS = {"rule": "fusion", "weights": {"f": -1.0, "V1": 0.5, "V2": 0.0, "V3": 1.0}}


def lockstep(route: bool, n_candidates: int, n_envs: int, n_steps: int, p_sample: float, **env_kwargs) -> int:
    """Step a vector env and ``n_envs`` single envs together; returns the deepest reveal any row reached."""
    pool = compile_pool(make_synthetic_pool({"d1": 3, "d2": 2}, GENERATORS, n_candidates=n_candidates, seed=0))
    grouping = "item" if route else "pair"
    venv = CoBaVectorEnv(n_envs, pool, grouping=grouping, **env_kwargs)
    obs_v, info_v = venv.reset(seed=1)
    envs = [CoBaEnv(pool, grouping=grouping, **env_kwargs) for _ in range(n_envs)]

    def restart(i: int) -> np.ndarray:
        obs, _ = envs[i].reset(options={"episode": int(info_v["episode"][i]), "lam": float(venv.lams[i])})
        return obs

    for i in range(n_envs):
        assert restart(i).tobytes() == obs_v[i].tobytes()
    rng = np.random.default_rng(1)
    n_gen, deepest = venv.layout.n_generators, 0
    for step in range(n_steps):
        actions = []
        for mask in info_v["action_mask"]:
            legal = np.flatnonzero(mask)
            samples = legal[legal < n_gen]
            pick = samples if len(samples) and rng.random() < p_sample else legal
            actions.append(int(rng.choice(pick)))
        deepest = max(deepest, int(venv.n.max()))
        obs_v, reward_v, term_v, _, info_v = venv.step(np.array(actions))
        for i, env in enumerate(envs):
            obs, reward, term, _, info = env.step(actions[i])
            where = (step, i)
            assert term == term_v[i], where
            expected = info_v["final_observation"][i] if term else obs_v[i]
            assert obs.tobytes() == expected.tobytes(), where
            assert np.float64(reward).tobytes() == np.float64(reward_v[i]).tobytes(), where
            if term:
                assert info["selected_candidate"] == info_v["selected_candidate"][i], where
                assert info["correct"] == info_v["correct"][i], where
                assert np.array(list(info["costs"].values())).tobytes() == info_v["final_costs"][i].tobytes(), where
                assert restart(i).tobytes() == obs_v[i].tobytes(), where
            else:
                assert np.array_equal(info["action_mask"], info_v["action_mask"][i]), where
                if route:  # the generator of each revealed slot, as the one-episode evidence keeps it
                    assert venv.slot_generator[:venv.n[i], i].tolist() == env.evidence.slot_generator, where
    return deepest


@pytest.mark.parametrize("route, n_candidates, env_kwargs, deep", [
    (False, 40, {}, 12),                                  # replay past the 8-slot fusion band
    (False, 40, {"selection": "majority"}, 12),
    (False, 40, {"selection": {"rule": "max_score", "tier": "V3"}}, 12),
    (False, 40, {"selection": NEGATIVE_WEIGHTS}, 12),     # weights <= 0: stale denominators are reset too
    (False, 126, {}, 30),                                 # int8 counters at their largest N
    (False, 130, {}, 30),                                 # int64 counters
    (True, 14, {}, 12),                                   # route, S = 42 slots
    (True, 14, {"selection": {"rule": "weighted_vote", "tier": "V1"}, "n_max": 5}, 9),
    (True, 43, {}, 30),                                   # route, S = 129: int64 slot candidates
])
def test_vector_env_equals_single_envs_on_deep_episodes(route, n_candidates, env_kwargs, deep):
    deepest = lockstep(route, n_candidates, n_envs=6, n_steps=120, p_sample=0.85, **env_kwargs)
    assert deepest >= deep  # the walk reached the paths it is here to check
