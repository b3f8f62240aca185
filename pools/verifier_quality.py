"""How good each verifier of a pool is, by its own name: coverage, AUROC, calibration error, best-of-N accuracy.

Evaluator-side figures (they read the pool's correctness labels; never a policy input), for ``coba pools inspect``
and the bench report's pool section:

* coverage: the share of the pool's candidates the verifier scored (a score that is not missing);
* AUROC: the area under the ROC curve of the score against the pool's own correctness labels, over the scored
  candidates with a known label (equal to ``sklearn.metrics.roc_auc_score``'s, computed from sorted scores: ``roc_auc``); None when those are all correct or all wrong;
* ECE: the expected calibration error with ``ECE_BINS`` equal-width bins of the score over [0, 1]: the mean over
  bins, weighted by their share of the candidates, of |share correct - mean score| (a score of exactly 1 falls in
  the last bin). Meaningful for probability-like scores; a reward model's sigmoid of a logit is one only loosely;
* best-of-N accuracy (pick@N): per episode, the candidate it scores highest (ties to the earliest candidate) among
  those it scored; the share of episodes where that candidate is correct, over the episodes where it scored at
  least one candidate and the picked candidate's label is known.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pools.store import Pool

#: Equal-width score bins of the expected calibration error.
ECE_BINS = 10
#: What the figures are, in one line (the inspect footer and the report say it).
DEFINITIONS = (f"coverage: share of candidates scored; AUROC: score vs the pool's correctness labels; ECE: expected "
               f"calibration error, {ECE_BINS} equal-width score bins; pick@N: accuracy of the candidate it scores "
               "highest in each episode (ties to the earliest)")


def expected_calibration_error(scores: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> float | None:
    """ECE of probability-like ``scores`` in [0, 1] against 0/1 ``labels`` with ``bins`` equal-width bins."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if scores.size == 0:
        return None
    which = np.minimum((np.clip(scores, 0.0, 1.0) * bins).astype(np.int64), bins - 1)
    total = np.bincount(which, minlength=bins)
    gap = np.abs(np.bincount(which, labels, bins) - np.bincount(which, scores, bins))  # per bin: n * |acc - conf|
    return float(gap.sum() / total.sum())


def _auroc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    if labels.size == 0 or labels.min() == labels.max():
        return None
    return roc_auc(scores, labels)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """``sklearn.metrics.roc_auc_score(labels, scores)`` (0/1 ``labels``, finite ``scores``, both classes present)
    to the last bit, from sorted copies of the scores instead of a stable argsort of all of them (at 16M scored
    candidates 0.5 s instead of 5 s): the ROC points at each distinct score, descending (false and true positives
    counted exactly), the collinear ones dropped and the trapezoid integrated as ``roc_curve`` and ``auc`` do."""
    from scipy.integrate import trapezoid

    scores = np.asarray(scores, dtype=np.float64)
    correct = np.asarray(labels) == 1
    positive = np.sort(scores[correct])
    # Both classes sorted, then merged (a stable sort of two sorted runs is one merge): every score, descending.
    ordered = np.sort(np.concatenate([positive, np.sort(scores[~correct])]), kind="stable")[::-1]
    last = np.r_[np.flatnonzero(np.diff(ordered)), ordered.size - 1]  # each distinct score's last position
    tps = (positive.size - np.searchsorted(positive, ordered[last], side="left")).astype(np.float64)
    fps = 1 + last.astype(np.float64) - tps
    if fps.size > 2:
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.r_[0.0, fps], np.r_[0.0, tps]
    return float(trapezoid(tps / tps[-1], fps / fps[-1]))


def _best_of_n(scored: pd.DataFrame) -> tuple[float | None, int]:
    """pick@N accuracy and the episodes it is over (``scored``: episode_id, candidate, score, correct)."""
    picked = scored.sort_values(["episode_id", "score", "candidate"], ascending=[True, False, True],
                                kind="stable").drop_duplicates("episode_id")
    known = picked["correct"].dropna()
    return (float(known.mean()) if len(known) else None), int(len(known))


def verifier_diagnostics(pool: Pool, episode_ids: Any = None) -> dict[str, dict[str, Any]]:
    """Per verifier of ``pool`` (its own name, in the pool's order): role, the model(s) behind it, coverage, AUROC,
    ECE, pick@N (see the module docstring); over ``episode_ids`` only when given."""
    cands = pool.candidates[["episode_id", "candidate", "correct"]]
    verifs = pool.verifications[["episode_id", "candidate", "tier", "model", "score"]]
    if episode_ids is not None:
        keep = pd.Index(episode_ids)
        cands, verifs = cands[cands["episode_id"].isin(keep)], verifs[verifs["episode_id"].isin(keep)]
    labels = cands.assign(correct=cands["correct"].astype("Float64").to_numpy(dtype=float, na_value=np.nan))
    roles = pool.manifest.get("verifier_roles") or {}
    out: dict[str, dict[str, Any]] = {}
    for tier in pool.tiers:
        rows = verifs[(verifs["tier"] == tier) & verifs["score"].notna()]
        scored = rows.merge(labels, on=["episode_id", "candidate"], how="inner").drop_duplicates(
            ["episode_id", "candidate"])
        known = scored[scored["correct"].notna()]
        score, label = known["score"].to_numpy(dtype=np.float64), known["correct"].to_numpy(dtype=np.float64)
        models = sorted(rows["model"].dropna().astype(str).unique()) if "model" in rows else []
        out[tier] = tier_figures(tier, roles, models=models, scored=len(scored), n_candidates=len(cands),
                                 score=score, label=label, pick=_best_of_n(scored))
    return out


def tier_figures(tier: str, roles: dict[str, Any], *, models: list[str], scored: int, n_candidates: int,
                 score: np.ndarray, label: np.ndarray, pick: tuple[float | None, int]) -> dict[str, Any]:
    """One verifier's diagnostics from its scored calls (``score``/``label``: the pairs with a known label, in
    table order) and its pick@N (accuracy, episodes); also ``pools.verifier_tally``'s."""
    from pools.schema import PAPER_TIER_ROLES

    return {"role": roles.get(tier, PAPER_TIER_ROLES.get(tier)), "model": ", ".join(models) or None,
            "coverage": scored / n_candidates if n_candidates else None, "scored": int(scored),
            "auroc": _auroc(score, label), "ece": expected_calibration_error(score, label),
            "ece_bins": ECE_BINS, "best_of_n_accuracy": pick[0], "best_of_n_episodes": pick[1]}


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def format_diagnostics(diagnostics: dict[str, dict[str, Any]], n: int) -> list[str]:
    """The diagnostics as text lines: a header, one row per verifier, what the figures are."""
    if not diagnostics:
        return ["verifiers: none"]
    header = ["verifier", "role", "coverage", "AUROC", "ECE", f"pick@{n}", "episodes", "model"]
    rows = [[name, str(d["role"] or "-"), _fmt(d["coverage"], 2), _fmt(d["auroc"]), _fmt(d["ece"]),
             _fmt(d["best_of_n_accuracy"]), str(d["best_of_n_episodes"]), str(d.get("model") or "-")]
            for name, d in diagnostics.items()]
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    lines = ["verifiers (how good each one is, from the pool's labels):"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    return [*lines, f"  {DEFINITIONS}"]
