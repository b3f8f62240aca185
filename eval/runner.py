"""Replay policies over every episode of a compiled pool, one record per (policy, episode).

A record holds what the policy did (its compact action string and action counts), what it selected, whether
that was correct, what it cost in every measure, and ``oracle_available``: whether the pool held a correct
candidate at all. That last field is evaluator-side (read from ``CompiledPool.labels``) and exists only to
split errors into allocation and generation errors; no policy ever sees it.

``run_policies`` runs a list of policies, in one process or in worker processes that share the compiled pool
by ``fork`` (one task per policy, so a policy's episodes always replay in order in one process, exactly as
in a single-process run).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv

#: Columns of an episode-records frame, in order.
RECORD_COLUMNS: tuple[str, ...] = (
    "policy", "episode_id", "dataset", "generator", "item_id", "actions", "n_actions", "n_samples",
    "n_v1", "n_v2", "n_v3", "selected_candidate", "selected_answer", "correct", "tokens", "p_tokens",
    "calls", "latency", "reward", "oracle_available",
)

#: Compact action codes used in the ``actions`` string ("S S V1 V1 V3 STOP").
ACTION_CODES: dict[str, str] = {"SAMPLE": "S", "VERIFY_V1": "V1", "VERIFY_V2": "V2", "VERIFY_V3": "V3",
                                "STOP": "STOP"}

#: How many episodes pass between two progress updates (a tqdm update per episode would cost ~10%).
_PROGRESS_EVERY = 128


@dataclass
class PolicyRun:
    """One policy's replay: its records (empty when not applicable), the reason if skipped, and timing."""

    name: str
    label: str
    group: str
    uses_labels: bool
    records: pd.DataFrame
    not_applicable: str | None = None
    seconds: float = 0.0
    description: dict[str, Any] = field(default_factory=dict)

    @property
    def applicable(self) -> bool:
        """Whether the policy ran (False when it was reported as not applicable)."""
        return self.not_applicable is None


@dataclass
class BenchRun:
    """Every policy's replay on one pool: the concatenated records and the per-policy runs."""

    runs: list[PolicyRun]
    seconds: float
    workers: int

    @property
    def records(self) -> pd.DataFrame:
        """All applicable policies' episode records in one frame (policy order preserved)."""
        frames = [r.records for r in self.runs if r.applicable and len(r.records)]
        if not frames:
            return empty_records()
        return pd.concat(frames, ignore_index=True)

    @property
    def not_applicable(self) -> dict[str, str]:
        """Policy name -> reason, for the policies that did not run."""
        return {r.name: r.not_applicable for r in self.runs if r.not_applicable is not None}

    def get(self, name: str) -> PolicyRun | None:
        """The run of policy ``name``, or None."""
        return next((r for r in self.runs if r.name == name), None)


