"""A structured search over CoBa's own parameters (issue 27), as a protocol method (``coba train coba_search``).

Reads top to bottom:

1. ``SPACE``: CoBa-Routed's parameters (``agents.coba.CoBaPolicy``): warm-up K, N_max, strong routes, the
   stopping share and cheap-judge threshold, V2 on the warm-up; ``skip_unanimous_routes`` stays on, as in
   CoBa-Strong.
2. ``search``: Optuna's TPE sampler (seeded with the protocol seed), ``N_TRIALS`` trials, CoBa-Strong's own
   parameters enqueued as the first trial. Objective on the fit's training episodes only: minimise the
   item-pooled p_tokens ratio to CoBa-Strong subject to (Optuna constraints) item-pooled and macro accuracy
   differences >= 0 points. Every trial replays the configuration batched; a configuration's per-item
   results on a dataset are cached, so folds that share a training dataset share its replays.
3. ``CoBaSearchMethod``: grid point ``margin`` m in ``SEARCH_MARGINS``: the cheapest trial whose in-sample
   item-pooled and macro differences are both >= m points (CoBa-Strong's parameters when none is). Fallback
   m = infinity: CoBa-Strong's parameters. The protocol's nested selection chooses m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.coba import CoBaPolicy
from agents.learned_rollout import STRONG_PARAMS
from coba_env.compiled import CompiledPool

#: Stated in advance (docs/LEARNING.md, "Protocol").
N_TRIALS = 100
SEARCH_MARGINS: tuple[float, ...] = (0.0, 0.5, 1.0)
#: name -> (kind, low, high, step) for ``trial.suggest_*``; "cat" lists the choices.
SPACE: dict[str, tuple] = {
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
    params: dict[str, Any] = {}
    for name, spec in SPACE.items():
        if spec[0] == "int":
            params[name] = trial.suggest_int(name, spec[1], spec[2], step=spec[3])
        elif spec[0] == "float":
            params[name] = round(trial.suggest_float(name, spec[1], spec[2], step=spec[3]), 4)
        else:
            params[name] = trial.suggest_categorical(name, list(spec[1]))
    return params


def strong_point() -> dict[str, Any]:
    """CoBa-Strong's parameters restricted to ``SPACE`` (the first trial and the fallback)."""
    return {k: STRONG_PARAMS[k] for k in SPACE}


def make_coba(params: dict[str, Any], name: str) -> CoBaPolicy:
    """CoBa-Routed with ``params`` over CoBa-Strong's other settings."""
    return CoBaPolicy(name=name, **{**STRONG_PARAMS, **params})


@dataclass
class ItemCache:
    """Per (configuration, dataset): per-item mean correctness and p_tokens, replayed once."""

    compiled: CompiledPool
    store: dict = field(default_factory=dict)

    def items(self, params: dict[str, Any], dataset: str) -> pd.DataFrame:
        """Index item_id; columns correct, p_tokens (means over the item's generators)."""
        key = (tuple(sorted(params.items())), dataset)
        if key not in self.store:
            from eval.runner import replay_policy

            sub = self.compiled.select(np.asarray(self.compiled.dataset) == dataset)
            rec = replay_policy(make_coba(params, "search"), sub, cost_model=COST_MODEL).records
            rec = rec.assign(correct=rec["correct"].astype(float))
            self.store[key] = rec.groupby("item_id", sort=True)[["correct", "p_tokens"]].mean()
        return self.store[key]


def in_sample(cache: ItemCache, params: dict[str, Any], datasets: list[str]) -> dict[str, float]:
    """``params`` against CoBa-Strong on ``datasets`` (whole datasets: the fit's training data): item-pooled and
    macro accuracy differences (points) and the item-pooled p_tokens ratio."""
    diffs, costs, ref_costs, per_ds = [], [], [], []
    for d in datasets:
        mine, ref = cache.items(params, d), cache.items(strong_point(), d)
        diff = (mine["correct"] - ref["correct"]).to_numpy()
        diffs.append(diff)
        per_ds.append(diff.mean())
        costs.append(mine["p_tokens"].to_numpy())
        ref_costs.append(ref["p_tokens"].to_numpy())
    return {"item_diff": 100.0 * float(np.concatenate(diffs).mean()), "macro_diff": 100.0 * float(np.mean(per_ds)),
            "cost_ratio": float(np.concatenate(costs).sum() / np.concatenate(ref_costs).sum())}


def search(cache: ItemCache, datasets: list[str], *, seed: int, n_trials: int = N_TRIALS) -> pd.DataFrame:
    """The TPE search on ``datasets``: one row per trial (parameters, in-sample figures)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial(strong_point())
    rows: list[dict[str, Any]] = []

    def objective(trial: Any) -> float:
        params = suggest(trial)
        figures = in_sample(cache, params, datasets)
        # feasible when both are <= 0, i.e. both in-sample differences >= 0 (the TPE sampler reads them)
        trial.set_constraint("item_diff>=0", -figures["item_diff"])
        trial.set_constraint("macro_diff>=0", -figures["macro_diff"])
        rows.append({**params, **figures})
        return figures["cost_ratio"]

    study.optimize(objective, n_trials=n_trials)
    return pd.DataFrame(rows)


@dataclass
class FittedSearch:
    """The trials of one fit's search; ``policy(point)`` is the chosen CoBa configuration."""

    trials: pd.DataFrame
    name: str = "coba_search"

    def params(self, point: dict[str, float]) -> dict[str, Any]:
        """The cheapest trial with both in-sample differences >= ``point["margin"]`` (Strong's parameters when none
        is, and at margin infinity)."""
        m = float(point["margin"])
        t = self.trials
        ok = t[(t["item_diff"] >= m) & (t["macro_diff"] >= m)] if math.isfinite(m) else t.iloc[:0]
        if ok.empty:
            return strong_point()
        best = ok.sort_values("cost_ratio", kind="stable").iloc[0]
        return {k: (bool(best[k]) if SPACE[k][0] == "cat" else int(best[k]) if SPACE[k][0] == "int"
                    else float(best[k])) for k in SPACE}

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
        return [{"margin": m} for m in self.margins] + [self.fallback()]

    def fallback(self) -> dict[str, float]:
        """margin = infinity: CoBa-Strong's own parameters."""
        return {"margin": math.inf}

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedSearch:
        """Search on the training datasets of ``train_ids`` (each whole: LODO folds are whole datasets)."""
        if self._cache is None or self._cache.compiled is not compiled:
            self._cache = ItemCache(compiled)
        mask = np.isin(compiled.episode_ids, np.asarray(train_ids))
        datasets = list(dict.fromkeys(np.asarray(compiled.dataset)[mask].tolist()))
        whole = np.isin(np.asarray(compiled.dataset), datasets)
        if not np.array_equal(mask, whole):
            raise ValueError("coba_search fits on whole datasets (leave-one-dataset-out folds)")
        trials = search(self._cache, datasets, seed=seed, n_trials=self.n_trials)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        trials.to_csv(out / "trials.csv", index=False)
        return FittedSearch(trials, name=self.name)
