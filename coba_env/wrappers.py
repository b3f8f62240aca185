"""Wrappers for algorithms without action masks (plain PPO, A2C, DQN): an illegal action is replaced, not raised.

``CoBaEnv.step`` raises ``ValueError`` on a masked action (MaskablePPO never picks one). An unmasked learner
does, so ``LegalActionWrapper`` replaces it by a legal fallback before the env sees it. The rule: STOP when
STOP is legal (it is, once a candidate has been revealed), else the lowest-numbered legal action (SAMPLE at
the start of an episode). The step's reward gets ``illegal_penalty`` (default 0.0) subtracted and its info
``illegal_action=True`` and ``requested_action`` (the action asked for); a legal action passes unchanged with
``illegal_action=False``. ``action_masks()`` is still answered, so MaskablePPO can run on the wrapped env too.

Example::

    import gymnasium as gym
    from stable_baselines3 import PPO
    from coba_env.wrappers import LegalActionWrapper

    env = LegalActionWrapper(gym.make("coba/Replay-v0", pool="tiny", order="shuffle"), illegal_penalty=0.1)
    PPO("MlpPolicy", env, n_steps=64, seed=0).learn(256)
"""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

__all__ = ["LegalActionWrapper", "legal_fallback"]


def legal_fallback(mask: np.ndarray) -> int:
    """The action played instead of an illegal one: STOP (the last action) if legal, else the first legal one."""
    legal = np.flatnonzero(np.asarray(mask, dtype=bool))
    if len(legal) == 0:
        raise ValueError("the action mask allows no action")
    stop = len(mask) - 1
    return stop if mask[stop] else int(legal[0])


class LegalActionWrapper(gym.Wrapper):
    """Replace an illegal action by ``legal_fallback(mask)`` and subtract ``illegal_penalty`` from its reward."""

    def __init__(self, env: gym.Env, illegal_penalty: float = 0.0) -> None:
        super().__init__(env)
        penalty = float(illegal_penalty)
        if not (math.isfinite(penalty) and penalty >= 0):
            raise ValueError(f"illegal_penalty must be a finite number >= 0, got {illegal_penalty!r}")
        self.illegal_penalty = penalty

    def action_masks(self) -> np.ndarray:
        """The wrapped env's legal actions (so maskable algorithms still see them)."""
        return np.asarray(self.env.unwrapped.action_masks(), dtype=bool)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step with ``action``, or with the fallback when ``action`` is not legal now."""
        mask = self.action_masks()
        requested = int(np.asarray(action).reshape(()))
        illegal = not (0 <= requested < len(mask) and mask[requested])
        played = legal_fallback(mask) if illegal else requested
        obs, reward, terminated, truncated, info = self.env.step(played)
        info = dict(info)
        info["illegal_action"] = illegal
        info["requested_action"] = requested
        if illegal:
            reward = float(reward) - self.illegal_penalty
        return obs, reward, terminated, truncated, info
