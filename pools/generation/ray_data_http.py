"""Send generation / verification calls through Ray Data's LLM processors instead of this process's threads.

``run_calls_on_ray`` is ``pools.generation.call_runner.run_calls`` with another transport. Everything else stays
where it was: ``generate`` / ``verify`` choose each call's endpoint and build it (``PreparedCall``), and journal
each result with the same ``on_done``. Here each prepared call is

1. *captured*: sent through a ``CapturingClient`` of its endpoint, which records the exact request body the
   ordinary client would POST (prompt building, sampling parameters, seed, ``n`` unchanged) and sends nothing;
2. *carried*: one Ray Data ``HttpRequestProcessorConfig`` processor per endpoint URL (``build_processor``) POSTs
   the bodies from actors on the Ray cluster; with ``engine="vllm"`` a ``vLLMEngineProcessorConfig`` processor
   runs the model itself on the cluster's GPU nodes instead of calling a server;
3. *replayed*: as rows come back (streamed: ``iter_rows``), the call is sent again through a ``ReplayClient``
   that answers with the row's response, so the ordinary parsing turns it into a ``Completion`` /
   ``JudgeOutcome``, and ``on_done`` journals it at once. An interrupted run keeps every call journaled so far,
   and the next run plans only the missing ones (the journal is the only state).

Follow-up calls that ``on_done`` returns (a server that ignores ``n``) run in a further round. Latency is
measured per request in the HTTP actor (from the request being sent to the answer read), token counts come from
the server's ``usage`` as in the local path. Needs the ``ray`` extra (``ray[data]`` and aiohttp).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pools.client.openai_client import EndpointError, OpenAIClient
from pools.generation.call_runner import PreparedCall
from pools.ray_connect import RayUnavailable, connect_ray

__all__ = ["ENGINES", "CapturingClient", "RayDataOptions", "ReplayClient", "engine_config", "run_calls_on_ray"]

T = TypeVar("T")
R = TypeVar("R")

#: How the calls are carried: "http" (HttpRequestProcessorConfig against the OpenAI-compatible endpoints) or
#: "vllm" (vLLMEngineProcessorConfig: vLLM engines on the cluster's GPU nodes load ``model`` themselves).
ENGINES = ("http", "vllm")
#: Test hook: after this many journaled calls the run raises KeyboardInterrupt, as Ctrl-C there would.
INTERRUPT_ENV = "COBA_TEST_INTERRUPT_AFTER_CALLS"
_RAY_MISSING = "--ray-address needs Ray Data, which is not installed: install coba-env[ray] (pip install -e '.[ray]' in the checkout)"


@dataclass
class RayDataOptions:
    """Where and how the calls run on Ray: cluster address, engine, rows per batch, actors per endpoint, and for
    ``engine="vllm"`` the model source and engine arguments (``vLLMEngineProcessorConfig``)."""

    address: str
    engine: str = "http"
    batch_size: int = 4
    actors_per_endpoint: int = 1
    model: str | None = None
    engine_kwargs: dict[str, Any] = field(default_factory=dict)

    def check(self, api: str) -> None:
        """Raise ``ValueError`` for a combination that cannot run (one line naming the option)."""
        if self.engine not in ENGINES:
            raise ValueError(f"--ray-engine {self.engine!r}; expected one of {list(ENGINES)}")
        if self.batch_size < 1 or self.actors_per_endpoint < 1:
            raise ValueError("--ray-batch-size and --ray-actors must be >= 1")
        if self.engine == "vllm" and not self.model:
            raise ValueError("--ray-engine vllm needs --ray-model (the Hugging Face id or path the engines load)")
        if self.engine == "vllm" and api != "chat":
            raise ValueError("--ray-engine vllm runs chat prompts only; use --api chat")


# --------------------------------------------------------------------------------------------------
# Capture and replay: the ordinary client code builds the request and parses the answer
# --------------------------------------------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, url: str, body: dict[str, Any]) -> None:
        super().__init__(url)
        self.url, self.body = url, body


class CapturingClient(OpenAIClient):
    """A client of ``like``'s endpoint that records the request it would send (raising ``_Captured``)."""

    def __init__(self, like: OpenAIClient) -> None:
        super().__init__(like.base_url, like.model, api_key=like.api_key)

    def _request(self, path: str, body: dict[str, Any] | None) -> tuple[dict[str, Any], float, int]:
        raise _Captured(self.base_url + path, dict(body or {}))


