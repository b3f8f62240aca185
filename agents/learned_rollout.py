"""The rollout controller: one-step policy improvement over CoBa-Routed-Strong (issue 19).

``StrongFromState`` is CoBa-Strong with its two pieces of episode memory read from the state: it has routed as
many candidates as the evidence holds V3 scores, and it is still expanding while it holds none. On Strong's own
trajectory that is exactly what the stateful policy remembers (it samples only before its first V3 call and
counts its V3 calls), so it replays identically (tests/test_rollout.py); after any other action it is a
well-defined continuation, which makes Q^Strong(s, a) = "play a, then StrongFromState to STOP" a function of
the state.

``RolloutController`` plays Strong's action unless a legal action's predicted advantage
``d_correct(s, a) - lam * d_cost(s, a) / B`` over Strong's action exceeds ``tau``; then it plays the best such
action. The model (``predict(rows)`` -> [n, 2]: ``d_correct``, the continuation's correctness minus Strong's,
and ``d_cost``, its p_tokens minus Strong's divided by the fold's budget B) reads only label-free features
(``rollout_features``); ``tau`` = infinity is Strong itself.

Both replay batched through ``CoBaVectorEnv`` (``act_batch``): Strong's memory per row from the vector env's
V3 counts, and the controller's predictions for every row in one model forward pass per step; the records equal
the one-episode replay's (tests/test_rollout.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agents.base import Policy
from agents.coba import CoBaPolicy
from agents.learned_mlp import batch_controller_features, controller_features
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence

#: The registered CoBa-Routed-Strong's parameters (agents/policies.yaml, ``coba_strong``).
STRONG_PARAMS: dict[str, Any] = {"warmup_k": 2, "n_max": 8, "strong_routes": 4, "share_min": 0.6, "s1_min": 0.7,
                                 "use_v2": True, "skip_unanimous_routes": True}


class StrongFromState(CoBaPolicy):
    """CoBa-Routed-Strong whose memory (expanding? routed so far?) is read from the evidence at every step."""

    #: ``act_batch`` reads the memory per row from the vector env's V3 counts, as ``act`` does from the evidence.
    batched = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**{**STRONG_PARAMS, **params})
        self.name = "coba_strong_from_state"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Algorithm 1's next action with ``_routed`` = V3 scores held and ``_expanding`` = none held yet."""
        self.track(evidence)
        slot = self.roles.slot("V3")
        routed = 0 if slot is None else evidence.n_verified[slot]
        self._routed, self._expanding = routed, routed == 0
        return super().act(observation, action_mask, evidence)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: CoBaPolicy's batched branches with its per-row memory read from ``venv``."""
        if venv is None:
            raise ValueError(f"{self.name}: act_batch reads the vector env's V3 counts; pass venv")
        slot = self.roles.slot("V3")
        routed = np.zeros(venv.num_envs, dtype=np.int64) if slot is None else venv.n_verified[:, slot].copy()
        self._b_routed, self._b_expanding = routed, routed == 0
        return super().act_batch(observations, action_masks, venv)


def rollout_features(observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence, *, budget: float,
                     cost_model: str, max_output_tokens: float) -> np.ndarray:
    """The state's label-free features (``controller_features`` at lambda 0; budget used against ``budget``)."""
    return controller_features(observation, action_mask, evidence, budget=budget, cost_model=cost_model,
                               max_output_tokens=max_output_tokens, lam=0.0)


def action_rows(state: np.ndarray, actions: np.ndarray, strong_action: int, n_actions: int) -> np.ndarray:
    """One regressor row per candidate action: the state's features, the action and Strong's action one-hot
    (``n_actions`` wide each: the layout's action count)."""
    rows = np.zeros((len(actions), state.size + 2 * n_actions), dtype=np.float32)
    rows[:, :state.size] = state
    rows[np.arange(len(actions)), state.size + np.asarray(actions)] = 1.0
    rows[:, state.size + n_actions + strong_action] = 1.0
    return rows


class OverStrong(Policy):
    """A learned controller that runs CoBa-Routed-Strong (``self.strong``) and departs from it where its model
    says so; fit on one action layout (``self.actions``: its model's input width follows it)."""

    strong: StrongFromState
    actions: tuple[str, ...] = ()

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Where Strong runs, on the layout the model was fit on."""
        if self.actions and tuple(env.layout.names) != self.actions:
            return False, f"fit on the actions {list(self.actions)}; the env has {list(env.layout.names)}"
        return self.strong.applicable(env)

    def reset(self, env: CoBaEnv) -> None:
        """Bind the env's roles for this policy and its Strong."""
        self.bind(env)
        self.strong.reset(env)

    def supports_batch(self, venv: Any) -> bool:
        """Where Strong replays batched."""
        return self.strong.supports_batch(venv)

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Bind the vector env's roles for this policy and its Strong."""
        super().start_batch(venv, rows)
        self.strong.start_batch(venv, rows)


