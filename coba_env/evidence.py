"""Evidence revealed so far in one episode, updated incrementally, and the observation features built from it.

``Evidence`` holds only what a deployed system would see: answer clusters, verifier scores, token counts,
costs. It holds no correctness label. Policies read it (``info["evidence"]``) but must not modify it.
"""

from __future__ import annotations

import math

import numpy as np

#: Observation features, in index order. Every value is computed from revealed evidence only.
FEATURES: tuple[tuple[str, str], ...] = (
    ("revealed_frac", "candidates revealed / N_max"),
    ("top_answer_share", "size of the largest answer cluster / candidates revealed"),
    ("distinct_answers_frac", "distinct answers revealed / N_max"),
    ("answer_entropy", "entropy of the revealed answer distribution / log(N_max)"),
    ("top2_gap", "(largest - second largest answer cluster) / candidates revealed"),
    ("no_answer_share", "share of revealed candidates with no extractable answer"),
    ("top_v1_mean", "mean V1 score over the top cluster's judged candidates (0 if none)"),
    ("top_v1_max", "max V1 score in the top cluster (0 if none)"),
    ("top_v1_available", "1 if any candidate of the top cluster has a V1 score"),
    ("best_v3", "max V3 score over all verified candidates (0 if none)"),
    ("top_v3_mean", "mean V3 score over the top cluster's verified candidates (0 if none)"),
    ("v1_verified_frac", "candidates verified at V1 / candidates revealed"),
    ("v2_verified_frac", "candidates verified at V2 / candidates revealed"),
    ("v3_verified_frac", "candidates verified at V3 / candidates revealed"),
    ("budget_used", "cost spent in the env's cost model / B"),
    ("mean_length", "mean output tokens of revealed candidates / the pool's max output tokens"),
    ("cap_hit_share", "share of revealed candidates that hit the token cap"),
    ("answer_flips", "times the top answer changed after a new sample / N_max"),
    ("step_frac", "actions taken / the most actions an episode can take"),
    ("lambda", "the episode's cost weight lambda"),
    ("top_fusion_score", "highest fusion rank R among revealed candidates with an answer (0 if none)"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FEATURES)
N_FEATURES = len(FEATURES)

V1, V2, V3 = 0, 1, 2


def clogc_table(n: int) -> list[float]:
    """c * log(c) for c = 0..n, computed once so that every env uses bit-identical values."""
    return [0.0] + [float(c) * math.log(c) for c in range(1, n + 1)]


def log_table(n: int) -> list[float]:
    """log(c) for c = 0..n (log 0 taken as 0)."""
    return [0.0] + [math.log(c) for c in range(1, n + 1)]


class Evidence:
    """The label-free state of one episode: revealed candidates, their clusters, scores, costs."""

    __slots__ = (
        "n_max", "n_tiers", "n_revealed", "clusters", "counts", "n_answered", "top", "n_distinct",
        "clogc_sum", "flips", "scores", "n_verified", "tier_stats", "best_v3",
        "len_sum", "cap_count", "cost", "steps", "lam", "output_tokens", "weights", "fnum", "fden",
        "cap_hits", "top_count", "second_count", "rank", "best", "best_r",
    )

    def __init__(self, n_max: int, n_tiers: int, n_clusters: int, lam: float,
                 weights: tuple[float, float, float, float] = (0.2, 0.3, 0.15, 0.45)) -> None:
        self.n_max = n_max
        self.n_tiers = n_tiers
        self.n_revealed = 0
        self.clusters: list[int] = []
        self.output_tokens: list[float] = []
        self.cap_hits: list[bool] = []
        self.counts = [0] * max(n_clusters, 1)
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
        self.cost = [0.0, 0.0, 0.0, 0.0]
        self.steps = 0
        self.lam = lam
        #: Fusion weights (f, V1, V2, V3) and, per candidate, the running sums of w_t * s_t and of w_t over
        #: its usable scores, added in verification order (the vector env adds in the same order).
        self.weights = weights
        self.fnum: list[float] = []
        self.fden: list[float] = []

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
        if tier == V3 and score == score and score > self.best_v3:
            self.best_v3 = score

    def fusion(self, candidate: int) -> float:
        """Fusion rank R(c) (paper Eq. 3, missing scores renormalized); -1 for a candidate without an answer."""
        cluster = self.clusters[candidate]
        if cluster < 0:
            return -1.0
        den = self.fden[candidate]
        return (self.weights[0] * self.counts[cluster] / self.n_revealed + self.fnum[candidate]) / den \
            if den > 0 else 0.0

    def refresh_rank(self) -> None:
        """Recompute ``rank`` (R of every revealed candidate) and ``best``/``best_r`` after new evidence."""
        wf, n, counts, fnum, fden = self.weights[0], self.n_revealed, self.counts, self.fnum, self.fden
        if wf > 0:  # every denominator is >= wf > 0
            rank = []
            append = rank.append  # a plain loop: cheaper than a comprehension for a handful of candidates
            for cl, num, den in zip(self.clusters, fnum, fden):  # noqa: B905 (equal lengths; strict= is slower)
                append((wf * counts[cl] / n + num) / den if cl >= 0 else -1.0)
        else:
            rank = [self.fusion(c) for c in range(n)]
        self.rank = rank
        if self.n_answered:
            best_r = max(rank)
            self.best, self.best_r = rank.index(best_r), best_r
        else:
            self.best, self.best_r = -1, 0.0

    def refresh_rank_of(self, candidate: int) -> None:
        """``refresh_rank`` after a new score for ``candidate`` only (every other R is unchanged)."""
        rank = self.rank
        rank[candidate] = self.fusion(candidate)
        if self.n_answered:
            best_r = max(rank)
            self.best, self.best_r = rank.index(best_r), best_r

    def best_fusion(self) -> tuple[int, float]:
        """(candidate, R) with the highest fusion rank, ties to the earliest; (-1, 0.0) if none has an answer."""
        best, best_r = -1, -2.0
        clusters, counts, fnum, fden = self.clusters, self.counts, self.fnum, self.fden
        wf, n = self.weights[0], self.n_revealed
        for c in range(n):
            cl = clusters[c]
            if cl >= 0:
                den = fden[c]
                r = (wf * counts[cl] / n + fnum[c]) / den if den > 0 else 0.0
                if r > best_r:
                    best, best_r = c, r
        return (best, best_r) if best >= 0 else (-1, 0.0)

    def feature_list(self, budget_used: float, max_steps: int, max_output_tokens: float, logs: list[float],
                     top_fusion: float) -> list[float]:
        """The observation values as Python floats, in ``FEATURES`` order (``features`` without the array)."""
        n = self.n_revealed
        top = self.top
        n_max = self.n_max
        if n == 0:
            share = gap = no_answer = v1f = v2f = v3f = mean_len = cap = 0.0
        else:
            share = self.top_count / n if top >= 0 else 0.0
            gap = (self.top_count - self.second_count) / n if top >= 0 else 0.0
            no_answer = (n - self.n_answered) / n
            n_verified = self.n_verified
            v1f = n_verified[V1] / n
            v2f = n_verified[V2] / n
            v3f = n_verified[V3] / n
            mean_len = self.len_sum / n / max_output_tokens
            cap = self.cap_count / n
        na = self.n_answered
        entropy = (logs[na] - self.clogc_sum / na) / logs[n_max] if na > 1 and n_max > 1 else 0.0
        if top >= 0:
            tier_stats = self.tier_stats
            stats = tier_stats.get((V1, top))
            if stats:
                v1_mean, v1_max, v1_avail = stats[0] / stats[1], stats[2], 1.0
            else:
                v1_mean = v1_max = v1_avail = 0.0
            stats = tier_stats.get((V3, top))
            v3_mean = stats[0] / stats[1] if stats else 0.0
        else:
            v1_mean = v1_max = v1_avail = v3_mean = 0.0
        return [n / n_max, share, self.n_distinct / n_max, entropy, gap, no_answer, v1_mean, v1_max, v1_avail,
                self.best_v3, v3_mean, v1f, v2f, v3f, budget_used, mean_len, cap, self.flips / n_max,
                self.steps / max_steps, self.lam, top_fusion]

    def features(self, budget_used: float, max_steps: int, max_output_tokens: float, logs: list[float],
                 top_fusion: float) -> np.ndarray:
        """The float32 observation vector, in ``FEATURES`` order."""
        return np.array(self.feature_list(budget_used, max_steps, max_output_tokens, logs, top_fusion),
                        dtype=np.float32)
