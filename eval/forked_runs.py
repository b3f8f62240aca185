"""Run one replay per policy (or one task per item: ``ordered_map``), in this process or in forked worker processes
that share the compiled pool.

Worker processes inherit the policies and the pool through ``fork`` (large numpy arrays and the per-episode
Python rows are never pickled); each returns its ``PolicyRun`` pickled. A shared counter feeds the progress bar.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

#: Episode-policies from which ``default_workers`` forks 2 workers (one-episode / batched replay).
_FORK_MIN_SINGLE, _FORK_MIN_BATCHED = 20_000, 10_000_000

#: prctl's option: the signal a process gets when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1

# What forked workers inherit: the replay function, the policies, the pool, the options and the counter.
_SHARED: dict[str, Any] = {}


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


def run_each(replay: Callable[..., Any], policies: Sequence[Any], pool: Any, options: dict[str, Any], *,
             workers: int, make_bar: Callable[[], Any]) -> tuple[list[Any], int]:
    """``replay(policy, pool, progress=..., **options)`` for every policy, in policy order, with ``workers``
    processes (1: in this one); returns (the runs, the workers used). ``make_bar`` makes the progress bar (or None)."""
    workers = max(1, min(int(workers), max(1, len(policies))))
    if workers == 1 or "fork" not in mp.get_all_start_methods():
        runs = []
        bar = make_bar()
        try:
            for p in policies:
                if bar is not None:
                    bar.set_postfix_str(p.name)
                runs.append(replay(p, pool, progress=bar.update if bar is not None else None, **options))
        finally:
            if bar is not None:
                bar.close()
        return runs, 1
    return _run_forked(replay, list(policies), pool, options, workers, make_bar), workers


def default_sigterm() -> None:
    """In a forked worker: SIGTERM ends the process again. The command's handler (``coba_cli.errors``: SIGTERM
    raises ``Terminated`` to clean up) is inherited through fork; ``Pool.terminate`` ends idle workers with
    SIGTERM, and a worker that unwound instead of ending could block on the pool's queue lock, its parent then
    waiting for it forever (one x320 bench in a few hung so)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def ordered_map(task: Callable[..., Any], items: Iterable[Any], shared: tuple[Any, ...], *,
                workers: int, initializer: Callable[[], None] | None = None) -> Iterator[Iterator[Any]]:
    """An iterator over ``task(item, *shared)`` for every item, in item order: with ``workers`` > 1 computed by
    worker processes forked once on entering (they inherit ``shared``: never pickled) and yielded as they come,
    else here one at a time. Fork from a small parent: a forked worker's resident set starts as its parent's.

    A worker that dies (the out-of-memory killer, a ``kill``) stops the iteration with one ``ChildProcessError``
    (``fork_executor``; ``Pool.imap`` replaced the worker, lost its task and waited for it
    forever). The workers end on leaving early (SIGTERM's default action: ``default_sigterm``) or with this
    process (``end_with_parent``). ``initializer`` (optional) runs once in each worker as it starts (never here)."""
    if workers <= 1 or "fork" not in mp.get_all_start_methods():
        yield (task(item, *shared) for item in items)
        return
    _SHARED.update(task=task, shared=shared)
    try:
        with fork_executor(workers, _start_chunk_worker, (initializer,)) as procs:
            mapped = procs.map(_worker_task, items)  # forks the workers and queues every item, here on entering
            finished = []

            def results() -> Iterator[Any]:
                yield from mapped
                finished.append(True)

            yield results()
            if not finished:  # left early without an error (a break): the tasks still queued are not waited for
                _end_now(procs)
    finally:
        _SHARED.clear()


#: What a dead worker's ``BrokenProcessPool`` becomes.
WORKER_DIED_MESSAGE = ("a worker process ended abruptly (a signal such as the out-of-memory killer's or a kill, or "
                       "an exit) before its task was done")


@contextlib.contextmanager
def fork_executor(workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...] = ()
                  ) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``workers`` forked processes (all forked at the first submit). A worker that
    dies (the out-of-memory killer, a ``kill``) fails every task left, which ends the ``with`` with one
    ``ChildProcessError`` (``Pool`` replaced such a worker, lost its task and waited for it forever); any error
    ends the workers at once, as ``Pool.terminate`` did; a normal exit waits for them."""
    procs = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=initializer,
                                initargs=initargs)
    try:
        yield procs
    except BrokenProcessPool:
        _end_now(procs)
        raise ChildProcessError(WORKER_DIED_MESSAGE) from None
    except BaseException:
        _end_now(procs)
        raise
    else:
        procs.shutdown(wait=True)


def _end_now(procs: ProcessPoolExecutor) -> None:
    """Drop the tasks not started and end the workers at once (SIGTERM): a worker left to finish its task could
    write into a folder its parent is removing. (``_processes``: the executor's own workers; no public call ends
    them.)"""
    workers = list((getattr(procs, "_processes", None) or {}).values())
    procs.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        with contextlib.suppress(Exception):
            worker.terminate()


def _start_chunk_worker(initializer: Callable[[], None] | None = None) -> None:
    default_sigterm()
    end_with_parent()
    if initializer is not None:
        initializer()


def end_with_parent() -> None:
    """In a forked worker (Linux): SIGKILL when the parent ends, so that a ``kill -9`` of the command leaves no
    worker behind still replaying and writing into the command's temporary folder."""
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _worker_task(item: Any) -> Any:
    return _SHARED["task"](item, *_SHARED["shared"])


def _worker_run(index: int) -> Any:
    shared = _SHARED
    counter = shared["counter"]

    def tick(k: int) -> None:
        with counter.get_lock():
            counter.value += k

    return shared["replay"](shared["policies"][index], shared["pool"], progress=tick, **shared["options"])


def _run_forked(replay: Callable[..., Any], policies: list[Any], pool: Any, options: dict[str, Any], workers: int,
                make_bar: Callable[[], Any]) -> list[Any]:
    counter = mp.get_context("fork").Value("q", 0)
    _SHARED.update(replay=replay, policies=policies, pool=pool, counter=counter, options=options)
    # Longest first (more samples and verifications -> more steps) so the two workers finish together.
    order = sorted(range(len(policies)), key=lambda i: -_expected_steps(policies[i]))
    results: dict[int, Any] = {}
    shown = 0
    bar = None
    try:
        with fork_executor(workers, default_sigterm) as procs:
            pending = {i: procs.submit(_worker_run, i) for i in order}
            # The bar (and its monitor thread) starts only after the workers are forked (at the first submit).
            bar = make_bar()
            while pending:
                for i in [i for i, r in pending.items() if r.done()]:
                    results[i] = pending.pop(i).result()
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


def _expected_steps(policy: Any) -> float:
    try:
        desc = dict(policy.describe())
    except Exception:  # a description is informative only
        desc = {}
    params = desc.get("params") if isinstance(desc.get("params"), dict) else {}
    for key in ("n_max", "n", "max_samples"):
        for source in (params, desc):
            value = source.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return 8.0


def progress_bar(total: int, enabled: bool) -> Any:
    """A tqdm bar over ``total`` episode-policies on a terminal (None when disabled, empty or not a terminal)."""
    if not enabled or total <= 0 or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="coba bench", unit="ep", unit_scale=True, leave=False, smoothing=0.05)
