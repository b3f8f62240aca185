"""The learner's own cost-to-go of every legal action, for many visited states at once, on the vector env.

DAgger's later rounds (``train.imitation``, ``targets="rollout"``) label each visited state with the return of
playing each legal action and then the current learner to STOP. One state at a time that is a replay of the
prefix per legal action on the one-episode env, a network forward per step: most of a round's time. Here
every (state, lambda, first action) continuation of a round is a row of one ``CoBaVectorEnv`` with the env's
configuration: a row plays its script (the prefix, then the first action), then the learner, all rows with one
forward pass per step (``MLPController``'s batched features, each row at its own lambda). A row that stops
starts the next continuation in the same step (the vector env's own autoreset, fed from the queue), so a long
continuation never holds the others back.

The values equal the one-state replay's (``tests/test_learner_values.py`` compares them on small pools of both
groupings): the same env rules, the same rewards, the same network (numpy, float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from agents.learned_mlp import MLPController, batch_controller_features
from coba_env.vector_env import CoBaVectorEnv

__all__ = ["CHUNK", "ValueTask", "learner_values_batch"]

#: Rows of the vector env (continuations played at once; a row that stops starts the next queued one).
CHUNK = 512


class ValueTask(NamedTuple):
    """One state to label: the episode, the lambda, the action prefix reaching it and its legal actions."""

    episode: int
    lam: float
    prefix: tuple[int, ...]
    legal: tuple[int, ...]


class _Queued(CoBaVectorEnv):
    """A vector env whose autoreset starts the queued episodes in order (the rows that stop, by row)."""

    def __init__(self, num_envs: int, config: Any, queue: list[int]) -> None:
        super().__init__(num_envs, config=config)
        self.queue, self.taken = queue, 0

    def _next_episodes(self, k: int) -> np.ndarray:
        out = self.queue[self.taken:self.taken + k]
        self.taken += len(out)
        return np.array(out + self.queue[:1] * (k - len(out)), dtype=np.int64)  # past the queue: idle rows


class _Rows(NamedTuple):
    """The cost and length sums ``batch_controller_features`` reads, at some rows of a vector env."""

    cost: np.ndarray
    len_sum: np.ndarray
    n: np.ndarray

    @classmethod
    def of(cls, venv: CoBaVectorEnv, rows: np.ndarray) -> _Rows:
        """``venv``'s sums at ``rows``."""
        return cls(venv.cost[rows], venv.len_sum[rows], venv.n[rows])


def learner_values_batch(env: Any, learner: MLPController, tasks: Sequence[ValueTask]) -> np.ndarray:
    """``q[i, a]``: the whole episode's return when ``tasks[i]``'s state plays ``a`` and then ``learner`` plays on at
    ``tasks[i].lam``; -inf where ``a`` is not in ``tasks[i].legal``. ``env``: the one-episode env (its config)."""
    q = np.full((len(tasks), env.layout.n_actions), -np.inf)
    conts = [(i, int(a)) for i, task in enumerate(tasks) for a in task.legal]
    if not conts:
        return q
    scripts = [(*tasks[i].prefix, a) for i, a in conts]
    width = max(len(s) for s in scripts)
    script = np.array([s + (-1,) * (width - len(s)) for s in scripts], dtype=np.int64)
    lengths = np.array([len(s) for s in scripts])
    lam_of = np.array([tasks[i].lam for i, _ in conts], dtype=np.float64)
    episodes = [tasks[i].episode for i, _ in conts]
    b = min(CHUNK, len(conts))
    venv = _Queued(b, env.unwrapped.config, episodes)
    venv.taken = b
    obs, info = venv.reset(options={"episodes": episodes[:b], "lams": lam_of[:b]})
    row = np.arange(b)  # the continuation each row plays (-1: idle)
    pos, total, values = np.zeros(b, dtype=np.int64), np.zeros(b), np.full(len(conts), np.nan)
    while (row >= 0).any():
        masks, cont = info["action_mask"], np.maximum(row, 0)
        scripted = (row >= 0) & (pos < lengths[cont])
        actions = script[cont, np.minimum(pos, width - 1)]
        # The network runs on the rows the learner plays (idle rows too: any legal action), not on the rows still
        # replaying their script: about half the row-steps of a round with long prefixes.
        free = np.flatnonzero(~scripted)
        if len(free):
            x = batch_controller_features(obs[free], masks[free], _Rows.of(venv, free), budget=learner.budget,
                                          cost_model=learner.cost_model, max_output_tokens=learner.max_output_tokens,
                                          lam=venv.lams[free])
            actions[free] = np.where(masks[free] > 0, learner.scores(x), -np.inf).argmax(axis=1)
        first = venv.taken  # the queue entry the first row to stop now starts
        obs, reward, terminated, _, info = venv.step(actions)
        pos += 1
        total += reward
        for j, r in enumerate(np.flatnonzero(terminated).tolist()):
            if row[r] >= 0:
                values[row[r]] = total[r]
            nxt = first + j
            if nxt >= len(conts):
                row[r] = -1
                continue
            if int(info["episode"][r]) != episodes[nxt]:  # the autoreset is not the queue's: refuse, never guess
                raise RuntimeError(f"row {r} restarted episode {int(info['episode'][r])}, expected {episodes[nxt]}")
            row[r], pos[r], total[r] = nxt, 0, 0.0
            venv.lams[r] = lam_of[nxt]
    for (i, a), value in zip(conts, values, strict=True):
        q[i, a] = value
    return q
