"""``coba bench --env route``: the routing policies on the route episodes of a pool, and the routing sections.

``run_route_bench`` replays the policies on ``coba/Route-v0`` (``eval.route_replay``); ``eval.bench`` runs its
own analysis on the route records (metrics, bootstrap, Pareto front: with routing policies, the route front)
and ``routing_section`` makes ``BenchData.routing``: the allocation by generator, the route front and, on
two-model pools, the model-routing metrics with the random router and the oracle as reference lines
(``eval.route_analysis``).
On a pool with one generator there is nothing to route: no routing section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.route_pool import compile_route_pool
from eval.bench_data import BenchData
from eval.route_analysis import allocation_by_generator, model_routing, no_shared_items, threshold_sweep
from eval.route_replay import run_route_policies
from eval.runner import BenchRun


def route_selection_problem(policies: Sequence[Policy]) -> str | None:
    """Why a route bench cannot run ``policies`` (none of them is written for the route env), else None."""
    from agents.routing_base import is_route_policy

    if policies and not any(is_route_policy(p) for p in policies):
        names = ", ".join(p.name for p in policies[:5]) + (", ..." if len(policies) > 5 else "")
        return (f"--env route: none of the selected policies ({names}) runs on the route env; expected at least "
                "one routing policy or route oracle (give no --policies for all of them, or see docs/POLICIES.md "
                "'Routing between generators')")
    return None


def run_route_bench(compiled: CompiledPool, policies: Sequence[Policy], *, cost_model: str, seed: int,
                    progress: bool, replay: str) -> tuple[BenchRun, CompiledPool]:
    """Replay ``policies`` on the route episodes of ``compiled``: (the run, the route episodes' compiled pool)."""
    run = run_route_policies(policies, compiled, cost_model=cost_model, progress=progress, seed=seed, replay=replay)
    return run, compile_route_pool(compiled).pool


def routing_section(data: BenchData, compiled: CompiledPool, policies: Sequence[Policy]) -> dict[str, Any] | None:
    """The ``routing`` block of results.json: generators, allocation by generator, route front, model routing.

    None on a pool with one generator (nothing to route) or when no policy ran (nothing to show). ``note``: why
    a two-model pool has no model-routing section, else None."""
    route = compile_route_pool(compiled)
    if route.n_generators < 2 or not data.ran:
        return None
    gens = list(route.generators)
    ran = set(data.ran)
    curves = {}
    unshared = no_shared_items(compiled)
    if len(gens) == 2 and not unshared:  # the swept curves feed the model-routing section only
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
        "allocation_by_generator": allocation_by_generator(data.records, gens) if len(data.records) else {},
        "front": list(data.pareto.get("front", [])),
        "model_routing": model_routing(compiled, data.records, groups, seed=data.seed, curves=curves)
        if len(data.records) else None,
        "note": (f"No model-routing section: no problem has candidates from both {gens[0]} and {gens[1]}, so "
                 "there is nothing to compare the two models on." if unshared else None),
    }
