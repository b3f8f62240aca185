"""The policy registry: policy kinds (classes) by name, and named policies (kind + parameters) in one YAML.

``agents/policies.yaml`` maps a policy name to ``{kind, label, group, params, bench}``; ``kind`` names a class
registered with ``@register(kind)``. A user YAML file with the same layout is merged over the built-in one,
so a new variant (say CoBa with ``n_max: 6``) needs no code::

    policies:
      coba_n6_k3: {kind: coba, label: "CoBa N6 K3", params: {n_max: 6, strong_routes: 3}}

Every parameterized policy derives from ``ConfiguredPolicy``, which checks parameter names against the
class's ``defaults`` so a typo in a YAML file fails loudly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml

from agents.base import Policy
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence

#: Action ids of ``CoBaEnv`` (its tier axis is always V1, V2, V3, so the ids never change).
SAMPLE, VERIFY_V1, VERIFY_V2, VERIFY_V3, STOP = range(5)

#: Policy kind -> class, filled by ``@register``.
POLICY_CLASSES: dict[str, type[Policy]] = {}

#: Where specs come from: a dict from ``load_specs``, a user YAML path, or None (the built-in file).
SpecSource = Mapping[str, dict] | str | Path | None

SPEC_KEYS = ("kind", "label", "group", "params", "bench", "description")
GROUPS = ("coba", "baseline", "oracle", "learned")


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


class ConfiguredPolicy(Policy):
    """A fixed policy built from keyword parameters (``defaults`` lists them and their default values).

    Subclasses implement ``act`` and may override ``configure`` (validate parameters, set ``requires_tiers``
    and ``selection``) and ``start_episode`` (clear per-episode state). ``act`` implementations call
    ``self.track(evidence)`` first: it starts a new episode whenever the env hands over a new ``Evidence``,
    so a policy stays correct even if ``reset(env)`` is not called.
    """

    kind: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, *, name: str | None = None, label: str | None = None, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} for policy kind {self.kind!r}; "
                             f"expected some of {sorted(self.defaults)}")
        for key, value in params.items():
            _check_param_type(self.kind, key, value, self.defaults[key])
        self.params: dict[str, Any] = {**self.defaults, **params}
        for key, value in self.params.items():
            setattr(self, key, value)
        self.name = name or self.kind
        self.label = label or self.name
        self._evidence: Evidence | None = None
        self.configure()

    def configure(self) -> None:
        """Validate parameters and derive ``requires_tiers`` / ``selection`` (called once by ``__init__``)."""

    def start_episode(self) -> None:
        """Clear per-episode state."""

    def reset(self, env: CoBaEnv) -> None:
        """Forget the previous episode; the next ``act`` starts a new one."""
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


# ---------------------------------------------------------------- specs
def _read_yaml(text: str, source: str) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(text) or {}
    if isinstance(data, dict) and "policies" in data:
        data = data["policies"]
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a mapping of policy name -> spec (optionally under "
                         "'policies:')")
    for name, spec in data.items():
        if not isinstance(spec, dict):
            raise ValueError(f"{source}: policy {name!r}: expected a mapping, got {type(spec).__name__}")
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        if unknown:
            raise ValueError(f"{source}: policy {name!r}: unknown key(s) {unknown}; "
                             f"expected some of {list(SPEC_KEYS)}")
        if spec.get("params") is not None and not isinstance(spec["params"], dict):
            raise ValueError(f"{source}: policy {name!r}: 'params' must be a mapping")
    return {str(k): dict(v) for k, v in data.items()}


def _merge(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {k: dict(v) for k, v in base.items()}
    for name, spec in extra.items():
        if name in out:
            merged = {**out[name], **spec}
            merged["params"] = {**(out[name].get("params") or {}), **(spec.get("params") or {})}
            out[name] = merged
        else:
            out[name] = dict(spec)
    return out


def _complete(name: str, spec: dict[str, Any], source: str) -> dict[str, Any]:
    kind = spec.get("kind")
    if kind not in POLICY_CLASSES:
        raise ValueError(f"{source}: policy {name!r}: unknown kind {kind!r}; "
                         f"expected one of {sorted(POLICY_CLASSES)}")
    cls = POLICY_CLASSES[kind]
    group = spec.get("group") or cls.group
    if group != cls.group:
        raise ValueError(f"{source}: policy {name!r}: group {group!r} does not match kind {kind!r} "
                         f"(group {cls.group!r})")
    return {"kind": kind, "label": spec.get("label") or name, "group": group,
            "params": dict(spec.get("params") or {}), "bench": bool(spec.get("bench", False)),
            "description": spec.get("description", "")}


def builtin_specs_text() -> str:
    """The text of the packaged ``agents/policies.yaml``."""
    return resources.files("agents").joinpath("policies.yaml").read_text()


@lru_cache(maxsize=1)
def _builtin_specs() -> dict[str, dict[str, Any]]:
    # Parsed once per process (PyYAML is slow); callers get deep copies.
    return _read_yaml(builtin_specs_text(), "agents/policies.yaml")


def load_specs(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Policy specs by name: the built-in ``agents/policies.yaml`` with the user file ``path`` merged over it.

    A user entry with a built-in name overrides that entry's keys (and its params one by one); a new name
    adds a policy. Names keep file order, built-in ones first.
    """
    _import_policy_modules()
    specs = copy.deepcopy(_builtin_specs())
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"policy spec file {str(path)!r} does not exist")
        specs = _merge(specs, _read_yaml(path.read_text(), str(path)))
    return {name: _complete(name, spec, str(path or "agents/policies.yaml")) for name, spec in specs.items()}


