"""The VERIFY target: which candidate a VERIFY at tier l scores, scalar and batched.

Among revealed candidates with an extractable answer (one without can never be selected, so judging it is
never useful) that the pool holds a tier-l call for and that are not yet verified at l, the one with the
highest current fusion rank R; ties go to the earliest candidate. With the paper's weights, before any V3
score this is "rank by cheap score and answer frequency".
"""

from __future__ import annotations

import numpy as np

from coba_env.rules.fusion import first_of


def verify_target(rank: list[float], clusters: list[int], has: list, scores: list, tier: int) -> int:
    """The candidate VERIFY at ``tier`` would score, or -1: ``scores[c][tier] is None`` = not verified yet.

    ``has[c][tier]``: the pool holds a tier call for candidate c; ``rank``/``clusters`` cover the revealed ones.
    """
    best, best_r = -1, -3.0
    for c, (r, cluster, score, has_c) in enumerate(zip(rank, clusters, scores, has)):  # noqa: B905
        if r > best_r and cluster >= 0 and has_c[tier] and score[tier] is None:
            best, best_r = c, r
    return best


def verify_target_bits(rank: list[float], clusters: list[int], has: list, verified: int, n_tiers: int,
                       tier: int) -> int:
    """``verify_target`` with the verified flags as one int (bit ``c * n_tiers + t``), as the oracle keeps them."""
    best, best_r = -1, -3.0
    for c, r in enumerate(rank):
        if r > best_r and clusters[c] >= 0 and has[c][tier] and not (verified >> (c * n_tiers + tier)) & 1:
            best, best_r = c, r
    return best


def batch_verify_target(eligible: np.ndarray, rank_cols: np.ndarray) -> np.ndarray:
    """Batched ``verify_target``: ``eligible`` and ``rank_cols`` slot-major [N, R]; each column has an eligible slot."""
    # R where eligible, -inf elsewhere, branch-free: min(R, +inf) = R and min(R, -inf) = -inf (np.where on a
    # mask as irregular as this one costs several times more).
    masked = eligible.astype(np.float64)
    masked -= 0.5
    masked *= np.inf
    np.minimum(rank_cols, masked, out=masked)
    top = masked.max(axis=0)
    if np.isnan(top).any():  # a NaN R (never, with the env's checked weights): np.where's exact result
        return np.argmax(np.where(eligible, rank_cols, -np.inf), axis=0)
    return first_of(masked, top)
