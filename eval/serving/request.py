"""A chat-completions request body -> a checked ``ServedRequest``, or an ``ApiError`` with one clear message.

What a request may choose, always within the server's limits (``ServeConfig``): the policy (the ``model``:
``POLICY`` or ``POLICY@LAMBDA``, the server's own name for its default policy), lambda, the hard budgets,
the generator's ``max_tokens`` / ``temperature`` / ``top_p`` / ``seed``, and a gold answer to be graded against.
The CoBa fields travel in one object ``coba`` (the ``openai`` client's ``extra_body={"coba": {...}}``):
``policy``, ``lambda``, ``budget`` (``tokens``, ``calls``, ``seconds``) and ``gold``. The problem is the last
message, which must come from the user; earlier messages (a system prompt, earlier turns) go to the generators
before it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.serving.config import ServeConfig
from eval.serving.errors import ApiError
from pools.errors import PoolError
from pools.limits import MAX_SEED
from pools.parse_boundary import parse_problem, refuse_lone_surrogates

__all__ = ["ServedRequest", "parse_body", "parse_request"]

ROLES = ("system", "developer", "user", "assistant")
COBA_FIELDS = ("policy", "lambda", "budget", "gold")
BUDGET_FIELDS = {"tokens": "--max-tokens", "calls": "--max-calls", "seconds": "--max-seconds"}
REFUSED_FIELDS = ("tools", "functions", "tool_choice", "function_call")


@dataclass(frozen=True)
class ServedRequest:
    """One checked request: the problem, its earlier messages, and what the client chose within the limits."""

    problem: str
    history: tuple[dict[str, str], ...]
    policy: str
    lam: float | None  # None: the server's default
    limits: dict[str, float | None]  # tokens, calls, seconds of this request
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    gold: str | None
    stream: bool
    include_usage: bool
    model: str  # the model name as the client sent it (echoed in the answer)


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object; 400 for anything else."""
    try:
        text = raw.decode("utf-8")
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        problem = parse_problem(exc)
        raise ApiError(400, f"the request body is {problem}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body is a JSON {type(body).__name__}; expected a JSON object with "
                            "'model' and 'messages'", code="invalid_json")
    try:
        refuse_lone_surrogates(body, text, where="the request body")
    except PoolError as exc:
        field = re.sub(r"\.(\d+)", r"[\1]", exc.field or "") or None  # messages.0.content -> messages[0].content
        raise ApiError(400, f"{field or 'the request body'} holds a lone surrogate escape (\\ud800-\\udfff "
                            "without its pair); expected valid Unicode text", param=field) from None
    return body


def parse_request(body: dict[str, Any], config: ServeConfig, policy_ids: Sequence[str]) -> ServedRequest:
    """Check ``body`` against the server's limits; raise ``ApiError`` naming the first bad field."""
    for name in REFUSED_FIELDS:
        if body.get(name):
            raise ApiError(400, f"'{name}' is not supported: coba serve answers with a routing policy's final "
                                "answer and passes no tools through", param=name)
    if body.get("n") not in (None, 1):
        raise ApiError(400, f"n = {body['n']!r}; coba serve returns one answer per request (n = 1)", param="n")
    coba = _object(body.get("coba"), "coba", COBA_FIELDS)
    policy, lam = _policy(body.get("model"), coba, config, policy_ids)
    problem, history = _messages(body.get("messages"), config.max_messages)
    stream = _bool(body.get("stream"), "stream", False)
    options = _object(body.get("stream_options"), "stream_options", ("include_usage",))
    gold = coba.get("gold")
    if gold is not None and not isinstance(gold, str):
        raise ApiError(400, f"coba.gold is {_shown(gold)}; expected the gold answer as a string", param="coba.gold")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    default, cap = config.sampling, config.sampling.max_tokens
    return ServedRequest(
        problem=problem, history=history, policy=policy, lam=lam, limits=_budget(coba.get("budget"), config),
        max_tokens=cap if max_tokens is None else int(_number(max_tokens, "max_tokens", 1, cap, integer=True,
                                                                hint=" (--sample-max-tokens)")),
        temperature=_number(body.get("temperature", default.temperature), "temperature", 0.0, 2.0),
        top_p=_number(body.get("top_p", default.top_p), "top_p", 0.0, 1.0, low_open=True),
        seed=int(_number(body.get("seed", default.seed), "seed", 0, MAX_SEED, integer=True)),
        gold=gold or None, stream=stream, include_usage=_bool(options.get("include_usage"),
                                                               "stream_options.include_usage", False),
        model=str(body.get("model")))