def empty_records() -> pd.DataFrame:
    """An episode-records frame with no rows and every column."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in RECORD_COLUMNS})


def make_env(policy: Policy, pool: CompiledPool, *, cost_model: str = "p_tokens", lam: float = 0.0) -> CoBaEnv:
    """The environment ``policy`` runs in: the compiled pool, the cost model, lambda and its own kwargs."""
    return CoBaEnv(pool=pool, cost_model=cost_model, lam=lam, **policy.env_kwargs())


def run_policy(policy: Policy, pool: CompiledPool, *, cost_model: str = "p_tokens", lam: float = 0.0,
               progress: Callable[[int], Any] | None = None, seed: int = 0) -> pd.DataFrame:
    """Replay ``policy`` on every episode of ``pool``: one record per episode (``RECORD_COLUMNS``).

    A policy that is not applicable to the pool gives an empty frame whose ``attrs["not_applicable"]`` holds
    the reason. ``progress(n)`` is called as episodes finish.
    """
    run = replay_policy(policy, pool, cost_model=cost_model, lam=lam, progress=progress, seed=seed)
    frame = run.records
    frame.attrs.update(policy=run.name, label=run.label, group=run.group, seconds=run.seconds,
                       not_applicable=run.not_applicable)
    return frame


def replay_policy(policy: Policy, pool: CompiledPool, *, cost_model: str = "p_tokens", lam: float = 0.0,
                  progress: Callable[[int], Any] | None = None, seed: int = 0,
                  episode_ids: Sequence[int] | None = None) -> PolicyRun:
    """Like ``run_policy``, returning a ``PolicyRun`` (records, not-applicable reason, timing, metadata).

    ``episode_ids`` replays only those episodes (in pool order), in an env over the whole pool, so each
    record equals the one a full replay gives for that episode.
    """
    start = time.perf_counter()
    env = make_env(policy, pool, cost_model=cost_model, lam=lam)
    meta = dict(name=policy.name, label=getattr(policy, "label", policy.name),
                group=str(getattr(policy, "group", "baseline")), uses_labels=bool(getattr(policy, "uses_labels",
                                                                                          False)),
                description=_describe(policy))
    ok, reason = policy.applicable(env)
    if not ok:
        if progress is not None:
            progress(len(selected_rows(pool, episode_ids)))
        return PolicyRun(records=empty_records(), not_applicable=reason or "not applicable", **meta)

    rows = selected_rows(pool, episode_ids)
    n = len(rows)
    oracle_available = pool.labels.correct.any(axis=1)[rows]
    codes = [ACTION_CODES.get(a, a) for a in env.actions]
    sample, stop = env.SAMPLE, env.STOP
    cols: dict[str, list] = {c: [] for c in ("actions", "n_actions", "n_samples", "n_v1", "n_v2", "n_v3",
                                               "selected_candidate", "selected_answer", "correct", "tokens",
                                               "p_tokens", "calls", "latency", "reward")}
    pending = 0
    for j, i in enumerate(rows.tolist()):
        # Seed once so that a stochastic policy drawing from env.np_random is reproducible; later resets keep
        # the generator running.
        obs, info = env.reset(seed=seed if j == 0 else None, options={"episode": i})
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
        cols["n_v1"].append(counts[1])
        cols["n_v2"].append(counts[2])
        cols["n_v3"].append(counts[3])
        cols["selected_candidate"].append(int(info.get("selected_candidate", -1)))
        cols["selected_answer"].append(info.get("selected_answer"))
        cols["correct"].append(bool(info.get("correct", False)))
        cols["tokens"].append(costs["tokens"])
        cols["p_tokens"].append(costs["p_tokens"])
        cols["calls"].append(costs["calls"])
        cols["latency"].append(costs["latency"])
        cols["reward"].append(total)
        pending += 1
        if progress is not None and pending >= _PROGRESS_EVERY:
            progress(pending)
            pending = 0
    if progress is not None and pending:
        progress(pending)

    frame = pd.DataFrame({
        "policy": pd.Series([policy.name] * n, dtype=object),
        "episode_id": pool.episode_ids[rows].astype(np.int64),
        "dataset": pool.dataset[rows].astype(str),
        "generator": pool.generator[rows].astype(str),
        "item_id": pool.item_id[rows].astype(str),
        **{k: cols[k] for k in ("actions",)},
        **{k: np.asarray(cols[k], dtype=np.int64) for k in ("n_actions", "n_samples", "n_v1", "n_v2", "n_v3",
                                                            "selected_candidate")},
        "selected_answer": pd.Series([None if v is None else str(v) for v in cols["selected_answer"]],
                                     dtype=object),
        "correct": np.asarray(cols["correct"], dtype=bool),
        **{k: np.asarray(cols[k], dtype=np.float64) for k in ("tokens", "p_tokens", "calls", "latency",
                                                              "reward")},
        "oracle_available": oracle_available.astype(bool),
    })
    return PolicyRun(records=frame[list(RECORD_COLUMNS)], seconds=time.perf_counter() - start, **meta)


def selected_rows(pool: CompiledPool, episode_ids: Sequence[int] | None) -> np.ndarray:
    """Row indices of ``pool`` holding ``episode_ids`` (every row when None), in pool order; an id the pool
    does not hold raises ``ValueError`` naming it."""
    if episode_ids is None:
        return np.arange(pool.n_episodes)
    wanted = np.asarray(list(episode_ids), dtype=np.int64)
    missing = np.setdiff1d(wanted, pool.episode_ids)
    if len(missing):
        raise ValueError(f"episode_ids not in the pool: {missing[:5].tolist()}")
    return np.flatnonzero(np.isin(pool.episode_ids, wanted))


def _describe(policy: Policy) -> dict[str, Any]:
    try:
        return dict(policy.describe())
    except Exception:  # a description is informative only; never fail a bench over it
        return {"name": policy.name}


# ---------------------------------------------------------------- many policies
# Worker processes inherit these through fork: the compiled pool (large numpy arrays and the per-episode
# Python rows) is never pickled.
_SHARED: dict[str, Any] = {}


def _worker_run(index: int) -> PolicyRun:
    shared = _SHARED
    counter = shared["counter"]

    def tick(k: int) -> None:
        with counter.get_lock():
            counter.value += k

    return replay_policy(shared["policies"][index], shared["pool"], cost_model=shared["cost_model"],
                      lam=shared["lam"], progress=tick, seed=shared["seed"], episode_ids=shared["episode_ids"])


def default_workers(n_policies: int, n_episodes: int) -> int:
    """Worker processes to use by default: 1 for small runs, else up to 2 (bounded by the CPUs present)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if n_policies < 2 or n_policies * n_episodes < 20_000 or "fork" not in mp.get_all_start_methods():
        return 1
    return max(1, min(2, cpus, n_policies))


