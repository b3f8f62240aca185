"""Bad input to the env API (gym.make / CoBaEnv / CoBaVectorEnv arguments, reset options, step actions) is
refused with a ValueError naming the argument; good input of unusual shape (one dataset as a str) works; and
``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`` gives the numpy ``CoBaVectorEnv``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import coba_env  # noqa: F401  (registers coba/Replay-v0)
from coba_env.compiled import CompiledPool, compile_pool
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool


@pytest.fixture(scope="module")
def tiny_pool() -> CompiledPool:
    """The simulator's small test pool, compiled once for the module."""
    return compile_pool(resolve_pool("tiny"))


@pytest.fixture(scope="module")
def compiled(tiny_pool: CompiledPool) -> CompiledPool:
    return tiny_pool


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"lam": float("nan")}, "lam must be a finite number"),
    ({"lam": float("inf")}, "lam must be a finite number"),
    ({"lam": 1e308}, r"lam must be >= 0 and <= 1e\+06"),
    ({"lam": -1}, "lam must be >= 0"),
    ({"lam": "0.1"}, "lam must be a number"),
    ({"budget": float("nan")}, "budget must be a finite number"),
    ({"budget": float("inf")}, "budget must be a finite number"),
    ({"budget": 1e308}, "budget must be >= 1e-06 and <= 1e\\+15"),
    ({"budget": 0}, "budget must be >= 1e-06"),
    ({"budget": -5.0}, "budget must be >= 1e-06"),
    ({"lambda_range": (0.0, float("nan"))}, r"lambda_range\[1\] must be a finite number"),
    ({"lambda_range": (0.5, 0.1)}, "lambda_range must be"),
    ({"lambda_range": 0.3}, r"lambda_range must be \(low, high\)"),
    ({"max_cost": float("nan")}, "max_cost must be a finite number"),
    ({"max_cost": -1.0}, "max_cost must be >= 0"),
    ({"n_max": 0}, r"n_max must be in 1\.\."),
    ({"n_max": 2.5}, "n_max must be an integer"),
    ({"n_max": 10_000}, r"n_max must be in 1\.\."),
    ({"cost_model": "dollars"}, "unknown cost model 'dollars'"),
    ({"order": "backwards"}, "unknown episode order 'backwards'"),
    ({"tiers": ("V9",)}, r"unknown tier\(s\) \['V9'\]"),
    ({"datasets": "no-such-dataset"}, r"unknown dataset\(s\) \['no-such-dataset'\]"),
    ({"datasets": []}, "the episode subset is empty"),
    ({"episode_ids": 10**9}, r"unknown episode id\(s\)"),
])
def test_bad_constructor_arguments_are_refused(kwargs, match, tiny_pool: CompiledPool) -> None:
    with pytest.raises(ValueError, match=match):
        gym.make("coba/Replay-v0", pool=tiny_pool, **kwargs)
    with pytest.raises(ValueError, match=match):
        CoBaVectorEnv(2, tiny_pool, **kwargs)


def test_a_dataset_given_as_a_str_is_one_dataset(compiled) -> None:
    name = str(compiled.dataset[0])
    env = CoBaEnv(compiled, datasets=name)
    assert env.n_episodes == int((compiled.dataset == name).sum()) > 0
    assert set(env.pool.dataset.tolist()) == {name}
    venv = CoBaVectorEnv(2, compiled, generators=str(compiled.generator[0]))
    assert set(venv.pool.generator.tolist()) == {str(compiled.generator[0])}


def test_disjoint_restrictions_give_a_clear_empty_subset_error(compiled) -> None:
    first_id = int(compiled.episode_ids[0])
    other_dataset = next(d for d in compiled.dataset.tolist() if d != compiled.dataset[0])
    with pytest.raises(ValueError, match=r"the episode subset is empty: no episode matches datasets=.*episode_ids="):
        CoBaEnv(compiled, datasets=[other_dataset], episode_ids=[first_id])


@pytest.mark.parametrize(("options", "match"), [
    ({"lam": -1}, r"options\['lam'\] must be >= 0"),
    ({"lam": float("nan")}, r"options\['lam'\] must be a finite number"),
    ({"lam": 1e308}, r"options\['lam'\] must be >= 0 and <= 1e\+06"),
    ({"episode": -1}, r"options\['episode'\] must be in 0\.\."),
    ({"episode": 1.5}, r"options\['episode'\] must be an integer"),
    ({"episode": 10**9}, r"options\['episode'\] must be in 0\.\."),
    ({"epsiode": 0}, r"unknown reset option\(s\) \['epsiode'\]"),
])
def test_bad_reset_options_are_refused(options, match, tiny_pool: CompiledPool) -> None:
    env = gym.make("coba/Replay-v0", pool=tiny_pool)
    with pytest.raises(ValueError, match=match):
        env.reset(options=options)


