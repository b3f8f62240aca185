"""The STOP selection: the final-answer rules applied at STOP, scalar (``select_candidate``) and batched.

Every rule sees only revealed evidence. Candidates without an extractable answer are never selected
unless no revealed candidate has one (then nothing is selected and the episode counts as wrong).
Ties always go to the earliest candidate in sampling order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from coba_env.rules.fusion import best_of, rank_list
from pools.schema import TIERS as _PAPER_TIERS

if TYPE_CHECKING:  # annotations only: the evidence module imports the rules
    from coba_env.evidence import Evidence

RULES: tuple[str, ...] = ("fusion", "majority", "weighted_vote", "max_score", "last")


def default_fusion_weights() -> dict[str, float]:
    """The paper's fusion weights (f, V1, V2, V3), read from ``coba_env/data/defaults.json``."""
    text = resources.files("coba_env").joinpath("data/defaults.json").read_text()
    return dict(json.loads(text)["fusion_weights"])


@dataclass(frozen=True)
class SelectionRule:
    """How STOP picks the answer. ``rule`` is one of RULES; ``weights`` (fusion) or ``tier`` parametrize it.

    - fusion: argmax R(c) = sum_x w_x x(c) / sum_x w_x over the evidence x in {f, s1, s2, s3} that c has
      (f = share of revealed candidates with c's answer; missing scores drop out and the rest renormalize).
    - majority: the most frequent answer (ties to the answer seen first), its earliest candidate.
    - weighted_vote: each answer gets the sum over its candidates of the tier score (``missing`` when absent
      or NaN); the best answer's earliest candidate.
    - max_score: the candidate with the highest tier score; majority when no candidate has one.
    - last: the most recently revealed candidate with an answer.
    """

    rule: str = "fusion"
    weights: dict[str, float] = field(default_factory=default_fusion_weights)
    tier: str = "V1"
    missing: float = 0.5
    #: The verifier names ``weights`` and ``tier`` refer to: the paper's V1, V2, V3 (the roles a policy asks
    #: for) until ``coba_env.rules.roles.RoleMap.resolve`` puts the rule on a pool's own verifiers.
    axis: tuple[str, ...] = _PAPER_TIERS

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown selection rule {self.rule!r}; expected one of {list(RULES)}")
        known = (*self.axis, *(t for t in _PAPER_TIERS if t not in self.axis))
        if self.tier not in known:
            raise ValueError(f"unknown tier {self.tier!r}; expected one of {list(known)}")
        unknown = set(self.weights) - {"f", *known}
        if unknown:
            raise ValueError(f"unknown fusion weight key(s) {sorted(unknown)}; expected f, {', '.join(known)}")

    @classmethod
    def from_spec(cls, spec: str | dict | SelectionRule | None) -> SelectionRule:
        """Build a rule from a name, a dict such as ``{"rule": "weighted_vote", "tier": "V1"}``, or None."""
        if spec is None:
            return cls()
        if isinstance(spec, SelectionRule):
            return spec
        if isinstance(spec, str):
            return cls(rule=spec)
        spec = dict(spec)
        if "weights" in spec and spec["weights"] is not None:
            spec["weights"] = {str(k): float(v) for k, v in spec["weights"].items()}
        else:
            spec.pop("weights", None)
        return cls(**spec)

    def weight_vector(self) -> tuple[float, ...]:
        """Fusion weights as (f, w_1, ..., w_T) over ``axis`` (the paper's: f, V1, V2, V3)."""
        w = self.weights
        return (w.get("f", 0.0), *(w.get(t, 0.0) for t in self.axis))

    @property
    def tier_index(self) -> int:
        """The index of ``tier`` on ``axis``; -1 when the axis has no such verifier (the rule sees no scores)."""
        return self.axis.index(self.tier) if self.tier in self.axis else -1


def select_candidate(ev: Evidence, rule: SelectionRule) -> int:
    """Index of the candidate STOP selects under ``rule``, or -1 when no revealed candidate has an answer."""
    if ev.n_answered == 0:
        return -1
    kind = rule.rule
    clusters = ev.clusters
    if kind == "fusion":
        return best_of(rank_list(ev.weights[0], ev.n_revealed, ev.counts, clusters, ev.fnum, ev.fden), clusters)
    if kind == "majority":
        return clusters.index(ev.top)
    if kind == "last":
        for c in range(ev.n_revealed - 1, -1, -1):
            if clusters[c] >= 0:
                return c
        return -1
    t = rule.tier_index
    if t < 0:  # no verifier serves the rule's tier: every score is missing
        return _select_without_scores(ev, rule)
    if kind == "weighted_vote":
        totals: dict[int, float] = {}
        for c in range(ev.n_revealed):
            cl = clusters[c]
            if cl < 0:
                continue
            v = ev.scores[c][t]
            totals[cl] = totals.get(cl, 0.0) + (v if v is not None and v == v else rule.missing)
        best_cluster = max(totals, key=lambda k: (totals[k], -k))
        return clusters.index(best_cluster)
    # max_score
    best, best_v = -1, -1.0
    for c in range(ev.n_revealed):
        v = ev.scores[c][t]
        if clusters[c] >= 0 and v is not None and v == v and v > best_v:
            best, best_v = c, v
    return best if best >= 0 else clusters.index(ev.top)


