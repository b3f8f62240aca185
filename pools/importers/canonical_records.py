"""The canonical candidate record: its fields, their kinds and ranges, and reading JSON lines.

Every importer converts its source into these records and checks each with ``check_record`` before
``pools.importers.jsonl.build_pool`` turns them into a pool; ``read_json_lines`` reads any JSONL source with
errors that name the file and line. What a set of records declares about its verifiers and models (their
order, roles and prices) is read here too (``verifier_sequence``, ``declared_verifier_roles``,
``declared_prices``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from pools.errors import PoolError
from pools.limits import MAX_CANDIDATES, MAX_CLUSTER, MAX_LATENCY_S, MAX_PARAMS_B, MAX_TOKENS
from pools.parse_boundary import parse_json_line
from pools.prices import price_problem
from pools.safe_names import check_data_name
from pools.schema import TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES

#: Field kinds: "str", "int", "num", "bool", "obj" (JSON object); a trailing "?" allows null.
#: Field -> (kind, required). Unknown fields are an error, so a misspelt field never goes unnoticed.
LINE_FIELDS: dict[str, tuple[str, bool]] = {
    "dataset": ("str", True),
    "item_id": ("str", True),
    "problem": ("str", True),
    "gold": ("str?", True),  # null: the source has no gold answer (labels must then be given)
    "level": ("str?", False),
    "subject": ("str?", False),
    "task": ("str?", False),
    "metadata": ("obj?", False),
    "generator": ("str", True),
    "generator_params_b": ("num", True),
    "generator_price": ("obj", False),  # the generator's $ per million tokens {"input", "output"} (pools.prices)
    "candidate": ("int", True),
    "text": ("str?", False),
    "answer": ("str?", False),
    "answer_key": ("str?", False),
    "cluster": ("int", False),
    "correct": ("bool?", False),
    "reference_correct": ("bool?", False),
    "prompt_tokens": ("int?", False),
    "output_tokens": ("int?", False),
    "tokens_estimated": ("bool", False),
    "latency_s": ("num?", False),
    "finish_reason": ("str", False),
    "cap_hit": ("bool", False),
    "extraction_status": ("str", False),
    "incomplete_boxed": ("bool", False),
    "repetition_score": ("num", False),
    "scores": ("obj", False),
    "graded_score": ("num?", False),  # the source's graded outcome in [0, 1] (evaluator side, like correct)
    "cost_usd": ("num?", False),  # the dollars the source recorded for the call
}

#: A verifier's call is recorded like the generator's call on the line, under its own names: a score entry's
#: field -> the line's field it mirrors (same kind, same range).
SCORE_CALL_FIELDS: dict[str, str] = {"model": "generator", "params_b": "generator_params_b",
                                     "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens",
                                     "latency_s": "latency_s"}

SCORE_FIELDS: dict[str, tuple[str, bool]] = {
    "score": ("num?", True),
    **{name: LINE_FIELDS[line_name] for name, line_name in SCORE_CALL_FIELDS.items()},
    "role": ("str", False),  # the verifier's role (pools.schema.VERIFIER_ROLES); required for a non-paper name
    "price": LINE_FIELDS["generator_price"],  # the verifier model's $ per million tokens (pools.prices)
}

#: The numeric fields of a line with their ranges [low, high]; a score entry's call fields take the line's.
LINE_RANGES: dict[str, tuple[float, float]] = {
    "generator_params_b": (0, MAX_PARAMS_B), "candidate": (0, MAX_CANDIDATES - 1), "cluster": (-1, MAX_CLUSTER),
    "prompt_tokens": (0, MAX_TOKENS), "output_tokens": (0, MAX_TOKENS), "latency_s": (0, MAX_LATENCY_S),
    "repetition_score": (0, 1), "graded_score": (0, 1), "cost_usd": (0, math.inf),
}

ITEM_FIELDS: tuple[str, ...] = ("problem", "gold", "level", "subject", "task", "metadata")

#: finish_reason when the source does not say; cap_hit is then False.
UNKNOWN_FINISH_REASON = "unknown"

_KIND_TEXT = {"str": "a string", "int": "an integer", "num": "a number", "bool": "true or false",
              "obj": "a JSON object"}


def _fits(value: Any, kind: str) -> bool:
    base, nullable = kind.rstrip("?"), kind.endswith("?")
    if value is None:
        return nullable
    if base == "str":
        return isinstance(value, str)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if base == "bool":
        return isinstance(value, bool)
    return isinstance(value, dict)


def describe_value(value: Any) -> str:
    """A short JSON rendering of ``value`` with its Python type, for error messages."""
    text = json.dumps(value, ensure_ascii=False)
    return f"{text[:60]}{'...' if len(text) > 60 else ''} ({type(value).__name__})"


def check_fields(obj: dict[str, Any], spec: dict[str, tuple[str, bool]], where: str, prefix: str = "") -> None:
    """Raise PoolError (at ``where``) for an unknown, missing or wrongly typed field of ``obj``."""
    for name in obj:
        if name not in spec:
            raise PoolError(f"unknown field; expected some of {list(spec)}", file=where, field=prefix + name)
    for name, (kind, required) in spec.items():
        if name not in obj:
            if required:
                raise PoolError(f"missing required field ({_KIND_TEXT[kind.rstrip('?')]})", file=where,
                                field=prefix + name)
            continue
        if not _fits(obj[name], kind):
            expected = _KIND_TEXT[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
            raise PoolError(f"expected {expected}, got {describe_value(obj[name])}", file=where, field=prefix + name)


def _check_range(value: Any, low: float, high: float, where: str, field: str) -> None:
    if value is not None and not low <= value <= high:
        bounds = f">= {low:g}" if value < low or not math.isfinite(high) else f"in [{low:g}, {high:g}]"
        shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}... ({len(str(value))} digits)"
        raise PoolError(f"is {shown}; expected a value {bounds}", file=where, field=field)


def _check_price(entry: Any, where: str, field: str) -> None:
    problem = None if entry is None else price_problem(entry)
    if problem:
        raise PoolError(f"is {problem}", file=where, field=field)


#: Largest raw verifier score taken when a score transform maps the scores to [0, 1] (a logit far beyond any model's).
RAW_SCORE_MAX = 1e6


def check_record(rec: dict[str, Any], where: str, *, raw_scores: bool = False) -> None:
    """Check one canonical candidate record's fields, types and value ranges; ``raw_scores``: verifier scores are raw
    reward-model scores a transform maps to [0, 1] later (any finite number up to ``RAW_SCORE_MAX`` in size)."""
    check_fields(rec, LINE_FIELDS, where)
    for name, what in (("dataset", "dataset"), ("item_id", "item"), ("generator", "model")):
        check_data_name(rec[name], what=what, file=where, field=name)
    for name, (low, high) in LINE_RANGES.items():
        _check_range(rec.get(name), low, high, where, name)
    _check_price(rec.get("generator_price"), where, "generator_price")
    for tier, entry in rec.get("scores", {}).items():
        if not re.fullmatch(VERIFIER_NAME_PATTERN, tier):
            raise PoolError(f"verifier name {tier!r}; expected a name matching {VERIFIER_NAME_PATTERN} (the paper's "
                            f"are {list(TIERS)})", file=where, field="scores")
        if not isinstance(entry, dict):
            raise PoolError(f"expected a JSON object, got {describe_value(entry)}", file=where, field=f"scores.{tier}")
        check_fields(entry, SCORE_FIELDS, where, prefix=f"scores.{tier}.")
        check_data_name(entry["model"], what="model", file=where, field=f"scores.{tier}.model")
        if "role" in entry and entry["role"] not in VERIFIER_ROLES:
            raise PoolError(f"is {entry['role']!r}; expected one of {list(VERIFIER_ROLES)}", file=where,
                            field=f"scores.{tier}.role")
        _check_price(entry.get("price"), where, f"scores.{tier}.price")
        low, high = (-RAW_SCORE_MAX, RAW_SCORE_MAX) if raw_scores else (0, 1)
        score = entry["score"]
        if score is not None and not low <= score <= high:
            hint = "" if raw_scores else " (raw reward-model scores: --score-transform auto maps them to [0, 1])"
            raise PoolError(f"is {str(score)[:40]}; expected a value in [{low:g}, {high:g}]{hint}", file=where,
                            field=f"scores.{tier}.score")
        for name, line_name in SCORE_CALL_FIELDS.items():
            if line_name in LINE_RANGES:
                _check_range(entry.get(name), *LINE_RANGES[line_name], where, f"scores.{tier}.{name}")


def read_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed JSON) per non-blank line; malformed JSON raises PoolError with the line."""
    path = str(path)
    if os.path.isdir(path):
        raise PoolError("is a directory; expected a JSONL file", file=path)
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                yield lineno, parse_json_line(line, where=f"{path}, line {lineno}")
    except FileNotFoundError as exc:
        raise PoolError("no such file", file=path) from exc
    except UnicodeDecodeError as exc:
        raise PoolError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from exc
    except OSError as exc:
        raise PoolError(f"cannot read ({exc.strerror})", file=path) from exc


