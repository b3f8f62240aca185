"""An SB3 ``VecEnv`` over ``CoBaVectorEnv``, with action masks for sb3-contrib's MaskablePPO and an env clock.

MaskablePPO fetches masks with ``get_action_masks(env)``, which for a ``VecEnv`` is
``np.stack(env.env_method("action_masks"))`` after checking ``env.has_attr("action_masks")``; this adapter
answers both from the batched env in one call (no per-sub-env loop). Episodes reset in the same step
(the vector env's SAME_STEP autoreset, which is SB3's convention): a finished sub-env's info carries
``terminal_observation``, a Monitor-style ``episode`` record (return ``r``, length ``l``, seconds ``t``) so SB3
logs ``rollout/ep_rew_mean`` without a Monitor wrapper, and the finished episode's ``correct``,
``selected_candidate``, ``final_episode``, ``final_steps``, ``lambda`` and ``costs`` (every cost measure).

The vector env is ``CoBaVectorEnv(num_envs, pool, grouping=...)`` of either grouping ("pair": the replay env,
"item": the route env, one episode per problem with a SAMPLE per generator).

``order="balanced"`` (this adapter's own order, on top of the env's "sequential"/"shuffle"/"random") draws every
new episode dataset first: a training dataset uniformly at random, then the next episode of that dataset's own
shuffled stream (``DatasetBalancedOrder``, installed as the vector env's episode stream), so each dataset is
drawn equally often however many items it has.
The reported objective is the macro accuracy (the mean over datasets), and with "shuffle" a dataset's share of
the training episodes is its share of the items (MATH-500 is 83% of a leave-rgym_hard-out fold's episodes).

``env_seconds`` accumulates the wall time spent inside ``reset``, ``step_async``, ``step_wait`` and the mask
fetch, ``env_cpu_seconds`` the process CPU time there: the environment's share of a training run is
``env_seconds`` over the run's wall time (or CPU over CPU, steadier on a shared machine).

Example::

    from sb3_contrib import MaskablePPO
    env = CoBaSB3VecEnv(256, "tiny", lambda_range=(0.0, 1.0), order="shuffle")
    model = MaskablePPO("MlpPolicy", env, n_steps=16, seed=0).learn(8192)
    print(env.env_share(wall_seconds))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from coba_env.costs import cost_record
from coba_env.vector_env import CoBaVectorEnv

#: The adapter's dataset-balanced episode order (``DatasetBalancedOrder``).
BALANCED = "balanced"

#: Final-episode fields of the vector env copied into a finished sub-env's info.
_FINAL_KEYS = ("correct", "selected_candidate", "final_episode", "final_steps")


class DatasetBalancedOrder:
    """The episode stream of a vector env (either grouping) drawn dataset first: a dataset uniformly, then its next
    shuffled episode.

    Every dataset of the (restricted) pool is drawn with probability 1/K; within a dataset the episodes follow
    their own permutation, renewed each pass, so a dataset's episodes are all seen once before any repeats.
    ``install`` makes it the vector env's stream (its ``order`` then reads "balanced"); the random stream is
    the vector env's (``np_random``), and ``restart`` (on a seeded reset) starts every dataset's stream anew.
    """

    def __init__(self, venv: CoBaVectorEnv) -> None:
        self.venv = venv
        datasets = np.asarray(venv.pool.dataset).astype(str)
        self.datasets = list(dict.fromkeys(datasets.tolist()))
        self._members = [np.flatnonzero(datasets == name) for name in self.datasets]
        self.restart()

    @classmethod
    def install(cls, venv: CoBaVectorEnv) -> DatasetBalancedOrder:
        """The order of ``venv``'s new episodes from now on (the vector env draws them through ``_next_episodes``)."""
        order = cls(venv)
        venv._next_episodes = order.next_episodes  # type: ignore[method-assign]
        venv.order = BALANCED
        return order

    def restart(self) -> None:
        """Start every dataset's stream anew (a seeded reset)."""
        self._stream: list[np.ndarray | None] = [None] * len(self._members)
        self._position = [0] * len(self._members)

    def next_episodes(self, k: int) -> np.ndarray:
        """The next ``k`` episodes."""
        rng = self.venv.np_random
        picks = rng.integers(len(self._members), size=k)
        out = np.empty(k, dtype=np.int64)
        for i, d in enumerate(picks.tolist()):
            members, stream = self._members[d], self._stream[d]
            if stream is None or self._position[d] >= len(members):
                stream = self._stream[d] = members[rng.permutation(len(members))]
                self._position[d] = 0
            out[i] = stream[self._position[d]]
            self._position[d] += 1
        return out


