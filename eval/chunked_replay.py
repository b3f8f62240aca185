"""Every policy replayed on a stored pool a chunk of episodes at a time (the streaming bench, issue 37).

``replay_in_chunks`` compiles consecutive chunks of the pool's episodes (``coba_env.chunked_compile``: each equals
the whole compile's rows of it, the pool-wide fields from one light pass), replays every policy on each chunk
with the whole pool's budget B (``eval.runner.run_policies(budget=)``), and joins each policy's chunk records in
order: the records equal the whole pool's replay, while only one chunk's compiled arrays are alive at a time.
(item, generator) episodes only: an item's generators lie apart in the episode order, and a routing policy's
draws are per episode of the whole route pool (``agents.simple_routers.RandomRouter``).

Each policy's records of a chunk are written out where they are replayed (``Spill``: pieces of the episode files,
``eval.episode_files.EpisodePieces``) and only their compact columns (``eval.compact_records``) come back and are
kept: ``BenchRun.compact``, what the analysis reads. With ``workers`` > 1 the chunks go to chunk workers forked
once before any record piles up here (``eval.forked_runs.ordered_map``), each reading, compiling, replaying and
spilling whole chunks (``replay_chunk``, as a Ray task does); their compact runs come back in chunk order and are
copied into the bench's columns as they come (``ChunkJoin``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from agents.base import Policy
from coba_env.chunked_compile import PoolScan, compile_chunk
from eval.compact_records import KeyCategories, compact_records
from eval.episode_files import EpisodePieces
from eval.forked_runs import default_workers, ordered_map, progress_bar
from eval.records import RecordLayout
from eval.runner import BenchRun, PolicyRun, join_runs, resolve_unique_policies, run_policies

#: Episodes compiled and replayed at a time (at 16 candidates and 3 verifiers: ~0.4 GB of compiled arrays).
CHUNK_EPISODES = 100_000


def replay_in_chunks(policies: Sequence[str | Policy], scan: PoolScan, *, chunk_episodes: int = CHUNK_EPISODES,
                     cost_model: str = "p_tokens", seed: int = 0, replay: str = "batched",
                     progress: bool = True, workers: int | None = None,
                     pieces: EpisodePieces | None = None) -> BenchRun:
    """``eval.runner.run_policies`` over the scanned pool (``coba_env.chunked_compile.scan_pool``), compiled and
    replayed ``chunk_episodes`` episodes at a time: the compact columns of the same records, in the same order
    (pair episodes), each policy's full records written to ``pieces`` (None: dropped). ``workers`` > 1: chunk
    workers, forked once, each reading, compiling, replaying and spilling whole chunks (``replay_chunk``)."""
    start = time.perf_counter()
    policies = resolve_unique_policies(policies)
    if workers is None:  # sized by the whole run, as run_policies sizes it: a chunk alone is a "small run"
        workers = default_workers(len(policies), len(scan.episodes), batched=replay == "batched")
    chunks = list(enumerate(scan.chunks(chunk_episodes)))
    workers = max(1, min(int(workers), len(chunks))) if "fork" in mp.get_all_start_methods() else 1
    shared = (scan, policies, Spill.of(policies, scan, pieces),
              {"cost_model": cost_model, "seed": seed, "replay": replay, "budget": scan.budget(cost_model)})
    joined = ChunkJoin(len(scan.episodes))
    # The forked workers write Arrow files: Arrow allocates through glibc's malloc here, which is fork-safe, not
    # jemalloc, whose background thread may hold a lock when a worker forks. (The x320 hangs seen, a worker
    # blocked on a lock and its parent waiting, were the pool's SIGTERM under the command's handler:
    # eval.forked_runs.default_sigterm.)
    arrow_pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    bar = None
    release_memory()  # what the pool's validation and scan freed: a forked worker's resident set starts as ours
    try:
        # Forked here, before any chunk's compact runs pile up in this process: each worker starts as small.
        with ordered_map(replay_chunk, chunks, shared, workers=workers) as results:
            bar = progress_bar(len(policies) * len(scan.episodes), progress)  # its monitor thread after the fork
            for (_, ids), runs in zip(chunks, results, strict=True):
                joined.add(runs)
                if bar is not None:
                    bar.update(len(policies) * len(ids))
    finally:
        pa.set_memory_pool(arrow_pool)
        if bar is not None:
            bar.close()
    release_memory()  # the chunks' frames, copied into the joined columns
    return joined.run(seconds=time.perf_counter() - start, workers=workers)


def replay_chunk(chunk: tuple[int, np.ndarray], scan: PoolScan, policies: Sequence[Policy], spill: Spill,
                 options: dict[str, Any]) -> list[PolicyRun]:
    """Every policy on one chunk (its number, its episode ids), in this process: the chunk compiled from the stored
    pool, each policy's records written to the episode files' pieces (``spill``), their compact columns returned
    (``options``: ``run_policies``' cost_model, seed, replay and the whole pool's budget). A chunk worker's task,
    here or on a Ray cluster (``eval.ray_bench``)."""
    number, episode_ids = chunk
    runs = run_policies(policies, compile_chunk(scan, episode_ids), grouping="pair", workers=1, progress=False,
                        generator_columns=False, finish=spill.at(number), **options).runs
    release_memory()  # the chunk's compiled arrays and pool rows, freed: back to the system
    return runs


def release_memory() -> None:
    """Give freed memory back to the system: Arrow's pool keeps freed buffers for reuse and glibc's heap keeps freed
    pages (a chunk's compiled arrays, its pool rows, the chunks' compact frames once joined), which would otherwise
    count in the process's RSS for the rest of the bench."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(frozen=True)
