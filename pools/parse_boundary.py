"""The parse boundary: where bytes from a file or a server become Python values, failures become one line.

JSON nested 100,000 deep raises ``RecursionError``, non-UTF-8 bytes ``UnicodeDecodeError``, a lone surrogate
``UnicodeEncodeError`` when written back, an integer past int64 ``OverflowError`` when it reaches numpy, and
an integer of thousands of digits ``ValueError``. ``parse_problem`` says what went wrong in plain words (no
Python internals), ``load_json`` / ``read_json_file`` turn them into ``PoolError`` naming the file, and the
command line's guard (``coba_cli.errors.run_guarded``) uses ``parse_problem`` for any that escape elsewhere.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from pools.errors import PoolError

__all__ = ["PARSE_ERRORS", "describe_bad_record", "load_json", "parse_problem", "read_json_file", "refuse_lone_surrogates"]

#: Exceptions that malformed or hostile input raises while it is parsed or converted.
PARSE_ERRORS: tuple[type[BaseException], ...] = (RecursionError, UnicodeError, OverflowError, ValueError)


def parse_problem(exc: BaseException) -> str:
    """What ``exc`` (raised while parsing or converting input) means, in plain words."""
    if isinstance(exc, RecursionError):
        return "nested too deeply; expected at most a few hundred levels of brackets"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, UnicodeEncodeError):
        return f"holds a character that cannot be written as UTF-8 (a lone surrogate at position {exc.start})"
    if isinstance(exc, UnicodeError):
        return "not valid text"
    if isinstance(exc, OverflowError):
        return "holds a number too large; expected values that fit a 64-bit number"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "integer string conversion" in text or "Exceeds the limit" in text:
        return "holds an integer with thousands of digits; expected values that fit a 64-bit number"
    return text[:200]


def describe_bad_record(exc: BaseException) -> str:
    """What a ``KeyError`` / ``TypeError`` / ``ValueError`` raised while reading one record means, without
    Python internals (no ``KeyError('x')``, no "dictionary update sequence element #0")."""
    if isinstance(exc, KeyError) and exc.args:
        return f"lacks the field {exc.args[0]!r}"
    return "has a field of the wrong kind (a list, number or text where another kind is expected)"


def load_json(text: str | bytes, *, where: str) -> Any:
    """``json.loads(text)``; anything unreadable raises ``PoolError`` naming ``where``."""
    try:
        return json.loads(text)
    except PARSE_ERRORS as exc:
        raise PoolError(parse_problem(exc), file=where) from None


def parse_json_line(line: str, *, where: str, what: str = "JSON") -> Any:
    """The JSON value of one line of a JSON-lines file; malformed (with its column), unreadable (nested too deep,
    an integer of thousands of digits) or holding a lone surrogate escape raises ``PoolError`` naming ``where``
    (``what`` names the line in the message: "malformed <what> (...)")."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PoolError(f"malformed {what} ({exc.msg} at column {exc.colno})", file=where) from exc
    except PARSE_ERRORS as exc:
        raise PoolError(f"unreadable {what} ({parse_problem(exc)})", file=where) from None
    refuse_lone_surrogates(value, line, where=where)
    return value


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """The JSON value in file ``path``; missing, unreadable or malformed raises ``PoolError`` naming it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise PoolError(f"cannot read ({exc.strerror or exc})", file=str(path)) from None
    return load_json(data, where=str(path))


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate_field(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "(value)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _lone_surrogate_field(key, path) if isinstance(key, str) else None
        found = found or _lone_surrogate_field(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def refuse_lone_surrogates(value: Any, raw: str, *, where: str) -> None:
    """Raise ``PoolError`` when parsed JSON ``value`` (from text ``raw``) holds a lone surrogate (``"\\ud800"``):
    text that can never be written as UTF-8. Only JSON escapes make one, so clean text is not walked."""
    if not _SURROGATE_ESCAPE.search(raw):
        return
    field = _lone_surrogate_field(value, "")
    if field is not None:
        raise PoolError("holds a lone surrogate escape (\\ud800-\\udfff without its pair); expected text that is "
                        "valid Unicode", file=where, field=field)
