"""Replay policies over every episode of a compiled pool, one record per (policy, episode) (``eval.records``).

The episodes are grouped as the env's configuration says (``EnvConfig.grouping``): "pair", one episode per (item,
generator) (``coba/Replay-v0``), or "item", one episode per item with all its generators (``coba/Route-v0``); a
policy runs on the grouping it is written for (``agents.routing_base.written_for``) and is reported as not
applicable on the other. Each policy is replayed batched through ``CoBaVectorEnv`` (``eval.batched_replay``)
when it has a batched form, else one episode at a time (``eval.single_replay``); both give the same records.
``run_policies`` runs a list of policies, in one process or in worker processes that share the compiled pool by
``fork`` (``eval.forked_runs``), optionally on a subset of the episodes (``episode_ids``: records independent of
how episodes are split).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from agents.base import Policy
from agents.policy_calls import contained_call
from agents.routing_base import NEEDS_ROUTE_ENV, written_for
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv
from coba_env.rules.config import EnvConfig, default_budget
from coba_env.vector_env import CoBaVectorEnv
from eval.batched_replay import DEFAULT_BATCH, played_in_batch, replay_batched
from eval.forked_runs import default_workers, progress_bar, run_each
from eval.records import GeneratorUse, RecordLayout, empty_records, generator_use, records_frame
from eval.single_replay import replay_single

#: Replay modes: "batched" (``CoBaVectorEnv`` for every policy with a batched form) or "single" (one episode
#: at a time, the reference).
REPLAY_MODES: tuple[str, ...] = ("batched", "single")
#: Why a policy does not run on episodes of the other grouping, by the grouping it is written for.
WRONG_GROUPING: dict[str, str] = {
    "pair": "a replay-env policy (one generator per episode); route envs run the routing policies",
    "item": NEEDS_ROUTE_ENV,
}


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
    #: What the policy drew from each generator, on episodes of several generators (else None).
    generator_use: GeneratorUse | None = None

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
    #: Every applicable policy's records as compact columns (``eval.compact_records``), in policy order, when the
    #: replay kept only those (``eval.chunked_replay``: the full records went to the episode files); else None.
    compact: pd.DataFrame | None = None

    @property
    def records(self) -> pd.DataFrame:
        """All applicable policies' episode records in one frame (policy order preserved)."""
        frames = [r.records for r in self.runs if r.applicable and len(r.records)]
        if not frames:
            return self.runs[0].records.iloc[0:0] if self.runs else pd.DataFrame()
        return pd.concat(frames, ignore_index=True)

    @property
    def not_applicable(self) -> dict[str, str]:
        """Policy name -> reason, for the policies that did not run."""
        return {r.name: r.not_applicable for r in self.runs if r.not_applicable is not None}

    def get(self, name: str) -> PolicyRun | None:
        """The run of policy ``name``, or None."""
        return next((r for r in self.runs if r.name == name), None)


def run_policy(policy: Policy, pool: CompiledPool, *, grouping: str = "pair", cost_model: str = "p_tokens",
               lam: float = 0.0, progress: Callable[[int], Any] | None = None, seed: int = 0,
               replay: str = "batched", episode_ids: np.ndarray | None = None) -> pd.DataFrame:
    """Replay ``policy`` on every episode of ``pool``: one record per episode (``eval.records``).

    A policy that is not applicable to the pool gives an empty frame whose ``attrs["not_applicable"]`` holds
    the reason. ``progress(n)`` is called as episodes finish.
    """
    run = replay_policy(policy, pool, grouping=grouping, cost_model=cost_model, lam=lam, progress=progress,
                        seed=seed, replay=replay, episode_ids=episode_ids)
    frame = run.records
    frame.attrs.update(policy=run.name, label=run.label, group=run.group, seconds=run.seconds,
                       not_applicable=run.not_applicable)
    return frame