class Spill:
    """What a chunk's replay does with a policy's records where it ran (``run_policies(finish=)``): writes them to
    the episode files' pieces and keeps their compact columns over the whole pool's categories."""

    names: tuple[str, ...]
    layout: RecordLayout
    categories: KeyCategories
    pieces: EpisodePieces | None = None
    chunk: int = 0

    @classmethod
    def of(cls, policies: Sequence[Policy], scan: PoolScan, pieces: EpisodePieces | None) -> Spill:
        """The spill of a bench of ``policies`` on the scanned pool."""
        keys = [scan.episodes[key].to_numpy(dtype=object) for key in ("dataset", "generator", "item_id")]
        categories = KeyCategories.of([p.name for p in policies], *keys)
        return cls(tuple(p.name for p in policies), RecordLayout.of(scan.episode_columns()), categories, pieces)

    def at(self, chunk: int) -> Spill:
        """This spill for chunk number ``chunk``."""
        return Spill(self.names, self.layout, self.categories, self.pieces, chunk)

    def __call__(self, run: PolicyRun) -> PolicyRun:
        if not run.applicable:
            return run
        if self.pieces is not None:
            self.pieces.write(self.names.index(run.name), self.chunk, run.records)
        run.records = compact_records(run.records, self.layout, self.categories)
        return run


class ChunkJoin:
    """The chunks' runs (compact records, ``parts[chunk][policy]``) joined as they come into one run per policy
    whose records are its rows of ``BenchRun.compact`` (every applicable policy's, policy-major, each in chunk
    order): each chunk's compact columns copied into one array per column sized for the whole bench, its frames
    then dropped, so the records are never held twice (a pile of chunk frames and their concatenation)."""

    def __init__(self, n_episodes: int) -> None:
        self.n_episodes = n_episodes
        self.parts: list[list[PolicyRun]] = []
        self.columns: dict[str, np.ndarray] = {}
        self.categories: dict[str, pd.CategoricalDtype] = {}
        self.block: dict[int, int] = {}  # policy number -> its block of rows (the first chunk's applicable ones)
        self.filled = 0

    def add(self, runs: Sequence[PolicyRun]) -> None:
        """Join the next chunk's runs (one per policy, in policy order); their records are emptied."""
        if not self.parts:
            self._allocate(runs)
        sizes = {len(run.records) for i, run in enumerate(runs) if i in self.block and run.applicable}
        rows = sizes.pop() if len(sizes) == 1 else 0
        if sizes or self.filled + rows > self.n_episodes:
            raise ValueError(f"chunk {len(self.parts)}: the policies' records do not cover its episodes once each")
        for i, run in enumerate(runs):
            if i in self.block and run.applicable:  # applicability differing by chunk: join_runs says so
                at = self.block[i] * self.n_episodes + self.filled
                for name, out in self.columns.items():
                    column = run.records[name]
                    out[at:at + rows] = column.cat.codes if name in self.categories else column.to_numpy()
            run.records = run.records.iloc[0:0].copy()  # a copy: a slice's arrays would keep the chunk's alive
        self.filled += rows
        self.parts.append(list(runs))

    def _allocate(self, runs: Sequence[PolicyRun]) -> None:
        applicable = [i for i, run in enumerate(runs) if run.applicable]
        self.block = {i: k for k, i in enumerate(applicable)}
        if not applicable:
            return
        total = len(applicable) * self.n_episodes
        for name, column in runs[applicable[0]].records.items():
            if isinstance(column.dtype, pd.CategoricalDtype):
                self.categories[name] = column.dtype
                column = column.cat.codes
            self.columns[name] = np.empty(total, dtype=column.to_numpy().dtype)

    def run(self, *, seconds: float, workers: int) -> BenchRun:
        """The joined run of every chunk added (all of the bench's episodes)."""
        if self.block and self.filled != self.n_episodes:
            raise ValueError(f"the chunks hold {self.filled} of the bench's {self.n_episodes} episodes")
        compact = pd.DataFrame({name: pd.Categorical.from_codes(out, dtype=self.categories[name])
                                if name in self.categories else out for name, out in self.columns.items()},
                               copy=False)
        runs, start = [], 0
        for i in range(len(self.parts[0]) if self.parts else 0):
            chunks = [chunk[i] for chunk in self.parts]
            rows = self.n_episodes if i in self.block else 0
            runs.append(join_runs(chunks, records=compact.iloc[start:start + rows]))
            start += rows
        return BenchRun(runs=runs, seconds=seconds, workers=workers, compact=compact)
