"""Learned-controller kinds, each declared once: ``agents/controllers.yaml`` (its trainer, protocol methods per
env, loader, options and help), read here.

Every layer reads the one declaration: ``agents.learned`` loads a checkpoint with its kind's ``loader``;
``train.lodo.train_kind`` calls its ``trainer`` and ``protocol_method`` builds its ``methods``; ``coba train``
builds its kind list, each kind's options and ``coba train KIND --help`` from it. References are
``module:attribute`` strings resolved on use (``resolve``), so reading the table imports neither torch nor the
train layer, and agents never imports train: a loader names an agents function, a trainer a train one.

``register_kind(name, entry)`` adds a kind with the same fields as a YAML entry (a plugin, or a test's tiny kind).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from pools.strict_yaml import load_yaml

__all__ = ["OPTION_TYPES", "ControllerKind", "KindOption", "checkpoint_kinds", "controller_kind", "controller_kinds",
           "register_kind", "resolve"]

#: Option value types: an integer >= 0, an integer >= 1, one of the option's ``choices``.
OPTION_TYPES = ("count", "positive", "choice")
_KIND_KEYS = ("summary", "description", "examples", "trainer", "snapshots", "loader", "methods", "options", "router")
#: A prompt-aware router kind's fields (``router:``): its predictor (``agents.router_predictors.PREDICTORS``), its
#: label, optionally the samples per generator it may choose (BEST-Route) and its default problem features.
_ROUTER_KEYS = ("predictor", "label", "samples", "features")
_OPTION_KEYS = ("dest", "type", "choices", "default", "metavar", "help")


@dataclass(frozen=True)
class KindOption:
    """One ``coba train KIND`` flag: ``--flag`` sets the trainer's keyword ``dest``."""

    flag: str
    dest: str
    type: str
    help: str
    choices: tuple[str, ...] = ()
    default: Any = None
    metavar: str | None = None

    @property
    def attribute(self) -> str:
        """The parsed namespace's attribute of the flag (``--episodes-per-round``: ``episodes_per_round``)."""
        return self.flag.replace("-", "_")


@dataclass(frozen=True)
class ControllerKind:
    """One learned-controller kind (see ``agents/controllers.yaml`` for the fields)."""

    name: str
    summary: str
    description: str
    examples: tuple[str, ...] = ()
    trainer: str | None = None
    snapshots: bool = False
    loader: str | None = None
    methods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    options: tuple[KindOption, ...] = ()
    #: A prompt-aware router's fields (``_ROUTER_KEYS``; ``train.router_training``), None for any other kind.
    router: Mapping[str, Any] | None = None

    @property
    def envs(self) -> tuple[str, ...]:
        """The ``--env`` values this kind trains on: a prompt-aware router routes between generators, so the route
        env only; every other kind either env."""
        return ("route",) if self.router is not None else ("replay", "route")

    @property
    def protocol_only(self) -> bool:
        """Trained under the learning protocol only (no trainer of its own): ``coba train KIND`` needs --lodo."""
        return self.trainer is None

    def load(self, path: Any, *, lam: float | None = None) -> Any:
        """The policy stored in the checkpoint ``path`` of this kind, acting at ``lam``."""
        if self.loader is None:
            raise ValueError(f"controller kind {self.name!r} writes no checkpoint to load")
        return resolve(self.loader)(path, lam=lam)

    def method(self, env: str, **extra: Any) -> Any:
        """The learning protocol's method of this kind on ``env`` with its stated settings and ``extra`` keyword
        arguments (e.g. ``problem_features``; a ValueError naming the envs it has one on)."""
        spec = self.methods.get(env)
        if spec is None:
            raise ValueError(f"{self.name} has no protocol method on the {env} env; it has one on: "
                             f"{', '.join(self.methods) or 'none'}")
        kwargs = {k: v for k, v in spec.items() if k != "method"}
        return resolve(spec["method"])(**kwargs, **extra)


