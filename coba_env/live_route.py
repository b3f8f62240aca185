"""Live routing between generators: ``RouteEnv`` fed by an evidence source with several generators.

``LiveRouteEnv`` is to ``RouteEnv`` what ``coba_env.live.LiveEnv`` is to ``CoBaEnv``: each episode is one
problem of the source, held as a blank one-episode route pool of ``G * n_max`` slots (generator-major, as
``coba_env.route_pool`` lays route episodes out). Before the env applies ``SAMPLE_<g>`` the gate
(``coba_env.live.LiveGate``) calls generator g and reveals its next candidate in g's next slot; ``RouteEnv``
then places it in the episode's next slot exactly as in replay. The source clusters every generator's
answers of a problem together (``coba_env.live_sources.EndpointSource``), and charges each sample at its
own generator's parameters. Everything else (per-generator and pooled evidence, features, masks, costs,
STOP selection, the trace with the generator of each SAMPLE, ``samples_by_generator`` and
``spend_by_generator`` in the final info) is ``RouteEnv``'s own code; the hard budgets are the gate's.
"""

from __future__ import annotations

import numpy as np

from coba_env.env import CoBaEnv
from coba_env.live import EvidenceSource, Limits, LiveTasks
from coba_env.route_pool import RoutePool
from coba_env.rules.actions import TIERS
from coba_env.rules.config import EnvConfig, check_int
from coba_env.rules.selection import SelectionRule

__all__ = ["LiveRouteEnv"]


class LiveRouteEnv(LiveTasks, CoBaEnv):
    """``RouteEnv`` whose episodes are revealed online by a source with several generators (module docstring).

    Arguments as ``coba_env.live.LiveEnv``; ``n_max`` is per generator (as ``coba/Route-v0``'s). The route
    layout is the source's: ``SAMPLE_<name>`` per ``source.generator_names``, in that order; ``self.route``
    holds the generators' parameters (``source.generator_params``) that routing policies choose by.
    """

    def __init__(self, source: EvidenceSource, *, n_max: int, budget: float, max_output_tokens: float,
                 limits: Limits | None = None, lam: float = 0.1, lambda_range: tuple[float, float] | None = None,
                 cost_model: str = "p_tokens", tiers: tuple[str, ...] = TIERS,
                 selection: SelectionRule | dict | str | None = None, max_cost: float | None = None,
                 render_mode: str | None = None) -> None:
        names = tuple(source.generator_names)
        if len(names) < 2 or len(set(names)) != len(names) or not all(names):
            raise ValueError(f"routing needs at least two generators with distinct names, got {list(names)}")
        n_max = check_int("n_max", n_max, low=1, high=source.max_candidates)
        g = len(names)
        gate = self._live_gate(source, limits, g * n_max, max_output_tokens)
        blank = gate.episode.pool
        route = RoutePool(pool=blank, generators=names, n_per_generator=n_max, available=np.ones((1, g), dtype=bool),
                          source_episode=np.full((1, g), -1, dtype=np.int64),
                          generator_params=tuple(float(p) for p in source.generator_params))
        config = EnvConfig.for_route(route, n_max, lam=lam, lambda_range=lambda_range, budget=budget,
                                     cost_model=cost_model, tiers=tiers, selection=selection, max_cost=max_cost)
        super().__init__(config=config, gate=gate, render_mode=render_mode)

    def slot_of_next_sample(self, generator: int) -> int:
        """Generator ``generator``'s next slot of the route episode (``g * n_max + revealed from g``)."""
        return generator * self.n_max_per_generator + self.evidence.gen_revealed[generator]

    def slot_of_candidate(self, candidate: int) -> int:
        """The route episode's slot of revealed candidate ``candidate``."""
        return self._slot_cand[candidate]
