"""PPO under the issue-19 protocol: dataset-balanced episode draws, the CoBa-Strong warm start, ``PPOMethod``."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from sb3_contrib import MaskablePPO

from agents.learned_ppo import PPOController
from agents.registry import make_policy
from coba_env.env import CoBaEnv, as_compiled, default_budget
from coba_env.vector_env import CoBaVectorEnv
from eval.runner import run_policies
from train.ppo_method import GRID_LAMBDAS, PPOMethod
from train.ppo_warm_start import agreement, clone_into, strong_demonstrations
from train.sb3_vec_env import CoBaSB3VecEnv


@pytest.fixture(scope="module")
def tiny():
    """The `tiny` simulator pool (24 math500 and 24 aime2024 episodes), compiled once."""
    return as_compiled("tiny")


@pytest.fixture(scope="module")
def lopsided(tiny):
    """Episode ids of every math500 episode and only the first 4 aime2024 ones: a 24 : 4 training set."""
    ds = np.asarray(tiny.dataset)
    math_ids = tiny.episode_ids[ds == "math500"]
    aime_ids = tiny.episode_ids[ds == "aime2024"][:4]
    assert len(math_ids) == 24 and len(aime_ids) == 4  # the premise of the hand-computed counts below
    return [int(i) for i in np.concatenate([math_ids, aime_ids])]


# ---------------------------------------------------------------------------------------------- balanced draws
def _draws(venv: CoBaVectorEnv, resets: int) -> list[int]:
    """Episode indices (into the restricted pool) of ``resets`` full resets of ``venv``, the first one seeded."""
    out: list[int] = []
    for i in range(resets):
        _, info = venv.reset(seed=3 if i == 0 else None)
        out.extend(info["episode"].tolist())
    return out


def test_balanced_order_draws_each_dataset_equally_often(tiny, lopsided):
    env = CoBaSB3VecEnv(100, tiny, episode_ids=lopsided, order="balanced")
    venv = env.venv
    assert env.balanced is not None and venv.order == "balanced"
    episodes = _draws(venv, 200)  # 20,000 draws
    datasets = np.asarray(venv.pool.dataset)[episodes]
    n = len(episodes)
    counts = Counter(datasets.tolist())
    # Each of the 2 datasets with probability 1/2: mean n/2, sd sqrt(n)/2 = 70.7; 4 sd is 283.
    for name in ("math500", "aime2024"):
        assert abs(counts[name] - n / 2) <= 4 * math.sqrt(n) / 2, counts
    # Within a dataset the draws walk through permutations: after m draws of a dataset of k episodes, every
    # episode has been drawn floor(m / k) or ceil(m / k) times.
    for name, k in (("math500", 24), ("aime2024", 4)):
        per_episode = Counter(e for e, d in zip(episodes, datasets, strict=True) if d == name)
        assert len(per_episode) == k
        m = counts[name]
        assert set(per_episode.values()) <= {m // k, -(-m // k)}, per_episode


def test_shuffle_order_follows_the_item_shares_instead(tiny, lopsided):
    venv = CoBaSB3VecEnv(100, tiny, episode_ids=lopsided, order="shuffle").venv
    episodes = _draws(venv, 56)  # 5,600 draws = 200 passes over the 28 episodes: exactly 24 : 4
    counts = Counter(np.asarray(venv.pool.dataset)[episodes].tolist())
    assert counts == {"math500": 200 * 24, "aime2024": 200 * 4}


def test_balanced_order_reproduces_with_a_seed(tiny, lopsided):
    first = _draws(CoBaSB3VecEnv(16, tiny, episode_ids=lopsided, order="balanced").venv, 10)
    second = _draws(CoBaSB3VecEnv(16, tiny, episode_ids=lopsided, order="balanced").venv, 10)
    assert first == second
    # the adapter's seeded reset restarts every dataset's stream too: the same env, seeded again, draws the same
    env = CoBaSB3VecEnv(16, tiny, episode_ids=lopsided, order="balanced")
    rounds = []
    for _ in range(2):
        env.seed(3)
        env.reset()
        rounds.append([env.venv.ep.tolist()] + [env.venv._next_episodes(16).tolist() for _ in range(3)])
    assert rounds[0] == rounds[1]


# ---------------------------------------------------------------------------------------------- warm start
@pytest.fixture(scope="module")
def demos(tiny):
    """CoBa-Strong's states and actions on every tiny episode, lambda drawn per episode in [0, 0.5]."""
    return strong_demonstrations(CoBaEnv(tiny, lambda_range=(0.0, 0.5)), seed=0)


def _observation_ceiling(demos) -> float:
    """The best share of states any function of the observation (lambda left out) can match: per distinct
    observation, the count of its most frequent teacher action, summed, over all states."""
    obs = demos.observations.copy()
    obs[:, 19] = 0.0  # the teacher ignores lambda
    groups: dict[bytes, Counter] = {}
    for row, action in zip(obs, demos.actions.tolist(), strict=True):
        groups.setdefault(row.tobytes(), Counter())[action] += 1
    return sum(c.most_common(1)[0][1] for c in groups.values()) / len(demos)


