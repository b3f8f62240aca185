"""The policy registry: policy kinds (classes) by name, and named policies (kind + parameters) in one YAML.

``agents/policies.yaml`` maps a policy name to ``{kind, label, group, params, bench}``; ``kind`` names a class
registered with ``@register(kind)``. A user YAML file with the same layout is merged over the built-in one,
so a new variant (say CoBa with ``n_max: 6``) needs no code::

    policies:
      coba_n6_k3: {kind: coba, label: "CoBa N6 K3", params: {n_max: 6, strong_routes: 3, skip_unanimous_routes: true}}

Every parameterized policy derives from ``ConfiguredPolicy``, which checks parameter names against the
class's ``defaults`` so a typo in a YAML file fails loudly.

A ``kind`` may also be a class of the user's own (``my_rules.py:TwoThenJudge`` or ``my_package.rules:Cls``,
``agents.plugins``), and installed packages add named policies through the ``coba_env.policies`` entry-point
group (imported only when named); ``make_policy`` accepts such a reference or plugin name as a name too. Route
policies share this registry, so they get the same mechanism.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import agents.adaptive  # noqa: F401  (importing a policy module runs its @register decorators)
import agents.coba  # noqa: F401
import agents.evaluators  # noqa: F401
import agents.oracle  # noqa: F401
import agents.routing  # noqa: F401
import agents.routing_cascade  # noqa: F401
import agents.routing_ladder  # noqa: F401
import agents.routing_model_switch  # noqa: F401
import agents.routing_single  # noqa: F401
import agents.routing_threshold  # noqa: F401
import agents.sampling  # noqa: F401
import agents.simple_routers  # noqa: F401
from agents.base import Policy
from agents.configured import POLICY_CLASSES, ConfiguredPolicy, register
from agents.plugins import PluginError, entry_point_refs, is_class_ref, load_class_ref, load_entry_point
from agents.policy_calls import contained_call
from agents.routing_base import written_for
from pools.strict_yaml import load_yaml

__all__ = ["POLICY_CLASSES", "POLICY_SETS", "ConfiguredPolicy", "PluginError", "UnknownPolicyError",
           "default_bench_policies", "list_policies", "load_specs", "make_policy", "policy_class", "register",
           "runs_on", "select_policies"]

#: Where specs come from: a dict from ``load_specs``, user YAML path(s), or None (the built-in file).
SpecSource = Mapping[str, dict] | str | Path | Sequence[str | Path] | None

SPEC_KEYS = ("kind", "label", "group", "params", "bench", "description", "at_pool_n")
GROUPS = ("coba", "baseline", "oracle", "learned", "routing")
#: Selection keywords: "all" (every non-learned policy written for the episodes' grouping) and "main" (the paper's
#: main table, the specs with ``bench: true``; on item-grouped episodes, where no main-table row runs, "all").
POLICY_SETS = ("all", "main")


class UnknownPolicyError(ValueError):
    """A selection names a policy the specs do not hold; the message lists the known ones."""


# ---------------------------------------------------------------- specs
def _spec_text(path: Path) -> str:
    """The text of a user's spec file, checked to parse as plain YAML: an unreadable file, or one holding a tag
    the safe loader refuses (``!!python/object``: no code ever runs), is one ValueError naming the file."""
    import yaml

    from pools.parse_boundary import PARSE_ERRORS, parse_problem

    try:
        text = path.read_text(encoding="utf-8")
        load_yaml(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: cannot parse the policy spec file: {' '.join(str(exc).split())[:300]}") from None
    except PARSE_ERRORS as exc:
        raise ValueError(f"{path}: cannot parse the policy spec file: {parse_problem(exc)}") from None
    return text


def _read_yaml(text: str, source: str) -> dict[str, dict[str, Any]]:
    data = load_yaml(text) or {}  # a key given twice is an error, not "the second one wins"
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


def policy_class(kind: str, *, base_dir: str | Path | None = None) -> type[Policy]:
    """The class of policy ``kind``: a registered kind, or a ``FILE.py:Class`` / ``module:Class`` reference."""
    if kind in POLICY_CLASSES:
        return POLICY_CLASSES[kind]
    if isinstance(kind, str) and is_class_ref(kind):
        return load_class_ref(kind, base_dir=base_dir)
    raise ValueError(f"unknown kind {kind!r}; expected one of {sorted(POLICY_CLASSES)}, FILE.py:Class or "
                     "module:Class")


def _canonical_kind(kind: str, base_dir: Path | None) -> str:
    """A file reference relative to the YAML file's folder becomes absolute, so it resolves from any cwd."""
    head, _, attr = kind.rpartition(":")
    if kind in POLICY_CLASSES or not head.endswith(".py") or Path(head).is_absolute() or base_dir is None:
        return kind
    beside = base_dir / head
    return f"{beside.resolve()}:{attr}" if beside.is_file() else kind


def _complete(name: str, spec: dict[str, Any], source: str, base_dir: Path | None = None) -> dict[str, Any]:
    kind = spec.get("kind")
    try:
        kind = _canonical_kind(kind, base_dir) if isinstance(kind, str) else kind
        cls = policy_class(kind)
    except ValueError as exc:
        raise ValueError(f"{source}: policy {name!r}: {exc}") from None
    group = spec.get("group") or cls.group
    if group != cls.group:
        raise ValueError(f"{source}: policy {name!r}: group {group!r} does not match kind {kind!r} "
                         f"(group {cls.group!r})")
    return {"kind": kind, "label": spec.get("label") or name, "group": group,
            "params": dict(spec.get("params") or {}), "bench": bool(spec.get("bench", False)),
            "description": spec.get("description", ""), "at_pool_n": _at_pool_n(name, spec, cls, source)}


