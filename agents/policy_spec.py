"""``PATH@LAMBDA``: a saved policy (checkpoint directory, SB3 ``.zip``) and the lambda it acts at, parsed once.

``PATH`` alone names the saved policy (it acts at its training default); ``PATH@LAMBDA`` also gives the cost
weight lambda it acts at, a finite number from 0 to the env's ``LAM_MAX``. The suffix is read only when the text
before the last '@' names a saved policy (``is_saved``), so a path that holds an '@' of its own still works.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from coba_env.rules.config import LAM_MAX

#: Whether a path (the text before '@', or the whole text) names a saved policy of one kind.
IsSaved = Callable[[str], bool]


def split_at_lambda(spec: str | Path, is_saved: IsSaved, what: str = "checkpoint spec") -> tuple[Path, float | None] | None:
    """``"DIR@0.2"`` -> (DIR, 0.2), ``"DIR"`` -> (DIR, None) when ``is_saved`` accepts DIR; None when ``spec`` names
    nothing ``is_saved`` accepts. A bad lambda raises ``ValueError`` naming ``spec`` as a ``what``."""
    text = str(spec)
    head, at, tail = text.rpartition("@")
    if not (at and is_saved(head)):
        return (Path(text), None) if is_saved(text) else None
    try:
        lam = float(tail)
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected PATH@LAMBDA with a number after '@', got {tail!r}") from None
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"{what} {text!r}: expected a finite lambda >= 0 after '@', got {tail!r}")
    if lam > LAM_MAX:
        raise ValueError(f"{what} {text!r}: expected a lambda from 0 to {LAM_MAX:g} (the env's range) after '@', "
                         f"got {tail!r}")
    return Path(head), lam


def names_saved(spec: str | Path, is_saved: IsSaved) -> bool:
    """Whether ``spec`` (optionally ``PATH@LAMBDA``; the lambda is not parsed) names a saved policy."""
    text = str(spec)
    head, at, _ = text.rpartition("@")
    return is_saved(text) or bool(at and is_saved(head))


def given_lambda(spec: str | Path, is_saved: IsSaved) -> float | None:
    """The lambda ``spec`` gives after '@' (None: ``spec`` is a bare path, or the text before '@' names nothing
    ``is_saved`` accepts); an unreadable lambda is None too (``split_at_lambda`` reports it)."""
    head, at, tail = str(spec).rpartition("@")
    if not (at and is_saved(head)):
        return None
    try:
        return float(tail)
    except ValueError:
        return None