def replay_policy(policy: Policy, pool: CompiledPool, *, grouping: str = "pair", cost_model: str = "p_tokens",
                  lam: float = 0.0, progress: Callable[[int], Any] | None = None, seed: int = 0,
                  replay: str = "batched", episode_ids: np.ndarray | None = None,
                  batch: int = DEFAULT_BATCH, generator_columns: bool = True,
                  budget: float | None = None) -> PolicyRun:
    """Like ``run_policy``, returning a ``PolicyRun`` (records, not-applicable reason, timing, metadata).

    ``grouping`` "pair" replays the (item, generator) episodes of ``pool``, "item" its items with all their
    generators. ``replay`` "batched" plays a policy with a batched form (``Policy.batched``) through
    ``CoBaVectorEnv`` (``eval.batched_replay``), any other one episode at a time; "single" always plays one
    episode at a time. ``episode_ids`` (pool episode ids) replays only those episodes, in pool order, with the
    whole pool's budget, so that records do not depend on how episodes are split. ``generator_columns`` False
    leaves the per-generator record columns out (``eval.records``); ``generator_use`` sums them either way.
    ``budget``: the budget B of a whole pool ``pool`` is a chunk of (``eval.chunked_replay``), unless the policy
    asks for its own.
    """
    check_replay_mode(replay)
    start = time.perf_counter()
    env_kwargs = dict(contained_call(policy, "env_kwargs", "", policy.env_kwargs))
    if budget is not None:
        env_kwargs.setdefault("budget", budget)
    if episode_ids is not None:
        env_kwargs.setdefault("budget", default_budget(pool, cost_model, pool.n_candidates))
        pool = pool.select(episode_indices(pool, episode_ids))
    options = dict(grouping=grouping, cost_model=cost_model, lam=lam, order="sequential", **env_kwargs)
    config = EnvConfig.build(pool, **options)
    meta = _meta(policy)
    batched = replay == "batched" and policy.batched and config.pool.n_episodes > 0
    env = _probe_env(config, batched, options)
    ok, reason = contained_call(policy, "applicable", "", applicability, policy, env)
    if not ok:
        if progress is not None:
            progress(config.pool.n_episodes)
        return PolicyRun(records=empty_records(RecordLayout.of(config.pool)), not_applicable=reason or "not applicable",
                         **meta)
    # A policy whose act_batch reads the env's state alone replays without observations built (the same records).
    venv = CoBaVectorEnv(max(1, min(batch, config.pool.n_episodes)), config=config,
                         observe=contained_call(policy, "observes_in_batch", "", policy.observes_in_batch)) \
        if batched else None
    if venv is not None and contained_call(policy, "supports_batch", "", policy.supports_batch, venv):
        played = played_in_batch(replay_batched(policy, venv, seed=seed, progress=progress), venv)
    else:
        env = env if env.config.pool is config.pool else CoBaEnv(config=config)
        played = replay_single(policy, env, seed=seed, progress=progress)
    frame = records_frame(policy.name, config.pool, played, env.layout, cost_k=config.cost_k,
                          per_generator=generator_columns)
    use = generator_use(config.pool, played, env.layout, cost_k=config.cost_k)
    return PolicyRun(records=frame, seconds=time.perf_counter() - start, generator_use=use, **meta)


def applicability(policy: Policy, env: CoBaEnv) -> tuple[bool, str]:
    """Whether ``policy`` runs on ``env`` and why not: written for the env's grouping, then its own ``applicable``
    (a trained controller, ``checks_own_grouping``, names the env it was trained on itself)."""
    wanted = written_for(policy)
    if wanted != env.config.grouping and not getattr(policy, "checks_own_grouping", False):
        return False, WRONG_GROUPING[wanted]
    why = policy.answers_problem(env) if hasattr(policy, "answers_problem") else ""
    return (False, why) if why else policy.applicable(env)


def check_replay_mode(mode: str) -> None:
    """Refuse a replay mode that is not one of ``REPLAY_MODES`` (ValueError naming them)."""
    if mode not in REPLAY_MODES:
        raise ValueError(f"unknown replay mode {mode!r}; expected one of {list(REPLAY_MODES)}")


def _probe_env(config: EnvConfig, batched: bool, options: dict[str, Any]) -> CoBaEnv:
    """The one-episode env that answers ``applicable`` and names the actions (and replays, when not batched).

    A batched replay of (item, generator) episodes asks it over the first episode only, with the whole pool's
    configuration and budget: a whole-pool env builds per-episode Python rows the batch never reads. Item-grouped
    episodes need the whole pool, since a routing policy's applicability reads every item's generators."""
    if batched and config.route is None:
        first = config.pool.select(np.arange(1))
        return CoBaEnv(config=EnvConfig.build(first, **{**options, "budget": config.budget}))
    return CoBaEnv(config=config)


def _meta(policy: Policy) -> dict[str, Any]:
    """A policy's name, label, group, whether it reads labels, and its description (``PolicyRun`` fields)."""
    return dict(name=policy.name, label=getattr(policy, "label", policy.name),
                group=str(getattr(policy, "group", "baseline")),
                uses_labels=bool(getattr(policy, "uses_labels", False)), description=describe(policy))


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


