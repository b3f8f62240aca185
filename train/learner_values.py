"""The learner's own cost-to-go of every legal action, for many visited states at once, on the vector env.

DAgger's later rounds (``train.imitation``, ``targets="rollout"``) label each visited state with the return of
playing each legal action and then the current learner to STOP. One state at a time that is a replay of the
prefix per legal action on the one-episode env, a network forward per step: most of a round's time. Here
every (state, lambda, first action) continuation of a round runs as one row of a ``CoBaVectorEnv`` with the
same configuration, the learner acting on all rows with one forward pass per step (``MLPController``'s
batched features, each row at its own lambda). Rows are grouped by prefix length so that they step in
lockstep; a row that stops is reset by the vector env and its later rewards are ignored.

The values equal ``train.imitation._learner_values``'s (``tests/test_learner_values.py`` compares them on small
pools): the same env rules, the same rewards, the same network (numpy, float64).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from agents.learned_mlp import MLPController, batch_controller_features
from coba_env.vector_env import CoBaVectorEnv

__all__ = ["CHUNK", "ValueTask", "learner_values_batch"]

#: Continuations stepped together (rows of one vector env); a last, smaller chunk is padded.
CHUNK = 512


class ValueTask(NamedTuple):
    """One state to label: the episode, the lambda, the action prefix reaching it and its legal actions."""

    episode: int
    lam: float
    prefix: tuple[int, ...]
    legal: tuple[int, ...]


def learner_values_batch(env: Any, learner: MLPController, tasks: Sequence[ValueTask]) -> np.ndarray:
    """``q[i, a]``: the whole episode's return when ``tasks[i]``'s state plays ``a`` and then ``learner`` plays on at
    ``tasks[i].lam``; -inf where ``a`` is not in ``tasks[i].legal``. ``env``: the one-episode env (its config)."""
    n_actions = env.layout.n_actions
    q = np.full((len(tasks), n_actions), -np.inf)
    by_length: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, task in enumerate(tasks):
        for a in task.legal:
            by_length[len(task.prefix)].append((i, int(a)))
    if not by_length:
        return q
    venv = CoBaVectorEnv(min(CHUNK, max(len(rows) for rows in by_length.values())), config=env.unwrapped.config)
    for length, rows in sorted(by_length.items()):
        for start in range(0, len(rows), venv.num_envs):
            chunk = rows[start:start + venv.num_envs]
            returns = _play(venv, learner, [tasks[i] for i, _ in chunk], [a for _, a in chunk], length)
            for (i, a), ret in zip(chunk, returns, strict=False):
                q[i, a] = ret
    return q


def _play(venv: CoBaVectorEnv, learner: MLPController, tasks: list[ValueTask], firsts: list[int],
          length: int) -> np.ndarray:
    """Returns of the rows (padded to ``venv.num_envs`` by repeating the first): prefix, first action, learner."""
    b, k = venv.num_envs, len(tasks)
    pad = [0] * (b - k)
    episodes = np.array([t.episode for t in tasks] + [tasks[0].episode for _ in pad], dtype=np.int64)
    lams = np.array([t.lam for t in tasks] + [tasks[0].lam for _ in pad], dtype=np.float64)
    obs, info = venv.reset(options={"episodes": episodes, "lams": lams})
    total = np.zeros(b)
    done = np.zeros(b, dtype=bool)
    plan = [list(t.prefix) + [a] for t, a in zip(tasks, firsts, strict=True)]
    plan += [plan[0]] * len(pad)
    for step in range(length + 1):
        obs, reward, terminated, _, info = venv.step(np.array([p[step] for p in plan], dtype=np.int64))
        total += np.where(done, 0.0, reward)
        done |= terminated
    while not done.all():
        masks = info["action_mask"]
        x = batch_controller_features(obs, masks, venv, budget=learner.budget, cost_model=learner.cost_model,
                                      max_output_tokens=learner.max_output_tokens, lam=lams)
        actions = np.where(masks > 0, learner.scores(x), -np.inf).argmax(axis=1)
        obs, reward, terminated, _, info = venv.step(actions)
        total += np.where(done, 0.0, reward)
        done |= terminated
    return total[:k]
