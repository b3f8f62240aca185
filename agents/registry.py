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
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

import agents.adaptive  # noqa: F401  (importing a policy module runs its @register decorators)
import agents.coba  # noqa: F401
import agents.evaluators  # noqa: F401
import agents.oracle  # noqa: F401
import agents.routing  # noqa: F401
import agents.routing_cascade  # noqa: F401
import agents.routing_model_switch  # noqa: F401
import agents.routing_oracle  # noqa: F401
import agents.routing_threshold  # noqa: F401
import agents.sampling  # noqa: F401
from agents.base import Policy
from agents.configured import POLICY_CLASSES, ConfiguredPolicy

#: Where specs come from: a dict from ``load_specs``, a user YAML path, or None (the built-in file).
SpecSource = Mapping[str, dict] | str | Path | None

SPEC_KEYS = ("kind", "label", "group", "params", "bench", "description")
GROUPS = ("coba", "baseline", "oracle", "learned", "routing")


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
