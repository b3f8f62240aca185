"""A live evidence source over route episodes: a cached pool with several generators replayed call by call.

``RoutePoolReplaySource`` is to ``coba_env.live_route.LiveRouteEnv`` what ``PoolReplaySource`` is to
``LiveEnv``: it returns the stored candidates and scores of ``coba_env.route_pool`` route episodes, so a live
routing run can be checked action for action against ``coba/Route-v0`` replay (``tests/test_live_route.py``).
"""

from __future__ import annotations

from typing import Any

from coba_env.live_sources import CallBound, EvidenceSource, Revealed, Scored
from coba_env.route_pool import RoutePool

__all__ = ["RoutePoolReplaySource"]


class RoutePoolReplaySource(EvidenceSource):
    """Reveals the route episodes of a compiled pool with several generators (``coba_env.route_pool``), so a
    live routing run can be checked action for action against ``coba/Route-v0`` replay.

    ``sample(c, generator=g)`` reveals g's next stored candidate (clusters joined across generators as the route
    pool holds them); every item must have every generator's candidates. Its labels are in the route pool's
    slot order, so run it with ``n_max`` = the pool's N per generator for ``info["correct"]``.
    """

    simulated_time = True

    def __init__(self, route: RoutePool) -> None:
        if not route.available.all():
            raise ValueError("some items lack a generator's candidates; a live route episode has them all")
        self.route, self.compiled = route, route.pool
        self.tiers = tuple(route.pool.tiers_present)
        self.verifier_roles = route.pool.verifier_roles
        self.generator_names = tuple(route.generators)
        self.generator_params = tuple(route.generator_params)
        self.max_candidates = route.n_per_generator
        self._rows = route.pool.episode_rows()

    @property
    def n_episodes(self) -> int:
        """Route episodes (items) of the pool."""
        return self.compiled.n_episodes

    def begin(self, episode: int) -> dict[str, Any]:
        """Start route episode ``episode``; its labels (slot order) come along for the evaluator-side ``correct``."""
        p, e = self.compiled, episode
        self._e, self._row = e, self._rows[e]
        self._drawn = [0] * len(self.generator_names)
        self._slots: list[int] = []  # the pool slot of each revealed candidate
        return {"dataset": p.dataset[e], "item_id": p.item_id[e], "generator": p.generator[e],
                "labels": p.labels.correct[e].tolist(), "problem": None}

    def _next_slot(self, generator: int) -> int:
        return generator * self.route.n_per_generator + self._drawn[generator]

    def sample(self, candidate: int, timeout_s: float | None, generator: int = 0) -> Revealed:
        """Generator ``generator``'s next stored candidate."""
        row, p = self._row, self._next_slot(generator)
        self._drawn[generator] += 1
        self._slots.append(p)
        return Revealed(row.cluster[p], self.compiled.answer[self._e, p], row.output_tokens[p], row.cap_hit[p],
                        row.gen_cost[p], row.has_score[p], {"generator": self.generator_names[generator]})

    def verify(self, candidate: int, tier: int, timeout_s: float | None) -> Scored:
        """The stored score of revealed candidate ``candidate``."""
        p = self._slots[candidate]
        return Scored(self._row.score[p][tier], self._row.ver_cost[p][tier])

    def sample_bound(self, candidate: int, generator: int = 0) -> CallBound:
        """Exact: the stored cost."""
        cost = self._row.gen_cost[self._next_slot(generator)]
        return CallBound(cost[0], cost[3])

    def verify_bound(self, candidate: int, tier: int) -> CallBound:
        """Exact: the stored cost."""
        cost = self._row.ver_cost[self._slots[candidate]][tier]
        return CallBound(cost[0], cost[3])
