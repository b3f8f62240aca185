"""ModelSwitch (Chen et al. 2025, "Do We Truly Need So Many Samples? Multi-LLM Repeated Sampling Efficiently
Scales Test-Time Compute"): m samples from model A; if they are not unanimous, m more from model B; vote over all.

The authors' code (JianhaoChen-nju/ModelSwitch, ``--ConsistencyThreshold 1``) switches when model A's answers
are not all the same and weights each model's votes by the consistency of its own answers (an entropy weight).
Here the vote is the env's ``majority`` rule over every revealed candidate (ties to the answer seen first):
with model A not unanimous, its votes are split, which is what the entropy weight down-weights.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import can, register
from agents.routing_base import RoutePolicy, unanimous, unanimous_batch
from coba_env.evidence import Evidence


@register("model_switch")
class ModelSwitchPolicy(RoutePolicy):
    """ModelSwitch: ``m`` samples from ``first``; when they are not unanimous, ``m`` from ``second``; majority.

    ``first`` / ``second``: "cheapest", "largest" or a generator's name (default cheapest, then largest).
    No verifier is called; the answer is the majority over all revealed candidates of both models.
    """

    defaults: ClassVar[dict[str, Any]] = {"m": 4, "first": "cheapest", "second": "largest"}
    compares_answers: ClassVar[bool] = True
    generator_params: ClassVar[tuple[str, ...]] = ("first", "second")
    m: int
    first: str
    second: str

    def configure(self) -> None:
        """Check ``m`` >= 2 (one sample is always unanimous); selection ``majority``."""
        if self.m < 2:
            raise ValueError(f"m must be >= 2 (one sample always agrees with itself), got {self.m}")
        self.selection = "majority"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE A up to m; if A is not unanimous, SAMPLE B up to m; then STOP."""
        ev: Any = evidence
        a, b = self.gen["first"], self.gen["second"]
        sample_a, sample_b = self.layout.sample_action(a), self.layout.sample_action(b)
        if ev.gen_revealed[a] < self.m and can(action_mask, sample_a):
            return sample_a
        if not unanimous(ev, a) and ev.gen_revealed[b] < self.m and can(action_mask, sample_b):
            return sample_b
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row."""
        a, b = self.gen["first"], self.gen["second"]
        sample_a, sample_b = self.layout.sample_action(a), self.layout.sample_action(b)
        draw_a = (venv.gen_revealed[a] < self.m) & legal(action_masks, sample_a)
        draw_b = ~draw_a & ~unanimous_batch(venv, a) & (venv.gen_revealed[b] < self.m) & legal(action_masks, sample_b)
        out = np.full(venv.num_envs, self.stop_id, dtype=np.int64)
        out[draw_a] = sample_a
        out[draw_b] = sample_b
        return out
