"""An answer-consistency cascade: k samples from the cheapest model, escalate to the next model while they disagree.

The cascade of Yue et al. 2024 ("Large Language Model Cascades with Mixture of Thought Representations for
Cost-Efficient Reasoning"): a weaker model's sampled answers agreeing is the signal that its answer can be
trusted; when they disagree the question goes to a stronger model. Here the ladder is every generator of the
pool from fewest to most parameters (label-free), and the strongest answers once. It is the ladder cascade
(``agents.routing_ladder``) with its two settings open and the rest fixed: ``k`` samples per rung that must all
agree, no judge, no early escalation, answer ``last``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents.configured import register
from agents.routing_ladder import LadderCascadePolicy


@register("route_cascade")
class CascadePolicy(LadderCascadePolicy):
    """Consistency cascade over the generators ordered by size; answers with the newest candidate.

    For each generator but the largest, in order of size: SAMPLE it ``k`` times (fewer when it has fewer
    candidates); STOP if those samples are unanimous (all answered, one answer), else escalate to the next
    generator. The largest generator is sampled ``final_k`` times and the episode stops. A generator with no
    candidates for the item is skipped. Selection ``last``: the newest answered candidate, i.e. the unanimous
    answer of the generator that stopped the cascade, or the largest generator's answer (with ``final_k`` =
    1, its only one). No verifier is called.
    """

    defaults: ClassVar[dict[str, Any]] = {"k": 2, "final_k": 1}

    def configure(self) -> None:
        """Check ``k`` >= 2 (one sample is always unanimous); the ladder's settings that make it this cascade."""
        if self.k < 2:
            raise ValueError(f"k must be >= 2 (one sample always agrees with itself), got {self.k}")
        self.rung_k, self.votes, self.early_escalate, self.answer = None, self.k, False, "last"
        self.judge, self.judge_accept, self.judge_escalate = False, 1.0, 0.0
        super().configure()
