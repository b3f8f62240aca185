"""Start ``coba serve``: check the policies and endpoints, open the record, run the app under uvicorn.

Stopping (Ctrl-C, SIGTERM): the server stops listening, lets running requests finish for ``grace`` seconds,
then cancels them (each ends after its internal call in flight, answers 503 and is recorded with what it
revealed) and exits once every worker has written its record.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import socket
import sys
from typing import Any

import uvicorn

from eval.serving.app import build_app
from eval.serving.config import ServeConfig
from eval.serving.engine import Engine
from eval.serving.jobs import Jobs
from eval.serving.record import TrafficRecord

__all__ = ["ServeServer", "bind_socket", "make_server"]


class ServeServer(uvicorn.Server):
    """uvicorn's server, stopping as the module docstring says; ``jobs`` runs the requests."""

    def __init__(self, config: uvicorn.Config, jobs: Jobs, grace: float) -> None:
        super().__init__(config)
        self.jobs, self.grace = jobs, grace

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop listening, give running requests ``grace`` seconds, cancel the rest, wait for the workers."""
        asyncio.get_running_loop().call_later(self.grace, self.jobs.cancel_all)
        await super().shutdown(sockets)
        await asyncio.to_thread(self.jobs.shutdown)

    def url(self) -> str:
        """The base URL the server listens on (after start-up), e.g. ``http://127.0.0.1:8090/v1``."""
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: a free one) for ``ServeServer.run(sockets=[...])``; OSError
    when the address is taken. Made with the protocol number IPPROTO_TCP, so asyncio switches Nagle's algorithm
    off on its connections (with protocol 0 it does not, and every answer waits ~40 ms for a delayed ACK)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         proto=socket.IPPROTO_TCP)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)  # clients may connect at once; uvicorn accepts them when it starts
    except OSError:
        sock.close()
        raise
    return sock


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging, with the server's own one-line-per-request logger ``coba.serve`` beside it."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["coba.serve"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def make_server(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8090, grace: float = 5.0,
                log_level: str = "info", access_log: bool = True, check_endpoints: bool = True) -> ServeServer:
    """A server ready to ``run()``; ValueError (one line) when a policy or an endpoint cannot be used."""
    engine = Engine(config)
    engine.check()
    if check_endpoints:
        engine.check_endpoints(timeout_s=min(config.call_timeout, 10.0))
    record = TrafficRecord(config.record) if config.record is not None else None
    if record is not None:
        for name, cut in record.repaired:
            print(f"coba serve: {config.record}/{name}: cut off {cut} bytes of a cut-short last record "
                  "(a process killed while writing)", file=sys.stderr)
    jobs = Jobs(engine, config, record)
    uv = uvicorn.Config(build_app(config, engine, jobs), host=host, port=port, lifespan="off",
                        log_config=log_config(log_level), log_level=log_level, access_log=access_log,
                        timeout_keep_alive=5)
    logging.getLogger("coba.serve").setLevel(log_level.upper())
    return ServeServer(uv, jobs, grace)
