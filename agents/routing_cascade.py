"""An answer-consistency cascade: k samples from the cheapest model, escalate to the next model while they disagree.

The cascade of Yue et al. 2024 ("Large Language Model Cascades with Mixture of Thought Representations for
Cost-Efficient Reasoning"): a weaker model's sampled answers agreeing is the signal that its answer can be
trusted; when they disagree the question goes to a stronger model. Here the ladder is every generator of the
pool from fewest to most parameters (label-free), and the strongest answers once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import can, register
from agents.routing_base import RoutePolicy, unanimous, unanimous_batch
from coba_env.evidence import Evidence


def top_rung_action(policy: Any, evidence: Any, action_mask: np.ndarray) -> int:
    """The cascade's last rung: SAMPLE the largest generator until it has ``policy.final_k`` candidates, then STOP."""
    top = policy.ladder[-1]
    sample = policy.layout.sample_action(top)
    if evidence.gen_revealed[top] < policy.final_k and can(action_mask, sample):
        return sample
    return policy.stop_id


def top_rung_batch(policy: Any, venv: Any, action_masks: np.ndarray, todo: np.ndarray, out: np.ndarray) -> None:
    """``top_rung_action`` for the rows ``todo`` still climbing: writes their SAMPLE into ``out`` (STOP stays)."""
    top = policy.ladder[-1]
    sample = policy.layout.sample_action(top)
    out[todo & (venv.gen_revealed[top] < policy.final_k) & legal(action_masks, sample)] = sample


@register("route_cascade")
class CascadePolicy(RoutePolicy):
    """Consistency cascade over the generators ordered by size; answers with the newest candidate.

    For each generator but the largest, in order of size: SAMPLE it ``k`` times (fewer when it has fewer
    candidates); STOP if those samples are unanimous (all answered, one answer), else escalate to the next
    generator. The largest generator is sampled ``final_k`` times and the episode stops. A generator with no
    candidates for the item is skipped. Selection ``last``: the newest answered candidate, i.e. the unanimous
    answer of the generator that stopped the cascade, or the largest generator's answer (with ``final_k`` =
    1, its only one). No verifier is called.
    """

    defaults: ClassVar[dict[str, Any]] = {"k": 2, "final_k": 1}
    compares_answers: ClassVar[bool] = True
    k: int
    final_k: int

    def configure(self) -> None:
        """Check ``k`` >= 2 (one sample is always unanimous) and ``final_k`` >= 1; selection ``last``."""
        if self.k < 2:
            raise ValueError(f"k must be >= 2 (one sample always agrees with itself), got {self.k}")
        if self.final_k < 1:
            raise ValueError(f"final_k must be >= 1, got {self.final_k}")
        self.selection = "last"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """The next SAMPLE of the current rung of the ladder, or STOP."""
        ev: Any = evidence
        for g in self.ladder[:-1]:
            sample = self.layout.sample_action(g)
            if ev.gen_revealed[g] < self.k and can(action_mask, sample):
                return sample
            if unanimous(ev, g):
                return self.stop_id
        return top_rung_action(self, ev, action_mask)

    batched = True

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: each rung claims the rows still climbing, in ``act``'s order."""
        out = np.full(venv.num_envs, self.stop_id, dtype=np.int64)
        todo = np.ones(venv.num_envs, dtype=bool)
        for g in self.ladder[:-1]:
            sample = self.layout.sample_action(g)
            draw = todo & (venv.gen_revealed[g] < self.k) & legal(action_masks, sample)
            out[draw] = sample
            todo &= ~draw & ~unanimous_batch(venv, g)  # unanimous rows keep STOP
        top_rung_batch(self, venv, action_masks, todo, out)
        return out
