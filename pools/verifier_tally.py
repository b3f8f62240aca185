"""The verifier diagnostics of a stored pool tallied a batch of verification rows at a time.

``pools.verifier_quality.verifier_diagnostics`` reads a whole pool; ``VerifierTally`` gives the same figures
(to the last digit) from the verification table's record batches in table order and the candidates'
correctness labels (int8 [episodes, N]: 1 correct, 0 wrong, -1 unknown): per verifier name its scored calls,
the models behind them, every scored call's (score, label) pair with a known label in table order (AUROC and
ECE read them as ``verifier_diagnostics`` does: the ECE's bin sums depend on the order) and per episode the
candidate it scores highest (ties to the earliest candidate) for pick@N.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pools.verifier_quality import tier_figures


class VerifierTally:
    """Per verifier name: scored calls, models, (score, label) pairs and each episode's best-scored candidate."""

    def __init__(self, n_episodes: int) -> None:
        self.n_episodes = n_episodes
        self.scored: dict[str, int] = {}
        self.models: dict[str, set[str]] = {}
        self.pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.best: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, tier: tuple[np.ndarray, list], model: tuple[np.ndarray, list], at: np.ndarray, c: np.ndarray,
            score: np.ndarray, label: np.ndarray) -> None:
        """Tally one batch (``tier``/``model``: codes and values; ``at``: each row's episode position)."""
        scored = ~np.isnan(score)
        for code, name in enumerate(tier[1]):
            rows = scored & (tier[0] == code)
            if not rows.any():
                continue
            self.scored[name] = self.scored.get(name, 0) + int(rows.sum())
            used = np.flatnonzero(np.bincount(model[0][rows], minlength=len(model[1])))
            self.models.setdefault(name, set()).update(model[1][m] for m in used.tolist())
            e, k, s = at[rows], c[rows], score[rows]
            inside = (k >= 0) & (k < label.shape[1])  # a bad pool (refused later) may index past N
            lab = np.full(len(k), -1, np.int8)
            lab[inside] = label[e[inside], k[inside]]
            known = lab >= 0
            self.pairs.setdefault(name, []).append((s[known], lab[known]))
            self._pick(name, e, k, s)

    def _pick(self, name: str, e: np.ndarray, k: np.ndarray, s: np.ndarray) -> None:
        """Keep, per episode, the highest score and the earliest candidate holding it."""
        if name not in self.best:
            self.best[name] = (np.full(self.n_episodes, np.nan), np.full(self.n_episodes, -1, np.int64))
        best, cand = self.best[name]
        top = np.full(self.n_episodes, np.nan)
        np.fmax.at(top, e, s)
        at_top = s == top[e]
        low = np.full(self.n_episodes, np.iinfo(np.int64).max)
        np.minimum.at(low, e[at_top], k[at_top])
        higher = ~np.isnan(top) & (np.isnan(best) | (top > best))
        tied = top == best
        cand[:] = np.where(higher, low, np.where(tied, np.minimum(cand, low), cand))
        best[:] = np.where(higher, top, best)

    def diagnostics(self, tiers: list[str], roles: dict[str, Any], n_candidates: int,
                    label: np.ndarray) -> dict[str, dict[str, Any]]:
        """``verifier_diagnostics`` of the tallied pool (``tiers`` in the pool's order, ``n_candidates`` rows)."""
        def figures(tier: str) -> dict[str, Any]:
            parts = self.pairs.get(tier, [])
            score = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
            known = np.concatenate([p[1] for p in parts]).astype(np.float64) if parts else np.zeros(0)
            return tier_figures(tier, roles, models=sorted(self.models.get(tier, ())),
                                scored=self.scored.get(tier, 0), n_candidates=n_candidates, score=score,
                                label=known, pick=self._pick_accuracy(tier, label))

        # The verifiers side by side: their AUROCs sort ~16M scores each at 1M episodes (numpy releases the GIL).
        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(zip(tiers, pool.map(figures, tiers), strict=True))

    def _pick_accuracy(self, tier: str, label: np.ndarray) -> tuple[float | None, int]:
        if tier not in self.best:
            return None, 0
        best, cand = self.best[tier]
        e = np.flatnonzero(~np.isnan(best))
        picked = label[e, cand[e]]
        known = picked[picked >= 0]
        return (float(known.sum()) / len(known) if len(known) else None), int(len(known))