class ReplayClient(OpenAIClient):
    """A client of ``like``'s endpoint answering every request with one received answer: ``text`` (the response
    body), ``status`` (HTTP status) and ``latency_s``; errors are reported as the ordinary client reports them."""

    def __init__(self, like: OpenAIClient, answer: dict[str, Any], url: str) -> None:
        super().__init__(like.base_url, like.model, api_key=like.api_key)
        self._answer, self._url = answer, url

    def _request(self, path: str, body: dict[str, Any] | None) -> tuple[dict[str, Any], float, int]:
        status, text = int(self._answer["status"]), str(self._answer["text"])
        if status != 200:
            raise EndpointError(f"HTTP {status}: {text.strip()[:300]}", url=self._url, attempts=1, status=status)
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise EndpointError(f"the answer is not JSON: {text[:200]!r}", url=self._url, attempts=1) from None
        if not isinstance(data, dict) or "error" in data:
            raise EndpointError(f"the server answered with an error: {str(data)[:300]}", url=self._url, attempts=1)
        return data, float(self._answer["latency_s"]), 1


def _capture(prepared: PreparedCall) -> tuple[str, dict[str, Any]]:
    try:
        prepared.send(CapturingClient(prepared.client))
    except _Captured as request:
        return request.url, request.body
    raise RuntimeError("a prepared call returned without sending a request")  # a bug, not bad input


# --------------------------------------------------------------------------------------------------
# The HTTP actors' session: exact bodies, per-request latency
# --------------------------------------------------------------------------------------------------


