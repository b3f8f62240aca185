"""One episode's evidence as plain Python lists with named fields: what the one-episode env's step reads.

A pair-grouped episode reads candidate ``c``'s fields in reveal order (``cluster[c]``, ``score[c][t]``...). A live
episode fills a blank ``EpisodeData`` slot by slot as candidates are revealed (the live source's answer); an
item-grouped episode reads its item's row by pool candidate through the slot -> candidate map of the env's
``_place`` (its trace reads the row through the same map).
"""

from __future__ import annotations

import math


class EpisodeData:
    """Per-candidate evidence of one episode (N candidates, T tiers, 5 cost measures), label-free."""

    __slots__ = ("cluster", "output_tokens", "cap_hit", "gen_cost", "has_score", "score", "ver_cost", "n_clusters")

    def __init__(self, cluster: list[int], output_tokens: list[float], cap_hit: list[bool],
                 gen_cost: list[list[float]], has_score: list[list[bool]], score: list[list[float]],
                 ver_cost: list[list[list[float]]], n_clusters: int) -> None:
        #: Answer cluster per candidate (-1: no extractable answer).
        self.cluster = cluster
        #: Output tokens per candidate.
        self.output_tokens = output_tokens
        #: Whether each candidate hit the token cap.
        self.cap_hit = cap_hit
        #: Generation cost per candidate, in ``COST_MEASURES`` order.
        self.gen_cost = gen_cost
        #: has_score[c][t]: the pool holds a tier-t call for candidate c.
        self.has_score = has_score
        #: score[c][t]: the tier-t score (NaN: missing or unusable).
        self.score = score
        #: ver_cost[c][t]: the tier-t call's cost, in ``COST_MEASURES`` order.
        self.ver_cost = ver_cost
        #: Answer clusters of the episode: the largest cluster id + 1 (the size of per-cluster counters).
        self.n_clusters = n_clusters

    @classmethod
    def blank(cls, n: int, n_tiers: int, n_measures: int, n_clusters: int) -> EpisodeData:
        """An episode with ``n`` unrevealed candidate slots (no answer, no calls, zero costs)."""
        return cls([-1] * n, [0.0] * n, [False] * n, [[0.0] * n_measures for _ in range(n)],
                   [[False] * n_tiers for _ in range(n)], [[math.nan] * n_tiers for _ in range(n)],
                   [[[0.0] * n_measures for _ in range(n_tiers)] for _ in range(n)], n_clusters)
