"""The STOP selection of a batch of episodes under the non-fusion rules (``CoBaVectorEnv``'s slow path).

Mirrors ``coba_env.selection.select_candidate`` row by row; the fusion rule, which every CoBa policy uses,
is handled in ``CoBaVectorEnv`` itself from its fusion ranks.
"""

from __future__ import annotations

import numpy as np

from coba_env.selection import SelectionRule


def select_by_rule(rule: SelectionRule, cluster: np.ndarray, n_revealed: np.ndarray, top: np.ndarray,
                   tier_scores: np.ndarray | None = None, tier_verified: np.ndarray | None = None) -> np.ndarray:
    """Selected candidate per row for the rules majority, last, max_score and weighted_vote.

    ``cluster`` [R, N]: answer cluster of every candidate of each row's episode (-1: no answer);
    ``n_revealed`` [R]: candidates revealed; ``top`` [R]: the top answer cluster; for the score rules,
    ``tier_scores`` [R, N] the rule tier's pool scores and ``tier_verified`` [R, N] whether each revealed
    candidate is verified at that tier. Rows without a revealed answer get an arbitrary index; the caller
    replaces it with -1.
    """
    n_cand = cluster.shape[1]
    revealed = np.arange(n_cand)[None, :] < n_revealed[:, None]
    answered = revealed & (cluster >= 0)
    first_of_top = np.argmax(answered & (cluster == top[:, None]), axis=1)
    if rule.rule == "majority":
        return first_of_top
    if rule.rule == "last":
        return n_cand - 1 - np.argmax(answered[:, ::-1], axis=1)
    if tier_scores is None or tier_verified is None:
        raise ValueError(f"selection rule {rule.rule!r} needs the tier's scores and verified flags")
    s = np.where(tier_verified, tier_scores, np.nan)
    usable = answered & ~np.isnan(s)
    if rule.rule == "weighted_vote":
        vals = np.where(usable, s, rule.missing)
        sel = np.zeros(len(cluster), dtype=np.int64)
        for i in range(len(cluster)):
            totals: dict[int, float] = {}
            for c in np.flatnonzero(answered[i]):
                totals[int(cluster[i, c])] = totals.get(int(cluster[i, c]), 0.0) + float(vals[i, c])
            if totals:
                best = max(totals, key=lambda k, tt=totals: (tt[k], -k))
                sel[i] = int(np.argmax(cluster[i] == best))
        return sel
    if rule.rule == "max_score":
        masked = np.where(usable, s, -1.0)
        return np.where(usable.any(axis=1), np.argmax(masked, axis=1), first_of_top)
    raise ValueError(f"unknown selection rule {rule.rule!r}")
