"""Flat lookup tables of a compiled pool for ``CoBaVectorEnv``: what SAMPLE and VERIFY gather, one ``take`` each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VectorTables:
    """Per-(episode, candidate) rows that the vector env gathers with flat indices ``episode * N + candidate``."""

    #: Answer clusters per episode: the largest cluster id + 1 (at least 1).
    n_clusters: int
    #: has_score of candidates with an answer, [N, T * E]: VERIFY gathers columns ``tier * E + episode``.
    has_slots: np.ndarray
    #: Output tokens [E * N].
    output_tokens: np.ndarray
    #: int8 (int64 from 127 clusters) [E * N, 3 + T]: cluster (-1: no answer), cap_hit, has_score with an
    #: answer per tier, and whether the candidate is the first of its answer cluster in its episode.
    sample_int: np.ndarray
    #: bool [E * N, T], contiguous: the tiers at which a revealed candidate is open to VERIFY (has_score with an
    #: answer), which SAMPLE copies into the env's state as one T-byte item per row.
    open_flags: np.ndarray
    #: Pool scores [E * N * T] (NaN: no usable score).
    score_flat: np.ndarray
    #: Every cost a step can add, [E * N + E * N * T + 1, 4] (4 measures): a SAMPLE's generation cost at row
    #: ``episode * N + candidate``, a VERIFY's at ``E * N + (episode * N + candidate) * T + tier``, and a zero
    #: row last (STOP), so that one gather gives every sub-env's step cost.
    cost_rows: np.ndarray

    @classmethod
    def build(cls, pool) -> VectorTables:
        """Build the tables of a ``CompiledPool``."""
        cluster = pool.cluster
        answered = cluster >= 0
        # First candidate of each answer cluster in its episode: a cluster's counts and statistics are zeroed
        # when it first appears instead of on every reset. Candidate c is first when no earlier candidate has
        # its cluster (compared slot by slot: N passes over [E, N] instead of a loop over episodes).
        first = answered.copy()
        for c in range(1, cluster.shape[1]):
            first[:, c] &= ~(cluster[:, :c] == cluster[:, c:c + 1]).any(axis=1)
        has_answered = pool.has_score & answered[:, :, None]
        n_cand = pool.n_candidates
        n_clusters = int(max(cluster.max() + 1, 1))
        # int8 when the cluster ids fit: a smaller table, so SAMPLE's random-row gather hits the cache. Written
        # column by column (a concatenation would build it in int32 first, then cast: several times slower).
        t_n = has_answered.shape[2]
        sample_int = np.empty((*cluster.shape, 3 + t_n), dtype=np.int8 if n_clusters < 127 else np.int64)
        sample_int[:, :, 0] = np.where(answered, cluster, -1)
        sample_int[:, :, 1] = pool.cap_hit
        sample_int[:, :, 2:2 + t_n] = has_answered
        sample_int[:, :, 2 + t_n] = first
        return cls(
            n_clusters=n_clusters,
            has_slots=np.ascontiguousarray(has_answered.transpose(1, 2, 0)).reshape(n_cand, -1),
            output_tokens=pool.output_tokens.astype(np.float64).ravel(),
            sample_int=sample_int.reshape(-1, sample_int.shape[2]),
            open_flags=np.ascontiguousarray(has_answered.reshape(cluster.size, t_n)),
            score_flat=pool.score.ravel(),
            cost_rows=pool.cost_rows() if hasattr(pool, "cost_rows") else np.concatenate(
                [pool.gen_cost.reshape(-1, pool.gen_cost.shape[-1]), pool.ver_cost.reshape(-1, pool.gen_cost.shape[-1]),
                 np.zeros((1, pool.gen_cost.shape[-1]))]),
        )
