"""Parameterized policies (``ConfiguredPolicy``) and the ``@register`` decorator that names their kinds.

The policy modules (coba, adaptive, evaluators, oracle, sampling) import this module; ``agents.registry``
imports them to fill ``POLICY_CLASSES``, so the imports point one way.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agents.base import Policy
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence

#: Policy kind -> class, filled by ``@register``.
POLICY_CLASSES: dict[str, type[Policy]] = {}


def register(kind: str):
    """Class decorator: make a Policy subclass available to specs as ``kind``."""

    def wrap(cls: type[Policy]) -> type[Policy]:
        if kind in POLICY_CLASSES and POLICY_CLASSES[kind] is not cls:
            raise ValueError(f"policy kind {kind!r} is already registered by {POLICY_CLASSES[kind].__name__}")
        cls.kind = kind
        POLICY_CLASSES[kind] = cls
        return cls

    return wrap


def _check_param_type(kind: str, key: str, value: Any, default: Any) -> None:
    """A parameter given in a spec file has its default's type (an int, a finite number, a bool, a string)."""
    if default is None:
        return
    if isinstance(default, bool):
        ok, expected = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        expected = "a finite number"
    elif isinstance(default, str):
        ok, expected = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise ValueError(f"parameter {key!r} of policy kind {kind!r} is {value!r}; expected {expected}")


def _check_param_range(kind: str, key: str, value: Any, bounds: tuple[float, float], default: Any) -> None:
    """A numeric parameter inside its declared range (a share in [0, 1], a count from 1 to the most candidates)."""
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, int | float) or lo <= value <= hi:
        return
    what = "an integer" if isinstance(default, int) else "a number"
    raise ValueError(f"parameter {key!r} of policy kind {kind!r} is {value!r}; expected {what} from {lo:g} to {hi:g}")


class ConfiguredPolicy(Policy):
    """A fixed policy built from keyword parameters (``defaults`` lists them and their default values).

    Subclasses implement ``act`` and may override ``configure`` (validate parameters, set ``requires_tiers``
    and ``selection``) and ``start_episode`` (clear per-episode state). ``act`` implementations call
    ``self.track(evidence)`` first: it starts a new episode whenever the env hands over a new ``Evidence``,
    so a policy stays correct even if ``reset(env)`` is not called.
    """

    kind: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    #: Parameter -> (lowest, highest) value accepted (a share in [0, 1], a count); a value outside is refused.
    ranges: ClassVar[dict[str, tuple[float, float]]] = {}

    def __init__(self, *, name: str | None = None, label: str | None = None, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} for policy kind {self.kind!r}; "
                             f"expected some of {sorted(self.defaults)}")
        for key, value in params.items():
            _check_param_type(self.kind, key, value, self.defaults[key])
            if key in self.ranges:
                _check_param_range(self.kind, key, value, self.ranges[key], self.defaults[key])
        self.params: dict[str, Any] = {**self.defaults, **params}
        for key, value in self.params.items():
            setattr(self, key, value)
        self.name = name or self.kind or type(self).name  # an unregistered user class: its class name
        self.label = label or self.name
        self._evidence: Evidence | None = None
        self.configure()

    def configure(self) -> None:
        """Validate parameters and derive ``requires_tiers`` / ``selection`` (called once by ``__init__``)."""

    def start_episode(self) -> None:
        """Clear per-episode state."""

    def reset(self, env: CoBaEnv) -> None:
        """Bind the env's role map and forget the previous episode; the next ``act`` starts a new one."""
        self.bind(env)
        self._evidence = None

    def track(self, evidence: Evidence) -> None:
        """Start a new episode when ``evidence`` is not the one seen by the previous call."""
        if evidence is not self._evidence:
            self._evidence = evidence
            self.start_episode()

    def describe(self) -> dict[str, Any]:
        """Name, label, group, kind, parameters, selection rule and required tiers."""
        selection = self.selection
        if selection is not None and not isinstance(selection, (str, dict)):
            selection = repr(selection)
        return {"name": self.name, "label": self.label, "group": self.group, "kind": self.kind,
                "params": dict(self.params), "selection": selection,
                "requires_tiers": list(self.requires_tiers), "uses_labels": self.uses_labels}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(name={self.name!r}, {params})"


def need_candidates(env: CoBaEnv, n: int, why: str) -> tuple[bool, str]:
    """(False, reason) when ``env`` allows fewer than ``n`` candidates per episode, else (True, "")."""
    if env.n_max < n:
        return False, f"{why} needs {n} candidates per episode; the env allows N_max = {env.n_max}"
    return True, ""


def can(mask: np.ndarray, action: int) -> bool:
    """Whether ``action`` is legal under ``mask``."""
    return bool(mask[action])