def _response_class() -> type:
    import aiohttp

    class TimedResponse(aiohttp.ClientResponse):
        """A response that reports its body as text with the HTTP status and the request's latency."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._coba_sent = time.perf_counter()  # built as the request goes out

        async def json(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # what HttpRequestUDF reads
            text = await self.text()
            return {"text": text, "status": self.status, "latency_s": time.perf_counter() - self._coba_sent}

    return TimedResponse


class _ExactBodySession:
    """The ``session_factory`` of the HTTP stage: rows carry each request body as JSON text (Ray Data's Arrow
    blocks would otherwise unify the bodies' keys and send absent options as nulls); the stage JSON-encodes that
    text once more, and this session undoes it, so the server gets the captured bytes."""

    def __init__(self, timeout_s: float) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(response_class=_response_class(),
                                              timeout=aiohttp.ClientTimeout(total=timeout_s))

    async def __aenter__(self) -> _ExactBodySession:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    def post(self, url: str, *, headers: dict[str, Any], data: Any) -> Any:
        body = json.loads(data) if isinstance(data, str) else data
        return self._session.post(url, headers=headers, data=body if isinstance(body, str) else data)


def _make_session(timeout_s: float) -> _ExactBodySession:
    return _ExactBodySession(timeout_s)


def engine_config(ray_options: RayDataOptions, url: str, *, timeout_s: float = 600.0, max_attempts: int = 5,
                  backoff_s: float = 1.0, api_key: str | None = None) -> Any:
    """The Ray Data LLM processor config for one endpoint URL: ``HttpRequestProcessorConfig`` (engine "http"),
    or ``vLLMEngineProcessorConfig`` (engine "vllm"; ``url`` then only names the rows' model)."""
    from ray.data.llm import HttpRequestProcessorConfig, vLLMEngineProcessorConfig

    if ray_options.engine == "vllm":
        return vLLMEngineProcessorConfig(model_source=ray_options.model, engine_kwargs=dict(ray_options.engine_kwargs),
                                         concurrency=ray_options.actors_per_endpoint,
                                         batch_size=ray_options.batch_size)
    return HttpRequestProcessorConfig(
        url=url, batch_size=ray_options.batch_size, concurrency=ray_options.actors_per_endpoint,
        headers={"Authorization": f"Bearer {api_key}"} if api_key else None, max_retries=max_attempts - 1,
        base_retry_wait_time_in_s=backoff_s, session_factory=partial(_make_session, timeout_s),
        # I/O-bound actors: a quarter CPU each, so a small cluster keeps CPUs for Ray Data's own tasks.
        http_request_stage={"num_cpus": 0.25})


_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "n", "logprobs", "top_logprobs", "stop")


def _vllm_rows(row: dict[str, Any]) -> dict[str, Any]:
    """vLLM engine input of a captured chat body: its messages and sampling parameters."""
    body = json.loads(row["body"])
    params = {k: body[k] for k in _SAMPLING_KEYS if k in body}
    if params.get("logprobs") is True:  # chat's switch; vLLM counts top tokens
        params["logprobs"] = int(body.get("top_logprobs", 1))
    params.pop("top_logprobs", None)
    return {"task": row["task"], "messages": body["messages"], "sampling_params": params,
            "max_tokens": int(body.get("max_tokens") or 0)}


def _vllm_answer(row: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped chat answer for one vLLM engine output row (the replay client parses it)."""
    capped = row["max_tokens"] and row["num_generated_tokens"] >= row["max_tokens"]
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": row["generated_text"]},
                           "finish_reason": "length" if capped else "stop"}],
              "usage": {"prompt_tokens": int(row["num_input_tokens"]),
                        "completion_tokens": int(row["num_generated_tokens"])}}
    return {"task": row["task"], "http_response": {"text": json.dumps(answer), "status": 200,
                                                   "latency_s": float(row["time_taken_llm"])}}


# --------------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------------


def _connect(address: str) -> Any:
    """``ray`` connected to ``address`` (``pools.ray_connect.connect_ray``), with Ray Data's LLM module present."""
    try:
        import ray.data.llm  # noqa: F401  (its HTTP stage needs aiohttp: part of the extra)
    except ModuleNotFoundError:
        raise ValueError(_RAY_MISSING) from None
    try:
        return connect_ray(address)
    except RayUnavailable as exc:
        raise ValueError(str(exc)) from None


def run_calls_on_ray(tasks: Iterable[T], prepare: Callable[[T], PreparedCall], on_done: Callable[[T, R], Iterable[T]],
                     *, ray: RayDataOptions, options: Any, total: int | None = None, desc: str = "calls",
                     progress: bool = True, unit: str = "call",
                     progress_of: Callable[[T, R], tuple[int, int]] | None = None) -> int:
    """Run the calls of ``tasks`` through Ray Data (one processor per endpoint URL), journaling each result with
    ``on_done`` as its row arrives; follow-ups run in further rounds. Returns the number of calls made.

    ``options`` is the ``RunOptions`` (timeout, attempts, backoff, API key). A call the endpoint refused raises
    ``EndpointError`` after every earlier result was journaled; Ctrl-C stops at once, keeping the journal.
    """
    from tqdm import tqdm

    ray_mod = _connect(ray.address)
    from ray.data.llm import build_processor

    # One progress bar (ours, counting journaled calls); Ray Data's own per-operator bars would interleave.
    ray_mod.data.DataContext.get_current().enable_progress_bars = False

    stop_after = int(os.environ.get(INTERRUPT_ENV, "0") or 0)
    bar = tqdm(total=total, desc=f"{desc} (Ray Data, {ray.engine})", unit=unit, disable=not progress,
               dynamic_ncols=True)
    done = 0
    backlog = list(tasks)
    try:
        while backlog:
            prepared = [prepare(task) for task in backlog]
            by_url: dict[str, list[dict[str, Any]]] = {}
            for i, call in enumerate(prepared):
                url, body = _capture(call)
                by_url.setdefault(url, []).append({"task": i, "body": json.dumps(body, ensure_ascii=False)})
            outputs = []
            for url, rows in by_url.items():
                config = engine_config(ray, url, timeout_s=options.timeout_s, max_attempts=options.max_attempts,
                                       backoff_s=options.backoff_s, api_key=options.api_key)
                if ray.engine == "vllm":
                    processor = build_processor(config, preprocess=_vllm_rows, postprocess=_vllm_answer)
                else:
                    processor = build_processor(config, preprocess=lambda row: {"task": row["task"],
                                                                                "payload": row["body"]},
                                                postprocess=lambda row: {"task": row["task"],
                                                                         "http_response": row["http_response"]})
                outputs.append(processor(ray_mod.data.from_items(rows)))
            stream = outputs[0].union(*outputs[1:]) if len(outputs) > 1 else outputs[0]
            urls = {i: url for url, rows in by_url.items() for i in (r["task"] for r in rows)}
            follow_ups: list[T] = []
            rows = _rows(stream, ", ".join(by_url))
            try:
                for row in rows:
                    i = int(row["task"])
                    result = prepared[i].send(ReplayClient(prepared[i].client, dict(row["http_response"]), urls[i]))
                    follow_ups.extend(on_done(backlog[i], result))
                    done += 1
                    units, _ = progress_of(backlog[i], result) if progress_of else (1, 0)
                    bar.update(units)
                    if stop_after and done >= stop_after:
                        raise KeyboardInterrupt(f"{INTERRUPT_ENV}={stop_after}")
            finally:
                rows.close()  # on an error or Ctrl-C: stop the Ray Data execution (no more calls are sent)
            backlog = follow_ups
        return done
    finally:
        bar.close()


def _rows(stream: Any, where: str) -> Generator[dict[str, Any], None, None]:
    """The output rows as they arrive; a failed Ray Data run becomes an ``EndpointError`` (journal kept)."""
    try:
        yield from stream.iter_rows()
    except (KeyboardInterrupt, EndpointError):
        raise
    except Exception as exc:  # Ray wraps the HTTP stage's failure (retries exhausted) in its own errors
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = next((line for line in lines if "Reached maximum retries" in line or "Error" in line),
                      lines[0] if lines else type(exc).__name__)
        raise EndpointError(f"Ray Data HTTP stage failed: {detail[:300]}", url=where, attempts=1) from None
