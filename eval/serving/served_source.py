"""``EndpointSource`` for a server: one per worker thread, re-aimed at each request (a helper of ``engine``).

Only ``eval.serving.engine`` imports this module; with it, the two are the server's whole contact with the
live path. Each internal call waits for its endpoint's slot (``EndpointGates``: at most
``endpoint_concurrency`` calls in flight per server URL), first checks the request's cancel flag (a client
that disconnected: ``RequestCancelled``, no further call), and runs in the worker's own thread with its
attempts cut to the request's time left (``EndpointSource`` would start a thread per call to bound it). A
failing endpoint degrades instead of ending the request: a failed VERIFY gives no score (NaN, the policy goes
on), a failed SAMPLE stops the episode (the policy's selection over what was revealed); both are in the path.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from coba_env.live import CallInterrupted, EndpointSource, LiveEndpointError
from coba_env.live_sources import Revealed, Scored
from eval.serving.answer import RequestCancelled
from eval.serving.gates import EndpointGates, GateTimeout
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from pools.problems import Problem

__all__ = ["ServedSource"]


class ServedSource(EndpointSource):
    """``EndpointSource`` re-aimed at one request at a time (``prepare``); see the module docstring."""

    def __init__(self, generators: dict[str, Endpoint], judges: dict[str, Endpoint], gates: EndpointGates,
                 **options: Any) -> None:
        generator = generators if len(generators) > 1 else next(iter(generators.values()))
        super().__init__([Problem("served", "-", "-", "")], generator, judges, sleep=lambda d: self._backoff(d),
                         **options)
        self.gates, self.cancel, self.history, self.failures = gates, threading.Event(), (), []
        self._deadline: float | None = None
        self._client: Any = None

    def prepare(self, problem: Problem, history: tuple[dict[str, str], ...], settings: SamplingSettings,
                cancel: threading.Event) -> None:
        """Aim at ``problem`` (one task) with ``history`` before the generator prompt."""
        self.problems, self.settings, self.history, self.cancel = [problem], settings, history, cancel
        self.failures = []

    def begin(self, episode: int) -> dict[str, Any]:
        """Start the request's problem; its earlier chat messages go before the generator prompt."""
        meta = super().begin(episode)
        self._messages = [*self.history, *self._messages]
        return meta

    def _call(self, role: str, ep: Endpoint, fn: Any, timeout_s: float | None) -> Any:
        """The call in this thread (no thread per call), its attempts cut to the time left (``_backoff``)."""
        if self.cancel.is_set():
            raise RequestCancelled(f"the request was cancelled before the {role} call")
        start = time.monotonic()
        try:
            gate = self.gates.acquire(ep.url, self.cancel, None if timeout_s is None else start + timeout_s)
        except GateTimeout as exc:
            raise CallInterrupted(str(exc)) from None
        saved = self.request_timeout_s
        try:
            if self.cancel.is_set():
                raise RequestCancelled(f"the request was cancelled before the {role} call")
            if timeout_s is not None:
                self._deadline = start + timeout_s
                self.request_timeout_s = max(min(saved, self._deadline - time.monotonic()), 1e-3)
            return super()._call(role, ep, self._keep_client(fn), None)
        except LiveEndpointError:
            if self._deadline is not None and time.monotonic() >= self._deadline - 1e-3:
                raise CallInterrupted(f"the time budget ran out during the {role} call") from None
            raise
        finally:
            self.request_timeout_s, self._deadline = saved, None
            gate.release()

    def _keep_client(self, fn: Any) -> Any:
        def call(client: Any) -> Any:
            self._client = client  # so that a retry gets only the time left (``_backoff``)
            return fn(client)

        return call

    def _backoff(self, delay: float) -> None:
        """Sleep between attempts: never past the deadline, never once cancelled; the next attempt's
        timeout is the time then left."""
        if self._deadline is not None and time.monotonic() + delay >= self._deadline:
            raise CallInterrupted("the time budget ran out while retrying a call")
        if self.cancel.wait(delay):
            raise RequestCancelled("the request was cancelled while retrying a call")
        if self._deadline is not None and self._client is not None:
            self._client.timeout_s = max(self._deadline - time.monotonic(), 1e-3)

    def _failed(self, role: str, ep: Endpoint, exc: Exception, sample: bool) -> str:
        message = str(exc).replace(ep.url.rstrip("/"), "").replace(ep.url.rstrip("/").removesuffix("/v1"), "")
        self.failures.append({"endpoint": role, "model": ep.model, "error": message, "sample": sample})
        return message

    def sample(self, candidate: int, timeout_s: float | None, generator: int = 0) -> Revealed:
        """One generator call; a failing generator stops the episode (``CallInterrupted``), recorded."""
        try:
            return super().sample(candidate, timeout_s, generator)
        except LiveEndpointError as exc:  # stop here: the policy's selection over what was revealed
            message = self._failed(self._generator_role(generator), self.generators[generator], exc, True)
            raise CallInterrupted(f"endpoint failure: {message}") from None

    def verify(self, candidate: int, tier: int, timeout_s: float | None) -> Scored:
        """One judge call; a failing judge gives no score (NaN) and the failure in the path."""
        name, start = self.verifiers[tier], time.monotonic()
        try:
            return super().verify(candidate, tier, timeout_s)
        except LiveEndpointError as exc:  # no score (NaN), as a judge reply without one; the policy goes on
            ep = self.judges[name]
            message = self._failed(self.verifier_role(name), ep, exc, False)
            return Scored(math.nan, (0.0, 0.0, 1.0, time.monotonic() - start, 0.0),
                          {"model": ep.model, "tier": name, "score": None, "error": message})

