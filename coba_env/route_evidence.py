"""Evidence of a route episode: the pooled evidence (an ``Evidence``) plus each generator's own, label-free.

The pooled part is ``Evidence`` itself over every revealed candidate whatever its generator, with answer
clusters joined across generators (``coba_env.route_pool``), so every rule of ``coba_env.rules`` and every
policy reading ``Evidence`` (CoBa included) works on it unchanged. Per generator g it adds what a router
reads: candidates revealed and still available, the size of g's own largest answer (agreement), the sums of
the usable scores of g's candidates per verifier, and the generation cost spent on g.
"""

from __future__ import annotations

from coba_env.costs import COST_MEASURES
from coba_env.evidence import Evidence

__all__ = ["RouteEvidence"]

#: Zero templates by (generators, tiers): rows shared within a template, copied row by row (never modified).
_ZERO_ROWS: dict[tuple[int, int], tuple[list, list, list]] = {}


class RouteEvidence(Evidence):
    """``Evidence`` over the pooled candidates, plus per-generator state (lists indexed by generator)."""

    __slots__ = ("n_generators", "n_clusters", "gen_revealed", "gen_cap", "gen_counts", "gen_top_count", "gen_score_sum",
                 "gen_score_count", "gen_spend", "slot_generator")

    def __init__(self, n_max: int, n_tiers: int, n_clusters: int, lam: float,
                 weights: tuple[float, ...], gen_cap: list[int], strong: int = 2) -> None:
        super().__init__(n_max, n_tiers, n_clusters, lam, weights, strong)
        g = len(gen_cap)
        self.n_generators = g
        #: Answer clusters of the episode (the size of each generator's counters).
        self.n_clusters = max(n_clusters, 1)
        #: Candidates revealed from each generator.
        self.gen_revealed = [0] * g
        #: Most candidates each generator can still have revealed in this episode (0: the item has none from it).
        self.gen_cap = list(gen_cap)
        #: Per generator, answers per (pooled) cluster among its revealed candidates, flat: [g * n_clusters + cluster].
        self.gen_counts = [0] * (g * self.n_clusters)
        #: Per generator, the size of its largest answer cluster.
        self.gen_top_count = [0] * g
        # g independent rows each: copies of the rows of a zero template built once per (g, n_tiers), which is
        # cheaper than building the rows every episode
        zeros = _ZERO_ROWS.get((g, n_tiers))
        if zeros is None:
            zeros = _ZERO_ROWS[(g, n_tiers)] = ([[0.0] * n_tiers] * g, [[0] * n_tiers] * g,
                                                [[0.0] * len(COST_MEASURES)] * g)
        #: gen_score_sum[g][t], gen_score_count[g][t]: usable tier-t scores of g's candidates.
        self.gen_score_sum = list(map(list.copy, zeros[0]))
        self.gen_score_count = list(map(list.copy, zeros[1]))
        #: Generation cost spent on each generator, in every cost measure ([g][measure]).
        self.gen_spend = list(map(list.copy, zeros[2]))
        #: The generator of each revealed candidate, in reveal order.
        self.slot_generator: list[int] = []

    def remaining(self, generator: int) -> int:
        """Candidates of ``generator`` that SAMPLE can still reveal."""
        return self.gen_cap[generator] - self.gen_revealed[generator]

    def agreement(self, generator: int) -> float:
        """Share of ``generator``'s revealed candidates in its own largest answer cluster (0 before any)."""
        n = self.gen_revealed[generator]
        return self.gen_top_count[generator] / n if n else 0.0

    def score_mean(self, generator: int, tier: int) -> float | None:
        """Mean usable tier-``tier`` score over ``generator``'s verified candidates, or None if there is none."""
        k = self.gen_score_count[generator][tier]
        return self.gen_score_sum[generator][tier] / k if k else None

    def add_generator_candidate(self, generator: int, cluster: int, cost: list[float]) -> None:
        """Count the candidate just revealed from ``generator`` (its pooled answer cluster and generation cost)."""
        self.gen_revealed[generator] += 1
        self.slot_generator.append(generator)
        if cluster >= 0:
            at = generator * self.n_clusters + cluster
            c = self.gen_counts[at] + 1
            self.gen_counts[at] = c
            if c > self.gen_top_count[generator]:
                self.gen_top_count[generator] = c
        spend = self.gen_spend[generator]
        if len(spend) == 5:  # every cost measure (coba_env.costs.COST_MEASURES), unrolled: SAMPLE's hot path
            spend[0] += cost[0]
            spend[1] += cost[1]
            spend[2] += cost[2]
            spend[3] += cost[3]
            spend[4] += cost[4]
        else:
            for k, c in enumerate(cost):
                spend[k] += c

    def add_score(self, candidate: int, tier: int, score: float) -> None:
        """``Evidence.add_score``, and a usable score also counts for the candidate's generator."""
        super().add_score(candidate, tier, score)
        if score == score:  # NaN is no evidence
            g = self.slot_generator[candidate]
            self.gen_score_sum[g][tier] += score
            self.gen_score_count[g][tier] += 1
