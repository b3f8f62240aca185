"""Adaptive-allocation proxies: difficulty-adaptive allocation and uncertainty (bandit-style) allocation.

Paper Appendix C: "These baselines allocate more candidate slots to examples with higher answer
disagreement or lower judge confidence." Both are proxies, not reproductions of a specific method.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal, supports_top_mean, top_share, top_tier_mean
from agents.configured import ConfiguredPolicy, can, register
from coba_env.evidence import Evidence
from pools.limits import MAX_CANDIDATES


def wilson_lower_bound(successes: int, n: int, z: float) -> float:
    """Lower end of the Wilson score interval for a proportion ``successes / n`` (0 when n = 0)."""
    if n == 0:
        return 0.0
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - spread) / (1 + z2 / n)


def wilson_lower_bound_batch(successes: np.ndarray, n: np.ndarray, z: float) -> np.ndarray:
    """``wilson_lower_bound`` per element, with the same float operations (0 where n = 0)."""
    n_safe = np.maximum(n, 1)
    p = successes / n_safe
    z2 = z * z
    centre = p + z2 / (2 * n_safe)
    spread = z * np.sqrt(p * (1 - p) / n_safe + z2 / (4 * n_safe * n_safe))
    return np.where(n > 0, (centre - spread) / (1 + z2 / n_safe), 0.0)


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
    compares_answers: ClassVar[bool] = True
    ranges: ClassVar[dict[str, tuple[float, float]]] = {"warmup": (1, MAX_CANDIDATES), "confidence_min": (0.0, 1.0)}
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
            if n < self.warmup and can(action_mask, self.sample_id):
                return self.sample_id
            judge = self.verify_for("V1") if self.use_judge else None
            if judge is not None and can(action_mask, judge):
                return judge
            self._total = self.allocation[self.difficulty_signals(evidence)]
        if n < self._total and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def supports_batch(self, venv: Any) -> bool:
        """The vector env keeps the top cluster's V1 and V3 statistics; a judge on V2 replays one by one."""
        return not self.use_judge or supports_top_mean(venv, venv.config.roles.slot("V1"))

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Per row: the allocated total (-1: not allocated yet)."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_total = np.full(venv.num_envs, -1, dtype=np.int64)
        else:
            self._b_total[rows] = -1

    def difficulty_signals_batch(self, venv: Any) -> np.ndarray:
        """``difficulty_signals`` for every row of ``venv``."""
        signals = ((venv.n_answered == 0) | (top_share(venv) < 1.0)).astype(np.int64)
        if self.use_judge:
            s1, has = top_tier_mean(venv, self.roles.slot("V1"))
            signals += ~has | (s1 < self.confidence_min)
        return signals

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        n = venv.n
        can_sample = legal(action_masks, self.sample_id)
        open_ = self._b_total < 0
        warm = open_ & (n < self.warmup) & can_sample
        judge = self.verify_for("V1") if self.use_judge else None
        judging = open_ & ~warm & legal(action_masks, judge)
        allocate = open_ & ~warm & ~judging
        if allocate.any():
            self._b_total[allocate] = np.asarray(self.allocation)[self.difficulty_signals_batch(venv)[allocate]]
        out = np.where((n < self._b_total) & can_sample, self.sample_id, self.stop_id)
        out[warm] = self.sample_id
        if judge is not None:
            out[judging] = judge
        return out


@register("uncertainty_bandit")
class UncertaintyBandit(ConfiguredPolicy):
    """Uncertainty / bandit-style allocation proxy: SAMPLE ``min_samples``, then in rounds of ``round_size``
    until the Wilson lower confidence bound (``z``) of the top answer's share of revealed candidates is at
    least ``threshold`` (default: the top answer holds a majority with about 84% one-sided confidence) or
    ``max_samples`` are drawn; majority selection. E.g. with the defaults 2/2 agreeing answers stop
    (bound 0.667), 3 of 4 stop (bound 0.5), 2 of 4 do not (0.276)."""

    defaults: ClassVar[dict[str, Any]] = {"min_samples": 2, "round_size": 2, "z": 1.0, "threshold": 0.5,
                                          "max_samples": 16}
    compares_answers: ClassVar[bool] = True
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
        if not done and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        n = venv.n
        at_round_end = (n >= self.min_samples) & ((n - self.min_samples) % self.round_size == 0)
        top_count = np.where(venv.top >= 0, venv.top_count, 0)
        confident = wilson_lower_bound_batch(top_count, n, self.z) >= self.threshold
        done = (n >= self.max_samples) | (at_round_end & confident)
        return np.where(~done & legal(action_masks, self.sample_id), self.sample_id, self.stop_id)