def test_demonstrations_replay_strong_exactly(tiny, demos):
    # One state per action Strong takes: the runner's n_actions (SAMPLE and VERIFY calls) plus the final STOP,
    # over two passes of every episode.
    run = run_policies(["coba_strong"], tiny, progress=False, workers=1).records
    assert len(demos) == 2 * (int(run["n_actions"].sum()) + tiny.n_episodes)
    assert demos.episodes == 2 * tiny.n_episodes
    assert demos.returns.shape == demos.actions.shape and np.isfinite(demos.returns).all()


def test_behaviour_cloning_reproduces_strongs_actions_on_most_training_states(tiny, demos):
    # Hand argument for the threshold: Strong is a deterministic rule of the evidence (sample count, answer
    # shares, verifier scores), which the observation encodes, so a function of the observation can match it
    # on (nearly) every state: the ceiling below is that premise, measured from the data alone. A 2 x 128
    # tanh network given ~400 Adam updates (100 epochs of 4 batches; the paper pool's folds get 15 epochs of
    # 30-150 batches) on a few hundred distinct states of such a near-deterministic map should then match at
    # least 90% of the states (far above a random net, which picks one of ~2-5 legal actions).
    ceiling = _observation_ceiling(demos)
    assert ceiling >= 0.95
    env = CoBaSB3VecEnv(8, tiny, lambda_range=(0.0, 0.5))
    model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu", n_steps=16, batch_size=64)
    before = agreement(model, demos)
    summary = clone_into(model, demos, seed=0, epochs=100)
    assert summary["agreement"] >= 0.9
    assert summary["agreement"] > before
    assert summary["agreement"] == agreement(model, demos)


# ---------------------------------------------------------------------------------------------- the method
@pytest.fixture(scope="module")
def fitted(tiny, tmp_path_factory):
    """PPOMethod fit on math500 only (a few hundred steps), at math500's own budget."""
    ds = np.asarray(tiny.dataset)
    train_ids = tiny.episode_ids[ds == "math500"]
    budget = default_budget(tiny.select(ds == "math500"), "p_tokens", tiny.n_candidates)
    method = PPOMethod(total_timesteps=256, n_envs=32, n_steps=8, batch_size=64)
    return method, budget, method.fit(tiny, train_ids, budget=budget, seed=0,
                                      out_dir=tmp_path_factory.mktemp("ppo") / "fit", progress=False)


def test_ppo_method_grid_is_the_stated_lambdas():
    assert PPOMethod().grid() == [{"lam": lam} for lam in GRID_LAMBDAS]
    assert PPOMethod(lambdas=(0.5, 0.0)).grid() == [{"lam": 0.5}, {"lam": 0.0}]


def test_ppo_method_policies_replay_on_held_out_episodes_with_the_folds_budget(tiny, fitted):
    method, budget, fit = fitted
    meta = fit.policy({"lam": 0.0}).meta
    assert meta["order"] == "balanced" and meta["warm_start"]["episodes"] > 0
    assert meta["train_datasets"] == ["math500"] and meta["timesteps"] >= 256
    held = tiny.select(np.asarray(tiny.dataset) == "aime2024")
    policies = []
    for point in method.grid()[:3]:
        policy = fit.policy(point)
        assert isinstance(policy, PPOController) and policy.lam == point["lam"]
        assert policy.env_kwargs()["budget"] == pytest.approx(budget)
        policy.name = f"ppo@{point['lam']:g}"
        policies.append(policy)
    run = run_policies([make_policy("coba_strong"), *policies], held, progress=False, workers=1)
    assert not run.not_applicable
    records = run.records
    assert records.groupby("policy").size().to_dict() == {p: held.n_episodes for p in
                                                          ["coba_strong", "ppo@0", "ppo@0.01", "ppo@0.02"]}


@pytest.mark.parametrize("point, match", [({"tau": 0.1}, "operating point"), ({"lam": 0.1, "tau": 0}, "operating")])
def test_ppo_policy_rejects_a_foreign_point(fitted, point, match):
    with pytest.raises(ValueError, match=match):
        fitted[2].policy(point)


@pytest.mark.parametrize("kwargs, match", [
    ({"lambdas": ()}, "lambdas"), ({"lambdas": (0.1, -1.0)}, "lambdas"), ({"lambdas": (float("nan"),)}, "lambdas"),
    ({"total_timesteps": 0}, "total_timesteps"), ({"n_envs": 0}, "n_envs"),
])
def test_ppo_method_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PPOMethod(**kwargs)


def test_ppo_method_fit_rejects_an_empty_training_set(tiny, tmp_path):
    with pytest.raises(ValueError, match="no training episodes"):
        PPOMethod().fit(tiny, np.array([], dtype=np.int64), budget=1.0, seed=0, out_dir=tmp_path, progress=False)
