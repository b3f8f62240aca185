"""The routing section of a bench whose episodes hold several generators: allocation by generator, the route
front, model-routing metrics (``routing_section``: results.json's ``routing`` block; ``eval.route_report``
renders it).

- Allocation by generator: per policy and generator, the share of its samples and of its generation cost
  (the bench's cost measure) spent on that generator, and samples per item (each run's
  ``eval.records.GeneratorUse``).
- The route front: the accuracy-cost Pareto front of the routing policies (oracles excluded), which is the
  bench's own front when it runs on route episodes.
- On a pool with exactly two generators, the model-routing literature's metrics (``eval.routing_metrics``):
  the weak model is the one with fewer parameters, the strong one the other (label-free, a priori); each
  model's per-item correctness is that of its first candidate (one sample per model, RouteLLM's setting).
  Reference curves: the random router and the oracle, with CPT(50%), CPT(80%) and APGR; each routing policy
  is a point (share of items on which it called the strong model, its accuracy, the gap it recovered); a
  threshold router is swept over ``THRESHOLDS`` and its curve gets CPT(50%), CPT(80%) and APGR too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.route_pool import compile_route_pool
from coba_env.rules.config import EnvConfig
from eval import routing_metrics as rm
from eval.bench_data import BenchData
from eval.runner import PolicyRun, replay_policy

#: Thresholds a threshold router is swept over in a two-model route bench (its curve).
THRESHOLDS: tuple[float, ...] = (-0.01, *(i / 20 for i in range(21)), 1.01)


def with_each_generator(policies: list[Policy], compiled: CompiledPool, grouping: str, *,
                        default_set: bool) -> list[Policy]:
    """The default policies of a route bench with every generator alone added ("Always <g>",
    ``agents.routing_single.each_generator``): each is a point of the route front; other benches unchanged."""
    if grouping != "item" or not default_set:
        return policies
    from agents.routing_single import each_generator

    return each_generator(policies, compile_route_pool(compiled).generators)


def allocation_by_generator(runs: Sequence[PolicyRun], generators: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per policy that ran: per generator the sample share, the generation-cost share and samples per item."""
    out: dict[str, dict[str, Any]] = {}
    for run in ran_on_items(runs):
        use = run.generator_use
        at = [use.generators.index(g) for g in generators]
        samples, costs = use.samples[at].astype(np.float64), use.cost[at]
        n_items = max(use.episodes, 1)
        out[run.name] = {g: {"sample_share": samples[k] / samples.sum() if samples.sum() else 0.0,
                             "cost_share": costs[k] / costs.sum() if costs.sum() else 0.0,
                             "samples_per_item": samples[k] / n_items}
                         for k, g in enumerate(generators)}
    return out


def ran_on_items(runs: Sequence[PolicyRun]) -> list[PolicyRun]:
    """The runs that played at least one episode of several generators (their ``generator_use`` is set)."""
    return [r for r in runs if r.applicable and len(r.records) and r.generator_use is not None]


def weak_and_strong(compiled: CompiledPool) -> tuple[int, int] | None:
    """(weak, strong) generator indices of a two-generator pool by parameters, or None for another pool."""
    from agents.routing import chosen_generator

    route = compile_route_pool(compiled)
    if route.n_generators != 2:
        return None
    weak = chosen_generator(route, "cheapest")
    return weak, 1 - weak


def no_shared_items(compiled: CompiledPool) -> bool:
    """Whether ``compiled`` has two generators but no item answered by both (nothing for model routing)."""
    route = compile_route_pool(compiled)
    return route.n_generators == 2 and not route.available.all(axis=1).any()


