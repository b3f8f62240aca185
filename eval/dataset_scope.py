"""Evaluation restricted to some datasets (``--datasets a,b``) and the in-sample warning for checkpoints.

A trained controller evaluated on datasets it was trained on measures fit, not generalization: the bench and
the sweep print one warning line per such checkpoint on stderr. Checkpoints record their training datasets in
``controller.json`` (``train_datasets``; MLP checkpoints also ``datasets``); a controller without the field (an
old checkpoint, a bare SB3 zip) is reported as trained on unknown datasets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coba_env.compiled import CompiledPool

#: controller.json fields naming the training datasets, in order of preference.
TRAIN_DATASET_FIELDS = ("train_datasets", "datasets")


def restrict_datasets(compiled: CompiledPool, datasets: Sequence[str] | None) -> CompiledPool:
    """The episodes of ``compiled`` whose dataset is in ``datasets`` (all when None); unknown names raise."""
    if datasets is None:
        return compiled
    wanted = list(dict.fromkeys(str(d).strip() for d in datasets if str(d).strip()))
    present = list(dict.fromkeys(compiled.dataset.tolist()))
    if not wanted:
        raise ValueError(f"--datasets names no dataset; the pool has {', '.join(present)}")
    unknown = [d for d in wanted if d not in present]
    if unknown:
        raise ValueError(f"--datasets: unknown dataset(s) {', '.join(unknown)}; the pool has {', '.join(present)}")
    return compiled.select(np.isin(compiled.dataset, wanted))


def training_datasets(policy: Any) -> list[str] | None:
    """The datasets a learned policy was trained on, from its checkpoint's configuration; None when unknown."""
    meta = getattr(policy, "meta", None) or getattr(policy, "config", None)
    if isinstance(meta, dict):
        for key in TRAIN_DATASET_FIELDS:
            value = meta.get(key)
            if isinstance(value, list) and all(isinstance(d, str) for d in value):
                return value
    return None


def in_sample_warnings(policies: Sequence[Any], datasets: Sequence[str]) -> list[str]:
    """One line per learned policy evaluated on ``datasets`` it was trained on (or whose training is unknown).

    A controller run at several lambdas (``mlp@0.1``, ``mlp@0.3``) is named once, without its lambda.
    """
    lines = []
    evaluated = list(dict.fromkeys(datasets))
    seen = set()
    for policy in policies:
        name = str(policy.name).split("@")[0]
        if getattr(policy, "group", None) != "learned" or name in seen:
            continue
        seen.add(name)
        trained = training_datasets(policy)
        if trained is None:
            lines.append(f"warning: {name}: training datasets unknown (no 'train_datasets' in its "
                         f"checkpoint); results on {', '.join(evaluated)} may be in-sample")
            continue
        overlap = [d for d in evaluated if d in trained]
        if overlap:
            lines.append(f"warning: {name} is evaluated on datasets it was trained on: {', '.join(overlap)} "
                         "(in-sample; use --datasets to hold them out)")
    return lines