def _policy(model: Any, coba: dict[str, Any], config: ServeConfig,
            policy_ids: Sequence[str]) -> tuple[str, float | None]:
    """(policy id, lambda or None) from ``model`` (``POLICY[@LAMBDA]`` or the served name) and ``coba``."""
    if not isinstance(model, str) or not model:
        raise ApiError(400, f"'model' is {_shown(model)}; expected {config.served_name!r} or a policy this server "
                            f"serves: {', '.join(policy_ids)}", param="model")
    name, lam_text = (model, None) if model == config.served_name or "@" not in model else model.rsplit("@", 1)
    lam = None
    if lam_text is not None:
        try:
            lam = float(lam_text)
        except ValueError:
            raise ApiError(400, f"model {model!r}: {lam_text!r} after '@' is not a number; expected "
                                "POLICY@LAMBDA", param="model") from None
    if name == config.served_name:
        name = next(iter(policy_ids))
    elif name not in policy_ids:
        raise ApiError(404, f"the model {model!r} does not exist; this server answers with the policies "
                            f"{', '.join(policy_ids)} (or {config.served_name!r}, its default), optionally as "
                            "POLICY@LAMBDA", param="model", code="model_not_found")
    chosen = coba.get("policy")
    if chosen is not None:
        if not isinstance(chosen, str) or chosen not in policy_ids:
            raise ApiError(400, f"coba.policy {_shown(chosen)} is not a policy this server serves; expected one "
                                f"of {', '.join(policy_ids)}", param="coba.policy", code="model_not_found")
        if model != config.served_name and chosen != name:
            raise ApiError(400, f"model {model!r} and coba.policy {chosen!r} name different policies; give one",
                           param="coba.policy")
        name = chosen
    if "lambda" in coba:
        other = _number(coba["lambda"], "coba.lambda", -math.inf, math.inf)
        if lam is not None and other != lam:
            raise ApiError(400, f"model {model!r} and coba.lambda {other:g} give different lambdas; give one",
                           param="coba.lambda")
        lam = other
    low, high = config.lambda_range
    if lam is not None and not (math.isfinite(lam) and low <= lam <= high):
        raise ApiError(400, f"lambda {lam:g} is outside this server's range [{low:g}, {high:g}] (--lambda-range)",
                       param="coba.lambda" if "lambda" in coba else "model")
    return name, lam


def _messages(messages: Any, most: int) -> tuple[str, tuple[dict[str, str], ...]]:
    """(problem: the last user message's text, the earlier messages as role + text)."""
    if messages is None:
        raise ApiError(400, "'messages' is missing; expected a list of chat messages ending with the user's "
                            "problem", param="messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, f"'messages' is {_shown(messages)}; expected a non-empty list of chat messages",
                       param="messages")
    if len(messages) > most:
        raise ApiError(400, f"'messages' holds {len(messages)} messages; this server takes at most {most} "
                            "(--max-messages)", param="messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} is {_shown(message)}; expected an object with 'role' and 'content'",
                           param=where)
        role = message.get("role")
        if role not in ROLES:
            raise ApiError(400, f"{where}.role is {_shown(role)}; expected one of {', '.join(ROLES)}",
                           param=f"{where}.role")
        out.append({"role": "system" if role == "developer" else role,
                    "content": _content(message.get("content"), f"{where}.content")})
    last = out[-1]
    if last["role"] != "user" or not last["content"].strip():
        raise ApiError(400, f"the last message (messages[{len(out) - 1}]) must be the user's problem, non-empty "
                            f"text; got role {last['role']!r}", param=f"messages[{len(out) - 1}]")
    return last["content"], tuple(out[:-1])


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or text parts joined; other parts (images, audio) are refused."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ApiError(400, f"{where}[{k}] is {_shown(part)}; expected a text part "
                                    '{"type": "text", "text": ...} (coba serve reads text only)', param=where)
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(400, f"{where} is {_shown(content)}; expected a string or a list of text parts", param=where)


def _budget(budget: Any, config: ServeConfig) -> dict[str, float | None]:
    """This request's hard budgets: the server's, or lower ones the client asked for."""
    server = {"tokens": config.max_tokens, "calls": config.max_calls, "seconds": config.max_seconds}
    asked = _object(budget, "coba.budget", tuple(BUDGET_FIELDS))
    out = dict(server)
    for name, value in asked.items():
        cap = server[name]
        where = f"coba.budget.{name}"
        number = _number(value, where, 0.0, math.inf, low_open=True, integer=name == "calls")
        if cap is not None and number > cap:
            raise ApiError(400, f"{where} = {number:g} is above this server's limit {cap:g} "
                                f"({BUDGET_FIELDS[name]})", param=where)
        out[name] = number
    return out


def _object(value: Any, where: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """``value`` as an object whose keys are all among ``fields`` (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(400, f"{where} is {_shown(value)}; expected an object with some of {', '.join(fields)}",
                       param=where)
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise ApiError(400, f"{where}.{unknown[0]} is not a field coba serve knows; expected some of "
                            f"{', '.join(fields)}", param=f"{where}.{unknown[0]}")
    return value


def _number(value: Any, where: str, low: float, high: float, *, low_open: bool = False, integer: bool = False,
            hint: str = "") -> float:
    """``value`` as a finite number in [low, high] (``(low, high]`` when ``low_open``)."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and isinstance(value, float) and not value.is_integer()):
        raise ApiError(400, f"{where} is {_shown(value)}; expected {kind}", param=where)
    finite = isinstance(value, int) or math.isfinite(value)  # an int of 400 digits is finite, too big for float
    if not finite or value < low or value > high or (low_open and value == low):
        bounds = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if math.isfinite(high) else "")
        raise ApiError(400, f"{where} is {_shown(value)}; expected {kind} {bounds}{hint}", param=where)
    return float(value)


def _bool(value: Any, where: str, default: bool) -> bool:
    """``value`` as true/false (None: ``default``)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{where} is {_shown(value)}; expected true or false", param=where)
    return value


def _shown(value: Any) -> str:
    """A short JSON rendering of ``value`` for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
