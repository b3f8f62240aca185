"""The protocol's outer folds in forked worker processes on this machine (``coba train KIND --lodo --workers N``).

``forked_fold_map(workers)`` is a ``train.protocol.FoldMap``: ``fold_map(fn, tasks)`` is the list of ``fn(task)``
in task order, computed by ``workers`` processes forked once (``eval.forked_runs.ordered_map``: they inherit the
compiled pool and the method, never pickled; each returns its ``FoldResult`` pickled). A fold's results do not
depend on where it runs: every fit seeds itself from its (seed, fold), and the lean PPO trainer's weights do not
depend on its thread count (``tests/test_masked_ppo.py``), so the tables equal the one-process run's.

Each worker trains on one core's worth: it restricts itself to one of the cores this process may use (the next
one for each worker started), so ``train.masked_ppo.default_threads`` gives 1 thread there, and sets torch to one
intra-op thread; N workers on N cores are not oversubscribed.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from typing import Any

from eval.forked_runs import ordered_map


def forked_fold_map(workers: int, *, progress: bool = False,
                    desc: str = "protocol folds") -> Callable[[Callable[[Any], Any], Iterable[Any]], list[Any]]:
    """A fold map over ``workers`` forked processes (1, or a single fold: this process); ``progress`` shows one bar
    over the folds. An exception raised by a fold is raised here as itself (``ordered_map`` re-raises it)."""
    return functools.partial(_map_folds, workers=int(workers), progress=progress, desc=desc)


def _map_folds(fn: Callable[[Any], Any], tasks: Iterable[Any], *, workers: int, progress: bool,
               desc: str) -> list[Any]:
    tasks = list(tasks)
    # Fork is safe here: a worker runs torch on one thread (``_one_core_worker``), so it never enters an OpenMP
    # pool a parent that trained before (a test does) may have started, whose locks a fork would leave held; the
    # bar below (tqdm's monitor thread) starts only once the workers are forked.
    setup = None
    if "fork" in mp.get_all_start_methods():  # without fork, ordered_map runs the folds here
        started = mp.get_context("fork").Value("i", 0)  # shared through fork: each worker takes the next core
        setup = functools.partial(_one_core_worker, started)
    from tqdm.auto import tqdm

    # One fold (or one worker) runs here, unpinned: ordered_map forks only for 2 or more workers.
    with ordered_map(_call, tasks, (fn,), workers=min(workers, len(tasks)), initializer=setup) as each:
        return list(tqdm(each, total=len(tasks), desc=desc, unit="fold", leave=False, disable=not progress))


def _call(task: Any, fn: Callable[[Any], Any]) -> Any:
    return fn(task)


def _one_core_worker(started: Any) -> None:
    """In a worker as it starts: run on one core (the next of the allowed ones) and one torch thread."""
    with started.get_lock():
        index = started.value
        started.value += 1
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[index % len(cores)]})
    import torch

    torch.set_num_threads(1)
