"""Limits on one HTTP request to a model server: a wall-clock deadline, a largest answer, a URL that parses.

``urllib``'s ``timeout`` bounds each socket read, not the request: a server sending one byte every half
second keeps a call alive for ever. ``read_within`` reads the body piece by piece against a deadline for the
whole request. ``check_url`` refuses, before any call, a URL that ``urllib`` would reject with a bare
``ValueError`` mid-run (a port that is not a number, an unclosed IPv6 bracket, spaces).

Standard library only.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse
from typing import Any

__all__ = ["BACKOFF_S", "CALL_ATTEMPTS", "CALL_TIMEOUT_S", "MAX_BACKOFF_S", "MAX_REPLY_BYTES", "check_url",
           "read_within"]

#: Per-call defaults of ``OpenAIClient``, declared once (``RunOptions`` and ``coba pools generate``'s options read
#: them): seconds before a call is retried, attempts per call, the first backoff and its cap (seconds).
CALL_TIMEOUT_S, CALL_ATTEMPTS, BACKOFF_S, MAX_BACKOFF_S = 600.0, 5, 1.0, 30.0

#: Largest answer read from a server (a reply of 16 samples of 32k tokens is a few MB).
MAX_REPLY_BYTES = 256 * 2**20


def read_within(response: Any, deadline: float) -> bytes:
    """The whole body of ``response``, read piece by piece so the request's wall-clock ``deadline`` holds even
    against a server that trickles a byte at a time (the socket timeout only bounds each read)."""
    chunks, size = [], 0
    while True:
        if time.perf_counter() > deadline:
            raise TimeoutError("the whole request took longer than the timeout")
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise http.client.HTTPException(f"the answer is larger than {MAX_REPLY_BYTES} bytes")
        chunks.append(chunk)


def check_url(url: str) -> str:
    """``url`` if it is a usable http(s) URL (scheme, host, a port that is a number); else ``ValueError``."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ValueError(f"bad URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"bad URL {url!r}; expected http://HOST[:PORT]")
    if not url.isprintable() or any(ch.isspace() for ch in url):
        raise ValueError(f"bad URL {url!r}: it holds spaces or control characters")
    return url