def describe(policy: Policy) -> dict[str, Any]:
    """``policy.describe()``, or just its name when that fails (a description is informative only)."""
    try:
        return dict(policy.describe())
    except Exception:  # never fail a bench over a description
        return {"name": policy.name}


# ---------------------------------------------------------------- many policies

def resolve_unique_policies(policies: Sequence[str | Policy], specs: dict | None = None) -> list[Policy]:
    """Policy objects for a mix of registry names and ready ``Policy`` instances, refusing two policies of one
    name (their records could not be told apart)."""
    from agents.registry import make_policy

    resolved = [make_policy(p, specs=specs) if isinstance(p, str) else p for p in policies]
    names = [p.name for p in resolved]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"policy names must be unique; repeated: {dupes}")
    return resolved


def run_policies(policies: Sequence[str | Policy], pool: CompiledPool, *, grouping: str = "pair",
                 cost_model: str = "p_tokens", lam: float = 0.0, progress: bool = True, workers: int | None = None,
                 seed: int = 0, specs: dict | None = None, replay: str = "batched",
                 episode_ids: np.ndarray | None = None, generator_columns: bool = True,
                 budget: float | None = None, finish: Callable[[PolicyRun], PolicyRun] | None = None) -> BenchRun:
    """Replay every policy (registry names or ``Policy`` objects) on every episode of ``pool`` (``grouping`` as
    in ``replay_policy``).

    Shows a tqdm bar over policies x episodes (on a terminal, unless ``progress`` is False). ``workers`` > 1
    runs policies in forked worker processes; None picks ``default_workers``. ``replay`` is "batched" (the
    default: ``CoBaVectorEnv`` for every policy with a batched form) or "single" (one episode at a time).
    ``episode_ids`` replays only those pool episodes: each policy's records come in pool order and equal
    the whole replay's records of those episodes, however the ids are split. ``generator_columns`` and ``budget``
    as in ``replay_policy``. ``finish`` maps each policy's run where it was replayed (in its worker process), e.g.
    to write its records out and keep compact ones (``eval.chunked_replay``).
    """
    check_replay_mode(replay)
    start = time.perf_counter()
    policies = resolve_unique_policies(policies, specs)
    if episode_ids is not None:
        episode_ids = pool.episode_ids[episode_indices(pool, episode_ids)]
    # The episodes the policies play (an item's generators joined into one under "item"), counted for the bar.
    episodes = EnvConfig.build(pool, grouping=grouping, cost_model=cost_model, episode_ids=episode_ids).pool
    n_episodes = episodes.n_episodes
    one_at_a_time = replay == "single" or not all(p.batched for p in policies)
    if episode_ids is None and one_at_a_time:
        episodes.episode_rows()  # the one-episode env's per-episode rows, built once before any fork
    if workers is None:
        workers = default_workers(len(policies), n_episodes, batched=replay == "batched")
    options = dict(grouping=grouping, cost_model=cost_model, lam=lam, seed=seed, replay=replay,
                   episode_ids=episode_ids, generator_columns=generator_columns, budget=budget)
    replay_one = replay_policy if finish is None else functools.partial(_replay_then, finish=finish)
    runs, workers = run_each(replay_one, policies, pool, options, workers=workers,
                             make_bar=lambda: progress_bar(len(policies) * n_episodes, progress))
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=workers)


def _replay_then(policy: Policy, pool: CompiledPool, *, finish: Callable[[PolicyRun], PolicyRun],
                 **options: Any) -> PolicyRun:
    return finish(replay_policy(policy, pool, **options))


def join_runs(parts: Sequence[PolicyRun], records: pd.DataFrame | None = None) -> PolicyRun:
    """One policy's runs on consecutive slices of the episodes joined in order (records concatenated, or
    ``records`` when the caller joined them; replay seconds summed); ValueError when the slices disagree on whether
    it applies (its records would be partial)."""
    first = parts[0]
    if any(p.applicable != first.applicable for p in parts):
        raise ValueError(f"policy {first.name!r} applies to some slices of the episodes and not to others")
    if not first.applicable:
        return first
    records = pd.concat([p.records for p in parts], ignore_index=True) if records is None else records
    return PolicyRun(name=first.name, label=first.label, group=first.group, uses_labels=first.uses_labels,
                     records=records, seconds=sum(p.seconds for p in parts), description=first.description)
