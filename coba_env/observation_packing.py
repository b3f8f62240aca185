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
    #: The episode's problem features (the env option ``problem_features``; empty when off), set by ``reset``.
    _prefix: list[float]

    def _init_packing(self, n_features: int, block: bool = False, problem: Any = None) -> None:
        """Pack observations of ``n_features`` floats from now on; ``block``: each starts with the item grouping's
        per-generator block ``_block``; ``problem`` (a ``coba_env.problem_features.ProblemBlock``, the env option):
        before that, with the episode's problem features ``_prefix`` (``_put_problem``)."""
        #: Each episode's problem features as Python floats, packed as the rest (None: the option is off).
        self._problem_rows = None if problem is None else problem.values.tolist()
        self._prefix = []
        self._n_obs, self._packs_block = n_features, block
        self._set_packer()

    def _set_packer(self) -> None:
        """The struct packer and the ``_as_observation`` form (chosen once here, not tested per step: unpacking even
        an empty block costs a pair step ~1%)."""
        self._pack_observation = struct.Struct(f"{self._n_obs}f").pack_into
        if self._problem_rows is not None:
            self._as_observation = self._as_prefixed_observation
        elif self._packs_block:
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

    def _put_problem(self, first: np.ndarray, episode: int) -> None:
        """Make ``episode``'s problem features the prefix of every observation from now on, and of ``first``."""
        self._prefix = self._problem_rows[episode]
        first[:len(self._prefix)] = self._prefix

    def _as_prefixed_observation(self, obs: list[float]) -> np.ndarray:
        """The observation array of the problem features, the per-generator block (if any), then ``obs``."""
        out = np.empty(self._n_obs, np.float32)
        self._pack_observation(out, 0, *self._prefix, *self._block, *obs)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_pack_observation"]  # a struct.Struct's method does not pickle: rebuilt by __setstate__
        state.pop("_as_observation", None)  # a bound method of this env, set again by __setstate__
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._set_packer()
