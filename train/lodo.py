"""Training one controller of a kind (``train_kind``, the kind's declared trainer) and the action mix of replayed
episodes.

Leave-one-dataset-out evaluation is the learning protocol (``train.protocol``): ``coba train KIND --lodo``.
The earlier LODO run here (the budget of the full pool given to the MLP, lambdas read off the held-out
folds, a "not dominated" verdict) is withdrawn (issue 19).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from agents.controller_kinds import controller_kind, resolve


def train_kind(kind: str, compiled: Any, out_dir: str | Path, *, grouping: str = "pair",
               datasets: Sequence[str] | None = None, episode_ids: Sequence[int] | None = None,
               lambdas: Sequence[float] | None = None, cost_model: str = "p_tokens", seed: int = 0,
               progress: bool = True, options: dict[str, Any] | None = None) -> Path:
    """Train one controller of ``kind`` (its declared trainer, ``agents/controllers.yaml``) on the env of
    ``grouping`` over ``datasets`` / ``episode_ids`` (None: every one); returns its checkpoint directory.

    ``lambdas`` None: the trainer's default (MLP: ``DEFAULT_LAMBDAS``; PPO: its own ``lambda_range``)."""
    spec = controller_kind(kind)
    if spec.trainer is None:
        raise ValueError(f"{kind} trains under the learning protocol only (coba train {kind} --lodo)")
    given = {"lambdas": list(lambdas)} if lambdas else {}
    return resolve(spec.trainer)(compiled, out_dir, grouping=grouping, datasets=datasets, episode_ids=episode_ids,
                                 cost_model=cost_model, seed=seed, progress=progress, **given, **(options or {}))


def action_mix(records: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Per (policy, held-out dataset): mean actions of each type per episode (samples, then each verifier's calls
    by its record column ``n_<name>``, shown as ``<name>``) and the share of episodes that stopped after one sample
    and no verification (a collapse to greedy shows as a share near 1)."""
    frame = records[records["policy"].isin(policies)].copy()
    verifiers = [c for c in frame.columns if c.startswith("n_") and c not in ("n_actions", "n_samples")]
    frame["greedy_stop"] = (frame["n_samples"] == 1) & (frame[verifiers].sum(axis=1) == 0)
    out = frame.groupby(["policy", "dataset"], sort=False).agg(
        samples=("n_samples", "mean"), **{c.removeprefix("n_"): (c, "mean") for c in verifiers},
        greedy_stop_share=("greedy_stop", "mean"), acc=("correct", "mean"), p_tokens=("p_tokens", "mean"))
    out["acc"] *= 100.0
    return out.reset_index()
