"""Replay policies over every episode of a compiled pool, one record per (policy, episode).

A record holds what the policy did (its compact action string and action counts), what it selected, whether
that was correct, what it cost in every measure, and ``oracle_available``: whether the pool held a correct
candidate at all. That last field is evaluator-side (read from ``CompiledPool.labels``) and exists only to
split errors into allocation and generation errors; no policy ever sees it.

Each policy is replayed batched through ``CoBaVectorEnv`` (``eval.batched_replay``) when it has a batched form,
else one episode at a time (``eval.single_replay``); both give the same records. ``run_policies`` runs a list of
policies, in one process or in worker processes that share the compiled pool by ``fork`` (one task per policy),
optionally on a subset of the episodes (``episode_ids``: records independent of how episodes are split).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES
from coba_env.env import CoBaEnv
from coba_env.rules.config import default_budget
from coba_env.rules.roles import primary_slots
from eval.batched_replay import DEFAULT_BATCH, action_strings, batched_env, replay_batched
from eval.single_replay import replay_single

#: Columns of an episode-records frame, in order.
RECORD_COLUMNS: tuple[str, ...] = (
    "policy", "episode_id", "dataset", "generator", "item_id", "actions", "n_actions", "n_samples",
    "n_v1", "n_v2", "n_v3", "selected_candidate", "selected_answer", "correct", "tokens", "p_tokens",
    "calls", "latency", "reward", "oracle_available",
)

#: Compact action codes used in the ``actions`` string ("S S V1 V1 V3 STOP").
ACTION_CODES: dict[str, str] = {"SAMPLE": "S", "VERIFY_V1": "V1", "VERIFY_V2": "V2", "VERIFY_V3": "V3",
                                "STOP": "STOP"}

def action_codes(names: list[str]) -> list[str]:
    """The compact code of each action name: ``ACTION_CODES``, else a VERIFY's verifier name, else the name."""
    return [ACTION_CODES.get(a, a.removeprefix("VERIFY_")) for a in names]


def verifier_counts(env: CoBaEnv, counts: np.ndarray) -> dict[str, np.ndarray]:
    """n_v1, n_v2, n_v3 from per-action counts [E, A]: the calls of the verifiers standing for the paper's V1,
    V2, V3 (``coba_env.rules.roles.primary_slots``; zeros where the pool has none)."""
    slots = primary_slots(env.pool.verifier_roles)
    zeros = np.zeros(len(counts), dtype=counts.dtype)
    return {f"n_v{k + 1}": counts[:, env.layout.verify_action(s)] if s >= 0 else zeros
            for k, s in enumerate(slots)}


#: Replay modes: "batched" (``CoBaVectorEnv`` for every policy with a batched form) or "single" (one episode
#: at a time, the reference).
REPLAY_MODES: tuple[str, ...] = ("batched", "single")

#: Episode-policies from which ``default_workers`` forks 2 workers (one-episode / batched replay).
_FORK_MIN_SINGLE, _FORK_MIN_BATCHED = 20_000, 10_000_000



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

    def share_records(self, records: pd.DataFrame) -> None:
        """Make each run's records a row slice of ``records`` (``self.records``, concatenated in policy order),
        so that the per-policy frames and the whole one do not both stay in memory."""
        start = 0
        for r in self.runs:
            if r.applicable and len(r.records):
                stop = start + len(r.records)
                r.records = records.iloc[start:stop]
                start = stop

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
               progress: Callable[[int], Any] | None = None, seed: int = 0, replay: str = "batched",
               episode_ids: np.ndarray | None = None) -> pd.DataFrame:
    """Replay ``policy`` on every episode of ``pool``: one record per episode (``RECORD_COLUMNS``).

    A policy that is not applicable to the pool gives an empty frame whose ``attrs["not_applicable"]`` holds
    the reason. ``progress(n)`` is called as episodes finish.
    """
    run = replay_policy(policy, pool, cost_model=cost_model, lam=lam, progress=progress, seed=seed, replay=replay,
                        episode_ids=episode_ids)
    frame = run.records
    frame.attrs.update(policy=run.name, label=run.label, group=run.group, seconds=run.seconds,
                       not_applicable=run.not_applicable)
    return frame


