"""A Discrete action space whose ``sample()`` draws only actions that are legal now."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces


class MaskedDiscrete(spaces.Discrete):
    """``Discrete(n)`` that, when ``sample()`` is called without a mask, uses the owning env's current mask.

    Random agents, ``gymnasium.utils.env_checker.check_env`` and SB3's ``check_env`` then only draw
    legal actions. The mask provider is held weakly and dropped on pickling, so saving the space (SB3
    stores it in every model zip) never drags the environment and its pool along.
    """

    def __init__(self, n: int, mask_provider: Callable[[], np.ndarray] | None = None, seed: Any = None) -> None:
        super().__init__(n, seed=seed)
        self._provider_ref = weakref.WeakMethod(mask_provider) if mask_provider is not None else None

    def sample(self, mask: np.ndarray | None = None, probability: np.ndarray | None = None) -> np.int64:
        """A random action; legal under the env's current mask unless a mask or probability is given."""
        if mask is None and probability is None and self._provider_ref is not None:
            provider = self._provider_ref()
            if provider is not None:
                current = provider()
                if current is not None and current.any():
                    mask = current.astype(np.int8)
        return super().sample(mask=mask, probability=probability)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_provider_ref"] = None
        return state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, spaces.Discrete) and self.n == other.n and self.start == other.start

    __hash__ = spaces.Discrete.__hash__
