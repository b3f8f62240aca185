"""A structured search over CoBa's own parameters (issue 27), as a protocol method (``coba train coba_search``).

Reads top to bottom:

1. ``SPACE``: CoBa-Routed's parameters (``agents.coba.CoBaPolicy``): warm-up K, N_max, strong routes, the
   stopping share and cheap-judge threshold, V2 on the warm-up; ``skip_unanimous_routes`` stays on, as in
   CoBa-Strong.
2. ``search``: Optuna's TPE sampler (seeded with the protocol seed), ``N_TRIALS`` trials, CoBa-Strong's own
   parameters enqueued as the first trial. Objective on the fit's training episodes only: minimise the
   item-pooled p_tokens ratio to CoBa-Strong subject to (Optuna constraints) item-pooled and macro accuracy
   differences >= 0 points. Every trial replays the configuration batched; a configuration's per-item
   results on a dataset are cached, so folds that share a training dataset share its replays. The search
   machinery is ``train.param_search`` (shared with ``train.route_search``).
3. ``CoBaSearchMethod``: grid point ``margin`` m in ``SEARCH_MARGINS``: the cheapest trial whose in-sample
   item-pooled and macro differences are both >= m points (CoBa-Strong's parameters when none is). Fallback
   m = infinity: CoBa-Strong's parameters. The protocol's nested selection chooses m.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.coba import CoBaPolicy
from agents.learned_rollout import STRONG_PARAMS
from coba_env.compiled import CompiledPool
from train import param_search

#: Stated in advance (docs/LEARNING.md, "Protocol").
N_TRIALS = 100
SEARCH_MARGINS: tuple[float, ...] = (0.0, 0.5, 1.0)
#: name -> (kind, low, high, step) for ``trial.suggest_*``; "cat" lists the choices.
SPACE: param_search.Space = {
    "warmup_k": ("int", 1, 4, 1),
    "n_max": ("int", 2, 16, 1),
    "strong_routes": ("int", 0, 6, 1),
    "share_min": ("float", 0.4, 1.0, 0.05),
    "s1_min": ("float", 0.3, 0.95, 0.05),
    "use_v2": ("cat", (True, False)),
}
COST_MODEL = "p_tokens"


def suggest(trial: Any) -> dict[str, Any]:
    """One configuration from ``SPACE`` (rounded, so equal configurations share cache entries)."""
    return param_search.suggest(trial, SPACE)


def strong_point() -> dict[str, Any]:
    """CoBa-Strong's parameters restricted to ``SPACE`` (the first trial and the fallback)."""
    return {k: STRONG_PARAMS[k] for k in SPACE}


def make_coba(params: dict[str, Any], name: str) -> CoBaPolicy:
    """CoBa-Routed with ``params`` over CoBa-Strong's other settings."""
    return CoBaPolicy(name=name, **{**STRONG_PARAMS, **params})


class ItemCache(param_search.ItemCache):
    """Per (configuration, dataset): per-item mean correctness and p_tokens of CoBa-Routed, replayed once."""

    def records(self, params: dict[str, Any], episodes: CompiledPool) -> pd.DataFrame:
        """The replay env's records of CoBa-Routed at ``params`` (one per episode)."""
        from eval.runner import replay_policy

        return replay_policy(make_coba(params, "search"), episodes, cost_model=COST_MODEL).records


def in_sample(cache: ItemCache, params: dict[str, Any], datasets: list[str]) -> dict[str, float]:
    """``params`` against CoBa-Strong on ``datasets`` (whole datasets: the fit's training data): item-pooled and
    macro accuracy differences (points) and the item-pooled p_tokens ratio."""
    return param_search.in_sample(cache, params, strong_point(), datasets)


def search(cache: ItemCache, datasets: list[str], *, seed: int, n_trials: int = N_TRIALS) -> pd.DataFrame:
    """The TPE search on ``datasets``: one row per trial (parameters, in-sample figures)."""
    return param_search.search(cache, SPACE, strong_point(), datasets, seed=seed, n_trials=n_trials)


@dataclass
class FittedSearch:
    """The trials of one fit's search; ``policy(point)`` is the chosen CoBa configuration."""

    trials: pd.DataFrame
    name: str = "coba_search"

    def params(self, point: dict[str, float]) -> dict[str, Any]:
        """The cheapest trial with both in-sample differences >= ``point["margin"]`` (Strong's parameters when none
        is, and at margin infinity)."""
        return param_search.cheapest_within(self.trials, SPACE, strong_point(), point["margin"])

    def policy(self, point: dict[str, float]) -> CoBaPolicy:
        """CoBa-Routed at the point's configuration."""
        return make_coba(self.params(point), self.name)


@dataclass
class CoBaSearchMethod:
    """Optuna TPE over CoBa's parameters on the training datasets (settings stated in advance)."""

    name: str = "coba_search"
    margins: tuple[float, ...] = SEARCH_MARGINS
    n_trials: int = N_TRIALS
    _cache: ItemCache | None = field(default=None, repr=False)

    def grid(self) -> list[dict[str, float]]:
        """margin in ``margins``, then margin = infinity (CoBa-Strong)."""
        return param_search.margin_grid(self.margins)

    def fallback(self) -> dict[str, float]:
        """margin = infinity: CoBa-Strong's own parameters."""
        return self.grid()[-1]

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedSearch:
        """Search on the training datasets of ``train_ids`` (each whole: LODO folds are whole datasets)."""
        if self._cache is None or self._cache.compiled is not compiled:
            self._cache = ItemCache(compiled)
        datasets = param_search.whole_training_datasets(compiled, train_ids, "coba_search")
        trials = search(self._cache, datasets, seed=seed, n_trials=self.n_trials)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        trials.to_csv(out / "trials.csv", index=False)
        return FittedSearch(trials, name=self.name)