def canonical_metadata(value: dict[str, Any] | None) -> str | None:
    """The items.metadata string of a JSON object: sorted keys, so equal objects give equal strings."""
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def verifier_order(scores: dict[str, Any]) -> list[str]:
    """The verifier names of a record's ``scores``: the paper's (V1, V2, V3) first, then the others as written."""
    return [t for t in TIERS if t in scores] + [t for t in scores if t not in TIERS]


def verifier_sequence(records: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """The verifier names of ``records`` in one order consistent with each record's own order of ``scores``
    (what ``coba pools export`` writes: the pool's order), a new name placed before the first known name that
    follows it in its record, else after the last known one that precedes it; the paper's names alone keep the
    paper's order."""
    order: list[str] = []
    for _, rec in records:
        names = list(rec.get("scores", {}))
        for k, name in enumerate(names):
            if name in order:
                continue
            after = next((order.index(n) for n in names[k + 1:] if n in order), None)
            if after is None:
                before = [order.index(n) for n in names[:k] if n in order]
                after = max(before) + 1 if before else len(order)
            order.insert(after, name)
    return [t for t in TIERS if t in order] if set(order) <= set(TIERS) else order


def declared_prices(records: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Model -> price from the records' ``generator_price`` and ``scores.<name>.price`` (what ``coba pools
    export`` writes for a priced pool); PoolError when two records price one model differently."""
    prices: dict[str, dict[str, float]] = {}
    for where, rec in records:
        given = [(rec["generator"], rec.get("generator_price"), "generator_price")]
        given += [(e["model"], e.get("price"), f"scores.{t}.price") for t, e in rec.get("scores", {}).items()]
        for model, price, field in given:
            if price is None:
                continue
            price = {side: float(price[side]) for side in ("input", "output")}
            if prices.setdefault(model, price) != price:
                raise PoolError(f"is {price}; an earlier record priced model {model!r} at {prices[model]}",
                                file=where, field=field)
    return prices


def declared_verifier_roles(records: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Verifier name -> role from the records' ``scores.<name>.role``; PoolError when two records disagree."""
    roles: dict[str, str] = {}
    for where, rec in records:
        for tier, entry in rec.get("scores", {}).items():
            role = entry.get("role") if isinstance(entry, dict) else None
            if role is None:
                continue
            if roles.setdefault(tier, role) != role:
                raise PoolError(f"is {role!r}; an earlier record gave verifier {tier} the role {roles[tier]!r}",
                                file=where, field=f"scores.{tier}.role")
    return roles
