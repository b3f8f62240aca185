"""Replay policies on a Ray cluster: episode shards (``coba bench``) or one task per policy (``coba sweep``).

``run_policies_on_ray`` is ``eval.runner.run_policies`` spread over Ray tasks with ``coba_env.parallel.map_tasks``:
the compiled pool and the policies go to the object store once, each task calls ``run_policies(policies, pool,
episode_ids=shard)`` on its slice of the work, and the slices are put back together in pool and policy order.
A task's env holds the whole pool and replays only its episodes, so every record equals the one the local run
gives (tests/test_ray_bench.py checks results.json and the episode table).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.base import Policy
from coba_env.chunked_compile import PoolScan
from coba_env.compiled import CompiledPool
from coba_env.parallel import cluster_cpus, connect_ray, map_tasks
from eval.chunked_replay import CHUNK_EPISODES, ChunkJoin, Spill, replay_chunk
from eval.episode_files import EpisodePieces
from eval.runner import BenchRun, PolicyRun, join_runs, resolve_unique_policies, run_policies

__all__ = ["run_chunks_on_ray", "run_policies_on_ray", "shard_episodes"]

#: Ways to cut the work: episode shards with every policy, or one policy per task over every episode.
SPLITS = ("episodes", "policies")


def shard_episodes(episode_ids: np.ndarray, shards: int) -> list[list[int]]:
    """``episode_ids`` cut into ``shards`` contiguous slices of near-equal size (pool order kept; none empty)."""
    shards = max(1, min(int(shards), len(episode_ids)))
    return [part.tolist() for part in np.array_split(np.asarray(episode_ids, dtype=np.int64), shards)]


def _replay_task(task: tuple[list[int], list[int] | None], pool: CompiledPool, policies: list[Policy],
                 options: dict[str, Any]) -> list[PolicyRun]:
    """One Ray task: the policies at ``task[0]`` on the episodes ``task[1]`` (None: all), in one process."""
    chosen, episode_ids = task
    run = run_policies([policies[i] for i in chosen], pool, episode_ids=episode_ids, workers=1, progress=False,
                       **options)
    return run.runs


def run_policies_on_ray(policies: Sequence[str | Policy], pool: CompiledPool, *, ray_address: str,
                        split: str = "episodes", shards: int | None = None, cost_model: str = "p_tokens",
                        lam: float = 0.0, seed: int = 0, specs: dict | None = None,
                        progress: bool = True, replay: str = "batched", grouping: str = "pair") -> BenchRun:
    """``run_policies`` on the Ray cluster at ``ray_address``: ``split="episodes"`` runs every policy on each of
    ``shards`` episode slices (default: twice the cluster's CPUs), ``split="policies"`` one task per policy;
    ``replay`` and ``grouping`` as in ``run_policies`` (batched, "pair" by default). Item-grouped episodes are
    split by policy only: an episode slice could cut an item's generators apart."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    if split == "episodes" and grouping != "pair":
        raise ValueError("item-grouped episodes are split by policy (split='policies'), not into episode slices")
    start = time.perf_counter()
    policies = resolve_unique_policies(policies, specs)
    ray = connect_ray(ray_address)
    everyone = list(range(len(policies)))
    if split == "episodes":
        slices = shard_episodes(pool.episode_ids, shards or 2 * cluster_cpus(ray))
        tasks: list[tuple[list[int], list[int] | None]] = [(everyone, ids) for ids in slices]
    else:
        tasks = [([i], None) for i in everyone]
    options = {"cost_model": cost_model, "lam": lam, "seed": seed, "replay": replay, "grouping": grouping}
    results = map_tasks(_replay_task, tasks, shared=(pool, policies, options), ray_address=ray_address,
                        progress=progress, desc="coba bench on Ray")
    if split == "policies":
        runs = [task_runs[0] for task_runs in results]
    else:
        runs = [join_runs([task_runs[i] for task_runs in results]) for i in everyone]
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=len(tasks))


def run_chunks_on_ray(policies: Sequence[str | Policy], scan: PoolScan, *, ray_address: str,
                      chunk_episodes: int = CHUNK_EPISODES, cost_model: str = "p_tokens", seed: int = 0,
                      replay: str = "batched", progress: bool = True, pieces: EpisodePieces | None = None) -> BenchRun:
    """``eval.chunked_replay.replay_in_chunks`` on the Ray cluster at ``ray_address``: one task per slice of at
    most ``chunk_episodes`` (item, generator) episodes (at least twice the cluster's CPUs), each reading and
    compiling its chunk from the stored pool as a local chunk worker does (``eval.chunked_replay.replay_chunk``;
    ``scan.path``, which every node reads: the pool itself is never shipped, only its light pass), every policy
    replayed on it with the whole pool's budget, its records written to ``pieces`` (a folder every node writes to)
    and only their compact columns returned to the object store (~57 bytes a record instead of ~200); the chunks
    joined in pool order."""
    start = time.perf_counter()
    policies = resolve_unique_policies(policies)
    ids = scan.episode_ids
    shards = max(2 * cluster_cpus(connect_ray(ray_address)), -(-len(ids) // max(1, int(chunk_episodes))))
    chunks = [(k, np.asarray(part, dtype=np.int64)) for k, part in enumerate(shard_episodes(ids, shards))]
    options = {"cost_model": cost_model, "seed": seed, "replay": replay, "budget": scan.budget(cost_model)}
    results = map_tasks(replay_chunk, chunks, shared=(scan, policies, Spill.of(policies, scan, pieces), options),
                        ray_address=ray_address, progress=progress, desc="coba bench on Ray")
    joined = ChunkJoin(len(ids))
    while results:  # each chunk's frames dropped once joined
        joined.add(results.pop(0))
    return joined.run(seconds=time.perf_counter() - start, workers=len(chunks))
