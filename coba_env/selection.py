"""Final-answer selection rules applied at STOP, and the fusion rank R(c) of paper Eq. 3.

Every rule sees only revealed evidence. Candidates without an extractable answer are never selected
unless no revealed candidate has one (then nothing is selected and the episode counts as wrong).
Ties always go to the earliest candidate in sampling order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

from coba_env.evidence import Evidence

RULES: tuple[str, ...] = ("fusion", "majority", "weighted_vote", "max_score", "last")
_TIER_INDEX = {"V1": 0, "V2": 1, "V3": 2}


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

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown selection rule {self.rule!r}; expected one of {list(RULES)}")
        if self.tier not in _TIER_INDEX:
            raise ValueError(f"unknown tier {self.tier!r}; expected one of {list(_TIER_INDEX)}")
        unknown = set(self.weights) - {"f", *_TIER_INDEX}
        if unknown:
            raise ValueError(f"unknown fusion weight key(s) {sorted(unknown)}; expected f, V1, V2, V3")

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

    def weight_vector(self) -> tuple[float, float, float, float]:
        """Fusion weights as (f, V1, V2, V3)."""
        w = self.weights
        return (w.get("f", 0.0), w.get("V1", 0.0), w.get("V2", 0.0), w.get("V3", 0.0))


def fusion_score(ev: Evidence, candidate: int) -> float:
    """R(c) for a revealed candidate under the evidence's weights; -1 for a candidate without an answer."""
    return ev.fusion(candidate)


def rank_candidates(ev: Evidence) -> list[float]:
    """Fusion rank of every revealed candidate (-1 for those without an answer)."""
    return [ev.fusion(c) for c in range(ev.n_revealed)]


def select_candidate(ev: Evidence, rule: SelectionRule) -> int:
    """Index of the candidate STOP selects under ``rule``, or -1 when no revealed candidate has an answer."""
    if ev.n_answered == 0:
        return -1
    kind = rule.rule
    clusters = ev.clusters
    if kind == "fusion":
        return ev.best_fusion()[0]
    if kind == "majority":
        return clusters.index(ev.top)
    if kind == "last":
        for c in range(ev.n_revealed - 1, -1, -1):
            if clusters[c] >= 0:
                return c
        return -1
    t = _TIER_INDEX[rule.tier]
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