def model_routing(compiled: CompiledPool, runs: Sequence[PolicyRun], policies: dict[str, str], *, seed: int = 0,
                  curves: dict[str, pd.DataFrame] | None = None, cost_model: str | None = None
                  ) -> dict[str, Any] | None:
    """CPT(50%), CPT(80%), APGR and AIQ of the reference routers and each policy's point, on a two-model pool.

    ``policies``: name -> group of the policies that ran; ``curves``: a threshold router's swept points
    (columns ``threshold``, ``strong_share``, ``acc`` and the ``cost_model`` column) by policy name. AIQ
    (``eval.routing_metrics.aiq``) is over the strong-call share for the random and oracle routers (one call per
    item: the cost is linear in the share) and over the measured ``cost_model`` for a swept router (its points
    may call both models). None when the pool has not two
    generators, when no item has both (``no_shared_items``) or when the strong model is not more accurate than
    the weak one (no gap to recover).
    """
    pair = weak_and_strong(compiled)
    if pair is None:
        return None
    route = compile_route_pool(compiled)
    weak, strong = pair
    both = route.available.all(axis=1)
    if not both.any():  # no item to compare the two models on (the accuracies would be NaN)
        return None
    n = route.n_per_generator
    correct = route.pool.labels.correct[both]
    weak_ok, strong_ok = correct[:, weak * n], correct[:, strong * n]
    if strong_ok.mean() <= weak_ok.mean():
        return None
    names = route.generators
    out: dict[str, Any] = {"weak": names[weak], "strong": names[strong], "items": int(both.sum()),
                           "weak_accuracy": float(weak_ok.mean()), "strong_accuracy": float(strong_ok.mean()),
                           "at_least_one_correct": float((weak_ok | strong_ok).mean()),
                           "random_router": {**_summary(rm.random_router_curve(weak_ok, strong_ok, seed)),
                                             "draws": rm.RANDOM_ROUTER_DRAWS, "seed": seed},
                           "oracle_router": _summary(rm.oracle_curve(weak_ok, strong_ok))}
    gap = out["strong_accuracy"] - out["weak_accuracy"]
    points = {}
    for run in ran_on_items(runs):
        share = run.generator_use.called_share(names[strong])
        acc = float(run.records["correct"].mean())
        points[run.name] = {"strong_share": share, "accuracy": acc, "pgr": (acc - out["weak_accuracy"]) / gap,
                            "group": policies.get(run.name, "")}
    out["policies"] = points
    out["threshold_curves"] = {}
    for name, table in (curves or {}).items():
        curve = rm.curve_from_points(table["strong_share"], table["acc"], out["weak_accuracy"],
                                     out["strong_accuracy"])
        entry = {**_summary(curve), "points": table.to_dict(orient="records")}
        if cost_model is not None and cost_model in table.columns:
            entry.update(aiq=rm.aiq(table[cost_model], table["acc"]), aiq_axis=cost_model)
        out["threshold_curves"][name] = entry
    out["aiq_axis"] = "strong-call share"
    return out


def _summary(curve: rm.RoutingCurve) -> dict[str, Any]:
    """CPT(50%), CPT(80%), APGR and the curve's points (strong-call share, accuracy)."""
    return {**rm.routing_summary(curve), "shares": curve.shares.tolist(), "accuracy": curve.accuracy.tolist()}


def threshold_sweep(policy: Any, compiled: CompiledPool, *, thresholds: Sequence[float] = THRESHOLDS,
                    cost_model: str = "p_tokens", strong: str | None = None) -> pd.DataFrame:
    """A threshold router replayed at each threshold: threshold, strong-call share and accuracy per point.

    ``policy`` is a ``route_threshold`` policy; each point is a copy with that ``threshold``. The strong-call
    share is the share of items on which the policy sampled its strong generator (``strong``: a name; default
    the pool's largest).
    """
    from agents.registry import POLICY_CLASSES
    from agents.routing import chosen_generator

    route = compile_route_pool(compiled)
    cls = POLICY_CLASSES[policy.kind]
    rows = []
    for t in thresholds:
        point = cls(name=f"{policy.name}@{t:g}", **{**policy.params, "threshold": float(t)})
        run = replay_policy(point, compiled, grouping="item", cost_model=cost_model, generator_columns=False)
        if not run.applicable:
            raise ValueError(f"{policy.name}: {run.not_applicable}")
        target = strong or route.generators[chosen_generator(route, "largest")]
        frame = run.records
        rows.append({"threshold": float(t), "strong_share": run.generator_use.called_share(target),
                     "acc": float(frame["correct"].mean()), cost_model: float(frame[cost_model].mean())})
    return pd.DataFrame(rows)


def routing_section(data: BenchData, episodes: EnvConfig, compiled: CompiledPool,
                    policies: Sequence[Policy]) -> dict[str, Any] | None:
    """The ``routing`` block of results.json: generators, allocation by generator, route front, model routing.

    ``episodes`` is the bench's env configuration over ``compiled`` (the (item, generator) episodes). None unless
    its episodes hold several generators each, or when no policy ran (nothing to show). ``note``: why a two-model
    pool has no model-routing section, else None."""
    route = episodes.route
    if route is None or route.n_generators < 2 or not data.ran:
        return None
    gens = list(route.generators)
    unshared = no_shared_items(compiled)
    curves = {}
    if len(gens) == 2 and not unshared:  # the swept curves feed the model-routing section only
        ran = set(data.ran)
        for p in policies:
            if p.name in ran and getattr(p, "kind", "") == "route_threshold":
                curves[p.name] = threshold_sweep(p, compiled, cost_model=data.cost_model,
                                                 strong=gens[p.gen["strong"]] if hasattr(p, "gen") else None)
    groups = {name: info.group for name, info in data.info.items()}
    return {
        "env": "coba/Route-v0",
        "generators": gens,
        "generator_params_b": dict(zip(gens, route.generator_params, strict=True)),
        "items": int(route.pool.n_episodes),
        "cost_model": data.cost_model,
        "allocation_by_generator": allocation_by_generator(data.run.runs, gens) if len(data.records) else {},
        "front": list(data.pareto.get("front", [])),
        "model_routing": model_routing(compiled, data.run.runs, groups, seed=data.seed, curves=curves,
                                       cost_model=data.cost_model)
        if len(data.records) else None,
        "note": (f"No model-routing section: no problem has candidates from both {gens[0]} and {gens[1]}, so "
                 "there is nothing to compare the two models on." if unshared else None),
    }
