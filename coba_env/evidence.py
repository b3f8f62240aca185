"""Evidence revealed so far in one episode, updated incrementally (the scalar state the rules read).

``Evidence`` holds only what a deployed system would see: answer clusters, verifier scores, token counts,
costs. It holds no correctness label. Policies read it (``info["evidence"]``) but must not modify it.
The rules computed from it (fusion rank, observation features, VERIFY target, STOP selection) live in
``coba_env.rules``; the feature table is ``coba_env.rules.features.FEATURES``.

The pooled state covers every revealed candidate whatever its generator (an item-grouped episode joins answer
clusters across generators when the pool is compiled, ``coba_env.route_pool``), so every rule and every policy
reading it works on either grouping. An item-grouped episode also keeps each generator's own evidence
(``track_generators``): what a router reads, namely candidates revealed and still available, the size of the
generator's own largest answer (agreement), the sums of its candidates' usable scores per verifier and the
generation cost spent on it. A one-generator episode keeps none of it (those fields stay unset), so its step
does no per-generator work.
"""

from __future__ import annotations

from coba_env.costs import COST_MEASURES, sum_costs
from coba_env.rules.fusion import fusion_rank

__all__ = ["Evidence"]

#: Nothing spent yet, in every cost measure.
_NO_COST: tuple[float, ...] = (0.0,) * len(COST_MEASURES)
#: Zero spend rows by generator count: rows shared within a template, copied row by row (never modified).
_ZERO_SPEND: dict[int, list[list[float]]] = {}


