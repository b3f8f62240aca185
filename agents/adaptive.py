"""Adaptive-allocation proxies: difficulty-adaptive allocation and uncertainty (bandit-style) allocation.

Paper Appendix C: "These baselines allocate more candidate slots to examples with higher answer
disagreement or lower judge confidence." Both are proxies, not reproductions of a specific method.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agents.configured import ConfiguredPolicy, can, register
from coba_env.evidence import Evidence
from coba_env.rules.actions import SAMPLE, STOP


def wilson_lower_bound(successes: int, n: int, z: float) -> float:
    """Lower end of the Wilson score interval for a proportion ``successes / n`` (0 when n = 0)."""
    if n == 0:
        return 0.0
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - spread) / (1 + z2 / n)


@register("difficulty_adaptive")
class DifficultyAdaptive(ConfiguredPolicy):
    """Difficulty-adaptive proxy: SAMPLE ``warmup`` candidates and judge them with V1; count two difficulty
    signals, *disagreement* (the warm-up answers are not unanimous, or none has an answer) and *low judge
    confidence* (mean V1 score of the top answer below ``confidence_min``, or no usable score); allocate a
    total of ``allocation[signals]`` candidates (default 4 / 8 / 16 for 0 / 1 / 2 signals), SAMPLE up to
    it, STOP; majority selection. Only the warm-up candidates are judged (the judge feeds the difficulty
    estimate, not the vote). With ``use_judge: false`` only disagreement counts and V1 is not needed. V1 is
    the cheap-judge role, served by the pool's verifier the env's role map assigns (``coba_env.rules.roles``)."""

    defaults: ClassVar[dict[str, Any]] = {"warmup": 2, "use_judge": True, "confidence_min": 0.7,
                                          "allocation": [4, 8, 16]}
    warmup: int
    use_judge: bool
    confidence_min: float
    allocation: list[int]

    def configure(self) -> None:
        """Majority selection; the allocation lists totals for 0, 1 and 2 difficulty signals."""
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {self.warmup}")
        if len(self.allocation) != 3 or any(a < self.warmup for a in self.allocation):
            raise ValueError(f"allocation must list 3 totals (0/1/2 difficulty signals), each >= warmup, "
                             f"got {self.allocation}")
        self.selection = "majority"
        self.requires_tiers = ("V1",) if self.use_judge else ()

    def start_episode(self) -> None:
        """New episode: no allocation yet."""
        self._total: int | None = None

    def difficulty_signals(self, evidence: Evidence) -> int:
        """Number of difficulty signals (0, 1 or 2) in the warm-up evidence."""
        disagreement = evidence.n_answered == 0 or evidence.top_share() < 1.0
        low_confidence = False
        if self.use_judge:
            slot = self.roles.slot("V1")
            s1 = None if slot is None else evidence.top_tier_mean(slot)
            low_confidence = s1 is None or s1 < self.confidence_min
        return int(disagreement) + int(low_confidence)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Warm-up, judge the warm-up, allocate once, SAMPLE up to the allocation, STOP."""
        self.track(evidence)
        n = evidence.n_revealed
        if self._total is None:
            if n < self.warmup and can(action_mask, SAMPLE):
                return SAMPLE
            judge = self.verify_for("V1") if self.use_judge else None
            if judge is not None and can(action_mask, judge):
                return judge
            self._total = self.allocation[self.difficulty_signals(evidence)]
        if n < self._total and can(action_mask, SAMPLE):
            return SAMPLE
        return STOP


@register("uncertainty_bandit")
class UncertaintyBandit(ConfiguredPolicy):
    """Uncertainty / bandit-style allocation proxy: SAMPLE ``min_samples``, then in rounds of ``round_size``
    until the Wilson lower confidence bound (``z``) of the top answer's share of revealed candidates is at
    least ``threshold`` (default: the top answer holds a majority with about 84% one-sided confidence) or
    ``max_samples`` are drawn; majority selection. E.g. with the defaults 2/2 agreeing answers stop
    (bound 0.667), 3 of 4 stop (bound 0.5), 2 of 4 do not (0.276)."""

    defaults: ClassVar[dict[str, Any]] = {"min_samples": 2, "round_size": 2, "z": 1.0, "threshold": 0.5,
                                          "max_samples": 16}
    min_samples: int
    round_size: int
    z: float
    threshold: float
    max_samples: int

    def configure(self) -> None:
        """Majority selection; sizes must be positive."""
        if self.min_samples < 1 or self.round_size < 1 or self.max_samples < 1:
            raise ValueError("min_samples, round_size and max_samples must be >= 1")
        self.selection = "majority"

    def confident(self, evidence: Evidence) -> bool:
        """Whether the top answer's share clears ``threshold`` at its Wilson lower bound."""
        top_count = evidence.counts[evidence.top] if evidence.top >= 0 else 0
        return wilson_lower_bound(top_count, evidence.n_revealed, self.z) >= self.threshold

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE to the end of the current round; at a round's end STOP if confident or at the cap."""
        n = evidence.n_revealed
        at_round_end = n >= self.min_samples and (n - self.min_samples) % self.round_size == 0
        done = n >= self.max_samples or (at_round_end and self.confident(evidence))
        if not done and can(action_mask, SAMPLE):
            return SAMPLE
        return STOP
