"""The stop gate over CoBa-Routed-Strong (issue 27): Strong, stopping early where a stop looks harmless.

At each state where Strong's next action is not STOP and STOP is legal, a model reads the state's label-free
features (``gate_features``: ``controller_features`` at lambda 0 with budget used against the pool's cost unit B,
plus Strong's next action one-hot) and predicts the probability that stopping *now* turns Strong's final
correct answer into a wrong one (the "harm"). The gate plays STOP when that prediction is <= ``threshold``,
otherwise Strong's action. ``threshold`` = -infinity is Strong itself.

The model and the threshold come from ``train/stop_gate.py`` (the threshold by Learn-then-Test); the gate reads
no label. It replays one episode at a time (``act``) or batched (``act_batch``, one model call per step for all
rows); both take the same decisions (tests/test_stop_gate.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agents.learned_mlp import batch_controller_features
from agents.learned_rollout import OverStrong, StrongFromState, rollout_features
from coba_env.evidence import Evidence
from coba_env.rules.actions import REPLAY_LAYOUT


def gate_features(state: np.ndarray, strong_actions: np.ndarray,
                  n_actions: int = REPLAY_LAYOUT.n_actions) -> np.ndarray:
    """Rows [n, F + A]: the states' features ``state`` [n, F] and Strong's next action one-hot (A actions; the gate
    is trained on the replay layout, where Strong runs)."""
    state = np.atleast_2d(np.asarray(state, dtype=np.float64))
    rows = np.zeros((len(state), state.shape[1] + n_actions))
    rows[:, :state.shape[1]] = state
    rows[np.arange(len(state)), state.shape[1] + np.asarray(strong_actions, dtype=np.int64)] = 1.0
    return rows


class StopGate(OverStrong):
    """CoBa-Routed-Strong with a learned early STOP: stop where the predicted harm is <= ``threshold``."""

    group = "learned"
    batched = True

    def __init__(self, model: Any, *, threshold: float, budget: float, max_output_tokens: float,
                 cost_model: str = "p_tokens", name: str = "stop_gate", actions: tuple[str, ...] = ()) -> None:
        if not (budget > 0 and math.isfinite(budget)) or math.isnan(threshold):
            raise ValueError(f"need budget > 0 and a threshold, got {budget}, {threshold}")
        self.model, self.threshold = model, float(threshold)
        self.budget, self.max_output_tokens, self.cost_model = float(budget), float(max_output_tokens), cost_model
        self.strong = StrongFromState()
        self.selection, self.requires_tiers = self.strong.selection, self.strong.requires_tiers
        self.optional_tiers = self.strong.optional_tiers
        self.name = name
        self.label = f"Stop gate over Strong (harm threshold {threshold:g})"
        self.actions = tuple(actions)  # the layout it was fit on: its model's input width follows it

    def harm(self, rows: np.ndarray) -> np.ndarray:
        """The model's predicted harm of stopping now, one per row of ``gate_features``."""
        return np.asarray(self.model.predict_harm(rows), dtype=np.float64)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """STOP if Strong would go on, STOP is legal and the predicted harm is <= threshold; else Strong's action."""
        a_strong = self.strong.act(observation, action_mask, evidence)
        stop = self.stop_id
        if a_strong == stop or not action_mask[stop] or math.isinf(self.threshold) and self.threshold < 0:
            return a_strong
        state = rollout_features(observation, action_mask, evidence, budget=self.budget, cost_model=self.cost_model,
                                 max_output_tokens=self.max_output_tokens)
        rows = gate_features(state, [a_strong], self.layout.n_actions)
        return stop if self.harm(rows)[0] <= self.threshold else a_strong

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: one model call over the rows where the gate may stop."""
        if venv is None:
            raise ValueError(f"{self.name}: act_batch reads the vector env's state; pass venv")
        a_strong = self.strong.act_batch(observations, action_masks, venv)
        if math.isinf(self.threshold) and self.threshold < 0:
            return a_strong
        stop = self.stop_id
        open_rows = np.flatnonzero((a_strong != stop) & (np.asarray(action_masks[:, stop]) > 0))
        if open_rows.size == 0:
            return a_strong
        states = batch_controller_features(observations, action_masks, venv, budget=self.budget,
                                           cost_model=self.cost_model, max_output_tokens=self.max_output_tokens,
                                           lam=0.0)
        harm = self.harm(gate_features(states[open_rows], a_strong[open_rows], action_masks.shape[1]))
        out = a_strong.copy()
        out[open_rows[harm <= self.threshold]] = stop
        return out

    def describe(self) -> dict[str, Any]:
        """Name, label, group and the threshold."""
        return {"name": self.name, "label": self.label, "group": self.group, "kind": "stop_gate",
                "threshold": self.threshold, "budget": self.budget}