def resolve(ref: str) -> Any:
    """The attribute named by ``module:attribute`` (imported on use)."""
    module, _, attribute = ref.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _text(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field {key!r} is {value!r}; expected text")
    return " ".join(value.split())


def _ref(where: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    module, colon, attribute = str(value).partition(":")
    if not (isinstance(value, str) and colon and module and attribute):
        raise ValueError(f"{where}: field {key!r} is {value!r}; expected module:attribute")
    return value


def _option(where: str, flag: str, spec: Any) -> KindOption:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: option {flag!r}: expected a mapping, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(_OPTION_KEYS))
    if unknown:
        raise ValueError(f"{where}: option {flag!r}: unknown key(s) {unknown}; expected some of {list(_OPTION_KEYS)}")
    kind = spec.get("type")
    if kind not in OPTION_TYPES:
        raise ValueError(f"{where}: option {flag!r}: field 'type' is {kind!r}; expected one of {list(OPTION_TYPES)}")
    choices = tuple(str(c) for c in spec.get("choices") or ())
    if (kind == "choice") != bool(choices):
        raise ValueError(f"{where}: option {flag!r}: 'choices' go with type 'choice' (and it needs them)")
    return KindOption(flag=str(flag), dest=_text(where, "dest", spec.get("dest")), type=kind,
                      help=_text(where, "help", spec.get("help")), choices=choices, default=spec.get("default"),
                      metavar=spec.get("metavar"))


def _router(where: str, spec: Any) -> Mapping[str, Any] | None:
    if spec is None:
        return None
    from agents.router_predictors import PREDICTORS

    if not isinstance(spec, Mapping) or sorted(set(spec) - set(_ROUTER_KEYS)):
        raise ValueError(f"{where}: field 'router': expected a mapping with keys from {list(_ROUTER_KEYS)}")
    if spec.get("predictor") not in PREDICTORS:
        raise ValueError(f"{where}: field 'router.predictor' is {spec.get('predictor')!r}; expected one of "
                         f"{list(PREDICTORS)}")
    samples = spec.get("samples", [1])
    if not (isinstance(samples, list) and samples and all(isinstance(k, int) and not isinstance(k, bool) and k >= 1
                                                          for k in samples)):
        raise ValueError(f"{where}: field 'router.samples' is {samples!r}; expected a list of integers >= 1")
    return {"predictor": spec["predictor"], "label": _text(where, "router.label", spec.get("label")),
            "samples": [int(k) for k in samples], "features": spec.get("features")}


def _kind(name: str, entry: Any, where: str) -> ControllerKind:
    """A kind from its declaration ``entry`` (a YAML entry's fields); a ValueError naming ``where`` and the field."""
    where = f"{where}: controller kind {name!r}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(_KIND_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {list(_KIND_KEYS)}")
    methods = entry.get("methods") or {}
    for env, spec in methods.items():
        if not isinstance(spec, Mapping) or "method" not in spec:
            raise ValueError(f"{where}: methods.{env}: expected a mapping with 'method: module:Class'")
        _ref(where, f"methods.{env}.method", spec["method"])
    trainer = _ref(where, "trainer", entry.get("trainer"))
    if trainer is None and not methods:
        raise ValueError(f"{where}: neither a 'trainer' nor protocol 'methods': nothing trains it")
    return ControllerKind(
        name=name, summary=_text(where, "summary", entry.get("summary")),
        description=_text(where, "description", entry.get("description")),
        examples=tuple(str(e) for e in entry.get("examples") or ()), trainer=trainer,
        snapshots=bool(entry.get("snapshots", False)), loader=_ref(where, "loader", entry.get("loader")),
        methods={str(env): dict(spec) for env, spec in methods.items()},
        options=tuple(_option(where, str(flag), spec) for flag, spec in (entry.get("options") or {}).items()),
        router=_router(where, entry.get("router")))


@lru_cache(maxsize=1)
def _declared() -> dict[str, ControllerKind]:
    text = resources.files("agents").joinpath("controllers.yaml").read_text()
    data = load_yaml(text) or {}
    return {str(name): _kind(str(name), entry, "agents/controllers.yaml") for name, entry in data.items()}


_REGISTERED: dict[str, ControllerKind] = {}


def register_kind(name: str, entry: Mapping[str, Any]) -> ControllerKind:
    """Declare the controller kind ``name`` with the fields of an ``agents/controllers.yaml`` entry (replacing a
    kind of that name); ``coba train``, ``coba bench`` and the protocol see it at once."""
    kind = _kind(str(name), entry, "register_kind")
    _REGISTERED[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Forget a kind added by ``register_kind`` (the declared ones stay)."""
    _REGISTERED.pop(name, None)


def controller_kinds() -> dict[str, ControllerKind]:
    """Every controller kind: the declared ones, then the registered ones (by name, in order)."""
    return {**_declared(), **_REGISTERED}


def controller_kind(name: str) -> ControllerKind:
    """The kind ``name`` (a ValueError listing the known kinds)."""
    kinds = controller_kinds()
    if name not in kinds:
        raise ValueError(f"unknown controller kind {name!r}; expected one of {list(kinds)}")
    return kinds[name]


def checkpoint_kinds() -> tuple[str, ...]:
    """The kinds that write a checkpoint a loader reads (the values of controller.json's ``kind``)."""
    return tuple(name for name, kind in controller_kinds().items() if kind.loader is not None)
