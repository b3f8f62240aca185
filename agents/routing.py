"""Routing policies for ``coba/Route-v0``: which generator to sample from, then CoBa's test-time scaling.

A routing policy reads the route env's action layout (``self.layout``: one ``SAMPLE_<g>`` per generator) and
its evidence: ``RouteEvidence`` (pooled ``Evidence`` plus per-generator ``gen_revealed``, ``gen_cap``,
``agreement(g)``, ``score_mean(g, t)``, ``gen_spend``) one episode at a time, and a ``RouteVectorEnv``'s
arrays of the same names ([G, B]) in ``act_batch``. The generator a policy prefers is chosen from label-free
facts of the pool (``RoutePool.generator_params``), never from correctness.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from agents.coba import CoBaPolicy
from agents.configured import register
from coba_env.rules.actions import ActionLayout

#: How ``generator`` names a generator by its size: the smallest or the largest in parameters.
BY_SIZE = ("cheapest", "largest")


def route_of(env: Any) -> Any:
    """The ``RoutePool`` of a route env (one- or many-episode, possibly wrapped), or None for a replay env."""
    return getattr(getattr(env, "unwrapped", env), "route", None)


def size_of(route: Any, generator: int) -> float:
    """``generator``'s parameters (billions) for size order; unknown (0, e.g. an API model) counts as largest."""
    params = route.generator_params[generator]
    return params if params > 0 else math.inf


def chosen_generator(route: Any, generator: str) -> int:
    """Index of ``generator`` ("cheapest", "largest" by parameters, or a generator name) in ``route``."""
    n = len(route.generator_params)
    if generator == "cheapest":
        return min(range(n), key=lambda g: (size_of(route, g), g))
    if generator == "largest":
        return max(range(n), key=lambda g: (size_of(route, g), -g))
    if generator not in route.generators:
        raise ValueError(f"unknown generator {generator!r}; the pool has {list(route.generators)}")
    return route.generators.index(generator)


@register("route_coba")
class RouteCoBaPolicy(CoBaPolicy):
    """CoBa (paper Algorithm 1, ``agents.coba``) on one generator's candidates inside the route env.

    ``generator``: "cheapest" (fewest parameters), "largest" (most) or a generator's name; every SAMPLE draws
    from it, VERIFY and STOP are CoBa's. Applicable on a route env whose every episode has that generator's
    candidates.
    """

    group: ClassVar[str] = "routing"
    defaults: ClassVar[dict[str, Any]] = {**CoBaPolicy.defaults, "generator": "cheapest"}
    generator: str

    def applicable(self, env: Any) -> tuple[bool, str]:
        """A route env whose episodes all hold the chosen generator, and CoBa's verifier needs."""
        route = route_of(env)
        if route is None:
            return False, "needs a route env (coba/Route-v0): one SAMPLE action per generator"
        try:
            g = chosen_generator(route, self.generator)
        except ValueError as exc:
            return False, str(exc)
        if not route.available[:, g].all():
            return False, f"generator {route.generators[g]} has no candidates for some problems of the pool"
        return super().applicable(env)

    def use_layout(self, layout: ActionLayout, env: Any = None) -> None:
        """SAMPLE from the chosen generator of ``env``'s route pool."""
        super().use_layout(layout, env)
        route = route_of(env)
        if route is not None:
            self.sample_id = layout.sample_action(chosen_generator(route, self.generator))
