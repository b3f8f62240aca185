"""Training one controller of a kind (``train_kind``) and the action mix of replayed episodes.

Leave-one-dataset-out evaluation is the learning protocol (``train.protocol``): ``coba train KIND --lodo``.
The earlier LODO run here (the budget of the full pool given to the MLP, lambdas read off the held-out
folds, a "not dominated" verdict) is withdrawn (issue 19).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.checkpoint import KINDS
from train.imitation import DEFAULT_LAMBDAS


def train_kind(kind: str, compiled: Any, out_dir: str | Path, *, episode_ids: np.ndarray | None = None,
               lambdas: Sequence[float] | None, cost_model: str, seed: int, progress: bool,
               budget: float | None = None, options: dict[str, Any]) -> Path:
    """Train one controller of ``kind`` on ``episode_ids`` (None: every episode); returns its checkpoint directory.

    ``lambdas`` None: each trainer's default (MLP: ``DEFAULT_LAMBDAS``; PPO: its own ``lambda_range``).
    ``budget`` (MLP only) None: the MLP trainer's default budget."""
    ids = None if episode_ids is None else episode_ids.tolist()
    if kind == "mlp":
        from train.imitation import train_mlp

        return train_mlp(compiled, out_dir, episode_ids=ids, lambdas=lambdas or DEFAULT_LAMBDAS,
                         cost_model=cost_model, seed=seed, progress=progress, budget=budget, **options)
    if kind == "ppo":
        from train.ppo import train_ppo

        if lambdas:
            options = {**options, "lambda_range": (float(min(lambdas)), float(max(lambdas)))}
        return train_ppo(compiled, out_dir, episode_ids=ids, cost_model=cost_model, seed=seed,
                         progress=progress, **options)
    raise ValueError(f"unknown controller kind {kind!r}; expected one of {list(KINDS)}")


def action_mix(records: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Per (policy, held-out dataset): mean actions of each type per episode and the share of episodes that
    stopped after one sample and no verification (a collapse to greedy shows as a share near 1)."""
    frame = records[records["policy"].isin(policies)].copy()
    frame["greedy_stop"] = (frame["n_samples"] == 1) & (frame[["n_v1", "n_v2", "n_v3"]].sum(axis=1) == 0)
    out = frame.groupby(["policy", "dataset"], sort=False).agg(
        samples=("n_samples", "mean"), v1=("n_v1", "mean"), v2=("n_v2", "mean"), v3=("n_v3", "mean"),
        greedy_stop_share=("greedy_stop", "mean"), acc=("correct", "mean"), p_tokens=("p_tokens", "mean"))
    out["acc"] *= 100.0
    return out.reset_index()