def _select_without_scores(ev: Evidence, rule: SelectionRule) -> int:
    """``weighted_vote`` / ``max_score`` when no revealed candidate can have a score at the rule's tier."""
    if rule.rule == "max_score":
        return ev.clusters.index(ev.top)
    totals: dict[int, float] = {}
    for cl in ev.clusters:
        if cl >= 0:
            totals[cl] = totals.get(cl, 0.0) + rule.missing
    best_cluster = max(totals, key=lambda k: (totals[k], -k))
    return ev.clusters.index(best_cluster)


def tier_columns(rule: SelectionRule, score: np.ndarray, verified: Any) -> tuple[np.ndarray, np.ndarray]:
    """(scores, verified flags) [R, N] of the rule's tier for ``select_by_rule``, given the [R, N, T] score table
    and ``verified(t)`` -> [R, N]; all missing when no verifier serves the tier."""
    t = rule.tier_index
    if t < 0:
        return np.full(score.shape[:2], np.nan), np.zeros(score.shape[:2], dtype=bool)
    return score[:, :, t], verified(t)


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
        return _weighted_vote(cluster, answered, np.where(usable, s, rule.missing), n_revealed)
    if rule.rule == "max_score":
        masked = np.where(usable, s, -1.0)
        return np.where(usable.any(axis=1), np.argmax(masked, axis=1), first_of_top)
    raise ValueError(f"unknown selection rule {rule.rule!r}")


def _weighted_vote(cluster: np.ndarray, answered: np.ndarray, vals: np.ndarray, n_revealed: np.ndarray) -> np.ndarray:
    """``weighted_vote`` per row: the answer whose candidates' ``vals`` sum highest (ties to the smaller cluster id),
    its earliest candidate (0 where no candidate is answered).

    Each answered candidate's cluster total is summed over the row's candidates in slot order, as the scalar rule's
    running sum is (adding 0.0 for the other candidates leaves a float sum unchanged), so both take the same
    decisions; with a non-finite value (a NaN or infinite ``missing``) the scalar rule's loop runs row by row.
    """
    rows = len(cluster)
    if not rows:
        return np.zeros(0, dtype=np.int64)
    if not np.isfinite(vals[answered]).all():
        return _weighted_vote_rows(cluster, answered, vals)
    k = min(int(n_revealed.max()), cluster.shape[1])  # answered candidates are revealed: slots < n
    if k == 0:
        return np.zeros(rows, dtype=np.int64)
    cl = cluster[:, :k]
    gain = np.where(answered[:, :k], vals[:, :k].astype(np.float64), 0.0)  # float64 sums, as the scalar rule's
    totals = np.zeros((rows, k))
    for c in range(k):  # candidate c's vote added to the total of every candidate in its cluster, in slot order
        totals += np.where(cl == cl[:, c:c + 1], gain[:, c:c + 1], 0.0)
    ok = answered[:, :k]
    totals = np.where(ok, totals, -np.inf)
    best = ok & (totals == totals.max(axis=1, keepdims=True))
    big = np.iinfo(np.int64).max
    best_cluster = np.where(best, cl.astype(np.int64), big).min(axis=1)
    sel = np.argmax(cluster == best_cluster[:, None], axis=1)
    return np.where(ok.any(axis=1), sel, 0)


def _weighted_vote_rows(cluster: np.ndarray, answered: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``_weighted_vote`` one row at a time (the scalar rule's arithmetic, for values that are not all finite)."""
    sel = np.zeros(len(cluster), dtype=np.int64)
    for i in range(len(cluster)):
        totals: dict[int, float] = {}
        for c in np.flatnonzero(answered[i]):
            totals[int(cluster[i, c])] = totals.get(int(cluster[i, c]), 0.0) + float(vals[i, c])
        if totals:
            best = max(totals, key=lambda k, tt=totals: (tt[k], -k))
            sel[i] = int(np.argmax(cluster[i] == best))
    return sel
