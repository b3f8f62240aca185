"""Operating points: the setting of a policy's lambda (or threshold) that meets a target on calibration items.

RouteLLM's users set an operating point, not a lambda (its ``calibrate_threshold --strong-model-pct``). Here a
policy with an operating parameter (``operating_parameter``: ``lam`` for a router or a learned controller, ``share``
for the random router, ``threshold`` for a threshold router; ``--parameter`` names another) is replayed on the
calibration episodes at settings chosen by bisection (``calibrate``), assuming the outcome moves one way with the
setting, and the evaluated setting nearest the target is kept. Targets (``parse_target``):

- ``share:GENERATOR=0.3``: the share of problems that call GENERATOR;
- ``cost:MEASURE=0.01``: the mean cost per problem in a cost measure (``usd``, ``tokens``, ``p_tokens``, ...);
- ``accuracy=0.8``: the cheapest evaluated setting (in the run's cost model) whose accuracy is at least 0.8.

``outcome`` reads the same figures off any run's records, so the held-out items are reported the same way.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES

#: Target kinds.
TARGETS = ("share", "cost", "accuracy")
#: Each operating parameter's search range and whether it is searched on a log scale (lambda spans decades).
PARAMETER_RANGES: dict[str, tuple[float, float, bool]] = {"lam": (0.0, 1e4, True), "share": (0.0, 1.0, False),
                                                          "threshold": (0.0, 1.0, False)}
#: Most bisection steps after the two ends (each one replay of the calibration episodes); the search stops sooner
#: once the bracket is narrower than ``RESOLUTION`` (relative on a log scale, absolute otherwise).
STEPS = 40
RESOLUTION = 1e-3
#: Smallest positive lambda the log-scale bisection reaches below its upper end.
LOG_FLOOR = 1e-6


@dataclass(frozen=True)
class Target:
    """What the operating point must meet: ``kind`` in ``TARGETS``, the generator or cost measure it names, value."""

    kind: str
    name: str
    value: float

    def describe(self) -> str:
        """The target as the user wrote it."""
        return f"{self.kind}={self.value:g}" if self.kind == "accuracy" else f"{self.kind}:{self.name}={self.value:g}"


def parse_target(text: str) -> Target:
    """``share:GEN=0.3``, ``cost:usd=0.01`` or ``accuracy=0.8`` -> a ``Target``; a ValueError naming the form."""
    head, eq, number = str(text).rpartition("=")
    kind, _, name = head.partition(":")
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not eq or kind not in TARGETS or not math.isfinite(value) or value < 0 or (kind == "accuracy") == bool(name):
        raise ValueError(f"target {text!r}: expected share:GENERATOR=FRACTION, cost:MEASURE=AMOUNT or "
                         "accuracy=FRACTION")
    if kind in ("share", "accuracy") and value > 1:
        raise ValueError(f"target {text!r}: a {kind} is a fraction from 0 to 1")
    if kind == "cost" and name not in COST_MEASURES:
        raise ValueError(f"target {text!r}: unknown cost measure {name!r}; expected one of {list(COST_MEASURES)}")
    return Target(kind, name, value)


def outcome(records: pd.DataFrame, generators: tuple[str, ...] = ()) -> dict[str, Any]:
    """The figures of a run's records: problems, accuracy, mean cost per problem in every measure they hold, and
    each generator's share of problems that called it (``samples:<g>`` columns)."""
    out: dict[str, Any] = {"problems": int(len(records)), "accuracy": float(records["correct"].mean())}
    out["mean_cost"] = {m: float(records[m].mean()) for m in COST_MEASURES if m in records}
    out["share"] = {g: float((records[f"samples:{g}"] > 0).mean()) for g in generators if f"samples:{g}" in records}
    return out


def measured(target: Target, figures: dict[str, Any]) -> float:
    """The figure ``target`` is about, from ``outcome``'s figures."""
    if target.kind == "share":
        return figures["share"][target.name]
    if target.kind == "cost":
        return figures["mean_cost"][target.name]
    return figures["accuracy"]


def operating_parameter(policy: Policy, parameter: str | None = None) -> str:
    """The parameter that sets ``policy``'s operating point (``parameter`` if given); a ValueError when it has none."""
    name = parameter or getattr(policy, "operating_parameter", None)
    if name is None:
        params = getattr(policy, "params", {})
        name = next((p for p in PARAMETER_RANGES if p in params), None) or ("lam" if hasattr(policy, "lam") else None)
    if name is None:
        raise ValueError(f"{policy.name} has no operating parameter (lambda, share or threshold); name one with "
                         "--parameter")
    return name


