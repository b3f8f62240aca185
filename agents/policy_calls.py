"""Calls into a policy's own code, contained: whatever a user's class does becomes one ``PolicyCodeError``.

A policy from ``FILE.py:Class``, ``module:Class`` or a plugin is code the project did not write. Its
``__init__``, ``reset``, ``act`` or ``act_batch`` may raise, call ``sys.exit``, recurse without end, or return
something that is not an action id (None, 0.9, ``'0'``, ``True``). Each of these becomes one ``PolicyCodeError``
(a ``ValueError``) naming the policy, where it happened (the episode, the problem) and what the code did,
with the file and line inside the user's code, so every command reports it in one line and exits 2.

Actions are never coerced: an action id is a Python or numpy integer (not a bool), as the env's own ``step``
takes it; 0.9 is not 0. Ctrl-C (``KeyboardInterrupt``) and the command's own signals pass through untouched.
"""

from __future__ import annotations

import inspect
import operator
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CONTAINED", "PolicyCodeError", "action_id", "action_ids", "code_failure", "contained_call"]

#: What a policy's code may raise that is reported as its failure (``SystemExit`` too: a user's ``sys.exit``
#: must not end the command as if it had finished). ``KeyboardInterrupt`` is the user's, never the policy's.
CONTAINED: tuple[type[BaseException], ...] = (Exception, SystemExit)


class PolicyCodeError(ValueError):
    """A policy's own code failed or returned something that is not a legal action (one line: policy, place, what)."""


def _policy_file(policy: Any) -> str | None:
    """The file that defines ``policy``'s class (None for a class without one)."""
    cls = policy if inspect.isclass(policy) else type(policy)
    try:
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None


def _where_in_code(exc: BaseException, own_file: str | None) -> str:
    """``FILE, line N``: the deepest frame in the policy's own file, else the deepest frame outside this module
    ("" when the call itself failed here, e.g. a keyword argument the class does not take)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) != Path(__file__)]
    if own_file is not None:
        mine = [f for f in frames if Path(f.filename) == Path(own_file)]
        frames = mine or frames
    if not frames:
        return ""
    return f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})"


def _what_it_raised(exc: BaseException) -> str:
    """The exception in words: ``sys.exit(0)`` for a SystemExit, the type and first line of the message else."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    if isinstance(exc, RecursionError):
        return "recursed too deeply (RecursionError: maximum recursion depth exceeded)"
    text = " ".join(str(exc).split())[:300]
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def code_failure(policy: Any, method: str, place: str, exc: BaseException) -> PolicyCodeError:
    """The one-line error for ``exc`` escaping ``policy.method`` at ``place`` (e.g. "episode 3 (math/m1)")."""
    name = getattr(policy, "name", None) or getattr(policy, "__name__", "?")
    at = f" on {place}" if place else ""
    return PolicyCodeError(f"policy {name!r}{at}: {method}() {_what_it_raised(exc)}"
                           f"{_where_in_code(exc, _policy_file(policy))}")


def contained_call(policy: Any, method: str, place: str, call: Callable[..., Any], *args: Any,
                   **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` (the policy's ``method``); whatever escapes it becomes a ``PolicyCodeError``."""
    try:
        return call(*args, **kwargs)
    except PolicyCodeError:
        raise
    except CONTAINED as exc:
        raise code_failure(policy, method, place, exc) from None


def _shown(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def action_id(policy: Any, value: Any, place: str, n_actions: int) -> int:
    """``value`` (what ``policy.act`` returned) as an int, or a ``PolicyCodeError``: only integers are action ids
    (Python or numpy, never a bool, a float such as 0.9 or 2.0, a string or None)."""
    if type(value) is int:
        return value
    if not isinstance(value, bool | np.bool_) and getattr(value, "dtype", None) != np.bool_:
        try:
            return operator.index(value)
        except TypeError:
            pass
    name = getattr(policy, "name", "?")
    raise PolicyCodeError(f"policy {name!r} on {place}: act() returned {_shown(value)}; expected an integer "
                          f"action id from 0 to {n_actions - 1} (actions are never rounded or converted)")


def action_ids(policy: Any, value: Any, place: str, n_rows: int, n_actions: int) -> np.ndarray:
    """``value`` (what ``policy.act_batch`` returned) as an int64 array of ``n_rows`` action ids, or a
    ``PolicyCodeError``: an integer array of that shape only (no floats, no booleans)."""
    a = np.asarray(value) if isinstance(value, np.ndarray | list | tuple) else None
    if a is None or a.dtype.kind not in "iu" or a.shape != (n_rows,):
        what = f"an array of {a.dtype} of shape {a.shape}" if a is not None else _shown(value)
        name = getattr(policy, "name", "?")
        raise PolicyCodeError(f"policy {name!r} on {place}: act_batch() returned {what}; expected {n_rows} "
                              f"integer action ids from 0 to {n_actions - 1} (actions are never rounded or converted)")
    return a.astype(np.int64, copy=False)
