"""The one-episode replay: a policy's scalar ``act`` on ``CoBaEnv``, episode after episode, for either grouping.

The reference the batched replay (``eval.batched_replay``) equals record for record, and the path of a policy
without a batched form. ``eval.runner`` turns what it returns into a records frame (``eval.records``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from agents.base import Policy
from agents.policy_calls import CONTAINED, PolicyCodeError, action_id, code_failure, contained_call
from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES
from coba_env.env import CoBaEnv
from eval.records import PlayedEpisodes, action_codes

#: How many episodes pass between two progress updates (a tqdm update per episode would cost ~10%).
PROGRESS_EVERY = 128


def replay_single(policy: Policy, env: CoBaEnv, *, seed: int = 0,
                  progress: Callable[[int], Any] | None = None) -> PlayedEpisodes:
    """``policy.act`` on ``env`` over every episode of its pool, in order (the reference the batched replay equals)."""
    pool, layout = env.config.pool, env.layout
    codes = action_codes(layout)
    n = pool.n_episodes
    counts = np.zeros((n, layout.n_actions), dtype=np.int64)
    actions = np.empty(n, dtype=object)
    answers = np.empty(n, dtype=object)
    selected, correct = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool)
    graded = None if pool.labels.graded is None else np.zeros(n)
    costs, rewards = np.zeros((n, len(COST_MEASURES))), np.zeros(n)
    pending = 0
    for i in range(n):
        seq, info, rewards[i] = _play(policy, env, i, seed)
        counts[i] = np.bincount(seq, minlength=layout.n_actions)
        actions[i] = " ".join(codes[a] for a in seq)
        selected[i] = int(info.get("selected_candidate", -1))
        answers[i] = info.get("selected_answer")
        correct[i] = bool(info.get("correct", False))
        if graded is not None:
            graded[i] = info.get("graded_score", 0.0)
        costs[i] = [info["costs"][m] for m in COST_MEASURES]
        pending += 1
        if progress is not None and pending >= PROGRESS_EVERY:
            progress(pending)
            pending = 0
    if progress is not None and pending:
        progress(pending)
    return PlayedEpisodes(actions=actions, counts=counts, selected=selected, answers=answers, correct=correct,
                          costs=costs, reward=rewards, graded=graded)


def episode_place(pool: CompiledPool, episode: int) -> str:
    """Episode index ``episode`` of ``pool`` in words, for a message: its index, id, item and generator."""
    return (f"episode {episode} (episode_id {int(pool.episode_ids[episode])}: {pool.dataset[episode]}/"
            f"{pool.item_id[episode]}, {pool.generator[episode]})")


def _play(policy: Policy, env: CoBaEnv, episode: int, seed: int) -> tuple[list[int], dict[str, Any], float]:
    """One episode: (the actions taken, the final info, the summed reward). The policy's own code is contained:
    whatever it raises or returns that is not a legal action id is one ``PolicyCodeError`` naming the episode."""
    # Seed once so that a stochastic policy drawing from env.np_random is reproducible; later resets keep the
    # generator running.
    obs, info = env.reset(seed=seed if episode == 0 else None, options={"episode": episode})
    contained_call(policy, "reset", _place(env, episode), policy.reset, env)
    evidence, mask, total, seq = env.evidence, info["action_mask"], 0.0, []
    while True:
        try:
            a = policy.act(obs, mask, evidence)
        except CONTAINED as exc:
            raise code_failure(policy, "act", _place(env, episode), exc) from None
        if type(a) is not int:
            a = action_id(policy, a, _place(env, episode), env.layout.n_actions)
        try:
            obs, reward, terminated, truncated, info = env.step(a)
        except ValueError as exc:
            if 0 <= a < len(mask) and mask[a]:  # a legal action: the env's own error, not the policy's
                raise
            raise PolicyCodeError(f"policy {policy.name!r} on {_place(env, episode)}: act() returned an illegal "
                                  f"action: {exc}") from None
        total += reward
        seq.append(a)
        if terminated or truncated:
            return seq, info, total
        mask = info["action_mask"]


def _place(env: CoBaEnv, episode: int) -> str:
    return episode_place(env.config.pool, episode)
