"""What the routing policies share: the route-env applicability check, generators by size, per-generator reads.

A routing policy runs on ``coba/Route-v0`` only (``routes = True``: ``coba bench`` runs it with ``--env route``
and leaves it out of a replay bench). It names generators by their size ("cheapest", "largest": parameters
from ``RoutePool.generator_params``, label-free) or by name, and reads each generator's evidence: one
an item episode's ``Evidence`` in ``act``, an item-grouped ``CoBaVectorEnv``'s [G, B] arrays of the same names in ``act_batch``. The
helpers below are the scalar and batched twins of each read, so both forms take the same decisions.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agents.configured import ConfiguredPolicy
from coba_env.rules.actions import ActionLayout

#: How ``generator`` names a generator by its size: the smallest or the largest in parameters.
BY_SIZE = ("cheapest", "largest")


#: Why a routing policy does not run on a replay env.
NEEDS_ROUTE_ENV = "needs a route env (coba/Route-v0): one SAMPLE action per generator"


def route_of(env: Any) -> Any:
    """The ``RoutePool`` of a route env (one- or many-episode, possibly wrapped), or None for a replay env."""
    return getattr(getattr(env, "unwrapped", env), "route", None)


def route_or_reason(env: Any) -> tuple[Any, str]:
    """(``env``'s ``RoutePool``, "") on a route env; (None, ``NEEDS_ROUTE_ENV``) on a replay env."""
    route = route_of(env)
    return (None, NEEDS_ROUTE_ENV) if route is None else (route, "")


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


def is_route_policy(policy: Any) -> bool:
    """Whether ``policy`` (an instance or class) is written for the route env: a routing policy or a route oracle."""
    return bool(getattr(policy, "routes", False)) or getattr(policy, "group", "") == "routing"


def written_for(policy: Any) -> str:
    """The episode grouping ``policy`` (an instance or class) is written for (``EnvConfig.grouping``): "item" for a
    routing policy or route oracle (``is_route_policy``), "pair" for every other."""
    return ("pair", "item")[is_route_policy(policy)]


def generators_by_size(route: Any) -> list[int]:
    """Generator indices from fewest to most parameters (ties in layout order; unknown sizes last): a ladder."""
    return sorted(range(route.n_generators), key=lambda g: (size_of(route, g), g))


def unanimous(evidence: Any, generator: int) -> bool:
    """Whether ``generator``'s revealed candidates (at least one) all have one answer (none without an answer)."""
    n = evidence.gen_revealed[generator]
    return n > 0 and evidence.gen_top_count[generator] == n


def unanimous_batch(venv: Any, generator: int) -> np.ndarray:
    """``unanimous`` for every row of an item-grouped ``CoBaVectorEnv``."""
    n = venv.gen_revealed[generator]
    return (n > 0) & (venv.gen_top_count[generator] == n)


def agreement_batch(venv: Any, generator: int) -> np.ndarray:
    """``Evidence.agreement(generator)`` for every row: its largest answer's share (0 before any)."""
    n = venv.gen_revealed[generator]
    return np.divide(venv.gen_top_count[generator], np.maximum(n, 1), out=np.zeros(venv.num_envs), where=n > 0)


def score_mean_batch(venv: Any, generator: int, tier: int) -> tuple[np.ndarray, np.ndarray]:
    """(``Evidence.score_mean(generator, tier)``, whether there is one) for every row."""
    count = venv.gen_score_count[generator, tier]
    has = count > 0
    total = venv.gen_score_sum[generator, tier]
    return np.divide(total, count, out=np.zeros(venv.num_envs), where=has), has


class RoutePolicy(ConfiguredPolicy):
    """A policy of the route env: applicable on ``coba/Route-v0`` with at least ``min_generators`` generators.

    Subclasses list the parameters naming generators in ``generator_params`` ("cheapest", "largest" or a
    generator's name); ``use_layout`` resolves them to indices (``self.gen[param]``) and orders the pool's
    generators by size (``self.ladder``).
    """

    group: ClassVar[str] = "routing"
    #: Runs on the route env only (``coba bench --env route``).
    routes: ClassVar[bool] = True
    min_generators: ClassVar[int] = 2
    generator_params: ClassVar[tuple[str, ...]] = ()

    def applicable(self, env: Any) -> tuple[bool, str]:
        """A route env with enough generators, whose named generators exist; then the verifier roles."""
        route, why = route_or_reason(env)
        if why:
            return False, why
        if route.n_generators < self.min_generators:
            return False, (f"routes between {self.min_generators} or more generators; the pool has "
                           f"{route.n_generators}")
        try:
            picked = [chosen_generator(route, getattr(self, p)) for p in self.generator_params]
        except ValueError as exc:
            return False, str(exc)
        if len(picked) == 2 and picked[0] == picked[1]:
            return False, f"{self.generator_params[0]} and {self.generator_params[1]} name the same generator"
        problem = self.route_problem(route, picked)
        if problem:
            return False, problem
        return super().applicable(env)

    def route_problem(self, route: Any, picked: list[int]) -> str:
        """Why the route pool does not suit the named generators ``picked`` (in ``generator_params`` order), or ""."""
        return ""

    def use_layout(self, layout: ActionLayout, env: Any = None) -> None:
        """Resolve the named generators and the size ladder from ``env``'s route pool."""
        super().use_layout(layout, env)
        route = route_of(env)
        if route is not None:
            self.gen = {p: chosen_generator(route, getattr(self, p)) for p in self.generator_params}
            self.ladder = generators_by_size(route)
