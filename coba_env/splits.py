"""Outer splits of the learning protocols: leave-one-dataset-out, and K folds over items where it cannot run."""

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


#: The categorical fields K-fold stratifies by, finest first: the first with two or more values is used.
STRATA_FIELDS = ("category", "subject", "dataset")


def fold_strata(pool: CompiledPool) -> tuple[str | None, list[str]]:
    """(the field, each item's stratum) K-fold stratifies the items of ``pool`` by (``STRATA_FIELDS``; a missing
    value is its own stratum); (None, []) when no field has two values."""
    from coba_env.problems import problems_of

    problems = problems_of(pool)
    for name in STRATA_FIELDS:
        values = [v if isinstance(v, str) else "(none)" for v in problems[name].tolist()]
        if len(set(values)) >= 2:
            return name, values
    return None, []


def item_kfold(pool: CompiledPool, k: int = 5, seed: int = 0) -> list[Split]:
    """K folds over the items of ``pool`` (every generator of an item on one side; held_out ``fold0`` ..), shuffled
    by ``seed`` and stratified by the finest category with two or more values (``fold_strata``), for pools where
    leave-one-dataset-out cannot run."""
    from sklearn.model_selection import KFold, StratifiedKFold

    keys = list(dict.fromkeys(zip(pool.dataset.tolist(), pool.item_id.tolist(), strict=True)))
    if not 2 <= k <= len(keys):
        raise ValueError(f"K-fold needs 2 <= K <= the number of items ({len(keys)}), got K = {k}")
    field, strata = fold_strata(pool)
    if field is not None and min(strata.count(s) for s in set(strata)) >= k:
        folds = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(keys)), strata)
    else:  # no category, or one too small to appear in every fold
        folds = KFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(keys)))
    fold_of = np.empty(len(keys), dtype=np.int64)
    for i, (_, held) in enumerate(folds):
        fold_of[held] = i
    index = {key: i for i, key in enumerate(keys)}
    episode_fold = fold_of[[index[key] for key in zip(pool.dataset.tolist(), pool.item_id.tolist(), strict=True)]]
    return [Split(held_out=f"fold{i}", train_episode_ids=pool.episode_ids[episode_fold != i],
                  eval_episode_ids=pool.episode_ids[episode_fold == i]) for i in range(k)]
