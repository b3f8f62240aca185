"""The env inside its own spaces (issue 39): every observation inside ``observation_space``, settings bounded so that
no inf or NaN reaches an observation, and the vector env refusing a step before reset as the single env does.

Before: ``answer_entropy`` came out about -1e-16 (below its declared bound 0) whenever every revealed answer agreed,
so ``observation_space.contains(obs)`` was False on ordinary episodes of Replay-v0, Route-v0 and the route vector
env; ``budget=1e-300`` was accepted and put inf into ``budget_used``; ``CoBaVectorEnv.step`` before ``reset``
raised ``AttributeError: '_mask'``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import coba_env  # noqa: F401  (registers the envs)
from coba_env import compile_pool
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool
from tests.conftest import make_synthetic_pool

#: Random legal steps per walk (a vector env's: sub-env steps, ``VECTOR_ENVS`` per step of the batch).
STEPS = 10_000
VECTOR_ENVS = 4


def _pools() -> dict[str, object]:
    """Three pools of different shapes: the tiny and ladder simulator pools (several generators, the paper's
    verifiers) and a synthetic pool with three generators and verifiers of its own names and roles."""
    verifiers = {"judge-s": ("Judge-1.5B", 1.5, "cheap_judge"), "rm": ("RM-72B", 72.0, "reward_model")}
    synthetic = make_synthetic_pool({"d1": 6, "d2": 5}, {"a-1.5B": 1.5, "b-7B": 7.0, "c-72B": 72.0}, n_candidates=8,
                                    seed=3, verifiers=verifiers)
    return {"tiny": compile_pool(resolve_pool("tiny")), "ladder": compile_pool(resolve_pool("ladder")),
            "synthetic-named-verifiers": compile_pool(synthetic)}


POOLS = _pools()


def _legal(mask: np.ndarray, rng: np.random.Generator) -> int:
    legal = np.flatnonzero(mask)
    return int(legal[int(rng.random() * len(legal))])


def _legal_rows(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly drawn legal action per row of ``masks`` [B, A]."""
    pick = (rng.random(len(masks)) * masks.sum(axis=1)).astype(np.int64)
    return np.argmax(np.cumsum(masks > 0, axis=1) > pick[:, None], axis=1)


@pytest.mark.parametrize("pool_name", list(POOLS))
@pytest.mark.parametrize("env_id", ["coba/Replay-v0", "coba/Route-v0"])
def test_every_observation_of_a_random_walk_is_inside_the_observation_space(pool_name, env_id):
    env = gym.make(env_id, pool=POOLS[pool_name], lambda_range=(0.0, 2.0)).unwrapped
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs), obs
    outside = 0
    for _ in range(STEPS):
        obs, _, terminated, _, info = env.step(_legal(info["action_mask"], rng))
        outside += not env.observation_space.contains(obs)
        if terminated:
            obs, info = env.reset()
            outside += not env.observation_space.contains(obs)
    assert outside == 0, f"{outside} observations outside the observation space"


@pytest.mark.parametrize("pool_name", list(POOLS))
@pytest.mark.parametrize("grouping", ["pair", "item"])
def test_every_observation_of_a_vector_walk_is_inside_the_observation_space(pool_name, grouping):
    venv = CoBaVectorEnv(VECTOR_ENVS, POOLS[pool_name], grouping=grouping, lambda_range=(0.0, 2.0), order="shuffle")
    rng = np.random.default_rng(1)
    obs, info = venv.reset(seed=1)
    outside = int(not venv.observation_space.contains(obs))
    for _ in range(STEPS // VECTOR_ENVS):
        obs, _, _, _, info = venv.step(_legal_rows(info["action_mask"], rng))
        outside += not venv.observation_space.contains(obs)
    assert outside == 0, f"{outside} batches with an observation outside the observation space"


@pytest.mark.parametrize("pool_name", list(POOLS))
def test_gymnasium_and_sb3_env_checkers_pass_on_the_route_env(pool_name):
    gym_check_env(CoBaEnv(POOLS[pool_name], grouping="item"))
    sb3_check_env(CoBaEnv(POOLS[pool_name], grouping="item"), warn=True)


@pytest.mark.parametrize("make", [
    lambda pool: CoBaEnv(pool, budget=1e-300),
    lambda pool: CoBaEnv(pool, budget=1e-300, grouping="item"),
    lambda pool: gym.make("coba/Route-v0", pool=pool, budget=1e-300),
    lambda pool: CoBaVectorEnv(2, pool, budget=1e-300),
    lambda pool: CoBaVectorEnv(2, pool, budget=1e-300, grouping="item"),
], ids=["replay", "route", "route-make", "vector-pair", "vector-item"])
def test_a_budget_that_would_put_inf_into_the_observation_is_refused(make):
    with pytest.raises(ValueError, match=r"budget must be >= 1e-06 and <= 1e\+15, got 1e-300"):
        make(POOLS["tiny"])


def test_the_smallest_budget_keeps_the_observation_finite():
    env = CoBaEnv(POOLS["tiny"], budget=1e-6, cost_model="p_tokens")
    obs, info = env.reset(seed=0)
    for _ in range(6):
        if info["action_mask"][env.SAMPLE]:
            obs, _, _, _, info = env.step(env.SAMPLE)
    assert np.isfinite(obs).all() and obs[env.features.budget] > 1e6 and env.observation_space.contains(obs)


def test_a_live_env_refuses_a_length_normalizer_that_would_be_inf():
    from coba_env.live import LiveEnv, PoolReplaySource

    source = PoolReplaySource(POOLS["tiny"])
    with pytest.raises(ValueError, match=r"max_output_tokens must be >= 1 and <= 1e\+09, got 1e-300"):
        LiveEnv(source, n_max=2, budget=100.0, max_output_tokens=1e-300)


@pytest.mark.parametrize("grouping", ["pair", "item"])
@pytest.mark.parametrize("call", ["step", "action_masks"])
def test_the_vector_env_refuses_a_step_before_reset_as_the_single_env_does(grouping, call):
    venv = CoBaVectorEnv(3, POOLS["tiny"], grouping=grouping)
    single = CoBaEnv(POOLS["tiny"], grouping=grouping)
    calls = {"step": (lambda: venv.step(np.zeros(3, dtype=np.int64)), lambda: single.step(0)),
             "action_masks": (venv.action_masks, single.action_masks)}[call]
    for do in calls:
        with pytest.raises(ResetNeeded, match=rf"{call}\(\) called before reset\(\); call reset\(\) first"):
            do()