class CoBaSB3VecEnv(VecEnv):
    """SB3 view of ``CoBaVectorEnv(num_envs, pool, **env_kwargs)`` (either ``grouping``; order "shuffle" unless
    given) or of ``venv``. ``order="balanced"`` draws each dataset equally often (``DatasetBalancedOrder``)."""

    def __init__(self, num_envs: int = 1, pool: Any = None, *, venv: CoBaVectorEnv | None = None,
                 **env_kwargs: Any) -> None:
        if venv is not None and env_kwargs:
            raise ValueError(f"pass either a ready venv or env keyword arguments, not both: {sorted(env_kwargs)}")
        #: The dataset-balanced episode order, when asked for (None: the vector env's own).
        self.balanced: DatasetBalancedOrder | None = None
        if venv is None:
            # Shuffled episodes by default: "sequential" (the env's default) would feed every sub-env the
            # same dataset-blocked stream, so each rollout would see one dataset only.
            env_kwargs.setdefault("order", "shuffle")
            balanced = env_kwargs["order"] == BALANCED
            if balanced:
                env_kwargs["order"] = "shuffle"
            venv = CoBaVectorEnv(num_envs, pool, **env_kwargs)
            if balanced:
                self.balanced = DatasetBalancedOrder.install(venv)
        self.venv = venv
        single = self.venv.single_observation_space
        n_actions = int(self.venv.single_action_space.n)
        # A plain Discrete: SB3 pickles the action space into every model zip.
        super().__init__(self.venv.num_envs, single, spaces.Discrete(n_actions))
        self.env_seconds = 0.0
        self.env_cpu_seconds = 0.0
        self._actions: np.ndarray | None = None
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._lams = np.array(self.venv.lams, dtype=np.float64)
        self._t0 = time.perf_counter()

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecEnvObs:
        """Reset every sub-env; the seed from ``seed()`` and options from ``set_options()`` apply once."""
        start, cpu = time.perf_counter(), time.process_time()
        seed = self._seeds[0] if self._seeds and self._seeds[0] is not None else None
        options = self._options[0] if self._options and self._options[0] else None
        if seed is not None and self.balanced is not None:
            self.balanced.restart()  # a seeded reset restarts every dataset's stream too
        obs, info = self.venv.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self._lams[:] = self.venv.lams
        masks = info["action_mask"]
        self.reset_infos = [{"action_mask": masks[i]} for i in range(self.num_envs)]
        self._clock(start, cpu)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Store the actions for ``step_wait``."""
        start, cpu = time.perf_counter(), time.process_time()
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        self._clock(start, cpu)

    def step_wait(self) -> VecEnvStepReturn:
        """Step all sub-envs; finished ones reset in the same step (their info holds the final values)."""
        start, cpu = time.perf_counter(), time.process_time()
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        obs, reward, terminated, truncated, info = self.venv.step(self._actions)
        self._actions = None
        dones = terminated | truncated
        self._returns += reward
        self._lengths += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        done_rows = np.flatnonzero(dones)
        if len(done_rows):
            # Columns are converted to Python lists once, not element by element.
            final_obs = info["final_observation"][done_rows]
            returns = self._returns[done_rows].tolist()
            lengths = self._lengths[done_rows].tolist()
            lams = self._lams[done_rows].tolist()
            timeouts = (truncated & ~terminated)[done_rows].tolist()
            finals = {key: info[key][done_rows].tolist() for key in _FINAL_KEYS if key in info}
            costs = info["final_costs"][done_rows].tolist() if "final_costs" in info else None
            elapsed = round(time.perf_counter() - self._t0, 6)
            for j, i in enumerate(done_rows.tolist()):
                record = infos[i]
                record["terminal_observation"] = final_obs[j]
                record["TimeLimit.truncated"] = timeouts[j]
                record["episode"] = {"r": returns[j], "l": lengths[j], "t": elapsed}
                record["lambda"] = lams[j]
                for key, values in finals.items():
                    record[key] = values[j]
                if costs is not None:
                    record["costs"] = cost_record(costs[j])
            self._returns[done_rows] = 0.0
            self._lengths[done_rows] = 0
            self._lams[done_rows] = self.venv.lams[done_rows]
        self._clock(start, cpu)
        return obs, reward.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        """Legal actions, bool [num_envs, n_actions]."""
        start, cpu = time.perf_counter(), time.process_time()
        masks = self.venv.action_masks()
        self._clock(start, cpu)
        return masks

    # ------------------------------------------------------------------ VecEnv plumbing
    def close(self) -> None:
        """Nothing to release."""

    def has_attr(self, attr_name: str) -> bool:
        """True for ``action_masks`` and for attributes of the vector env."""
        return attr_name == "action_masks" or hasattr(self.venv, attr_name) or hasattr(self.venv.single, attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The vector env's attribute (or its template single env's), once per requested sub-env."""
        source = self.venv if hasattr(self.venv, attr_name) else self.venv.single
        value = getattr(source, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute on the vector env (it is shared by all sub-envs)."""
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """``action_masks`` is answered per sub-env from one batched call; other methods run on the vector env."""
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            masks = self.action_masks()
            return list(masks) if len(idx) == self.num_envs else list(masks[idx])
        result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [result for _ in idx]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """No sub-env is wrapped."""
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """No images: the env renders text only."""
        return [None for _ in range(self.num_envs)]

    def _clock(self, start: float, cpu: float) -> None:
        self.env_seconds += time.perf_counter() - start
        self.env_cpu_seconds += time.process_time() - cpu

    def env_share(self, wall_seconds: float) -> float:
        """The share of ``wall_seconds`` spent inside the environment."""
        return self.env_seconds / wall_seconds if wall_seconds > 0 else float("nan")

    def env_cpu_share(self, cpu_seconds: float) -> float:
        """The share of ``cpu_seconds`` (process CPU time) spent inside the environment."""
        return self.env_cpu_seconds / cpu_seconds if cpu_seconds > 0 else float("nan")
