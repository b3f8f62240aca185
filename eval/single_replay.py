"""The one-episode replay: a policy's scalar ``act`` on ``CoBaEnv``, episode after episode.

The reference the batched replay (``eval.batched_replay``) equals record for record, and the path of a policy
without a batched form. ``eval.runner`` turns the columns it returns into a records frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv
from coba_env.rules.roles import primary_slots

#: How many episodes pass between two progress updates (a tqdm update per episode would cost ~10%).
PROGRESS_EVERY = 128


def replay_single(policy: Policy, env: CoBaEnv, pool: CompiledPool, codes: list[str],
                   progress: Callable[[int], Any] | None, seed: int) -> dict[str, Any]:
    """The one-episode replay: ``policy.act`` on ``env`` episode by episode (the reference the batched one equals)."""
    n = pool.n_episodes
    sample, stop = env.SAMPLE, env.STOP
    slots = primary_slots(pool.verifier_roles)
    cols: dict[str, list] = {c: [] for c in ("actions", "n_actions", "n_samples", "n_v1", "n_v2", "n_v3",
                                               "selected_candidate", "selected_answer", "correct", "tokens",
                                               "p_tokens", "calls", "latency", "usd", "reward")}
    pending = 0
    for i in range(n):
        # Seed once so that a stochastic policy drawing from env.np_random is reproducible; later resets keep
        # the generator running.
        obs, info = env.reset(seed=seed if i == 0 else None, options={"episode": i})
        policy.reset(env)
        evidence = env.evidence
        mask = info["action_mask"]
        total = 0.0
        seq: list[int] = []
        while True:
            a = int(policy.act(obs, mask, evidence))
            try:
                obs, reward, terminated, truncated, info = env.step(a)
            except ValueError as exc:
                raise RuntimeError(f"policy {policy.name!r} failed on episode index {i} "
                                   f"(episode_id {int(pool.episode_ids[i])}): {exc}") from exc
            total += reward
            seq.append(a)
            if terminated or truncated:
                break
            mask = info["action_mask"]
        counts = [0] * len(codes)
        for a in seq:
            counts[a] += 1
        costs = info["costs"]
        cols["actions"].append(" ".join(codes[a] for a in seq))
        cols["n_actions"].append(len(seq) - counts[stop])
        cols["n_samples"].append(counts[sample])
        for k, s in enumerate(slots):  # the verifiers standing for the paper's V1..V3
            cols[f"n_v{k + 1}"].append(counts[env.layout.verify_action(s)] if s >= 0 else 0)
        cols["selected_candidate"].append(int(info.get("selected_candidate", -1)))
        cols["selected_answer"].append(info.get("selected_answer"))
        cols["correct"].append(bool(info.get("correct", False)))
        cols["tokens"].append(costs["tokens"])
        cols["p_tokens"].append(costs["p_tokens"])
        cols["calls"].append(costs["calls"])
        cols["latency"].append(costs["latency"])
        cols["usd"].append(costs["usd"])
        cols["reward"].append(total)
        pending += 1
        if progress is not None and pending >= PROGRESS_EVERY:
            progress(pending)
            pending = 0
    if progress is not None and pending:
        progress(pending)
    return cols
