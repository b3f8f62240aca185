"""``coba serve`` in a thread of the test process, on a free loopback port, for tests and scripts.

``running_server(config)`` builds the server with ``eval.serving.server.make_server`` (the command's own
function), serves it from a background thread and yields it; ``server.url()`` is its base URL with ``/v1``.
Leaving the block stops it the way Ctrl-C does (running requests finish, the record is complete).
``request`` sends one raw HTTP request (standard library only) for what the ``openai`` client cannot send.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eval.serving.config import ServeConfig
from eval.serving.server import ServeServer, bind_socket, make_server
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings

__all__ = ["Reply", "fake_config", "request", "running_server"]


def fake_config(generator_url: str, judge_url: str | None = None, **options: Any) -> ServeConfig:
    """A server over stand-in endpoints: generator ``gen`` (1B), judge ``j1`` (0.5B) on ``judge_url``."""
    judges = {"V1": Endpoint(judge_url or generator_url, "j1", 0.5)}
    base = ServeConfig(generators={"gen": Endpoint(generator_url, "gen", 1.0)}, judges=judges, policy="coba_light",
                       sampling=SamplingSettings(n=1, max_tokens=64), max_attempts=1)
    if isinstance(options.get("record"), str):
        options["record"] = Path(options["record"])
    return replace(base, **options)


@contextmanager
def running_server(config: ServeConfig, *, grace: float = 5.0, log_level: str = "warning") -> Iterator[ServeServer]:
    """``config`` served on 127.0.0.1 (a free port) from a thread until the block ends."""
    server = make_server(config, host="127.0.0.1", port=0, grace=grace, log_level=log_level, access_log=False)
    sock = bind_socket("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="coba-serve-test")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("coba serve did not start")
        time.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


@dataclass
class Reply:
    """An HTTP answer: status, headers (lower-case names) and body text."""

    status_code: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.text)


def request(method: str, url: str, *, json_body: Any = None, content: bytes | None = None,
            timeout: float = 60.0) -> Reply:
    """One HTTP request to ``url`` (``content``: raw bytes, else ``json_body`` as JSON); raises TimeoutError
    when no answer comes within ``timeout`` seconds (the connection is then closed, as a client giving up)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        body = content if content is not None else None if json_body is None else json.dumps(json_body).encode()
        conn.request(method, parts.path, body=body, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        return Reply(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode())
    finally:
        conn.close()