class RolloutController(OverStrong):
    """Strong, deviating where the predicted advantage at ``lam`` exceeds ``tau`` (label-free)."""

    group = "learned"

    def __init__(self, model: Any, *, budget: float, lam: float, tau: float,
                 cost_model: str = "p_tokens", max_output_tokens: float, cache: dict | None = None,
                 name: str = "rollout", actions: tuple[str, ...] = ()) -> None:
        if not (budget > 0 and math.isfinite(budget)) or lam < 0 or math.isnan(tau):
            raise ValueError(f"need budget > 0, lam >= 0 and a tau, got {budget}, {lam}, {tau}")
        self.model = model
        self.budget, self.lam, self.tau = float(budget), float(lam), float(tau)
        self.cost_model, self.max_output_tokens = cost_model, float(max_output_tokens)
        self.strong = StrongFromState()
        self.selection, self.requires_tiers = self.strong.selection, self.strong.requires_tiers
        self.optional_tiers = self.strong.optional_tiers
        # Predictions depend on the state only (not on lam or tau): policies of one fit share them.
        self.cache: dict = {} if cache is None else cache
        self.name = name
        #: The action names of the layout the model was fit on ("" = unknown: only Strong's own check applies).
        self.actions = tuple(actions)
        self.label = f"Rollout over Strong (lambda={lam:g}, tau={tau:g})"

    def predictions(self, state: np.ndarray, actions: np.ndarray, strong_action: int,
                    n_actions: int) -> tuple[np.ndarray, ...]:
        """Predicted (d_correct, d_cost / B) of ``actions`` against Strong's action (cached per state) in a layout
        of ``n_actions`` actions."""
        key = (state.tobytes(), strong_action)
        hit = self.cache.get(key)
        if hit is None:
            rows = action_rows(state, actions, strong_action, n_actions)
            out = self.model.predict(rows)
            hit = self.cache[key] = (out[:, 0], out[:, 1])
        return hit

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Strong's action, or the legal action whose predicted advantage beats it by more than ``tau``."""
        a_strong = self.strong.act(observation, action_mask, evidence)
        if math.isinf(self.tau):
            return a_strong
        others = np.array([a for a in np.flatnonzero(action_mask) if a != a_strong], dtype=np.int64)
        if others.size == 0:
            return a_strong
        state = rollout_features(observation, action_mask, evidence, budget=self.budget, cost_model=self.cost_model,
                                 max_output_tokens=self.max_output_tokens)
        d_correct, d_cost = self.predictions(state, others, a_strong, len(action_mask))
        advantage = d_correct - self.lam * d_cost
        best = int(np.argmax(advantage))
        return int(others[best]) if advantage[best] > self.tau else a_strong

    batched = True

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: one model forward pass over every legal non-Strong action of every row.

        Not cached: a stacked forward pass may differ in the last bit from ``act``'s per-state one, and the two
        replays must not read each other's predictions.
        """
        if venv is None:
            raise ValueError(f"{self.name}: act_batch reads the vector env's state; pass venv")
        a_strong = self.strong.act_batch(observations, action_masks, venv)
        if math.isinf(self.tau):
            return a_strong
        n_actions = action_masks.shape[1]
        others = np.asarray(action_masks) > 0
        others[np.arange(len(a_strong)), a_strong] = False
        row, action = np.nonzero(others)  # row-major: each row's actions ascending, as ``act``'s ``others``
        if row.size == 0:
            return a_strong
        states = batch_controller_features(observations, action_masks, venv, budget=self.budget,
                                           cost_model=self.cost_model, max_output_tokens=self.max_output_tokens,
                                           lam=0.0)
        f = states.shape[1]
        x = np.zeros((row.size, f + 2 * n_actions), dtype=np.float32)
        x[:, :f] = states[row]
        at = np.arange(row.size)
        x[at, f + action] = 1.0
        x[at, f + n_actions + a_strong[row]] = 1.0
        out = self.model.predict(x)
        advantage = out[:, 0] - self.lam * out[:, 1]
        # Per row, the first maximum (``np.argmax``); a NaN maximum never beats tau, as in ``act``.
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        best = np.maximum.reduceat(advantage, starts)
        group = np.cumsum(np.r_[False, row[1:] != row[:-1]])
        hit = np.flatnonzero(advantage == best[group])
        _, first = np.unique(row[hit], return_index=True)
        pick = hit[first]
        pick = pick[advantage[pick] > self.tau]
        chosen = a_strong.copy()
        chosen[row[pick]] = action[pick]
        return chosen

    def describe(self) -> dict[str, Any]:
        """Name, label, group and the operating point."""
        return {"name": self.name, "label": self.label, "group": self.group, "kind": "rollout", "lambda": self.lam,
                "tau": self.tau, "budget": self.budget}
