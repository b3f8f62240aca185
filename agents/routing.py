"""Routing policies for ``coba/Route-v0``: which generator to sample from, then CoBa's test-time scaling.

A routing policy reads the route env's action layout (``self.layout``: one ``SAMPLE_<g>`` per generator) and
its evidence: an item episode's ``Evidence`` (pooled, plus per-generator ``gen_revealed``, ``gen_cap``,
``agreement(g)``, ``score_mean(g, t)``, ``gen_spend``) one episode at a time, and an item-grouped ``CoBaVectorEnv``'s
arrays of the same names ([G, B]) in ``act_batch``. The generator a policy prefers is chosen from label-free
facts of the pool (``RoutePool.generator_params``), never from correctness.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents.coba import CoBaPolicy
from agents.configured import register
from agents.routing_base import (  # noqa: F401  (route_of, size_of, chosen_generator, BY_SIZE re-exported)
    BY_SIZE,
    RoutePolicy,
    chosen_generator,
    route_of,
    size_of,
)
from coba_env.rules.actions import ActionLayout


@register("route_coba")
class RouteCoBaPolicy(RoutePolicy, CoBaPolicy):
    """CoBa (paper Algorithm 1, ``agents.coba``) on one generator's candidates inside the route env.

    ``generator``: "cheapest" (fewest parameters), "largest" (most) or a generator's name; every SAMPLE draws
    from it, VERIFY and STOP are CoBa's. Applicable on a route env whose every episode has that generator's
    candidates (``RoutePolicy`` resolves the generator; one generator is enough).
    """

    defaults: ClassVar[dict[str, Any]] = {**CoBaPolicy.defaults, "generator": "cheapest"}
    min_generators: ClassVar[int] = 1
    generator_params: ClassVar[tuple[str, ...]] = ("generator",)
    generator: str

    def route_problem(self, route: Any, picked: list[int]) -> str:
        """The chosen generator must answer every problem of the pool."""
        g = picked[0]
        return "" if route.available[:, g].all() else \
            f"generator {route.generators[g]} has no candidates for some problems of the pool"

    def use_layout(self, layout: ActionLayout, env: Any = None) -> None:
        """SAMPLE from the chosen generator (``RoutePolicy.use_layout`` resolved it into ``self.gen``)."""
        super().use_layout(layout, env)
        if "generator" in getattr(self, "gen", {}):
            self.sample_id = layout.sample_action(self.gen["generator"])