def replay_policy(policy: Policy, pool: CompiledPool, *, cost_model: str = "p_tokens", lam: float = 0.0,
                  progress: Callable[[int], Any] | None = None, seed: int = 0, replay: str = "batched",
                  episode_ids: np.ndarray | None = None, batch: int = DEFAULT_BATCH) -> PolicyRun:
    """Like ``run_policy``, returning a ``PolicyRun`` (records, not-applicable reason, timing, metadata).

    ``replay`` "batched" plays a policy with a batched form (``Policy.batched``) through ``CoBaVectorEnv``
    (``eval.batched_replay``), any other one episode at a time; "single" always plays one episode at a time.
    ``episode_ids`` (pool episode ids) replays only those episodes, in pool order, with the whole pool's
    budget, so that records do not depend on how episodes are split.
    """
    if replay not in REPLAY_MODES:
        raise ValueError(f"unknown replay mode {replay!r}; expected one of {list(REPLAY_MODES)}")
    start = time.perf_counter()
    env_kwargs = dict(policy.env_kwargs())
    if episode_ids is not None:
        env_kwargs.setdefault("budget", default_budget(pool, cost_model, pool.n_candidates))
        pool = pool.select(episode_indices(pool, episode_ids))
    use_batch = replay == "batched" and policy.batched and pool.n_episodes > 0
    if use_batch:
        # The one-episode env answers ``applicable`` and names the actions; over the first episode only (same
        # configuration and budget), since a whole-pool one builds per-episode Python rows the batch never reads.
        env_kwargs.setdefault("budget", default_budget(pool, cost_model, pool.n_candidates))
        env = CoBaEnv(pool=pool.select(np.arange(1)), cost_model=cost_model, lam=lam, **env_kwargs)
    else:
        env = CoBaEnv(pool=pool, cost_model=cost_model, lam=lam, **env_kwargs)
    meta = dict(name=policy.name, label=getattr(policy, "label", policy.name),
                group=str(getattr(policy, "group", "baseline")), uses_labels=bool(getattr(policy, "uses_labels",
                                                                                          False)),
                description=_describe(policy))
    ok, reason = policy.applicable(env)
    if not ok:
        if progress is not None:
            progress(pool.n_episodes)
        return PolicyRun(records=empty_records(), not_applicable=reason or "not applicable", **meta)
    codes = action_codes(env.actions)
    venv = None
    if use_batch:
        venv = batched_env(policy, pool, batch=batch, cost_model=cost_model, lam=lam, env_kwargs=env_kwargs)
        if not policy.supports_batch(venv):
            venv = None
            env = CoBaEnv(pool=pool, cost_model=cost_model, lam=lam, **env_kwargs)
    if venv is not None:
        out = replay_batched(policy, venv, seed=seed, progress=progress)
        actions, counts = action_strings(out["actions"], codes)
        del out["actions"]
        cols = _batched_columns(out, counts, env, pool)
        cols["actions"] = actions
    else:
        cols = replay_single(policy, env, pool, codes, progress, seed)
    frame = _records_frame(policy.name, pool, cols)
    return PolicyRun(records=frame, seconds=time.perf_counter() - start, **meta)


def episode_indices(pool: CompiledPool, episode_ids: np.ndarray) -> np.ndarray:
    """Row indices of ``episode_ids`` in ``pool``, in pool order (unique); ValueError naming an id the pool lacks.

    The pool's ids need not be sorted (a pool selected with an index array keeps that array's order)."""
    ids = np.unique(np.asarray(episode_ids, dtype=np.int64))
    order = np.argsort(pool.episode_ids, kind="stable")
    sorted_ids = pool.episode_ids[order]
    at = np.searchsorted(sorted_ids, ids)
    found = (at < pool.n_episodes) & (sorted_ids[np.minimum(at, pool.n_episodes - 1)] == ids)
    if not found.all():
        raise ValueError(f"episode_ids: episode id {int(ids[~found][0])} is not in the pool")
    return np.sort(order[at])


def _batched_columns(out: dict[str, np.ndarray], counts: np.ndarray, env: CoBaEnv,
                     pool: CompiledPool) -> dict[str, Any]:
    sel = out["selected_candidate"]
    answers = pool.answer[np.arange(pool.n_episodes), np.maximum(sel, 0)]
    answers[sel < 0] = None
    costs = out["costs"]
    return {
        "n_actions": counts.sum(axis=1) - counts[:, env.STOP], "n_samples": counts[:, env.SAMPLE],
        **verifier_counts(env, counts), "selected_candidate": sel,
        "selected_answer": answers, "correct": out["correct"],
        **{m: costs[:, k] for k, m in enumerate(COST_MEASURES)},
        "reward": out["reward"],
    }