@pytest.mark.parametrize(("options", "match"), [
    ({"lams": [0.1, -1.0]}, r"options\['lams'\]\[1\] must be >= 0"),
    ({"lams": [0.1]}, r"options\['lams'\] must hold one value per sub-env \(2\)"),
    ({"episodes": [0, 2.5]}, r"options\['episodes'\]\[1\] must be an integer"),
    ({"episode": [0, 1]}, r"unknown reset option\(s\) \['episode'\]"),
])
def test_bad_vector_reset_options_are_refused(options, match, compiled) -> None:
    with pytest.raises(ValueError, match=match):
        CoBaVectorEnv(2, compiled).reset(options=options)


@pytest.mark.parametrize(("action", "match"), [
    (0.7, "action must be an integer action id, got 0.7"),
    (2.7, "action must be an integer action id, got 2.7"),
    ("0", "action must be an integer action id"),
    (True, "action must be an integer action id, got True"),
    (np.True_, "action must be an integer action id, got (np.)?True"),
    (np.array(False), "action must be an integer action id"),
    (7, r"action 7 is outside the action space 0\.\.4"),
    (-1, r"action -1 is outside the action space 0\.\.4"),
    (4, r"action 4 \(STOP\) is not allowed now: no candidate has been revealed yet"),
])
def test_bad_actions_are_refused(action, match, tiny_pool: CompiledPool) -> None:
    env = gym.make("coba/Replay-v0", pool=tiny_pool)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(action)


@pytest.mark.parametrize("action", [0, np.int64(0), np.array(0), 0.0])
def test_integral_actions_of_any_type_are_accepted(action, tiny_pool: CompiledPool) -> None:
    env = gym.make("coba/Replay-v0", pool=tiny_pool)
    env.reset(seed=0)
    env.step(action)  # SAMPLE, the only legal action at the start
    assert env.unwrapped.evidence.n_revealed == 1


def test_vector_env_refuses_non_integer_actions(compiled) -> None:
    venv = CoBaVectorEnv(2, compiled)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="actions must be integer action ids"):
        venv.step(np.array([0.0, 0.5]))
    obs, *_ = venv.step(np.array([0.0, 0.0]))  # integral floats are accepted
    assert obs[:, 0].tolist() == [1 / venv.n_max] * 2


@pytest.mark.parametrize(("num_envs", "match"), [(0, "num_envs must be in 1"), (1.5, "num_envs must be an integer")])
def test_bad_num_envs_is_refused(num_envs, match, compiled) -> None:
    with pytest.raises(ValueError, match=match):
        CoBaVectorEnv(num_envs, compiled)


def test_make_vec_vector_entry_point_gives_the_numpy_vector_env(tiny_pool: CompiledPool) -> None:
    venv = gym.make_vec("coba/Replay-v0", num_envs=3, vectorization_mode="vector_entry_point", pool=tiny_pool,
                        lam=0.2)
    assert isinstance(venv, CoBaVectorEnv)
    assert venv.num_envs == 3 and venv.lam == 0.2
    obs, info = venv.reset(seed=0)
    assert obs.shape == (3, 21) and info["action_mask"].shape == (3, 5)
    # The same episodes and observations as three single envs made with gym.make.
    single = gym.make("coba/Replay-v0", pool=tiny_pool, lam=0.2)
    first, _ = single.reset(seed=0)
    np.testing.assert_array_equal(obs[0], first)
    obs2, reward, *_ = venv.step(np.zeros(3, dtype=np.int64))
    o1, r1, *_ = single.step(0)
    np.testing.assert_array_equal(obs2[0], o1)
    assert reward[0] == r1


def test_tiers_none_means_every_tier_as_other_none_arguments_mean_the_default(tiny_pool: CompiledPool) -> None:
    assert CoBaEnv(tiny_pool, tiers=None).enabled_tiers == ("V1", "V2", "V3")
    assert CoBaEnv(tiny_pool, tiers=[]).enabled_tiers == ()


@pytest.mark.parametrize("value, message", [
    (np.float64(-2.5), r"^lam must be >= 0 and <= [0-9e+.]+, got -2\.5$"),
    (np.float64(np.nan), r"^lam must be a finite number, got nan$"),
    (np.int64(-3), r"^lam must be >= 0 and <= [0-9e+.]+, got -3$"),
])
def test_numpy_numbers_are_shown_as_plain_numbers(value, message):
    """Issue 25: a message never shows Python internals such as ``np.float64(-2.5)``."""
    from coba_env.rules.config import check_number

    with pytest.raises(ValueError, match=message):
        check_number("lam", value, high=1e6)
