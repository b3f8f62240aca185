"""The fusion rank R(c) of paper Eq. 3, scalar and batched.

R(c) = (w_f * f(c) + sum_t w_t s_t(c)) / (w_f + sum_t w_t) over the evidence c has: f(c) is the share of
revealed candidates with c's answer, s_t(c) its usable tier-t scores (missing or NaN scores drop out and the
rest renormalize). Per candidate the running sums ``fnum`` = sum w_t s_t and ``fden`` = w_f + sum w_t are
added in verification order, so every form below does the same float operations. A candidate without an
answer has R = -1 (never selected); ties go to the earliest candidate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: the evidence module imports this one
    from coba_env.evidence import Evidence


def fusion_rank(wf: float, count: int, n: int, fnum: float, fden: float) -> float:
    """R of one answered candidate whose answer has ``count`` of ``n`` revealed candidates."""
    return (wf * count / n + fnum) / fden if fden > 0 else 0.0


def rank_list(wf: float, n: int, counts: list[int], clusters: list[int], fnum, fden) -> list[float]:
    """R of the first ``n`` candidates (-1 without an answer); ``counts[cluster]`` among those ``n``."""
    rank = []
    append = rank.append  # a plain loop: cheaper than a comprehension for a handful of candidates
    if wf > 0:  # every denominator is >= wf > 0
        for c in range(n):
            cl = clusters[c]
            append((wf * counts[cl] / n + fnum[c]) / fden[c] if cl >= 0 else -1.0)
    else:
        for c in range(n):
            cl = clusters[c]
            append(fusion_rank(wf, counts[cl], n, fnum[c], fden[c]) if cl >= 0 else -1.0)
    return rank


def best_of(rank: list[float], clusters: list[int]) -> int:
    """The answered candidate of highest R, ties to the earliest; -1 when none has an answer."""
    best, best_r = -1, -2.0
    for c, r in enumerate(rank):
        if clusters[c] >= 0 and r > best_r:
            best, best_r = c, r
    return best


def refresh_rank(ev: Evidence) -> None:
    """Recompute ``ev.rank`` and ``ev.best``/``ev.best_r`` after new evidence."""
    rank = ev.rank = rank_list(ev.weights[0], ev.n_revealed, ev.counts, ev.clusters, ev.fnum, ev.fden)
    if ev.n_answered:
        best_r = max(rank)
        ev.best, ev.best_r = rank.index(best_r), best_r
    else:
        ev.best, ev.best_r = -1, 0.0


def refresh_rank_of(ev: Evidence, candidate: int) -> None:
    """``refresh_rank`` after a new score for ``candidate`` only (every other R is unchanged)."""
    rank = ev.rank
    rank[candidate] = fusion_rank(ev.weights[0], ev.counts[ev.clusters[candidate]], ev.n_revealed,
                                  ev.fnum[candidate], ev.fden[candidate])
    if ev.n_answered:
        best_r = max(rank)
        ev.best, ev.best_r = rank.index(best_r), best_r


def batch_fusion(r: np.ndarray, count_t: np.ndarray, n: np.ndarray, fnum_t: np.ndarray, fden_t: np.ndarray,
                 wf: float) -> np.ndarray:
    """R of every slot, slot-major [N, B], written into ``r`` (batched ``fusion_rank``, same float operations).

    ``count_t`` holds each revealed slot's answer count, ``n`` [B] the candidates revealed; an unrevealed slot
    has fnum = -inf (R = -inf) and a revealed one without an answer count 0, fnum -2, fden 1 (R = -2).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        np.copyto(r, count_t)  # exact int -> float64, then a float loop: half the cost of a mixed-type multiply
        r *= wf
        r /= np.maximum(n, 1).astype(np.float64)
        r += fnum_t
        r /= fden_t
    if wf <= 0:
        r[(fden_t <= 0) & (fnum_t > -np.inf)] = 0.0
    return r


def first_of(x: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The first row of each column of ``x`` [N, R] equal to its column maximum ``top`` [R] (``np.argmax(x, 0)``).

    Comparing with the maximum and taking the first True of the bool array does what ``np.argmax(x, axis=0)``
    does for a column without NaN at about half its cost (numpy's argmax over axis 0 copies the floats
    transposed first). Callers check ``top`` for NaN, where the two differ.
    """
    return np.argmax(x == top, axis=0)


def batch_best(rank_cols: np.ndarray, none: np.ndarray, hidden: bool = False) -> np.ndarray:
    """Batched ``best_of`` on slot-major ranks [K, R] (a copy: may be modified); -1 where ``none`` has an answer.

    ``hidden``: more slots follow the K given ones, all unrevealed (R = -inf) in every column.
    """
    top = rank_cols.max(axis=0)
    # Unrevealed slots (-inf) rank with the unanswered ones (-2): where a column with an answer has its max
    # above -2, lifting them to -2 moves neither the max nor its first row, so that step is skipped.
    if not np.isnan(top).any() and ((top > -2.0) | none).all():
        return np.where(none, -1, first_of(rank_cols, top))
    rank_cols[rank_cols == -np.inf] = -2.0
    best = np.argmax(rank_cols, axis=0)
    if hidden:  # a column whose every R is below -2 ranks the first hidden slot (lifted to -2) first
        best[rank_cols.max(axis=0) < -2.0] = len(rank_cols)
    return np.where(none, -1, best)