def _records_frame(name: str, pool: CompiledPool, cols: dict[str, Any]) -> pd.DataFrame:
    """The records frame (``RECORD_COLUMNS``) of one policy from its per-episode columns."""
    n = pool.n_episodes
    frame = pd.DataFrame({
        "policy": pd.Series(name, index=pd.RangeIndex(n), dtype="str"),  # grouped on: Arrow strings factorize fast
        **pool.record_columns(),
        "actions": pd.Series(np.asarray(cols["actions"], dtype=object), dtype=object),
        **{k: np.asarray(cols[k], dtype=np.int64) for k in ("n_actions", "n_samples", "n_v1", "n_v2", "n_v3",
                                                            "selected_candidate")},
        "selected_answer": pd.Series([None if v is None else str(v) for v in cols["selected_answer"]],
                                     dtype=object),
        "correct": np.asarray(cols["correct"], dtype=bool),
        **{k: np.asarray(cols[k], dtype=np.float64) for k in ("tokens", "p_tokens", "calls", "latency",
                                                              "reward")},
        "oracle_available": pool.labels.correct.any(axis=1).astype(bool),
    })
    if pool.usd_priced:  # dollars only where the pool prices every model (else no usd column at all)
        frame["usd"] = np.asarray(cols["usd"], dtype=np.float64)
        return frame[[*RECORD_COLUMNS, "usd"]]
    return frame[list(RECORD_COLUMNS)]


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
                         lam=shared["lam"], progress=tick, seed=shared["seed"], replay=shared["replay"],
                         episode_ids=shared["episode_ids"])


def default_workers(n_policies: int, n_episodes: int, *, batched: bool = False) -> int:
    """Worker processes to use by default: 1 for small runs, else up to 2 (bounded by the CPUs present).

    A batched replay plays about 20x more episode-policies per second, and a forked worker returns its records
    pickled (a second copy in the parent), so it forks only for far larger runs (not the 2.2M episode-policies
    of a 100k-episode pool, which replays in ~20 s in one process; docs/PERFORMANCE.md).
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    small = n_policies * n_episodes < (_FORK_MIN_BATCHED if batched else _FORK_MIN_SINGLE)
    if n_policies < 2 or small or "fork" not in mp.get_all_start_methods():
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


def resolve_unique_policies(policies: Sequence[str | Policy], specs: dict | None = None) -> list[Policy]:
    """``resolve_policies``, refusing two policies of one name (their records could not be told apart)."""
    resolved = resolve_policies(policies, specs)
    names = [p.name for p in resolved]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"policy names must be unique; repeated: {dupes}")
    return resolved


def run_policies(policies: Sequence[str | Policy], pool: CompiledPool, *, cost_model: str = "p_tokens",
                 lam: float = 0.0, progress: bool = True, workers: int | None = None,
                 seed: int = 0, specs: dict | None = None, replay: str = "batched",
                 episode_ids: np.ndarray | None = None) -> BenchRun:
    """Replay every policy (registry names or ``Policy`` objects) on every episode of ``pool``.

    Shows a tqdm bar over policies x episodes (on a terminal, unless ``progress`` is False). ``workers`` > 1
    runs policies in forked worker processes; None picks ``default_workers``. ``replay`` is "batched" (the
    default: ``CoBaVectorEnv`` for every policy with a batched form) or "single" (one episode at a time).
    ``episode_ids`` replays only those pool episodes: each policy's records come in pool order and equal
    the whole replay's records of those episodes, however the ids are split.
    """
    if replay not in REPLAY_MODES:
        raise ValueError(f"unknown replay mode {replay!r}; expected one of {list(REPLAY_MODES)}")
    start = time.perf_counter()
    policies = resolve_unique_policies(policies, specs)
    if episode_ids is not None:
        episode_ids = pool.episode_ids[episode_indices(pool, episode_ids)]
    n_episodes = pool.n_episodes if episode_ids is None else len(episode_ids)
    if replay == "single" or not all(p.batched for p in policies):
        pool.episode_rows()  # the one-episode env's per-episode rows, built once before any fork
    if workers is None:
        workers = default_workers(len(policies), n_episodes, batched=replay == "batched")
    workers = max(1, min(int(workers), max(1, len(policies))))
    total = len(policies) * n_episodes
    if workers == 1 or "fork" not in mp.get_all_start_methods():
        workers = 1
        runs = []
        bar = _progress_bar(total, progress)
        try:
            for p in policies:
                if bar is not None:
                    bar.set_postfix_str(p.name)
                runs.append(replay_policy(p, pool, cost_model=cost_model, lam=lam, seed=seed, replay=replay,
                                          episode_ids=episode_ids,
                                          progress=bar.update if bar is not None else None))
        finally:
            if bar is not None:
                bar.close()
    else:
        runs = _run_forked(policies, pool, dict(cost_model=cost_model, lam=lam, seed=seed, replay=replay,
                                                episode_ids=episode_ids),
                           workers, lambda: _progress_bar(total, progress))
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=workers)


def _run_forked(policies: list[Policy], pool: CompiledPool, options: dict[str, Any], workers: int,
                make_bar: Callable[[], Any]) -> list[PolicyRun]:
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)
    _SHARED.update(policies=policies, pool=pool, counter=counter, **options)
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
    if not enabled or total <= 0 or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="coba bench", unit="ep", unit_scale=True, leave=False, smoothing=0.05)
