"""The bounded queue of ``coba serve``: admission, worker threads, cancellation, the record and the log.

A request is admitted (``reserve``) before its body is read: at most ``concurrency`` episodes run at once (one
worker thread each) and at most ``queue`` more wait; past that the server answers 429 at once. An admitted
request runs as a ``Job`` on the worker pool; its ``cancel`` flag stops its internal calls (the client went
away, or the server stops), and its deadline (arrival + the request's seconds budget) bounds the time it may
wait in the queue and run. When a job ends, its request (and its episodes) go to the record, and one line to
the log.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eval.serving.answer import Answer
from eval.serving.config import ServeConfig
from eval.serving.record import TrafficRecord
from eval.serving.request import ServedRequest

__all__ = ["Job", "Jobs"]

log = logging.getLogger("coba.serve")


@dataclass(eq=False)
class Job:
    """One admitted request: its id, the checked request, its cancel flag, deadline and future answer."""

    request: ServedRequest
    arrived: float  # time.monotonic() at arrival
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
    received: float = field(default_factory=time.time)
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future | None = None

    @property
    def deadline(self) -> float:
        """Monotonic time by which the request must be answered (its seconds budget from arrival)."""
        return self.arrived + float(self.request.limits["seconds"])


class Jobs:
    """Admits, runs, cancels and records served requests (see the module docstring)."""

    def __init__(self, engine: Any, config: ServeConfig, record: TrafficRecord | None = None) -> None:
        self.engine, self.config, self.record = engine, config, record
        self.capacity = config.concurrency + config.queue
        self._pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="coba-serve")
        self._lock = threading.Lock()
        self._admitted = 0
        self._running = 0
        self._active: set[Job] = set()
        self.stopping = False

    # -- admission ----------------------------------------------------------------------------------
    def reserve(self) -> bool:
        """Take a place for a new request; False when ``concurrency + queue`` requests are in already."""
        with self._lock:
            if self.stopping or self._admitted >= self.capacity:
                return False
            self._admitted += 1
            return True

    def unreserve(self) -> None:
        """Give back a place taken by ``reserve`` for a request that was refused before it was submitted."""
        with self._lock:
            self._admitted -= 1

    def submit(self, request: ServedRequest, arrived: float) -> Job:
        """Run ``request`` (its place already reserved) on the worker pool."""
        job = Job(request, arrived)
        with self._lock:
            self._active.add(job)
        job.future = self._pool.submit(self._run, job)
        return job

    def stats(self) -> dict[str, int]:
        """Requests running and waiting now, and how many may be in at once."""
        with self._lock:
            return {"running": self._running, "queued": self._admitted - self._running, "capacity": self.capacity}

    # -- stopping -----------------------------------------------------------------------------------
    def cancel_all(self) -> None:
        """Stop every admitted request after its internal call in flight (server shutdown)."""
        with self._lock:
            self.stopping = True
            jobs = list(self._active)
        for job in jobs:
            job.cancel.set()

    def shutdown(self) -> None:
        """Cancel everything and wait for the workers (their records are written before they end)."""
        self.cancel_all()
        self._pool.shutdown(wait=True)

    # -- one job ------------------------------------------------------------------------------------
    def _run(self, job: Job) -> Answer:
        with self._lock:
            self._running += 1
        try:
            try:
                answer = self.engine.answer(job.request, job.id, job.cancel, job.deadline)
            except Exception as exc:  # a bug must not take the worker down nor reach the client as a traceback
                log.error("request %s: internal error: %s: %s", job.id, type(exc).__name__, _one_line(exc))
                answer = Answer(job.id, "failed", job.request.policy, float(job.request.lam or 0.0),
                                error=f"internal error ({type(exc).__name__})")
            self._write(job, answer)
            log.info("request %s %s policy=%s calls=%d tokens=%d %.2f s%s", job.id, answer.status, answer.policy,
                     sum(1 for s in answer.path if s["action"] != "STOP"), answer.usage["total_tokens"],
                     time.monotonic() - job.arrived, f" ({_one_line(answer.error)})" if answer.error else "")
            return answer
        finally:
            with self._lock:
                self._running -= 1
                self._admitted -= 1
                self._active.discard(job)

    def _write(self, job: Job, answer: Answer) -> None:
        """The request and its episodes to the record (a failing disk is logged, the answer still goes out)."""
        if self.record is None:
            return
        r = job.request
        line = {"request_id": job.id, "received": datetime.fromtimestamp(job.received, UTC).isoformat(),
                "status": answer.status, "policy": answer.policy, "lambda": answer.lam, "model": r.model,
                "problem": r.problem, "gold": r.gold, "answer": answer.answer, "correct": answer.correct,
                "selected_candidate": answer.selected_candidate, "usage": answer.usage, "costs": answer.costs,
                "stop_reason": answer.stop_reason, "spent": answer.spent, "limits": answer.limits,
                "path": answer.path, "error": answer.error}
        try:
            self.record.append(line, answer.episodes)
        except (OSError, ValueError) as exc:
            log.error("request %s: not recorded: %s", job.id, _one_line(exc))


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())