def _at_pool_n(name: str, spec: dict[str, Any], cls: type, source: str) -> tuple[str, ...]:
    """A spec's ``at_pool_n``: parameters set to the pool's N at bench time (``agents.sampling.fit_to_pool``)."""
    names = spec.get("at_pool_n") or []
    defaults = getattr(cls, "defaults", {})
    if not isinstance(names, list) or any(not isinstance(n, str) or not isinstance(defaults.get(n), int)
                                          for n in names):
        raise ValueError(f"{source}: policy {name!r}: 'at_pool_n' must list integer parameters of kind "
                         f"{spec.get('kind')!r}, got {names!r}")
    return tuple(names)


def builtin_specs_text() -> str:
    """The text of the packaged ``agents/policies.yaml``."""
    return resources.files("agents").joinpath("policies.yaml").read_text()


@lru_cache(maxsize=1)
def _builtin_specs() -> dict[str, dict[str, Any]]:
    # Parsed once per process (PyYAML is slow); callers get deep copies.
    return _read_yaml(builtin_specs_text(), "agents/policies.yaml")


def load_specs(path: str | Path | Sequence[str | Path] | None = None) -> dict[str, dict[str, Any]]:
    """Policy specs by name: the built-in ``agents/policies.yaml``, then the user file(s) ``path`` merged over them in
    order. Installed plugin policies (entry-point group ``coba_env.policies``) are not specs: ``make_policy`` imports
    one only when it is named (``agents.plugins.load_entry_point``).

    A user entry with a known name overrides that entry's keys (and its params one by one); a new name
    adds a policy. Names keep file order, built-in ones first. A ``kind`` that is a relative
    ``FILE.py:Class`` is looked up beside the YAML file first.
    """
    specs = copy.deepcopy(_builtin_specs())
    sources = {name: ("agents/policies.yaml", None) for name in specs}
    paths = [] if path is None else [path] if isinstance(path, str | Path) else list(path)
    for one in map(Path, paths):
        if not one.is_file():
            raise ValueError(f"policy spec file {str(one)!r} does not exist")
        extra = _read_yaml(_spec_text(one), str(one))
        specs = _merge(specs, extra)
        sources.update({name: (str(one), one.parent) for name in extra})
    return {name: _complete(name, spec, *sources[name]) for name, spec in specs.items()}


def _resolve_specs(specs: SpecSource) -> Mapping[str, dict]:
    if specs is None or isinstance(specs, str | Path) or (isinstance(specs, Sequence)):
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
        if is_class_ref(name):  # the user's own class: FILE.py:Class or module:Class, named after the class
            cls = load_class_ref(name)
            return contained_call(cls, "__init__", "", cls, **overrides)
        if name in entry_point_refs():  # an installed plugin, imported now that it is named
            return _plugin_policy(name, overrides)
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(specs)} (or FILE.py:Class, "
                         "module:Class, a checkpoint directory or an SB3 .zip)")
    spec = specs[name]
    cls = policy_class(spec["kind"])
    params = {**(spec.get("params") or {}), **overrides}
    # A class of the user's own (FILE.py:Class, module:Class) runs contained: whatever its __init__ raises or
    # exits with is one PolicyCodeError; the registered kinds' own checks keep their messages.
    build = cls if spec["kind"] in POLICY_CLASSES else (lambda **kw: contained_call(cls, "__init__", "", cls, **kw))
    if issubclass(cls, ConfiguredPolicy):
        policy = build(name=name, label=spec.get("label") or name, **params)
        policy.at_pool_n = tuple(spec.get("at_pool_n") or ())
        return policy
    policy = build(**params)
    policy.name, policy.label = name, spec.get("label") or name
    return policy


def _plugin_policy(name: str, overrides: dict[str, Any]) -> Policy:
    """The installed plugin policy ``name``, built (contained) and named after its entry point."""
    _, cls = load_entry_point(name)
    policy = contained_call(cls, "__init__", "", cls, **overrides)
    own_label = cls.label not in (Policy.label, cls.__name__)
    policy.name, policy.label = name, cls.label if own_label else name
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


def runs_on(spec: Mapping[str, Any], grouping: str) -> bool:
    """Whether the policy of ``spec`` is written for episodes of ``grouping`` ("pair" or "item", the env's
    ``EnvConfig.grouping``): routing policies and route oracles for "item", every other policy for "pair"."""
    return written_for(policy_class(spec["kind"])) == grouping


def select_policies(names: Sequence[str] | None, specs: Mapping[str, dict], grouping: str = "pair") -> list[str]:
    """Resolve a selection against ``specs`` for episodes of ``grouping``: None / "all" -> every non-learned
    policy written for it (on "pair" the main table first), "main" -> the paper's main table (on "item", "all");
    names pass through in order, once each. Unknown names raise ``UnknownPolicyError`` listing the known ones."""
    chosen = list(names) if names is not None else ["all"]
    if chosen == ["all"] or chosen == ["main"]:
        mine = [n for n in list_policies(specs=specs) if runs_on(specs[n], grouping)]
        main = [n for n in default_bench_policies(specs=specs) if n in mine]
        if not main or chosen == ["all"]:
            return main + [n for n in mine if n not in main and specs[n]["group"] != "learned"]
        return main
    plugins = entry_point_refs() if any(n not in specs for n in chosen) else {}
    unknown = [n for n in chosen if n not in specs and n not in plugins]
    if unknown:
        installed = f"; installed plugins: {', '.join(plugins)}" if plugins else ""
        raise UnknownPolicyError(f"unknown polic{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                                 f"known policies: {', '.join(specs)} (or {', '.join(map(repr, POLICY_SETS))})"
                                 f"{installed}")
    return list(dict.fromkeys(chosen))
