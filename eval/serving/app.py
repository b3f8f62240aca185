"""The HTTP side of ``coba serve``: a Starlette application run by uvicorn.

Routes: ``POST /v1/chat/completions`` (answered by a routing policy; ``stream: true`` as server-sent events),
``GET /v1/models`` (the policies a request may name) and ``GET /health``. With an API key every ``/v1`` route
wants ``Authorization: Bearer KEY``. Every error is an OpenAI-shaped JSON body with a 4xx/5xx status and one
line of message; nothing raises out of a route, so no traceback reaches a client or the log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from eval.serving.config import ServeConfig
from eval.serving.errors import ApiError
from eval.serving.jobs import Job, Jobs
from eval.serving.request import parse_body, parse_request
from eval.serving.responses import answer_error, completion_body, role_chunk, stream_events

__all__ = ["build_app"]

log = logging.getLogger("coba.serve")

#: Seconds a client waits past its request's deadline (the episode stops there and is recorded first).
GRACE_S = 2.0


def served_seconds(job: Job) -> float:
    """The request's time limit in seconds."""
    return float(job.request.limits["seconds"])


def build_app(config: ServeConfig, engine: Any, jobs: Jobs) -> Starlette:
    """The application serving ``engine``'s policies through ``jobs``."""

    async def health(request: Request) -> Response:
        """``GET /health``: up or stopping, requests running and waiting (no key needed)."""
        return JSONResponse({"status": "stopping" if jobs.stopping else "ok", **jobs.stats()})

    async def models(request: Request) -> Response:
        """``GET /v1/models``: the served name (the default policy) and every policy a request may name."""
        try:
            _authorize(request, config)
        except ApiError as exc:
            return _error(exc)
        default = engine.policy_ids[0]
        data = [{"id": config.served_name, "object": "model", "created": 0, "owned_by": "coba",
                 "coba": {**engine.describe(default), "default": True}}]
        data += [{"id": ident, "object": "model", "created": 0, "owned_by": "coba", "coba": engine.describe(ident)}
                 for ident in engine.policy_ids]
        return _json(200, {"object": "list", "data": data})

    async def chat(request: Request) -> Response:
        """``POST /v1/chat/completions``: admit, check, run the policy, answer (or stream) with the path."""
        arrived = time.monotonic()
        try:
            _authorize(request, config)
            if not jobs.reserve():
                stats = jobs.stats()
                raise ApiError(503 if jobs.stopping else 429, "the server is stopping" if jobs.stopping else
                               f"the server is full: {stats['running']} requests running and {stats['queued']} "
                               "waiting (--concurrency, --queue); retry later", code="queue_full")
            try:
                raw = await _read_body(request, config.max_body_bytes)
                served = parse_request(parse_body(raw), config, engine.policy_ids)
            except BaseException:
                jobs.unreserve()
                raise
            job = jobs.submit(served, arrived)
            if served.stream:
                return StreamingResponse(_stream(job, config.keepalive_s), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache", "X-Request-Id": job.id})
            answer = await _wait(job, request)
            if answer.status != "ok":
                raise answer_error(answer)
            return _json(200, completion_body(answer, served.model), {"X-Request-Id": job.id})
        except ApiError as exc:
            return _error(exc)
        except ClientDisconnect:  # gone while sending its body: nobody to answer, nothing was started
            return Response(status_code=400)
        except Exception as exc:  # a bug: one line in the log, an OpenAI-shaped 500 to the client
            log.error("internal error: %s: %s", type(exc).__name__, " ".join(str(exc).split()))
            return _error(ApiError(500, f"internal error ({type(exc).__name__})", code="internal_error"))

    async def not_found(request: Request, exc: Exception) -> Response:
        """Starlette's 404 / 405 in the OpenAI error shape."""
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: f"no route {request.url.path}; this server answers POST /v1/chat/completions, "
                        "GET /v1/models and GET /health",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(status, "request refused")
        return _error(ApiError(status, message))

    routes = [Route("/health", health, methods=["GET"]), Route("/v1/models", models, methods=["GET"]),
              Route("/v1/chat/completions", chat, methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={HTTPException: not_found})


def _authorize(request: Request, config: ServeConfig) -> None:
    """401 unless the request carries the server's API key (when it has one)."""
    if config.api_key is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), config.api_key.encode()):
        raise ApiError(401, "missing or wrong API key; send the header 'Authorization: Bearer KEY'",
                       code="invalid_api_key")


async def _read_body(request: Request, most: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``most`` bytes."""
    declared = request.headers.get("content-length")
    too_big = ApiError(413, f"the request body is larger than this server's limit of {most} bytes "
                            "(--max-body-bytes)", code="request_too_large")
    if declared is not None and declared.isdigit() and int(declared) > most:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > most:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


async def _wait(job: Job, request: Request) -> Any:
    """The job's answer; a client that disconnects meanwhile cancels the job's further internal calls."""

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        job.cancel.set()

    watcher = asyncio.create_task(watch())
    future = asyncio.wrap_future(job.future)
    try:
        # The episode stops at its deadline by itself; only a request still waiting in the queue gets here.
        if not (await asyncio.wait({future}, timeout=max(job.deadline - time.monotonic(), 0.0) + GRACE_S))[0]:
            job.cancel.set()
            raise ApiError(503, f"no free worker within the request's time limit of "
                                f"{served_seconds(job):g} s; the server is busy, retry later", code="timeout")
        return future.result()
    finally:
        watcher.cancel()
        if not job.future.done():  # this handler was cancelled: the server stops
            job.cancel.set()


async def _stream(job: Job, keepalive_s: float) -> AsyncIterator[str]:
    """Server-sent events: the role chunk at once, comments while the policy works, then the answer."""
    served = job.request
    future = asyncio.wrap_future(job.future)
    try:
        yield _event(role_chunk(job.id, served.model))
        while not (await asyncio.wait({future}, timeout=keepalive_s))[0]:
            if time.monotonic() > job.deadline + GRACE_S:  # still in the queue (an episode stops by itself)
                job.cancel.set()
                yield _event(ApiError(503, f"no free worker within the request's time limit of "
                                           f"{served_seconds(job):g} s; retry later", code="timeout").body())
                yield "data: [DONE]\n\n"
                return
            yield ": working\n\n"  # a comment: keeps proxies from timing out, and notices a client gone
        answer = future.result()
        if answer.status == "ok":
            for chunk in stream_events(answer, served.model, include_usage=served.include_usage):
                yield _event(chunk)
        else:
            yield _event(answer_error(answer).body())
        yield "data: [DONE]\n\n"
    finally:
        if not job.future.done():  # the client went away (Starlette cancelled the stream)
            job.cancel.set()


def _event(payload: dict[str, Any]) -> str:
    return f"data: {_dumps(payload)}\n\n"


def _json(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(_dumps(payload), status_code=status, headers=headers, media_type="application/json")


def _dumps(payload: dict[str, Any]) -> str:
    """JSON of an answer whose floats ``coba_field`` already made finite (NaN would be refused here)."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


def _error(exc: ApiError) -> Response:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    return Response(json.dumps(exc.body(), ensure_ascii=False), status_code=exc.status, headers=headers,
                    media_type="application/json")
