"""A threshold router on a label-free difficulty signal: probe the weak model, call the strong one below a threshold.

The model-routing literature (RouteLLM, Ong et al. 2024) routes a query to the strong model when a router's
score says the weak one will likely fail; sweeping the threshold traces the router's accuracy against its
share of strong-model calls (``eval.routing_metrics``: CPT, APGR). Here the score is read from the weak
model's own probe samples, never from labels: their agreement (the share of the largest answer), or the cheap
judge's mean score of them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import can, register
from agents.routing_base import RoutePolicy, agreement_batch, score_mean_batch
from coba_env.evidence import Evidence

#: The difficulty signals: the weak probes' agreement, or the cheap judge's (V1 role) mean score of them.
SIGNALS = ("agreement", "judge")


@register("route_threshold")
class ThresholdRouterPolicy(RoutePolicy):
    """Probe ``weak`` with ``probe`` samples; when the signal is below ``threshold``, SAMPLE ``strong``.

    1. SAMPLE ``weak`` ``probe`` times (fewer when it has fewer candidates).
    2. ``signal`` "judge": VERIFY each probe with the cheap judge (V1 role) before any strong sample.
    3. The signal: "agreement" = share of the probes in their largest answer (0 before any); "judge" = the
       mean cheap-judge score of the probes (0 when none has a usable score, so such items go to ``strong``).
    4. If the signal < ``threshold``: SAMPLE ``strong`` ``strong_samples`` times. STOP.

    Selection ``last``: the newest answered candidate, i.e. the strong model's answer when routed, else the
    weak model's newest probe. ``threshold`` 0 never calls ``strong`` (unless the judge signal is missing);
    a threshold above 1 always does. ``coba sweep`` over ``threshold`` traces the router's curve.
    """

    defaults: ClassVar[dict[str, Any]] = {"signal": "judge", "threshold": 0.7, "probe": 1, "strong_samples": 1,
                                          "weak": "cheapest", "strong": "largest"}
    generator_params: ClassVar[tuple[str, ...]] = ("weak", "strong")
    signal: str
    threshold: float
    probe: int
    strong_samples: int
    weak: str
    strong: str

    @property
    def compares_answers(self) -> bool:  # type: ignore[override]
        """The agreement signal compares the probes' answers; the judge signal does not."""
        return self.signal == "agreement"

    def configure(self) -> None:
        """Check the signal and counts; the judge signal requires the cheap-judge role."""
        if self.signal not in SIGNALS:
            raise ValueError(f"signal must be one of {list(SIGNALS)}, got {self.signal!r}")
        if self.probe < 1 or self.strong_samples < 1:
            raise ValueError(f"probe and strong_samples must be >= 1, got {self.probe} and {self.strong_samples}")
        if self.signal == "agreement" and self.probe < 2:
            raise ValueError("signal 'agreement' needs probe >= 2 (one sample always agrees with itself)")
        self.requires_tiers = ("V1",) if self.signal == "judge" else ()
        self.selection = "last"

    def difficulty_signal(self, evidence: Any) -> float:
        """The label-free signal of one episode (high: the weak model is likely right)."""
        w = self.gen["weak"]
        if self.signal == "agreement":
            return evidence.agreement(w)
        mean = evidence.score_mean(w, self.roles.slot("V1"))
        return 0.0 if mean is None else mean

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Probe, judge the probes (judge signal), route below the threshold, STOP."""
        ev: Any = evidence
        w, s = self.gen["weak"], self.gen["strong"]
        sample_w, sample_s = self.layout.sample_action(w), self.layout.sample_action(s)
        if ev.gen_revealed[w] < self.probe and can(action_mask, sample_w):
            return sample_w
        judge = self.verify_for("V1") if self.signal == "judge" else None
        if judge is not None and ev.gen_revealed[s] == 0 and can(action_mask, judge):
            return judge
        if (ev.gen_revealed[s] < self.strong_samples and can(action_mask, sample_s)
                and self.difficulty_signal(ev) < self.threshold):
            return sample_s
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def difficulty_signal_batch(self, venv: Any) -> np.ndarray:
        """``difficulty_signal`` for every row of an item-grouped ``CoBaVectorEnv``."""
        w = self.gen["weak"]
        if self.signal == "agreement":
            return agreement_batch(venv, w)
        mean, has = score_mean_batch(venv, w, self.roles.slot("V1"))
        return np.where(has, mean, 0.0)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row, branch by branch in ``act``'s order."""
        w, s = self.gen["weak"], self.gen["strong"]
        sample_w, sample_s = self.layout.sample_action(w), self.layout.sample_action(s)
        out = np.full(venv.num_envs, self.stop_id, dtype=np.int64)
        todo = np.ones(venv.num_envs, dtype=bool)
        probe = (venv.gen_revealed[w] < self.probe) & legal(action_masks, sample_w)
        out[probe] = sample_w
        todo &= ~probe
        judge = self.verify_for("V1") if self.signal == "judge" else None
        if judge is not None:
            verify = todo & (venv.gen_revealed[s] == 0) & legal(action_masks, judge)
            out[verify] = judge
            todo &= ~verify
        route = todo & (venv.gen_revealed[s] < self.strong_samples) & legal(action_masks, sample_s)
        route &= self.difficulty_signal_batch(venv) < self.threshold
        out[route] = sample_s
        return out
