"""At most a few internal calls in flight per model server, whatever request makes them."""

from __future__ import annotations

import threading
import time

from eval.serving.answer import RequestCancelled

__all__ = ["EndpointGates", "GateTimeout"]

#: Seconds between checks of the cancel flag and the deadline while a call waits for its slot.
WAIT_S = 0.05


class GateTimeout(RuntimeError):
    """The request's time ran out while it waited for a free slot of an endpoint."""


class EndpointGates:
    """At most ``limit`` internal calls in flight per server URL, whatever request makes them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._gates: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def acquire(self, url: str, cancel: threading.Event, deadline: float | None) -> threading.BoundedSemaphore:
        """Wait for a slot of ``url`` (``RequestCancelled`` once ``cancel`` is set, ``GateTimeout`` past
        ``deadline``); the caller releases the returned gate."""
        with self._lock:
            gate = self._gates.setdefault(url, threading.BoundedSemaphore(self.limit))
        while not gate.acquire(timeout=WAIT_S):
            if cancel.is_set():
                raise RequestCancelled("the request was cancelled while waiting for an endpoint")
            if deadline is not None and time.monotonic() >= deadline:
                raise GateTimeout("the time budget ran out while waiting for a free endpoint slot")
        return gate


