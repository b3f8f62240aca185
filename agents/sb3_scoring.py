"""Scoring observations with a stable-baselines3 policy network, and the best legal action of each row.

Shared by the PPO checkpoint policy (``agents.learned_ppo``) and the policy over any SB3 ``.zip``
(``agents.learned_sb3``): actor-critic networks score actions by their logits, DQN by its Q-values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.checkpoint import LAMBDA_INDEX


def action_scores(torch: Any, net: Any, observations: np.ndarray, lam: float | None) -> np.ndarray:
    """Scores [B, A] of ``net`` for ``observations`` [B, F], with the lambda feature set to ``lam`` if given."""
    obs = np.array(observations, dtype=np.float32, copy=True)
    if lam is not None:
        obs[:, LAMBDA_INDEX] = lam
    with torch.no_grad():
        x = torch.as_tensor(obs)
        if hasattr(net, "q_net"):  # DQN: action values
            return net.q_net(x).numpy()
        features = net.extract_features(x, net.pi_features_extractor)
        return net.action_net(net.mlp_extractor.forward_actor(features)).numpy()


def best_legal_actions(scores: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
    """The highest-scoring legal action of each row (the first on ties); every row must allow one action."""
    legal = np.atleast_2d(action_masks).astype(bool)
    if not legal.any(axis=1).all():
        raise ValueError("every action mask must allow at least one action")
    return np.where(legal, scores, -np.inf).argmax(axis=1)