def at_setting(policy: Policy, parameter: str, value: float) -> Policy:
    """``policy`` acting at ``parameter = value`` (a router's ``at``, a configured policy rebuilt with the
    parameter, or a copy of a controller with its ``lam`` set)."""
    if hasattr(policy, "at") and parameter == getattr(policy, "operating_parameter", None):
        return policy.at(value)
    params = getattr(policy, "params", None)
    if isinstance(params, dict) and parameter in params:
        return type(policy)(name=policy.name, label=policy.label, **{**params, parameter: float(value)})
    if parameter == "lam" and hasattr(policy, "lam"):
        twin = copy.copy(policy)
        twin.lam = float(value)
        return twin
    raise ValueError(f"{policy.name} has no parameter {parameter!r} to set")


@dataclass
class Calibration:
    """The chosen setting, its figures on the calibration episodes, and every setting evaluated."""

    parameter: str
    value: float
    figures: dict[str, Any]
    reached: bool
    evaluated: list[dict[str, Any]] = field(default_factory=list)


def calibrate(policy: Policy, episodes: CompiledPool, target: Target, *, grouping: str = "item",
              cost_model: str = "p_tokens", parameter: str | None = None,
              progress: Callable[[int], Any] | None = None) -> Calibration:
    """Search ``policy``'s operating parameter on ``episodes`` (calibration items) for ``target`` (see the module
    docstring); every replay goes through ``eval.runner.run_policy``."""
    from eval.runner import run_policy

    name = operating_parameter(policy, parameter)
    low, high, log_scale = PARAMETER_RANGES.get(name, (0.0, 1.0, False))
    generators = tuple(dict.fromkeys(str(g) for g in episodes.generator))
    if target.kind == "share" and target.name not in generators:
        raise ValueError(f"target {target.describe()}: unknown generator {target.name!r}; the pool has "
                         f"{list(generators)}")
    seen: dict[float, dict[str, Any]] = {}

    def figures(value: float) -> dict[str, Any]:
        if value not in seen:
            records = run_policy(at_setting(policy, name, value), episodes, grouping=grouping, cost_model=cost_model)
            if records.attrs.get("not_applicable"):
                raise ValueError(f"{policy.name}: {records.attrs['not_applicable']}")
            seen[value] = outcome(records, generators)
            if progress is not None:
                progress(1)
        return seen[value]

    def gap(value: float) -> float:
        return measured(target, figures(value)) - target.value

    a, b = low, high
    rising = gap(b) > gap(a)  # the direction the outcome moves with the setting
    for _ in range(STEPS):
        mid = math.sqrt(max(a, LOG_FLOOR) * b) if log_scale else (a + b) / 2
        narrow = b <= max(a, LOG_FLOOR) * (1 + RESOLUTION) if log_scale else b - a <= RESOLUTION
        if narrow or not a < mid < b:
            break
        if (gap(mid) < 0) == rising:
            a = mid
        else:
            b = mid
    value = _choose(target, seen, cost_model)
    evaluated = [{name: v, "value": measured(target, f)} for v, f in sorted(seen.items())]
    reached = _meets(target, seen[value])
    return Calibration(parameter=name, value=value, figures=seen[value], reached=reached, evaluated=evaluated)


def _meets(target: Target, figures: dict[str, Any]) -> bool:
    if target.kind == "accuracy":
        return measured(target, figures) >= target.value
    return math.isclose(measured(target, figures), target.value, rel_tol=0.05, abs_tol=0.01 * max(target.value, 0))


def _choose(target: Target, seen: dict[float, dict[str, Any]], cost_model: str) -> float:
    """The evaluated setting nearest the target (ties: the smaller setting); for an accuracy floor the cheapest one
    that meets it, else the most accurate."""
    if target.kind == "accuracy":
        meeting = [v for v, f in seen.items() if f["accuracy"] >= target.value]
        if meeting:
            return min(meeting, key=lambda v: (seen[v]["mean_cost"][cost_model], v))
        return max(seen, key=lambda v: (seen[v]["accuracy"], -v))
    return min(seen, key=lambda v: (abs(measured(target, seen[v]) - target.value), v))
