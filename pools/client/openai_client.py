"""A small client for OpenAI-compatible servers (vLLM, llama.cpp, SGLang): chat and text completions.

Standard library only (``urllib``). Each call returns its choices (text, finish reason, first-token top
log-probabilities, per-choice token count when the server sends token log-probabilities), the server's
``usage`` (prompt and completion tokens) and the wall-clock latency of the successful attempt.

Retries: timeouts, refused or reset connections, HTTP 408, 409, 429 and 5xx are retried with exponential backoff
(``backoff_s * 2**attempt``, capped at ``max_backoff_s``, with +-25 % jitter) up to ``max_attempts`` attempts
in all; then ``EndpointError`` says what failed and where. Other 4xx answers (a bad model name, a bad
parameter) fail at once with the server's message, since asking again cannot help.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pools.client import request_limits
from pools.client.request_limits import check_url, read_within
from pools.limits import MAX_PARAMS_B

__all__ = ["Choice", "Completion", "Endpoint", "EndpointError", "EndpointPool", "OpenAIClient", "check_url",
           "guess_params_b", "parse_endpoint"]

_RETRY_STATUS = frozenset({408, 409, 429})


class EndpointError(RuntimeError):
    """A call to an OpenAI-compatible endpoint failed for good (after retries, or on a non-retryable error)."""

    def __init__(self, message: str, *, url: str, attempts: int, status: int | None = None) -> None:
        super().__init__(f"{url}: {message} (after {attempts} attempt{'s' if attempts != 1 else ''})")
        self.url, self.attempts, self.status = url, attempts, status


@dataclass
class Choice:
    """One returned choice: text, finish reason, first-token top log-probs, and its token count if known."""

    text: str
    finish_reason: str
    first_top_logprobs: dict[str, float] | None = None
    n_tokens: int | None = None  # from the choice's own token log-probs; None when the server sent none


@dataclass
class Completion:
    """One call's result: the choices, the server's usage (None when it sent none), and the latency."""

    choices: list[Choice]
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    attempts: int = 1


def _chat_text(message: Any) -> str:
    """The message's content, preceded by its reasoning as ``<think>...</think>`` when the server split it off (a
    message sent as a bare string is its own content).

    vLLM with ``--reasoning-parser`` returns a reasoning model's thinking in ``reasoning`` (``reasoning_content``
    before vLLM 0.11) and only the rest in ``content``; ``usage`` counts both, so the candidate keeps both.
    """
    if isinstance(message, str):  # a server that sends the message as its bare text: that text is the candidate
        return message
    if not isinstance(message, dict):
        return ""
    content = _content_text(message.get("content"))
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        return f"<think>\n{reasoning}\n</think>\n\n{content}"
    return content


def _content_text(content: Any) -> str:
    """A message's ``content``: a string, or a list of parts (``{"type": "text", "text": ...}`` or strings)
    joined in order; anything else counts as no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _logprob(value: Any) -> float | None:
    """A log-probability as a float, or None when a server sends something that is not one (text, NaN, > 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value > 0:
        return None
    return float(value)


def _chat_logprobs(lp: Any) -> tuple[dict[str, float] | None, int | None]:
    """(first-token top log-probs, token count) from a chat choice's ``logprobs`` (``content`` list)."""
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        return None, None
    content = lp["content"]
    if not content:
        return None, 0
    first = content[0] if isinstance(content[0], dict) else {}
    tops = first.get("top_logprobs") if isinstance(first.get("top_logprobs"), list) else []
    top = {str(t["token"]): v for t in tops if isinstance(t, dict) and "token" in t
           and (v := _logprob(t.get("logprob"))) is not None}
    if not top and "token" in first and _logprob(first.get("logprob")) is not None:
        top = {str(first["token"]): _logprob(first["logprob"])}
    return top or None, len(content)


