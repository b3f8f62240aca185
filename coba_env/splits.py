"""Leave-one-dataset-out splits: train on all datasets but one, evaluate on the held-out one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coba_env.compiled import CompiledPool


@dataclass(frozen=True)
class Split:
    """One fold: the held-out dataset and the episode ids (the pool's episode_id) on each side."""

    held_out: str
    train_episode_ids: np.ndarray
    eval_episode_ids: np.ndarray


def leave_one_dataset_out(pool: CompiledPool) -> list[Split]:
    """One split per dataset, in order of first appearance; train and eval never share an item."""
    datasets = list(dict.fromkeys(pool.dataset.tolist()))
    if len(datasets) < 2:
        raise ValueError(f"leave-one-dataset-out needs at least 2 datasets, the pool has {datasets}")
    splits = []
    for name in datasets:
        held = pool.dataset == name
        splits.append(Split(held_out=name, train_episode_ids=pool.episode_ids[~held],
                            eval_episode_ids=pool.episode_ids[held]))
    return splits
