"""Feature lists to float32 observation arrays, for the one-episode envs (a mixin of ``CoBaEnv``).

The step keeps its features as Python floats (cheap to patch) and packs them into a new float32 array with
``struct.pack_into``: native ``"f"`` is C's double -> float cast, numpy's own (out-of-range values give inf, as
numpy does; ``tests/test_env.py`` pins it bit for bit), several times cheaper per value than ``np.fromiter``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

__all__ = ["ObservationPacking"]


class ObservationPacking:
    """``_as_observation`` for a fixed observation length, and pickling that rebuilds the packer."""

    _n_obs: int
    _block: list[float]

    def _init_packing(self, n_features: int, block: bool = False) -> None:
        """Pack observations of ``n_features`` floats from now on; ``block``: each starts with the item grouping's
        per-generator block ``_block``."""
        self._n_obs, self._packs_block = n_features, block
        self._pack_observation = struct.Struct(f"{n_features}f").pack_into
        if block:  # chosen once here, not tested per step: unpacking even an empty block costs a pair step ~1%
            self._as_observation = self._as_block_observation

    def _as_observation(self, obs: list[float]) -> np.ndarray:
        """The observation array of the feature list ``obs``."""
        out = np.empty(self._n_obs, np.float32)
        self._pack_observation(out, 0, *obs)
        return out

    def _as_block_observation(self, obs: list[float]) -> np.ndarray:
        """The observation array of the per-generator block ``_block``, then the pooled features ``obs``."""
        out = np.empty(self._n_obs, np.float32)
        self._pack_observation(out, 0, *self._block, *obs)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_pack_observation"]  # a struct.Struct's method does not pickle: rebuilt by __setstate__
        state.pop("_as_observation", None)  # a bound method of this env, set again by __setstate__
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_packing(self._n_obs, self._packs_block)
