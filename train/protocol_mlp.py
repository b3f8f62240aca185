"""The MLP controller (``train.imitation``) as a protocol ``Method``: one fit serves every lambda of its grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.learned_mlp import MLPController
from coba_env.compiled import CompiledPool

#: The MLP's operating points (the lambda it acts at), stated in advance.
MLP_GRID_LAMBDAS = (0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
#: Training settings used under the protocol (stated in advance; smaller than ``train_mlp``'s defaults so that
#: 25 fits per seed fit the machine: 5 outer folds x (4 inner + 1 refit)).
MLP_PROTOCOL_SETTINGS: dict[str, Any] = {"dagger_rounds": 2, "episodes_per_round": 400, "epochs": 20,
                                         "balance_datasets": True, "tensorboard": False}


@dataclass
class FittedMLP:
    """An MLP checkpoint fit on one fold; ``policy`` acts at the point's lambda with the fold's budget."""

    path: Path

    def policy(self, point: dict[str, float]) -> Policy:
        """The checkpoint acting at ``point["lam"]``."""
        from agents.learned_mlp import load

        controller: MLPController = load(self.path, lam=float(point["lam"]))
        return controller


@dataclass
class MLPMethod:
    """DAgger imitation of the cost-aware oracle (``train.imitation.train_mlp``), dataset-balanced."""

    name: str = "mlp"
    lambdas: tuple[float, ...] = MLP_GRID_LAMBDAS
    settings: dict[str, Any] = field(default_factory=lambda: dict(MLP_PROTOCOL_SETTINGS))

    def grid(self) -> list[dict[str, float]]:
        """One point per lambda of ``lambdas``."""
        return [{"lam": float(v)} for v in self.lambdas]

    def fallback(self) -> dict[str, float] | None:
        """None: without a qualifying point the protocol takes the highest item-pooled difference."""
        return None

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedMLP:
        """Train on ``train_ids`` at ``budget``; training lambdas are the grid's."""
        from train.imitation import train_mlp

        path = train_mlp(compiled, out_dir, episode_ids=[int(i) for i in train_ids], lambdas=self.lambdas,
                         seed=seed, progress=progress, budget=budget, **self.settings)
        return FittedMLP(Path(path))
