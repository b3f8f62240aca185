"""Training logs in SB3's formats: TensorBoard event files and ``progress.csv`` under ``OUT/tb/NAME_<run>``.

``coba train ppo`` logs through SB3 into ``OUT/tb/ppo_<run>``; ``run_logger(out, "mlp")`` gives the MLP trainer
(``train/imitation.py``) the same layout (one new ``mlp_<run>`` folder per run, earlier runs kept), with a CSV
beside the event file so the scalars read without TensorBoard.
"""

from __future__ import annotations

from pathlib import Path

from stable_baselines3.common.logger import Logger, configure
from stable_baselines3.common.utils import get_latest_run_id

#: Folder of the training logs inside a checkpoint directory (as ``train.ppo.TENSORBOARD_DIR``).
LOG_DIR = "tb"


def run_logger(out_dir: str | Path, name: str) -> Logger:
    """A logger writing TensorBoard events and ``progress.csv`` into ``out_dir/tb/<name>_<next run id>``."""
    root = Path(out_dir) / LOG_DIR
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}_{get_latest_run_id(str(root), name) + 1}"
    return configure(str(folder), ["csv", "tensorboard"])