def _text_logprobs(lp: Any) -> tuple[dict[str, float] | None, int | None]:
    """(first-token top log-probs, token count) from a text-completion choice's ``logprobs`` (legacy shape)."""
    if not isinstance(lp, dict):
        return None, None
    tokens = lp.get("tokens")
    count = len(tokens) if isinstance(tokens, list) else None
    tops = lp.get("top_logprobs")
    top = None
    if isinstance(tops, list) and tops and isinstance(tops[0], dict):
        top = {str(k): x for k, v in tops[0].items() if (x := _logprob(v)) is not None}
    elif count and isinstance(lp.get("token_logprobs"), list) and lp["token_logprobs"] and \
            _logprob(lp["token_logprobs"][0]) is not None:
        top = {str(tokens[0]): _logprob(lp["token_logprobs"][0])}
    return top or None, count


class OpenAIClient:
    """Calls ``{base_url}/v1/chat/completions`` or ``/v1/completions`` of one served ``model``."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout_s: float = request_limits.CALL_TIMEOUT_S, max_attempts: int = request_limits.CALL_ATTEMPTS,
                 backoff_s: float = request_limits.BACKOFF_S, max_backoff_s: float = request_limits.MAX_BACKOFF_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        check_url(base_url)
        if api_key is not None and not (api_key.isprintable() and api_key.isascii()):
            raise ValueError("--api-key holds a line break, a control character or non-ASCII text; expected the "
                             "key on one line")
        base = base_url.rstrip("/")
        self.base_url = base[: -len("/v1")] if base.endswith("/v1") else base
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"OpenAIClient({self.base_url!r}, {self.model!r})"

    # ------------------------------------------------------------------------------------------------

    def chat(self, messages: Sequence[dict[str, str]], **params: Any) -> Completion:
        """POST /v1/chat/completions; ``params``: temperature, top_p, max_tokens, seed, n, logprobs, top_logprobs, ..."""
        body = {"model": self.model, "messages": list(messages), **_clean(params, chat=True)}
        data, latency, attempts = self._request("/v1/chat/completions", body)
        choices = []
        for ch in self._raw_choices(data, attempts):
            top, count = _chat_logprobs(ch.get("logprobs"))
            choices.append(Choice(_chat_text(ch.get("message") or ""), str(ch.get("finish_reason") or "unknown"),
                                  top, count))
        return self._result(data, choices, latency, attempts)

    def complete(self, prompt: str, **params: Any) -> Completion:
        """POST /v1/completions with a raw ``prompt``; same ``params`` as ``chat``."""
        body = {"model": self.model, "prompt": prompt, **_clean(params, chat=False)}
        data, latency, attempts = self._request("/v1/completions", body)
        choices = []
        for ch in self._raw_choices(data, attempts):
            top, count = _text_logprobs(ch.get("logprobs"))
            text = ch.get("text") if isinstance(ch.get("text"), str) else ""
            choices.append(Choice(text, str(ch.get("finish_reason") or "unknown"), top, count))
        return self._result(data, choices, latency, attempts)

    def models(self) -> list[str]:
        """Model ids the server lists at GET /v1/models."""
        data, _, attempts = self._request("/v1/models", None)
        listed = data.get("data")
        if not isinstance(listed, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str)
                                                   for m in listed):
            raise EndpointError(f"the server's /v1/models answer lists {str(listed)[:80]}; expected a list of "
                                "objects with an 'id'", url=self.base_url, attempts=attempts)
        return [m["id"] for m in listed]

    # ------------------------------------------------------------------------------------------------

    def _raw_choices(self, data: dict[str, Any], attempts: int) -> list[dict[str, Any]]:
        """The answer's ``choices`` in index order; anything but a list of objects is a misbehaving server."""
        raw = data.get("choices") or []
        if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
            raise EndpointError(f"the server's choices are {str(raw)[:80]}; expected a list of objects",
                                url=self.base_url, attempts=attempts)
        index = [c.get("index", i) for i, c in enumerate(raw)]
        if all(isinstance(i, int) and not isinstance(i, bool) for i in index):
            return [c for _, c in sorted(zip(index, raw, strict=True), key=lambda pair: pair[0])]
        return raw

    def _result(self, data: dict[str, Any], choices: list[Choice], latency: float, attempts: int) -> Completion:
        url = self.base_url
        if not choices:  # nothing to record: a call that returns no text must not count as done
            raise EndpointError("the server answered with no choices", url=url, attempts=attempts)
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            raise EndpointError(f"the server's usage is {str(usage)[:80]}; expected an object", url=url,
                                attempts=attempts)
        return Completion(choices, _token_count(usage, "prompt_tokens", url, attempts),
                          _token_count(usage, "completion_tokens", url, attempts), latency, attempts)

    def _request(self, path: str, body: dict[str, Any] | None) -> tuple[dict[str, Any], float, int]:
        """Send with retries; return (parsed JSON, latency of the successful attempt, attempts used)."""
        url = self.base_url + path
        payload = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = "no attempt made"
        status: int | None = None
        for attempt in range(1, self.max_attempts + 1):
            request = urllib.request.Request(url, data=payload, headers=headers,
                                             method="GET" if payload is None else "POST")
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = read_within(response, start + self.timeout_s)
                latency = time.perf_counter() - start
            except urllib.error.HTTPError as exc:
                status = exc.code
                detail = _error_detail(exc)
                if exc.code < 500 and exc.code not in _RETRY_STATUS:
                    raise EndpointError(f"HTTP {exc.code}: {detail}", url=url, attempts=attempt,
                                        status=exc.code) from None
                last = f"HTTP {exc.code}: {detail}"
            except ValueError as exc:  # urllib: a malformed URL or header, a cut reply; asking again cannot help
                raise EndpointError(f"cannot send the request ({str(exc)[:120]})", url=url, attempts=attempt) from None
            except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, refused/reset/cut connections
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, TimeoutError):
                    last = f"timed out after {self.timeout_s:g} s"
                else:
                    last = f"cannot connect ({reason})"
                status = None
            else:
                try:
                    data = json.loads(raw)
                except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
                    last = f"the answer is not readable JSON: {raw[:200]!r}"
                else:
                    if isinstance(data, dict) and "error" not in data:
                        return data, latency, attempt
                    last = f"the server answered with an error: {str(data)[:300]}"
            if attempt < self.max_attempts:
                self._sleep(self._backoff(attempt))
        raise EndpointError(f"giving up: {last}", url=url, attempts=self.max_attempts, status=status)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return delay * random.uniform(0.75, 1.25)


