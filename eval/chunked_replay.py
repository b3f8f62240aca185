"""Every policy replayed on a stored pool a chunk of episodes at a time (the streaming bench, issue 37).

``replay_in_chunks`` compiles consecutive chunks of the pool's episodes (``coba_env.chunked_compile``: each equals
the whole compile's rows of it, the pool-wide fields from one light pass), replays every policy on each chunk
with the whole pool's budget B (``eval.runner.run_policies(budget=)``), and joins each policy's chunk records in
order: the records equal the whole pool's replay, while only one chunk's compiled arrays are alive at a time.
(item, generator) episodes only: an item's generators lie apart in the episode order, and a routing policy's
draws are per episode of the whole route pool (``agents.simple_routers.RandomRouter``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from agents.base import Policy
from coba_env.chunked_compile import PoolScan, compile_chunk
from eval.forked_runs import default_workers, progress_bar
from eval.runner import BenchRun, PolicyRun, join_runs, resolve_unique_policies, run_policies

#: Episodes compiled and replayed at a time (at 16 candidates and 3 verifiers: ~0.4 GB of compiled arrays).
CHUNK_EPISODES = 100_000


def replay_in_chunks(policies: Sequence[str | Policy], scan: PoolScan, *, chunk_episodes: int = CHUNK_EPISODES,
                     cost_model: str = "p_tokens", seed: int = 0, replay: str = "batched",
                     progress: bool = True, workers: int | None = None,
                     generator_columns: bool = False) -> BenchRun:
    """``eval.runner.run_policies`` over the scanned pool (``coba_env.chunked_compile.scan_pool``), compiled and
    replayed ``chunk_episodes`` episodes at a time; the same records, in the same order (pair episodes)."""
    start = time.perf_counter()
    policies = resolve_unique_policies(policies)
    budget = scan.budget(cost_model)
    if workers is None:  # sized by the whole run, as run_policies sizes it: a chunk alone is a "small run"
        workers = default_workers(len(policies), len(scan.episodes), batched=replay == "batched")
    bar = progress_bar(len(policies) * len(scan.episodes), progress)
    parts: list[list[PolicyRun]] = []
    used = 1
    try:
        for ids in scan.chunks(chunk_episodes):
            run = run_policies(policies, compile_chunk(scan, ids), grouping="pair", cost_model=cost_model,
                               seed=seed, replay=replay, progress=False, workers=workers,
                               generator_columns=generator_columns, budget=budget)
            parts.append(run.runs)
            used = max(used, run.workers)
            if bar is not None:
                bar.update(len(policies) * len(ids))
    finally:
        if bar is not None:
            bar.close()
    runs = [join_runs([chunk[i] for chunk in parts]) for i in range(len(policies))]
    return BenchRun(runs=runs, seconds=time.perf_counter() - start, workers=used)
