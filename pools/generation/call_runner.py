"""Run many HTTP calls with bounded concurrency, journaling each result as it completes, with a progress bar.

``run_calls`` is what ``pools.generation.generate`` and ``pools.generation.verify_calls`` use: calls run on daemon worker threads,
results are handed back to the main thread one at a time (which journals them), and follow-up calls can be
queued from a result (e.g. the samples a server that ignores ``n`` did not return).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["PreparedCall", "run_calls"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class PreparedCall(Generic[R]):
    """One call with its endpoint chosen: ``send(client)`` makes it through ``client`` (the chosen one here, or a
    stand-in for the same endpoint when another transport, e.g. Ray Data, carries the HTTP exchange)."""

    client: Any
    send: Callable[[Any], R]

    def send_here(self) -> R:
        """Make the call from this process through the chosen client."""
        return self.send(self.client)


class _DaemonWorkers:
    """A fixed set of daemon threads running submitted calls; unlike ``ThreadPoolExecutor`` an interrupted
    process (Ctrl-C) exits at once instead of waiting at exit for the calls still in flight."""

    def __init__(self, workers: int) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._workers = max(1, workers)
        for i in range(self._workers):
            threading.Thread(target=self._work, name=f"coba-call-{i}", daemon=True).start()

    def submit(self, fn: Callable[[T], R], arg: T) -> Future:
        """Queue ``fn(arg)``; the future can be cancelled until a worker starts it."""
        future: Future = Future()
        self._queue.put((future, fn, arg))
        return future

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            future, fn, arg = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(arg))
            except BaseException as exc:  # handed to the caller through the future
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Let every worker exit once the queued calls are done (calls in flight are not waited for)."""
        for _ in range(self._workers):
            self._queue.put(None)


def run_calls(tasks: Iterable[T], call: Callable[[T], R], on_done: Callable[[T, R], Iterable[T]], *,
              concurrency: int, total: int | None = None, desc: str = "calls", progress: bool = True,
              unit: str = "call", progress_of: Callable[[T, R], tuple[int, int]] | None = None) -> int:
    """Run ``call`` over ``tasks`` on a thread pool; ``on_done`` (main thread) journals and returns follow-ups.

    At most ``concurrency`` calls run at once and ``2 * concurrency`` are queued. When a call raises, no new
    call starts; the ones already running finish and are handed to ``on_done`` (so nothing completed is
    lost), then the first error is raised. On Ctrl-C the queued calls are dropped and the running ones
    abandoned at once (their results are lost; a resumed run asks for them again). Returns the number of completed calls. ``progress_of`` gives
    (units done, tokens) per result for the progress bar, e.g. (samples, output tokens).
    """
    from tqdm import tqdm

    queue = iter(tasks)
    backlog: list[T] = []
    bar = tqdm(total=total, desc=desc, unit=unit, disable=not progress, dynamic_ncols=True, smoothing=0.1)
    started = time.perf_counter()
    tokens = 0
    done_calls = 0
    error: BaseException | None = None
    pool = _DaemonWorkers(concurrency)
    running: dict[Future, T] = {}

    def next_task() -> T | None:
        if backlog:
            return backlog.pop(0)
        return next(queue, None)

    try:
        while True:
            while error is None and len(running) < 2 * max(1, concurrency):
                task = next_task()
                if task is None:
                    break
                running[pool.submit(call, task)] = task
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                task = running.pop(fut)
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is not None:
                    if error is None:
                        error = exc
                        for other in running:
                            other.cancel()  # queued, not started: dropped; running ones finish
                    continue
                result = fut.result()
                try:
                    backlog.extend(on_done(task, result))
                except Exception as exc:  # journal the calls still running before giving up
                    if error is None:
                        error = exc
                        for other in running:
                            other.cancel()
                    continue
                done_calls += 1
                units, toks = progress_of(task, result) if progress_of else (1, 0)
                tokens += toks
                bar.update(units)
                if toks:
                    bar.set_postfix_str(f"{tokens / max(time.perf_counter() - started, 1e-9):,.0f} tok/s",
                                        refresh=False)
        if error is not None:
            raise error
        return done_calls
    except KeyboardInterrupt:
        for fut in running:
            fut.cancel()
        raise
    finally:
        bar.close()
        pool.shutdown()