def _token_count(usage: dict[str, Any], name: str, url: str, attempts: int) -> int | None:
    """``usage[name]`` as a non-negative int (None when absent); anything else is a misbehaving server."""
    value = usage.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**53:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**53:
        raise EndpointError(f"the server's usage.{name} is {str(value)[:40]!r}; expected a non-negative integer",
                            url=url, attempts=attempts)
    return value


def _clean(params: dict[str, Any], *, chat: bool) -> dict[str, Any]:
    """Drop None values; translate ``logprobs``/``top_logprobs`` to the shape of the chosen API."""
    out = {k: v for k, v in params.items() if v is not None and k != "extra_body"}
    out.update(params.get("extra_body") or {})
    if chat and out.get("top_logprobs") and not out.get("logprobs"):
        out["logprobs"] = True  # chat needs both: logprobs switches them on, top_logprobs says how many
    elif not chat and "top_logprobs" in out:
        # Legacy completions: ``logprobs`` is the number of top tokens per position.
        out["logprobs"] = out.pop("top_logprobs")
    elif not chat and out.get("logprobs") is True:
        out["logprobs"] = 1
    return out


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    try:
        data = json.loads(text)
        message = data.get("error", data)
        if isinstance(message, dict):
            message = message.get("message", message)
        text = str(message)
    except (json.JSONDecodeError, AttributeError):
        pass
    return (text or exc.reason or "").strip()[:300]