def _resolve_specs(specs: SpecSource) -> Mapping[str, dict]:
    if specs is None or isinstance(specs, (str, Path)):
        return load_specs(specs)
    return specs


def make_policy(name: str, *, specs: SpecSource = None, **overrides: Any) -> Policy:
    """Build the policy ``name`` from ``specs`` (a dict from ``load_specs``, a user YAML path, or None for the
    built-in file); ``overrides`` replace individual parameters."""
    specs = _resolve_specs(specs)
    if name not in specs:
        from agents.learned import is_checkpoint, load_checkpoint

        if is_checkpoint(name):  # a trained controller's checkpoint directory (optionally PATH@LAMBDA)
            return load_checkpoint(name, **overrides)
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(specs)}")
    spec = specs[name]
    cls = POLICY_CLASSES[spec["kind"]]
    params = {**(spec.get("params") or {}), **overrides}
    if issubclass(cls, ConfiguredPolicy):
        return cls(name=name, label=spec.get("label") or name, **params)
    policy = cls(**params)
    policy.name, policy.label = name, spec.get("label") or name
    return policy


def list_policies(group: str | None = None, *, specs: SpecSource = None) -> list[str]:
    """Policy names in file order, optionally only those of ``group`` (coba, baseline, oracle, learned)."""
    specs = _resolve_specs(specs)
    if group is not None and group not in GROUPS:
        raise ValueError(f"unknown policy group {group!r}; expected one of {list(GROUPS)}")
    return [n for n, s in specs.items() if group is None or s["group"] == group]


def default_bench_policies(*, specs: SpecSource = None) -> list[str]:
    """The policies of the paper's main table (specs with ``bench: true``), in table order."""
    specs = _resolve_specs(specs)
    return [n for n, s in specs.items() if s.get("bench")]


def _import_policy_modules() -> None:
    # Importing the modules runs their @register decorators; done lazily so that registry.py itself has no
    # import cycle with the policy modules (which import ConfiguredPolicy from here).
    import agents.adaptive  # noqa: F401
    import agents.coba  # noqa: F401
    import agents.evaluators  # noqa: F401
    import agents.oracle  # noqa: F401
    import agents.sampling  # noqa: F401


# Fill POLICY_CLASSES on import (safe at the end of the module: every name the policy modules import from
# here already exists).
_import_policy_modules()
