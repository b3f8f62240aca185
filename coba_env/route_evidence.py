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

#: Zero spend rows by generator count: rows shared within a template, copied row by row (never modified).
_ZERO_SPEND: dict[int, list[list[float]]] = {}


class RouteEvidence(Evidence):
    """``Evidence`` over the pooled candidates, plus per-generator state (lists indexed by generator)."""

    __slots__ = ("n_generators", "n_clusters", "gen_revealed", "gen_cap", "gen_counts", "gen_top_count", "score_sums",
                 "score_counts", "gen_spend", "slot_generator")

    def __init__(self, n_max: int, n_tiers: int, n_clusters: int, lam: float,
                 weights: tuple[float, ...], gen_cap: list[int], strong: int = 2) -> None:
        Evidence.__init__(self, n_max, n_tiers, n_clusters, lam, weights, strong)
        g = len(gen_cap)
        self.n_generators = g
        #: Answer clusters of the episode (the size of each generator's counters).
        self.n_clusters = n_clusters if n_clusters > 1 else 1
        #: Candidates revealed from each generator.
        self.gen_revealed = [0] * g
        #: Most candidates each generator can still have revealed in this episode (0: the item has none from it).
        self.gen_cap = list(gen_cap)
        #: Per generator, answers per (pooled) cluster among its revealed candidates, flat: [g * n_clusters + cluster].
        self.gen_counts = [0] * (g * self.n_clusters)
        #: Per generator, the size of its largest answer cluster.
        self.gen_top_count = [0] * g
        #: Sum and count of the usable tier-t scores of generator g's candidates, flat: [g * n_tiers + t]
        #: (``score_mean`` reads them; flat lists are built per episode at a fraction of nested ones' cost).
        self.score_sums = [0.0] * (g * n_tiers)
        self.score_counts = [0] * (g * n_tiers)
        # g independent rows: copies of the rows of a zero template built once per g (cheaper than new rows)
        zeros = _ZERO_SPEND.get(g)
        if zeros is None:
            zeros = _ZERO_SPEND[g] = [[0.0] * len(COST_MEASURES)] * g
        #: Generation cost spent on each generator, in every cost measure ([g][measure]).
        self.gen_spend = list(map(list.copy, zeros))
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
        at = generator * self.n_tiers + tier
        k = self.score_counts[at]
        return self.score_sums[at] / k if k else None

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
        Evidence.add_score(self, candidate, tier, score)
        if score == score:  # NaN is no evidence
            at = self.slot_generator[candidate] * self.n_tiers + tier
            self.score_sums[at] += score
            self.score_counts[at] += 1