# --------------------------------------------------------------------------------------------------
# Endpoints: "URL,MODEL[,PARAMS_B]" specs and round-robin over several servers of one model
# --------------------------------------------------------------------------------------------------

_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*([BbMm])(?![A-Za-z])")


def guess_params_b(model: str) -> float | None:
    """Parameters in billions read off a model name ("Qwen3-8B" -> 8.0, "SmolLM2-135M" -> 0.135), else None."""
    matches = _SIZE.findall(model.replace("_", "-"))
    if not matches:
        return None
    number, unit = matches[-1]
    return float(number) / (1000.0 if unit in "Mm" else 1.0)


@dataclass(frozen=True)
class Endpoint:
    """One server and the model name it serves, with the model's size in billions of parameters."""

    url: str
    model: str
    params_b: float


def parse_endpoint(spec: str, *, model: str | None = None, params_b: float | None = None) -> Endpoint:
    """Parse ``URL,MODEL[,PARAMS_B]`` (``model``/``params_b`` fill parts the spec leaves out)."""
    parts = [p.strip() for p in spec.split(",")]
    if not parts[0] or len(parts) > 3:
        raise ValueError(f"bad endpoint {spec!r}; expected URL,MODEL[,PARAMS_B]")
    url = parts[0]
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"bad endpoint {spec!r}: the URL must start with http:// or https://")
    try:
        check_url(url)
    except ValueError as exc:
        raise ValueError(f"bad endpoint {spec!r}: {exc}") from None
    name = parts[1] if len(parts) > 1 and parts[1] else model
    if not name:
        raise ValueError(f"endpoint {spec!r} names no model; expected URL,MODEL[,PARAMS_B] (or pass --model)")
    size: float | None = params_b
    if len(parts) > 2 and parts[2]:
        try:
            size = float(parts[2])
        except ValueError:
            raise ValueError(f"bad endpoint {spec!r}: PARAMS_B {parts[2]!r} is not a number") from None
        if not (math.isfinite(size) and 0 < size <= MAX_PARAMS_B):
            raise ValueError(f"bad endpoint {spec!r}: PARAMS_B {parts[2]!r}; expected a finite number of billions "
                             f"of parameters > 0 and at most {MAX_PARAMS_B:g}")
    if size is None:
        size = guess_params_b(name)
    if size is None or not size > 0:
        raise ValueError(f"endpoint {spec!r}: cannot tell the size of model {name!r}; give it as "
                         "URL,MODEL,PARAMS_B (billions of parameters)")
    return Endpoint(url, name, size)


class EndpointPool:
    """Clients for several endpoints, grouped by model; ``client(model)`` hands them out round-robin."""

    def __init__(self, endpoints: Sequence[Endpoint], **client_options: Any) -> None:
        if not endpoints:
            raise ValueError("no endpoint given; expected at least one URL,MODEL[,PARAMS_B]")
        self.by_model: dict[str, list[OpenAIClient]] = {}
        self.params_b: dict[str, float] = {}
        for ep in endpoints:
            if self.params_b.setdefault(ep.model, ep.params_b) != ep.params_b:
                raise ValueError(f"model {ep.model!r} is given two sizes: {self.params_b[ep.model]} and "
                                 f"{ep.params_b} billion parameters")
            self.by_model.setdefault(ep.model, []).append(OpenAIClient(ep.url, ep.model, **client_options))
        self._turn = dict.fromkeys(self.by_model, 0)
        self._lock = threading.Lock()
        #: Largest n each endpoint honoured (learned when it returns fewer choices than asked).
        self.max_n: dict[str, int] = {}

    @property
    def models(self) -> list[str]:
        """Model names in the order first given."""
        return list(self.by_model)

    def client(self, model: str) -> OpenAIClient:
        """The next client serving ``model``."""
        with self._lock:
            clients = self.by_model[model]
            turn = self._turn[model]
            self._turn[model] = turn + 1
        return clients[turn % len(clients)]
