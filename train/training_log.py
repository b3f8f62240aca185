"""Training logs in SB3's formats: TensorBoard event files and ``progress.csv`` under ``OUT/tb/NAME_<run>``.

``coba train ppo`` logs through SB3 into ``OUT/tb/ppo_<run>`` (``TrainingMonitor``: progress bar, the scalars
below and the snapshots); ``run_logger(out, "mlp")`` gives the MLP trainer (``train/imitation.py``) the same
layout (one new ``mlp_<run>`` folder per run, earlier runs kept), with a CSV beside the event file so the
scalars read without TensorBoard.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, configure
from stable_baselines3.common.utils import get_latest_run_id

from coba_env.costs import COST_MEASURES
from pools.atomic_write import atomic_write

#: Folder of the training logs inside a checkpoint directory (as ``train.ppo.TENSORBOARD_DIR``).
LOG_DIR = "tb"


def run_logger(out_dir: str | Path, name: str) -> Logger:
    """A logger writing TensorBoard events and ``progress.csv`` into ``out_dir/tb/<name>_<next run id>``."""
    root = Path(out_dir) / LOG_DIR
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}_{get_latest_run_id(str(root), name) + 1}"
    return configure(str(folder), ["csv", "tensorboard"])


class TrainingMonitor(BaseCallback):
    """Progress bar, TensorBoard scalars (steps per second, env share, accuracy, cost, action mix) and snapshots."""

    def __init__(self, checkpoint_dir: Path, checkpoint_every: int, total_timesteps: int, *,
                 progress: bool = True) -> None:
        super().__init__(verbose=0)
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.total_timesteps = total_timesteps
        self.progress = progress
        self._next_checkpoint = checkpoint_every
        self._bar: Any = None

    def _on_training_start(self) -> None:
        self._start = time.perf_counter()
        self._reset_counts()
        if self.progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total_timesteps, desc="ppo", unit="step", smoothing=0.1)

    def _reset_counts(self) -> None:
        self._actions = np.zeros(self.training_env.action_space.n, dtype=np.int64)
        self._correct = self._episodes = 0
        self._cost = 0.0

    def _on_step(self) -> bool:
        self._actions += np.bincount(np.asarray(self.locals["actions"]).ravel(), minlength=len(self._actions))
        dones = np.flatnonzero(self.locals["dones"])
        if len(dones):
            infos = self.locals["infos"]
            budget = self.training_env.venv.budget
            cost_k = self.training_env.venv.cost_k
            for i in dones.tolist():
                info = infos[i]
                self._correct += bool(info.get("correct", False))
                self._cost += info["costs"][COST_MEASURES[cost_k]] / budget if "costs" in info else 0.0
            self._episodes += len(dones)
        if self._bar is not None:
            self._bar.update(self.training_env.num_envs)
        return True

    def _on_rollout_end(self) -> None:
        elapsed = time.perf_counter() - self._start
        env: Any = self.training_env  # a train.sb3_vec_env.CoBaSB3VecEnv
        self.logger.record("time/steps_per_second", self.num_timesteps / elapsed if elapsed > 0 else 0.0)
        self.logger.record("time/env_share", env.env_share(elapsed))
        if self._episodes:
            self.logger.record("rollout/accuracy", self._correct / self._episodes)
            self.logger.record("rollout/cost_over_budget", self._cost / self._episodes)
        total = max(int(self._actions.sum()), 1)
        for name, count in zip(env.venv.layout.names, self._actions.tolist(), strict=True):
            self.logger.record(f"rollout/action_share/{name}", count / total)
        if self._bar is not None and self._episodes:
            self._bar.set_postfix(acc=f"{self._correct / self._episodes:.3f}",
                                  cost=f"{self._cost / self._episodes:.3f}B")
        self._reset_counts()

    def _on_rollout_start(self) -> None:
        # Called after each update: the weights saved here are the ones the next rollout will use.
        if self.num_timesteps >= self._next_checkpoint:
            atomic_write(self.checkpoint_dir / f"step_{self.num_timesteps:010d}.zip", self.model.save)
            while self._next_checkpoint <= self.num_timesteps:
                self._next_checkpoint += self.checkpoint_every

    def _on_training_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
