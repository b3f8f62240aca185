"""Action ids given to ``step``: the one input check of the one-episode envs (ints pass through untouched)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["as_action"]


def as_action(action: Any) -> int:
    """An action id as an int: integers (Python or numpy) as they are; 2.0 accepted, 2.7 and booleans refused."""
    if isinstance(action, bool | np.bool_) or getattr(action, "dtype", None) == np.bool_:
        raise ValueError(f"action must be an integer action id, got {action!r}")  # as the vector env says
    try:
        return operator.index(action)
    except TypeError:
        pass
    value = np.asarray(action)
    if value.size == 1 and value.dtype.kind in "fiu":
        x = value.item()
        if isinstance(x, float) and x.is_integer():
            return int(x)
        if not isinstance(x, float):
            return int(x)
    raise ValueError(f"action must be an integer action id, got {action!r}")