def resolve_policies(policies: Sequence[str | Policy], specs: dict | None = None) -> list[Policy]:
    """Policy objects for a mix of registry names and ready ``Policy`` instances."""
    out = []
    for p in policies:
        if isinstance(p, str):
            from agents.registry import make_policy

            out.append(make_policy(p, specs=specs))
        else:
            out.append(p)
    return out


def run_policies(policies: Sequence[str | Policy], pool: CompiledPool, *, cost_model: str = "p_tokens",
                 lam: float = 0.0, progress: bool = True, workers: int | None = None,
                 seed: int = 0, specs: dict | None = None, episode_ids: Sequence[int] | None = None) -> BenchRun:
    """Replay every policy (registry names or ``Policy`` objects) on every episode of ``pool`` (or only on
    ``episode_ids``, see ``replay_policy``).

    Shows a tqdm bar over policies x episodes. ``workers`` > 1 runs policies in forked worker processes;
    None picks ``default_workers``.
    """
    start = time.perf_counter()
    policies = resolve_policies(policies, specs)
    names = [p.name for p in policies]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"policy names must be unique; repeated: {dupes}")
    pool.episode_rows()  # build the per-episode rows once, before any fork
    if workers is None:
        workers = default_workers(len(policies), pool.n_episodes)
    workers = max(1, min(int(workers), max(1, len(policies))))
    total = len(policies) * len(selected_rows(pool, episode_ids))
    if workers == 1 or "fork" not in mp.get_all_start_methods():
        workers = 1
        runs = []
        bar = _progress_bar(total, progress)
        try:
            for p in policies:
                if bar is not None:
                    bar.set_postfix_str(p.name)
                runs.append(replay_policy(p, pool, cost_model=cost_model, lam=lam, seed=seed,
                                          progress=bar.update if bar is not None else None,
                                          episode_ids=episode_ids))
        finally:
            if bar is not None:
                bar.close()
    else:
        runs = _run_forked(policies, pool, cost_model, lam, seed, workers, lambda: _progress_bar(total, progress),
                           episode_ids)
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=workers)


def _run_forked(policies: list[Policy], pool: CompiledPool, cost_model: str, lam: float, seed: int,
                workers: int, make_bar: Callable[[], Any],
                episode_ids: Sequence[int] | None = None) -> list[PolicyRun]:
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)
    _SHARED.update(policies=policies, pool=pool, cost_model=cost_model, lam=lam, seed=seed, counter=counter,
                   episode_ids=episode_ids)
    # Longest first (more samples and verifications -> more steps) so the two workers finish together.
    order = sorted(range(len(policies)), key=lambda i: -_expected_steps(policies[i]))
    results: dict[int, PolicyRun] = {}
    shown = 0
    bar = None
    try:
        with ctx.Pool(workers) as procs:
            # The bar (and its monitor thread) starts only after the workers are forked.
            bar = make_bar()
            pending = {i: procs.apply_async(_worker_run, (i,)) for i in order}
            while pending:
                for i in [i for i, r in pending.items() if r.ready()]:
                    results[i] = pending.pop(i).get()
                if bar is not None:
                    done = counter.value
                    if done > shown:
                        bar.update(done - shown)
                        shown = done
                if pending:
                    time.sleep(0.05)
    finally:
        _SHARED.clear()
        if bar is not None:
            bar.close()
    return [results[i] for i in range(len(policies))]


def _expected_steps(policy: Policy) -> float:
    desc = _describe(policy)
    params = desc.get("params") if isinstance(desc.get("params"), dict) else {}
    for key in ("n_max", "n", "max_samples"):
        for source in (params, desc):
            value = source.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return 8.0


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or total <= 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="coba bench", unit="ep", unit_scale=True, leave=False, smoothing=0.05)