class Evidence:
    """The label-free state of one episode: revealed candidates, their clusters, scores, costs."""

    __slots__ = (
        "n_max", "n_tiers", "n_revealed", "clusters", "counts", "n_answered", "top", "n_distinct",
        "clogc_sum", "flips", "scores", "n_verified", "tier_stats", "best_v3",
        "len_sum", "cap_count", "cost_rows", "_cost", "_cost_n", "steps", "lam", "output_tokens", "weights", "fnum", "fden",
        "cap_hits", "top_count", "second_count", "rank", "best", "best_r", "strong",
        # per generator (``track_generators``; item grouping only)
        "n_generators", "n_clusters", "gen_revealed", "gen_cap", "gen_counts", "gen_top_count", "score_sums",
        "score_counts", "gen_spend", "slot_generator",
    )

    def __init__(self, n_max: int, n_tiers: int, n_clusters: int, lam: float,
                 weights: tuple[float, ...] = (0.2, 0.3, 0.15, 0.45), strong: int = 2) -> None:
        self.n_max = n_max
        #: The verifier slot whose best score is ``best_v3`` (the feature layout's strong verifier; -1: none).
        self.strong = strong
        self.n_tiers = n_tiers
        self.n_revealed = 0
        self.clusters: list[int] = []
        self.output_tokens: list[float] = []
        self.cap_hits: list[bool] = []
        self.counts = [0] * (n_clusters if n_clusters > 1 else 1)
        self.n_answered = 0
        self.top = -1
        self.top_count = 0
        self.second_count = 0  # the largest count among answers other than the top one
        #: Fusion rank R of every revealed candidate (-1 without an answer), refreshed by ``refresh_rank``.
        self.rank: list[float] = []
        self.best = -1
        self.best_r = 0.0
        self.n_distinct = 0
        self.clogc_sum = 0.0
        self.flips = 0
        #: scores[candidate][tier]: None = not verified at that tier; NaN = verified, no usable score.
        self.scores: list[list[float | None]] = []
        self.n_verified = [0] * n_tiers
        #: (tier, cluster) -> [sum, count, max] of the usable scores of that answer's candidates at that tier.
        self.tier_stats: dict[tuple[int, int], list] = {}
        self.best_v3 = 0.0
        self.len_sum = 0.0
        self.cap_count = 0
        #: Each action's cost row (``COST_MEASURES`` order), in action order; ``cost`` is their running total.
        self.cost_rows: list[list[float]] = []
        self._cost: tuple[float, ...] = _NO_COST
        self._cost_n = 0
        self.steps = 0
        self.lam = lam
        #: Fusion weights (f, w_1..w_T) and, per candidate, the running sums of w_t * s_t and of w_t over
        #: its usable scores, added in verification order (the vector env adds in the same order).
        self.weights = weights
        self.fnum: list[float] = []
        self.fden: list[float] = []

    @property
    def cost(self) -> tuple[float, ...]:
        """Cost spent so far in every measure (``cost_rows`` added in action order when read)."""
        rows = self.cost_rows
        if self._cost_n < len(rows):  # the rows added since the last read, in order: the same float additions
            self._cost, self._cost_n = sum_costs(self._cost, rows[self._cost_n:]), len(rows)
        return self._cost

    def top_share(self) -> float:
        """Share of revealed candidates in the largest answer cluster (0 before any answer)."""
        return self.counts[self.top] / self.n_revealed if self.top >= 0 else 0.0

    def top_tier_mean(self, tier: int) -> float | None:
        """Mean score at ``tier`` over the top cluster's scored candidates, or None if there is none."""
        stats = self.tier_stats.get((tier, self.top))
        return stats[0] / stats[1] if stats else None

    def is_verified(self, candidate: int, tier: int) -> bool:
        """Whether ``candidate`` has been verified at ``tier``."""
        return self.scores[candidate][tier] is not None

    def add_candidate(self, cluster: int, output_tokens: float, cap_hit: bool, clogc: list[float]) -> None:
        """Reveal the next candidate (its answer cluster, length and cap hit)."""
        self.n_revealed += 1
        self.clusters.append(cluster)
        self.output_tokens.append(output_tokens)
        self.cap_hits.append(cap_hit)
        self.scores.append([None] * self.n_tiers)
        self.fnum.append(0.0)
        self.fden.append(self.weights[0])
        self.len_sum += output_tokens
        if cap_hit:
            self.cap_count += 1
        if cluster >= 0:
            c = self.counts[cluster] + 1
            if c == 1:
                self.n_distinct += 1
            self.counts[cluster] = c
            self.clogc_sum += clogc[c] - clogc[c - 1]
            self.n_answered += 1
            top = self.top
            if top < 0:
                self.top, self.top_count = cluster, c
            elif cluster == top:
                self.top_count = c
            elif c > self.top_count or (c == self.top_count and cluster < top):
                # Ties go to the answer seen first, i.e. the lower cluster id.
                self.second_count = self.top_count
                self.top, self.top_count = cluster, c
                self.flips += 1
            elif c > self.second_count:
                self.second_count = c

    def add_score(self, candidate: int, tier: int, score: float) -> None:
        """Record ``score`` (NaN = no usable score) for ``candidate`` at ``tier``."""
        self.scores[candidate][tier] = score
        self.n_verified[tier] += 1
        cluster = self.clusters[candidate]
        if score == score:
            w = self.weights[tier + 1]
            self.fnum[candidate] += w * score
            self.fden[candidate] += w
        if cluster >= 0 and score == score:  # NaN never counts as evidence
            stats = self.tier_stats.get((tier, cluster))
            if stats is None:
                self.tier_stats[(tier, cluster)] = [score, 1, max(score, 0.0)]
            else:
                stats[0] += score
                stats[1] += 1
                if score > stats[2]:
                    stats[2] = score
        if tier == self.strong and score == score and score > self.best_v3:
            self.best_v3 = score

    # -- per generator (item grouping) -------------------------------------------------------------
    def track_generators(self, gen_cap: list[int]) -> None:
        """Keep each generator's own evidence from now on (lists indexed by generator; before any candidate).

        ``gen_cap[g]``: the most candidates generator g can have revealed in this episode (0: the item has none).
        """
        g, n_tiers, n_clusters = len(gen_cap), self.n_tiers, len(self.counts)
        self.n_generators = g
        #: Answer clusters of the episode (the size of each generator's counters).
        self.n_clusters = n_clusters
        #: Candidates revealed from each generator.
        self.gen_revealed = [0] * g
        #: Most candidates each generator can still have revealed in this episode (0: the item has none from it).
        self.gen_cap = list(gen_cap)
        #: Per generator, answers per (pooled) cluster among its revealed candidates, flat: [g * n_clusters + cluster].
        self.gen_counts = [0] * (g * n_clusters)
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
        """Count the candidate just revealed from ``generator`` (its pooled answer cluster and generation cost).

        Called beside ``add_candidate`` (which counts it in the pooled evidence).
        """
        self.gen_revealed[generator] += 1
        self.slot_generator.append(generator)
        if cluster >= 0:
            at = generator * self.n_clusters + cluster
            c = self.gen_counts[at] + 1
            self.gen_counts[at] = c
            if c > self.gen_top_count[generator]:
                self.gen_top_count[generator] = c
        spend = self.gen_spend[generator]
        if len(spend) == 5:  # the five cost measures of today's table, unrolled: SAMPLE's hot path
            spend[0] += cost[0]
            spend[1] += cost[1]
            spend[2] += cost[2]
            spend[3] += cost[3]
            spend[4] += cost[4]
        else:
            for k, c in enumerate(cost):
                spend[k] += c

    def add_generator_score(self, candidate: int, tier: int, score: float) -> None:
        """Count a usable ``score`` for ``candidate``'s generator (called beside ``add_score``)."""
        if score == score:  # NaN is no evidence
            at = self.slot_generator[candidate] * self.n_tiers + tier
            self.score_sums[at] += score
            self.score_counts[at] += 1

    def fusion(self, candidate: int) -> float:
        """Fusion rank R(c) (``coba_env.rules.fusion``); -1 for a candidate without an answer."""
        cluster = self.clusters[candidate]
        if cluster < 0:
            return -1.0
        return fusion_rank(self.weights[0], self.counts[cluster], self.n_revealed, self.fnum[candidate],
                           self.fden[candidate])
