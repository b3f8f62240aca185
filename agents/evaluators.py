"""Always-on evaluator proxies: sample a fixed N, verify every candidate with fixed tiers, select by score.

Paper Appendix C: outcome and process-plus-outcome evaluator baselines "score candidate prefixes with local
judges and select the highest-scoring answer"; self-evaluation weighted voting weights "the generator's
candidate answers ... by local outcome-judge scores and answer frequency".
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import ConfiguredPolicy, can, need_candidates, register
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence


class SampleThenVerify(ConfiguredPolicy):
    """SAMPLE the first ``n`` candidates, then VERIFY every candidate at each tier of ``verify`` in order
    (as long as the pool holds calls for them), then STOP with the class's selection rule. Tiers are roles
    (V1 cheap judge, V2 process judge, V3 strong verifier), called on the verifier the env's role map
    assigns to each (``coba_env.rules.roles``)."""

    defaults: ClassVar[dict[str, Any]] = {"n": 8}
    verify: ClassVar[tuple[str, ...]] = ()
    n: int

    def configure(self) -> None:
        """N must be at least 1."""
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")

    def wanted_candidates(self) -> int:
        """``n``: an episode holding fewer is played with what it has (the bench notes how many)."""
        return self.n

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Needs its verifier tiers and ``n`` candidates per episode."""
        ok, why = super().applicable(env)
        if not ok:
            return ok, why
        return need_candidates(env, self.n, self.label)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE to ``n``, then each tier's VERIFY until none is pending, then STOP."""
        if evidence.n_revealed < self.n and can(action_mask, self.sample_id):
            return self.sample_id
        for need in self.verify:
            action = self.verify_for(need)
            if action is not None and can(action_mask, action):
                return action
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``: the first of SAMPLE, then each tier's VERIFY, that applies."""
        out = np.full(len(action_masks), self.stop_id, dtype=np.int64)
        todo = np.ones(len(action_masks), dtype=bool)
        steps = [(self.sample_id, (venv.n < self.n) & legal(action_masks, self.sample_id))]
        steps += [(a, legal(action_masks, a)) for a in map(self.verify_for, self.verify) if a is not None]
        for action, applies in steps:
            take = todo & applies
            np.copyto(out, action, where=take)  # a masked copy: no index array
            todo &= ~take
        return out


@register("outcome_evaluator")
class OutcomeEvaluator(SampleThenVerify):
    """Always-on outcome evaluator proxy: ``n`` candidates (default 8), the strong outcome verifier V3 on
    all, select the candidate with the highest V3 score (ties to the earliest; majority if none scored)."""

    verify: ClassVar[tuple[str, ...]] = ("V3",)

    def configure(self) -> None:
        """max_score selection on V3; needs V3."""
        super().configure()
        self.requires_tiers = ("V3",)
        self.selection = {"rule": "max_score", "tier": "V3"}


@register("process_outcome_evaluator")
class ProcessOutcomeEvaluator(SampleThenVerify):
    """Process-plus-outcome evaluator proxy: ``n`` candidates (default 8), the process verifier V2 wherever
    the pool has it and V3 on all; select argmax of the fusion rank restricted to the evaluator scores,
    (w2 s2 + w3 s3) / (w2 + w3) with the paper's relative weights w2 = .15, w3 = .45 (answer frequency and
    V1 weighted 0); a missing V2 score drops out, so the rank falls back to s3 alone."""

    defaults: ClassVar[dict[str, Any]] = {"n": 8, "weights": {"V2": 0.15, "V3": 0.45}}
    verify: ClassVar[tuple[str, ...]] = ("V2", "V3")
    weights: dict[str, float]

    def configure(self) -> None:
        """Fusion selection with weights on s2 / s3 only; needs V3 (V2 optional)."""
        super().configure()
        self.requires_tiers = ("V3",)
        self.selection = {"rule": "fusion", "weights": {"f": 0.0, "V1": 0.0, **self.weights}}


@register("self_eval_weighted")
class SelfEvalWeighted(SampleThenVerify):
    """Self-evaluation weighted-voting proxy: ``n`` candidates, the cheap judge V1 on all, then each answer
    scores the sum of its candidates' V1 scores (frequency x judge confidence; ``missing`` for an unusable
    score) and the best answer's earliest candidate is selected. Default n = 10: the paper's costs for this
    row (19.87 calls, 112.6k tokens, fewer than best-of-16's 130.5k) match about 10 generations + 10
    judge calls, not 16 + 16 (see docs/POLICIES.md)."""

    defaults: ClassVar[dict[str, Any]] = {"n": 10, "missing": 0.5}
    compares_answers: ClassVar[bool] = True
    verify: ClassVar[tuple[str, ...]] = ("V1",)
    missing: float

    def configure(self) -> None:
        """Weighted vote on V1; needs V1."""
        super().configure()
        self.requires_tiers = ("V1",)
        self.selection = {"rule": "weighted_vote", "tier": "V1", "missing": float(self.missing)}
