"""Replay one policy over every episode of a compiled pool through ``CoBaVectorEnv``, many episodes at once.

The batched twin of the one-episode loop (``eval.single_replay``), for either episode grouping: ``batch`` rows
step together, each row taking the pool's episodes in order (the vector env's "sequential" order hands a finished row the next episode in the
same step), and the policy's ``act_batch`` chooses every row's action. The env's rules run in the vector env,
which is bit-identical to ``CoBaEnv``; so a policy whose ``act_batch`` is its ``act`` taken row-wise gives
the same records as the one-episode replay (tests/test_batched_policies.py). Per-episode results are kept in
flat arrays (one entry per episode), and the actions taken in a compact [E, max_steps] int8 log.

When fewer episodes are left than rows, the idle rows play placeholder episodes (SAMPLE, then STOP) whose
results are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from agents.base import Policy
from agents.policy_calls import CONTAINED, PolicyCodeError, action_ids, code_failure, contained_call
from coba_env.rules.actions import ActionLayout
from coba_env.vector_env import CoBaVectorEnv
from eval.records import PlayedEpisodes, action_codes

#: Rows stepped together: large enough that numpy's per-call overhead is amortized, small enough that the
#: per-step state stays in cache.
DEFAULT_BATCH = 4096


def replay_batched(policy: Policy, venv: CoBaVectorEnv, *, seed: int = 0,
                   progress: Callable[[int], Any] | None = None) -> dict[str, np.ndarray]:
    """Play every episode of ``venv``'s pool once with ``policy.act_batch``; per-episode arrays by episode index.

    Returns ``actions`` (int8 [E, max_steps], -1 after the episode's last action), ``selected_candidate``,
    ``correct``, ``costs`` ([E, K] in ``COST_MEASURES`` order) and ``reward`` (the episode's summed reward).
    """
    pool = venv.pool
    n_ep, b = pool.n_episodes, venv.num_envs
    log = np.full((n_ep, venv.max_steps), -1, dtype=np.int8)
    flat_log, width = log.ravel(), venv.max_steps
    selected = np.full(n_ep, -1, dtype=np.int64)
    correct = np.zeros(n_ep, dtype=bool)
    costs = np.zeros((n_ep, venv.cost.shape[1]))
    rewards = np.zeros(n_ep)
    obs, info = venv.reset(seed=seed)  # rows 0..b-1 take episodes 0..b-1; finished rows take b, b+1, ...
    mask = info["action_mask"]
    contained_call(policy, "start_batch", "the first batch", policy.start_batch, venv, None)
    episode = np.arange(b, dtype=np.int64)  # the episode each row plays; >= n_ep: a placeholder
    issued = b
    step_at = np.zeros(b, dtype=np.int64)
    total = np.zeros(b)
    left = n_ep
    while left:
        real = episode < n_ep
        try:  # the policy's own code: whatever escapes it, or an array that is not b action ids, is its failure
            a = policy.act_batch(obs, mask, venv)
        except CONTAINED as exc:
            raise code_failure(policy, "act_batch", _batch_place(pool, episode, real), exc) from None
        if type(a) is not np.ndarray or a.dtype.kind not in "iu" or a.shape != (b,):
            a = action_ids(policy, a, _batch_place(pool, episode, real), b, mask.shape[1])
        a = a.astype(np.int64, copy=False)
        idle = np.flatnonzero(~real)
        if len(idle):
            stop = venv.layout.stop_action
            # STOP, else the first legal action (a route row's generator 0 may have no candidates there).
            a[idle] = np.where(mask[idle, stop] > 0, stop, np.argmax(mask[idle] > 0, axis=1))
        rows = np.flatnonzero(real)
        flat_log[episode.take(rows) * width + step_at.take(rows)] = a.take(rows)  # log[episode, step]: one 1-D scatter
        step_at += 1
        try:
            obs, reward, terminated, _, infos = venv.step(a)
        except ValueError as exc:
            if ((a >= 0) & (a < mask.shape[1])).all() and mask[np.arange(b), np.clip(a, 0, mask.shape[1] - 1)].all():
                raise  # every action legal: the env's own error, not the policy's
            raise PolicyCodeError(f"policy {policy.name!r} on {_batch_place(pool, episode, real, exc)}: act_batch() "
                                  f"returned an illegal action: {exc}") from None
        total += reward
        done = np.flatnonzero(terminated)
        if len(done):
            fin = done[episode[done] < n_ep]
            e = episode[fin]
            selected[e] = infos["selected_candidate"][fin]
            correct[e] = infos["correct"][fin]
            costs[e] = infos["final_costs"][fin]
            rewards[e] = total[fin]
            left -= len(fin)
            if progress is not None and len(fin):
                progress(len(fin))
            # The vector env reset ``done`` (in row order) to the next episodes of its sequential stream.
            episode[done] = issued + np.arange(len(done))
            issued += len(done)
            total[done] = 0.0
            step_at[done] = 0
            contained_call(policy, "start_batch", "a batch", policy.start_batch, venv, done)
        mask = infos["action_mask"]
    return {"actions": log, "selected_candidate": selected, "correct": correct, "costs": costs, "reward": rewards}


def _batch_place(pool: Any, episode: np.ndarray, real: np.ndarray, exc: Exception | None = None) -> str:
    """The episodes a batch step plays, in words: the one a vector env's error names (``sub-env i``), else the first."""
    from eval.single_replay import episode_place

    rows = np.flatnonzero(real)
    if not len(rows):
        return "a batch"
    row = rows[0]
    text = str(exc or "")
    if text.startswith("sub-env "):
        row = int(text.split()[1].rstrip(":"))
    return episode_place(pool, int(episode[row])) if episode[row] < pool.n_episodes else "a batch"


def action_strings(log: np.ndarray, codes: list[str]) -> tuple[pd.Series, np.ndarray]:
    """(each episode's action string as a text column of Arrow strings, its action counts [E, n_actions]) from an
    action log.

    Episodes share few distinct action sequences, so each distinct row is joined once and the column takes the
    distinct strings by index.
    """
    n_actions = len(codes)
    if not len(log):
        return pd.Series(np.empty(0, dtype=object), dtype="str"), np.zeros((0, n_actions), dtype=np.int64)
    uniq, inverse = distinct_rows(log)
    texts = [" ".join(codes[a] for a in row if a >= 0) for row in uniq.tolist()]
    counts = np.stack([(uniq == k).sum(axis=1) for k in range(n_actions)], axis=1).astype(np.int64)
    column = pd.Series(pd.array(pa.array(texts, type=pa.large_string()).take(inverse), dtype="str"))
    return column, counts[inverse]


def distinct_rows(log: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of the int8 [E, S] ``log``, each row's index among them).

    Only the columns up to the last action anywhere are compared (the rest is -1 everywhere), packed into 64-bit
    words; several words are hashed to one key, and the grouping is checked row by row against its group's first
    row (a hash collision, never seen, falls back to comparing whole rows). Keys are grouped by hashing
    (``pandas.factorize``), not sorting.
    """
    width = max(int(np.flatnonzero((log >= 0).any(axis=0)).max(initial=-1)) + 1, 1)
    words = -(-width // 8)
    packed = np.full((len(log), words * 8), -1, dtype=np.int8)
    packed[:, :width] = log[:, :width]
    key = packed.view(np.uint64)
    if words == 1:
        first, inverse = _first_and_groups(key[:, 0])
    else:
        h = key[:, 0].copy()
        for w in range(1, words):
            h *= np.uint64(0x9E3779B97F4A7C15)  # the 64-bit golden-ratio multiplier: words mix before each add
            h ^= key[:, w]
        first, inverse = _first_and_groups(h)
        if not (key == key[first[inverse]]).all():  # a collision: group the whole rows instead
            rows = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1])))[:, 0]
            _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return log[first], inverse.reshape(-1)


def _first_and_groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first index of each distinct key, each key's group) of the 1-D ``keys``."""
    groups, distinct = pd.factorize(keys)
    first = np.empty(len(distinct), dtype=np.int64)
    first[groups[::-1]] = np.arange(len(groups))[::-1]  # the last write per group is its first index
    return first, groups


def played_in_batch(out: dict[str, np.ndarray], venv: CoBaVectorEnv) -> PlayedEpisodes:
    """What ``replay_batched`` returned on ``venv``, as ``PlayedEpisodes`` (the selected slots' answers looked up)."""
    layout, pool = venv.layout, venv.config.pool
    actions, counts = action_strings(out["actions"], action_codes(layout))
    selected = out["selected_candidate"]
    candidate = slot_candidates(out["actions"], selected, layout, pool.n_candidates)
    rows = np.arange(len(selected))
    answers = pool.answer[rows, np.maximum(candidate, 0)]
    answers[selected < 0] = None
    graded = pool.labels.graded  # evaluator side, read once the episodes are over
    graded = None if graded is None else np.where(selected >= 0, graded[rows, np.maximum(candidate, 0)], 0.0)
    return PlayedEpisodes(actions=actions, counts=counts, selected=selected, answers=answers, correct=out["correct"],
                          costs=out["costs"], reward=out["reward"], graded=graded)


def slot_candidates(log: np.ndarray, selected: np.ndarray, layout: ActionLayout, n_candidates: int) -> np.ndarray:
    """The pool candidate in each episode's ``selected`` slot, from its action ``log``: the (s+1)-th SAMPLE put a
    candidate in slot s, and a generator's k-th SAMPLE draws its k-th candidate (slots generator-major,
    ``n_candidates`` over the layout's generators). On one generator the slot is the candidate."""
    n_gen = layout.n_generators
    if n_gen == 1:
        return selected
    log = log.astype(np.int64)
    rows = np.arange(len(log))
    is_sample = (log >= 0) & (log < n_gen)  # the layout's SAMPLE actions are 0 .. G-1
    pos = np.argmax(np.cumsum(is_sample, axis=1) == (selected + 1)[:, None], axis=1)
    generator = np.clip(log[rows, pos], 0, n_gen - 1)
    k = np.cumsum(log == generator[:, None], axis=1)[rows, pos] - 1  # the generator's samples up to that one
    return generator * (n_candidates // n_gen) + np.maximum(k, 0)
