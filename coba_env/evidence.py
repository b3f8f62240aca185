"""Evidence revealed so far in one episode, updated incrementally (the scalar state the rules read).

``Evidence`` holds only what a deployed system would see: answer clusters, verifier scores, token counts,
costs. It holds no correctness label. Policies read it (``info["evidence"]``) but must not modify it.
The rules computed from it (fusion rank, observation features, VERIFY target, STOP selection) live in
``coba_env.rules``; the feature table is ``coba_env.rules.features.FEATURES``.
"""

from __future__ import annotations

from coba_env.costs import COST_MEASURES, sum_costs
from coba_env.rules.fusion import fusion_rank

__all__ = ["Evidence"]

#: Nothing spent yet, in every cost measure.
_NO_COST: tuple[float, ...] = (0.0,) * len(COST_MEASURES)


class Evidence:
    """The label-free state of one episode: revealed candidates, their clusters, scores, costs."""

    __slots__ = (
        "n_max", "n_tiers", "n_revealed", "clusters", "counts", "n_answered", "top", "n_distinct",
        "clogc_sum", "flips", "scores", "n_verified", "tier_stats", "best_v3",
        "len_sum", "cap_count", "cost_rows", "_cost", "_cost_n", "steps", "lam", "output_tokens", "weights", "fnum", "fden",
        "cap_hits", "top_count", "second_count", "rank", "best", "best_r", "strong",
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

    def fusion(self, candidate: int) -> float:
        """Fusion rank R(c) (``coba_env.rules.fusion``); -1 for a candidate without an answer."""
        cluster = self.clusters[candidate]
        if cluster < 0:
            return -1.0
        return fusion_rank(self.weights[0], self.counts[cluster], self.n_revealed, self.fnum[candidate],
                           self.fden[candidate])
