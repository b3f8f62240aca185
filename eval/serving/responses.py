"""An ``Answer`` in the OpenAI shapes: a chat completion, its stream chunks, or an error with the path.

Every answer carries the extension field ``coba``: the request id, policy and lambda, the extracted answer,
the selected candidate (and its generator when routing), why the episode stopped, its cost in every measure,
the hard budgets and what was spent, the computation path, and ``correct`` (null unless the client gave a gold
answer). ``usage`` totals the prompt and completion tokens of every internal call in the path.
"""

from __future__ import annotations

import time
from typing import Any

from eval.serving.answer import Answer
from eval.serving.errors import ApiError
from pools.strict_json import finite_or_none

__all__ = ["answer_error", "coba_field", "completion_body", "role_chunk", "stream_events"]


def coba_field(answer: Answer) -> dict[str, Any]:
    """The ``coba`` extension of a response: what the policy did and what it cost."""
    out = {"request_id": answer.request_id, "status": answer.status, "policy": answer.policy, "lambda": answer.lam,
           "answer": answer.answer, "selected_candidate": answer.selected_candidate, "correct": answer.correct,
           "stop_reason": answer.stop_reason, "costs": answer.costs, "spent": answer.spent, "limits": answer.limits,
           "path": answer.path}
    if answer.selected_generator is not None:
        out["selected_generator"] = answer.selected_generator
    if answer.error:
        out["error"] = answer.error
    return finite_or_none(out)


def completion_body(answer: Answer, model: str) -> dict[str, Any]:
    """The ``chat.completion`` object of a request that got an answer."""
    return {"id": answer.request_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text or ""},
                         "finish_reason": answer.finish_reason, "logprobs": None}],
            "usage": dict(answer.usage), "coba": coba_field(answer)}


def answer_error(answer: Answer) -> ApiError:
    """The error a request without an answer ends with, its path attached."""
    extra = {"coba": coba_field(answer)}
    if answer.status == "expired":
        return ApiError(503, f"{answer.error}; the server is busy, retry later", code="timeout", extra=extra)
    if answer.status == "cancelled":
        return ApiError(503, f"the request was cancelled ({answer.error}); the server is stopping",
                        code="cancelled", extra=extra)
    if any("error" in step for step in answer.path):
        return ApiError(502, answer.error or "an endpoint failed", code="endpoint_failed", extra=extra)
    if any(step.get("timed_out") for step in answer.path):
        return ApiError(504, f"{answer.error}; give the request more time (coba.budget.seconds, --max-seconds)",
                        code="timeout", extra=extra)
    return ApiError(422, answer.error or "no answer", code="no_answer", extra=extra)


def stream_events(answer: Answer, model: str, *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects after the role chunk: the content, the finish reason, and (with
    ``include_usage``) a last chunk without choices holding the usage, as the OpenAI API streams them. The
    ``coba`` field rides on the last chunk."""
    base = {"id": answer.request_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": answer.text or ""}, "finish_reason": None,
                                    "logprobs": None}]},
              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": answer.finish_reason,
                                    "logprobs": None}]}]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": dict(answer.usage)})
    chunks[-1]["coba"] = coba_field(answer)
    return chunks


def role_chunk(request_id: str, model: str) -> dict[str, Any]:
    """The first chunk of a stream, sent at once: the assistant's role, no content yet."""
    return {"id": request_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
                         "logprobs": None}]}
