"""Replay routing policies over the route episodes of a pool (``coba bench --env route``): one record per problem.

The route twin of ``eval.runner``: a policy with a batched form plays through ``RouteVectorEnv``
(``eval.batched_replay.replay_batched``), any other one episode at a time through ``RouteEnv``; both give the
same records. A record has the replay records' columns (``eval.runner.RECORD_COLUMNS``; ``episode_id`` is the
route episode, ``generator`` the item's generators joined by "+") plus, per generator g of the layout,
``samples:<g>`` (candidates drawn from g) and ``gen_cost:<g>`` (their generation cost in the bench's cost
measure): the allocation by generator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agents.base import Policy
from agents.routing_base import is_route_policy
from coba_env import RouteEnv, RouteVectorEnv
from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES
from coba_env.rules.actions import ActionLayout
from coba_env.rules.roles import primary_slots
from eval.batched_replay import DEFAULT_BATCH, action_strings, replay_batched
from eval.runner import (
    REPLAY_MODES,
    BenchRun,
    PolicyRun,
    _describe,
    _progress_bar,
    _records_frame,
    empty_records,
    resolve_unique_policies,
)


def samples_column(generator: str) -> str:
    """The record column counting the candidates drawn from ``generator``."""
    return f"samples:{generator}"


def cost_column(generator: str) -> str:
    """The record column holding the generation cost spent on ``generator`` (bench cost measure)."""
    return f"gen_cost:{generator}"


def verifier_columns(layout: ActionLayout, roles: Sequence[str], counts: np.ndarray) -> dict[str, np.ndarray]:
    """The records' n_v1, n_v2, n_v3 from per-action counts [E, A]: the calls of the verifiers standing for the
    paper's V1, V2, V3 by their declared ``roles`` (``coba_env.rules.roles.primary_slots``, as
    ``eval.runner.verifier_counts``; zeros where the pool has none)."""
    zeros = np.zeros(len(counts), dtype=np.int64)
    return {f"n_v{k + 1}": counts[:, layout.verify_action(s)] if s >= 0 else zeros
            for k, s in enumerate(primary_slots(roles))}


def replay_route_policy(policy: Policy, pool: CompiledPool, *, cost_model: str = "p_tokens", lam: float = 0.0,
                        progress: Callable[[int], Any] | None = None, seed: int = 0, replay: str = "batched",
                        batch: int = DEFAULT_BATCH) -> PolicyRun:
    """Replay ``policy`` on every route episode of ``pool`` (a compiled replay pool); a ``PolicyRun``."""
    if replay not in REPLAY_MODES:
        raise ValueError(f"unknown replay mode {replay!r}; expected one of {list(REPLAY_MODES)}")
    start = time.perf_counter()
    env_kwargs = dict(policy.env_kwargs())
    meta = dict(name=policy.name, label=getattr(policy, "label", policy.name),
                group=str(getattr(policy, "group", "baseline")), uses_labels=bool(getattr(policy, "uses_labels",
                                                                                          False)),
                description=_describe(policy))
    venv = RouteVectorEnv(1, pool, cost_model=cost_model, lam=lam, order="sequential", **env_kwargs)
    env = venv.single
    route = venv.route
    if not is_route_policy(policy):
        ok, reason = False, "a replay-env policy (one generator per episode); route envs run the routing policies"
    else:
        ok, reason = policy.applicable(env)
    if not ok:
        if progress is not None:
            progress(route.pool.n_episodes)
        return PolicyRun(records=empty_records(), not_applicable=reason or "not applicable", **meta)
    codes = list(env.layout.names)
    use_batch = replay == "batched" and policy.batched
    if use_batch:
        venv = RouteVectorEnv(max(1, min(batch, route.pool.n_episodes)), pool, cost_model=cost_model, lam=lam,
                              order="sequential", **env_kwargs)
        use_batch = policy.supports_batch(venv)
    if use_batch:
        cols = _batched(policy, venv, codes, seed, progress)
    else:
        env = RouteEnv(pool, cost_model=cost_model, lam=lam, **env_kwargs)
        cols = _single(policy, env, codes, seed, progress)
    frame = _records_frame(policy.name, route.pool, cols)
    for g in route.generators:
        frame[samples_column(g)] = np.asarray(cols[samples_column(g)], dtype=np.int64)
        frame[cost_column(g)] = np.asarray(cols[cost_column(g)], dtype=np.float64)
    return PolicyRun(records=frame, seconds=time.perf_counter() - start, **meta)


def _batched(policy: Policy, venv: RouteVectorEnv, codes: list[str], seed: int,
             progress: Callable[[int], Any] | None) -> dict[str, Any]:
    out = replay_batched(policy, venv, seed=seed, progress=progress)
    log = out["actions"].astype(np.int64)
    actions, counts = action_strings(out["actions"], codes)
    route, layout, pool = venv.route, venv.layout, venv.route.pool
    n_gen, n_per = route.n_generators, route.n_per_generator
    # The pool candidate of the selected slot: the (s+1)-th SAMPLE of the row drew generator g's k-th candidate.
    is_sample = (log >= 0) & (log < n_gen)
    sel = out["selected_candidate"]
    rows = np.arange(len(log))
    pos = np.argmax(np.cumsum(is_sample, axis=1) == (sel + 1)[:, None], axis=1)
    g_sel = np.clip(log[rows, pos], 0, n_gen - 1)
    k_sel = np.cumsum(log == g_sel[:, None], axis=1)[rows, pos] - 1  # g's samples up to that one
    candidate = g_sel * n_per + np.maximum(k_sel, 0)
    answers = pool.answer[rows, candidate]
    answers[sel < 0] = None
    costs = out["costs"]
    cols: dict[str, Any] = {
        "actions": actions, "n_actions": counts.sum(axis=1) - counts[:, layout.stop_action],
        "n_samples": counts[:, :n_gen].sum(axis=1),
        **verifier_columns(layout, pool.verifier_roles, counts),
        "selected_candidate": sel, "selected_answer": answers, "correct": out["correct"],
        **{m: costs[:, k] for k, m in enumerate(COST_MEASURES)}, "reward": out["reward"],
    }
    prefix = np.cumsum(pool.gen_cost[:, :, venv.cost_k].reshape(len(log), n_gen, n_per), axis=2)
    for g, name in enumerate(route.generators):
        drawn = counts[:, g]
        cols[samples_column(name)] = drawn
        cols[cost_column(name)] = np.where(drawn > 0, prefix[rows, g, np.maximum(drawn - 1, 0)], 0.0)
    return cols


def _single(policy: Policy, env: RouteEnv, codes: list[str], seed: int,
            progress: Callable[[int], Any] | None) -> dict[str, Any]:
    gens, layout, measure = env.layout.generators, env.layout, COST_MEASURES[env.config.cost_k]
    keys = ("actions", "n_actions", "n_samples", "n_v1", "n_v2", "n_v3", "selected_candidate", "selected_answer",
            "correct", *COST_MEASURES, "reward", *map(samples_column, gens), *map(cost_column, gens))
    cols: dict[str, list] = {k: [] for k in keys}
    for i in range(env.n_episodes):
        obs, info = env.reset(seed=seed if i == 0 else None, options={"episode": i})
        policy.reset(env)
        evidence, mask, total, seq = env.evidence, info["action_mask"], 0.0, []
        while True:
            a = int(policy.act(obs, mask, evidence))
            obs, reward, terminated, truncated, info = env.step(a)
            total += reward
            seq.append(a)
            if terminated or truncated:
                break
            mask = info["action_mask"]
        cols["actions"].append(" ".join(codes[a] for a in seq))
        cols["n_actions"].append(len(seq) - seq.count(layout.stop_action))
        cols["n_samples"].append(sum(1 for a in seq if layout.is_sample(a)))
        counts = np.bincount(seq, minlength=layout.n_actions)[None, :]
        for key, n in verifier_columns(layout, env.pool.verifier_roles, counts).items():
            cols[key].append(int(n[0]))
        cols["selected_candidate"].append(int(info["selected_candidate"]))
        cols["selected_answer"].append(info["selected_answer"])
        cols["correct"].append(bool(info["correct"]))
        for m in COST_MEASURES:
            cols[m].append(info["costs"][m])
        cols["reward"].append(total)
        for g in gens:
            cols[samples_column(g)].append(info["samples_by_generator"][g])
            cols[cost_column(g)].append(info["spend_by_generator"][g][measure])
        if progress is not None:
            progress(1)
    return cols


def run_route_policies(policies: Sequence[str | Policy], pool: CompiledPool, *, cost_model: str = "p_tokens",
                       lam: float = 0.0, progress: bool = True, seed: int = 0, replay: str = "batched") -> BenchRun:
    """Replay every policy on every route episode of ``pool``, in one process (route episodes are few)."""
    start = time.perf_counter()
    resolved = resolve_unique_policies(policies)
    total = len(resolved) * len({(d, i) for d, i in zip(pool.dataset.tolist(), pool.item_id.tolist(), strict=True)})
    bar = _progress_bar(total, progress)
    try:
        runs = [replay_route_policy(p, pool, cost_model=cost_model, lam=lam, seed=seed, replay=replay,
                                    progress=bar.update if bar is not None else None) for p in resolved]
    finally:
        if bar is not None:
            bar.close()
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=1)
