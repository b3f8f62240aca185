"""``train.learner_values``: the learner's cost-to-go of every legal action, batched on the vector env, equals the
one-state-at-a-time replay on the one-episode env (the path ``train.imitation`` used before, written out here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.learned_mlp import MLPController, build_network
from coba_env import compile_pool
from coba_env.env import CoBaEnv, as_compiled
from pools.default import resolve_pool
from train.imitation import MLPSettings, _checkpoint_config
from train.learner_values import ValueTask, learner_values_batch


def untrained_learner(env: CoBaEnv, seed: int) -> MLPController:
    """A seeded, untrained controller of ``env``'s shape (its arbitrary choices reach states of every length)."""
    torch.manual_seed(seed)
    config = _checkpoint_config(env, MLPSettings(lambdas=(0.1, 1.0), hidden=(16,), seed=seed))
    width = len(config["observation"]) + env.layout.n_actions
    config.update(feature_mean=[0.0] * width, feature_scale=[1.0] * width)
    return MLPController(build_network((16,), len(config["observation"]), env.layout.n_actions), config)


def one_state_values(env: CoBaEnv, learner: MLPController, task: ValueTask) -> np.ndarray:
    """The reference: replay the prefix, play each legal action, then the learner, on the one-episode env."""
    q = np.full(env.layout.n_actions, -np.inf)
    learner.lam = task.lam
    for first in task.legal:
        obs, info = env.reset(options={"episode": task.episode, "lam": task.lam})
        total, done = 0.0, False
        for a in (*task.prefix, first):
            obs, r, done, _, info = env.step(a)
            total += r
        while not done:
            obs, r, done, _, info = env.step(learner.act(obs, info["action_mask"], env.evidence))
            total += r
        q[first] = total
    return q


def random_walk_tasks(env: CoBaEnv, lams: tuple[float, ...], seed: int) -> list[ValueTask]:
    """Every state of one random legal walk per episode and lambda, with its legal actions."""
    rng, tasks = np.random.default_rng(seed), []
    for e in range(env.n_episodes):
        for lam in lams:
            _, info = env.reset(options={"episode": e, "lam": lam})
            prefix, done = [], False
            while not done:
                legal = tuple(int(a) for a in np.flatnonzero(info["action_mask"]))
                tasks.append(ValueTask(e, lam, tuple(prefix), legal))
                a = int(rng.choice(legal))
                _, _, done, _, info = env.step(a)
                prefix.append(a)
    return tasks


@pytest.fixture(scope="module")
def envs():
    """The tiny pool's replay env and the route env of the paper pool's first 2 problems per dataset."""
    paper = as_compiled("paper")
    keep = np.zeros(paper.n_episodes, dtype=bool)
    for d in dict.fromkeys(paper.dataset.tolist()):
        rows = np.flatnonzero(paper.dataset == d)
        keep |= (paper.dataset == d) & np.isin(paper.item_id, paper.item_id[rows][:2])
    return {"replay": CoBaEnv(compile_pool(resolve_pool("tiny"))),
            "route": CoBaEnv(paper.select(keep), grouping="item")}


@pytest.mark.parametrize(("grouping", "chunk"), [("replay", 512), ("route", 512), ("route", 7)])
def test_batched_values_equal_the_one_state_replay(envs, grouping, chunk, monkeypatch):
    monkeypatch.setattr("train.learner_values.CHUNK", chunk)  # 7 rows: most continuations start in a row another just left
    env = envs[grouping]
    learner = untrained_learner(env, seed=3)
    tasks = random_walk_tasks(env, (0.1, 2.0), seed=5)
    got = learner_values_batch(env, learner, tasks)
    want = np.vstack([one_state_values(env, learner, t) for t in tasks])
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.allclose(np.where(np.isinf(want), 0.0, got), np.where(np.isinf(want), 0.0, want), rtol=0, atol=1e-9)
    assert len({len(t.prefix) for t in tasks}) > 2  # states of several depths were compared


def test_no_tasks_give_no_rows(envs):
    env = envs["replay"]
    assert learner_values_batch(env, untrained_learner(env, seed=0), []).shape == (0, env.layout.n_actions)
