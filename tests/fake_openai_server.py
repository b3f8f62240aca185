"""A fake OpenAI-compatible server for tests: canned chat/text completions with usage and log-probabilities.

It runs ``http.server`` on 127.0.0.1 in a thread. Knobs (attributes, changeable while it runs):
``ignore_n`` (always one choice), ``fail_first`` (answer that many requests with HTTP 500 first),
``fail_always`` (every request 500), ``fail_after`` (500 once that many requests succeeded),
``reject_model`` (404 for that model name), ``delay_s`` (sleep per request), ``send_usage``, ``send_logprobs``,
``reasoning_field`` (chat samples carry a thinking part in that message field, as vLLM's reasoning parsers do),
``usage_override`` (merged into ``usage``: non-integer or negative counts) and ``no_choices`` (empty choices).
Sampling replies are deterministic in (seed, choice index): "... the answer is \\boxed{A}" with A in 0..3;
judge prompts (containing "Yes or No") get "Yes"/"No" with top log-probabilities; step-judge prompts get
"Step K: correct|incorrect" lines. Usage counts whitespace-separated words, so tests can recompute it.

``RecordingProxy`` forwards requests to a real server and keeps every request body and answer, so a test
can compare what the pipeline stored with what the server actually reported.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["FakeOpenAIServer", "RecordingProxy", "count_tokens"]


def count_tokens(text: str) -> int:
    """The fake tokenizer: whitespace-separated words."""
    return len(text.split())


class _LoopbackHTTPService:
    """A threaded HTTP server on a free loopback port: ``url``, ``stop()`` and the context-manager protocol."""

    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def start(self) -> Self:
        """Start serving."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeOpenAIServer(_LoopbackHTTPService):
    """A threaded fake server; use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, *, ignore_n: bool = False, fail_first: int = 0, delay_s: float = 0.0,
                 send_usage: bool = True, send_logprobs: bool = True, max_tokens_cap: int | None = None) -> None:
        self.ignore_n = ignore_n
        self.fail_first = fail_first
        self.fail_always = False
        self.delay_s = delay_s
        self.send_usage = send_usage
        self.send_logprobs = send_logprobs
        self.max_tokens_cap = max_tokens_cap
        self.fail_after: int | None = None  # after this many successes, every request fails with 500
        self.reject_model: str | None = None  # requests for this model get 404 "model not found"
        self.reasoning_field: str | None = None  # e.g. "reasoning": chat replies put a thinking part there
        self.usage_override: dict[str, Any] | None = None  # merged into usage: misbehaving counts ("12.5", -3)
        self.no_choices = False  # answer every completion with an empty "choices" list
        self.trickle_s = 0.0  # send each answer one byte at a time, this many seconds apart (a stalling server)
        self.content_parts = False  # chat content as a list of {"type": "text", "text": ...} parts
        self.models_payload: Any = None  # what GET /v1/models answers (None: the usual list)
        self.requests: list[dict[str, Any]] = []  # bodies of successful requests
        self.responses: list[dict[str, Any]] = []  # what was sent back for them
        self.failures = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def start(self) -> FakeOpenAIServer:
        """Start serving on a free loopback port."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                payload = owner.models_payload
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
                           if payload is None else payload)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = owner._handle(self.path, body)
                self._send(status, payload)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    if owner.trickle_s:
                        for i in range(len(data)):
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                            time.sleep(owner.trickle_s)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (killed, timed out)
                    pass

        self._serve(Handler)
        return self

    # ------------------------------------------------------------------------------------------------

    def _handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            if body.get("model") is not None and body.get("model") == self.reject_model:
                return 404, {"error": {"message": f"The model `{body['model']}` does not exist.",
                                       "type": "NotFoundError"}}
            with self._lock:
                failing_after = self.fail_after is not None and len(self.requests) >= self.fail_after
                if self.fail_always or failing_after or self.fail_first > 0:
                    self.fail_first = max(0, self.fail_first - 1)
                    self.failures += 1
                    return 500, {"error": {"message": "fake overload", "type": "server_error"}}
            if path not in ("/v1/chat/completions", "/v1/completions"):
                return 404, {"error": {"message": f"no route {path}"}}
            payload = self._complete(path, body)
            with self._lock:
                self.requests.append(body)
                self.responses.append(payload)
            return 200, payload
        finally:
            with self._lock:
                self.in_flight -= 1

    def _complete(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        chat = path.endswith("chat/completions")
        prompt = "\n".join(m["content"] for m in body["messages"]) if chat else body["prompt"]
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        seed = int(body.get("seed") or 0)
        want_logprobs = bool(body.get("logprobs")) and self.send_logprobs
        choices, completion_tokens = [], 0
        for i in range(n):
            text, top, finish = self._reply(prompt, seed, i, body)
            completion_tokens += count_tokens(text)
            choice: dict[str, Any] = {"index": i, "finish_reason": finish}
            if chat:
                content: Any = text if not self.content_parts else [
                    {"type": "text", "text": text[: len(text) // 2]}, {"type": "text", "text": text[len(text) // 2:]}]
                choice["message"] = {"role": "assistant", "content": content}
                if self.reasoning_field and not top:  # a sample, not a judge verdict: split off a thinking part
                    thinking = f"thinking about seed {seed}"
                    choice["message"][self.reasoning_field] = thinking
                    completion_tokens += count_tokens(thinking)
            else:
                choice["text"] = text
            if want_logprobs and top:
                if chat:
                    choice["logprobs"] = {"content": [{"token": next(iter(top)), "logprob": max(top.values()),
                                                       "top_logprobs": [{"token": t, "logprob": lp}
                                                                        for t, lp in top.items()]}]}
                else:
                    choice["logprobs"] = {"tokens": [next(iter(top))], "token_logprobs": [max(top.values())],
                                          "top_logprobs": [top]}
            choices.append(choice)
        out: dict[str, Any] = {"id": "cmpl-fake", "object": "chat.completion" if chat else "text_completion",
                               "model": body.get("model"), "choices": choices}
        if self.send_usage:
            out["usage"] = {"prompt_tokens": count_tokens(prompt), "completion_tokens": completion_tokens,
                            "total_tokens": count_tokens(prompt) + completion_tokens, **(self.usage_override or {})}
        if self.no_choices:
            out["choices"] = []
        return out

    def _reply(self, prompt: str, seed: int, i: int, body: dict[str, Any]) -> tuple[str, dict[str, float], str]:
        """(text, first-token top log-probs, finish reason) for one choice."""
        if "Step K:" in prompt:
            n_steps = prompt.count("\nStep ") + prompt.startswith("Step ")
            lines = [f"Step {k}: {'correct' if (k + seed) % 3 else 'incorrect'}" for k in range(1, n_steps + 1)]
            return "\n".join(lines), {}, "stop"
        if "Yes or No" in prompt:
            p_yes = 0.8 if "boxed{2}" in prompt else 0.3  # the fake generator's gold-looking answer is 2
            top = {"Yes": math.log(p_yes), "No": math.log(1 - p_yes), "Maybe": math.log(0.001)}
            return ("Yes" if p_yes > 0.5 else "No"), top, "stop"
        answer = (seed * 7 + i * 3) % 4
        words = " ".join(f"step{j}" for j in range((seed + i) % 5 + 3))
        text = f"Let us think. {words} so the answer is \\boxed{{{answer}}}"
        cap = body.get("max_tokens")
        finish = "stop"
        if self.max_tokens_cap is not None and cap is not None and cap <= self.max_tokens_cap:
            text, finish = " ".join(text.split()[:cap]), "length"
        return text, {}, finish


class RecordingProxy(_LoopbackHTTPService):
    """Forward ``/v1/...`` requests to ``upstream`` (a base URL, with or without ``/v1``) and record the exchanges.

    ``exchanges`` holds (path, request body, status, response JSON) for every forwarded POST, in the order
    the answers came back. Use as a context manager; ``url`` is the proxy's base URL.
    """

    def __init__(self, upstream: str, timeout_s: float = 300.0) -> None:
        base = upstream.rstrip("/")
        self.upstream = base[: -len("/v1")] if base.endswith("/v1") else base
        self.timeout_s = timeout_s
        self.exchanges: list[tuple[str, dict[str, Any], int, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def responses(self, path_suffix: str = "completions") -> list[dict[str, Any]]:
        """Answers (status 200) to POSTs whose path ends with ``path_suffix``."""
        return [resp for path, _, status, resp in self.exchanges if status == 200 and path.endswith(path_suffix)]

    def start(self) -> RecordingProxy:
        """Start forwarding on a free loopback port."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, data: bytes | None) -> None:
                request = urllib.request.Request(owner.upstream + self.path, data=data,
                                                 headers={"Content-Type": "application/json"},
                                                 method="GET" if data is None else "POST")
                try:
                    with urllib.request.urlopen(request, timeout=owner.timeout_s) as response:
                        status, raw = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, raw = exc.code, exc.read()
                if data is not None:
                    try:
                        answer = json.loads(raw)
                    except json.JSONDecodeError:
                        answer = {"raw": raw.decode("utf-8", "replace")}
                    with owner._lock:
                        owner.exchanges.append((self.path, json.loads(data), status, answer))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler)
        return self
