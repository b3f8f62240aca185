"""Strict JSON for the reports the project writes: no ``NaN`` / ``Infinity`` tokens, which JSON does not have.

A non-finite float (an undefined statistic, a missing measurement) is written as ``null``; everything
else must be JSON-serializable (``default`` may convert it), and ``json.dumps(allow_nan=False)`` makes sure
nothing non-finite slips through.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["finite_or_none", "strict_dumps"]


def finite_or_none(value: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """``value`` with every non-finite float (nested in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v, default) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v, default) for v in value]
    if default is not None and not isinstance(value, str | int | bool | type(None)):
        return finite_or_none(default(value), None)
    return value


def strict_dumps(value: Any, *, default: Callable[[Any], Any] | None = None, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` with non-finite floats as null and ``allow_nan=False``."""
    return json.dumps(finite_or_none(value, default), allow_nan=False, **kwargs)
