"""A constrained Optuna TPE search over a fixed policy's own parameters, as a protocol method (``SearchMethod``).

One method for every searched ``Family`` (``train.coba_search``: CoBa's parameters on the replay env against
CoBa-Strong, ``coba train coba_search``; the generalized consistency cascade on the route env against the
cascade, ``coba train route_search``). What varies is data: the search ``Space`` (built from the pool), the
reference's own parameters (the first trial and the fallback), the policy at a point and how one
configuration replays.

Reads top to bottom:

1. ``suggest``: one configuration from a ``Space`` (rounded, so equal configurations share cache entries).
2. ``ItemCache``: per (configuration, dataset) the per-item mean correctness and p_tokens, replayed once; each
   dataset's episodes are selected once, so an env compiled from them is reused by every trial.
3. ``in_sample`` and ``search``: minimise the item-pooled p_tokens ratio to the reference on whole training
   datasets subject to (Optuna constraints) item-pooled and macro accuracy differences >= 0 points.
4. ``cheapest_within``: the grid point ``margin`` m: the cheapest trial whose in-sample item-pooled and macro
   differences are both >= m points (the reference's parameters when none is, and at m = infinity).
5. ``whole_training_datasets``: a fit's datasets, refusing a split that is not by whole datasets.
6. ``SearchMethod``: grid point ``margin`` m in ``SEARCH_MARGINS``, then m = infinity (the reference: the
   fallback); ``fit`` runs the search on the fold's training datasets, the protocol's nested selection chooses m.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool

#: name -> ("int" | "float", low, high, step) or ("cat", choices): the arguments of ``trial.suggest_*``.
Space = dict[str, tuple]
#: The required in-sample margins of a search's grid (points): 0, then asking for a gain; stated in advance.
SEARCH_MARGINS: tuple[float, ...] = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class Family:
    """A policy family searched over its own parameters.

    ``space`` and ``reference`` are built from the pool (a ValueError for a pool the family cannot search);
    ``make(params, name)`` is the policy at a point; ``records(params, episodes)`` replays one configuration
    (columns item_id, correct, p_tokens); ``canonical`` maps a suggestion to the configuration it acts as."""

    name: str
    space: Callable[[CompiledPool], Space]
    reference: Callable[[CompiledPool], dict[str, Any]]
    make: Callable[[dict[str, Any], str], Policy]
    records: Callable[[dict[str, Any], CompiledPool], pd.DataFrame]
    n_trials: int
    canonical: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def suggest(trial: Any, space: Space) -> dict[str, Any]:
    """One configuration from ``space`` (floats rounded, so equal configurations share cache entries)."""
    params: dict[str, Any] = {}
    for name, spec in space.items():
        if spec[0] == "int":
            params[name] = trial.suggest_int(name, spec[1], spec[2], step=spec[3])
        elif spec[0] == "float":
            params[name] = round(trial.suggest_float(name, spec[1], spec[2], step=spec[3]), 4)
        else:
            params[name] = trial.suggest_categorical(name, list(spec[1]))
    return params


def typed(row: pd.Series, space: Space) -> dict[str, Any]:
    """A trials-table row's configuration with the space's types (bool / int / float; a choice as stored)."""
    out: dict[str, Any] = {}
    for k, spec in space.items():
        value = row[k]
        if spec[0] == "int":
            out[k] = int(value)
        elif spec[0] == "float":
            out[k] = float(value)
        elif all(isinstance(c, bool) for c in spec[1]):
            out[k] = bool(value)
        else:
            out[k] = value.item() if isinstance(value, np.generic) else value
    return out


@dataclass
class ItemCache:
    """Per (configuration, dataset): per-item mean correctness and p_tokens of ``family``, replayed once."""

    compiled: CompiledPool
    family: Family
    store: dict = field(default_factory=dict)
    _datasets: dict = field(default_factory=dict, repr=False)

    def records(self, params: dict[str, Any], episodes: CompiledPool) -> pd.DataFrame:
        """The replay records of the configuration ``params`` on ``episodes`` (columns item_id, correct,
        p_tokens)."""
        return self.family.records(params, episodes)

    def episodes(self, dataset: str) -> CompiledPool:
        """The episodes of ``dataset`` (selected once: an env compiled from them is cached with them)."""
        if dataset not in self._datasets:
            self._datasets[dataset] = self.compiled.select(np.asarray(self.compiled.dataset) == dataset)
        return self._datasets[dataset]

    def items(self, params: dict[str, Any], dataset: str) -> pd.DataFrame:
        """Index item_id; columns correct, p_tokens (means over the item's records)."""
        key = (tuple(sorted(params.items())), dataset)
        if key not in self.store:
            rec = self.records(params, self.episodes(dataset))
            rec = rec.assign(correct=rec["correct"].astype(float))
            self.store[key] = rec.groupby("item_id", sort=True)[["correct", "p_tokens"]].mean()
        return self.store[key]


def in_sample(cache: ItemCache, params: dict[str, Any], reference: dict[str, Any],
              datasets: list[str]) -> dict[str, float]:
    """``params`` against the ``reference`` configuration on ``datasets`` (whole datasets: the fit's training
    data): item-pooled and macro accuracy differences (points) and the item-pooled p_tokens ratio."""
    diffs, costs, ref_costs, per_ds = [], [], [], []
    for d in datasets:
        mine, ref = cache.items(params, d), cache.items(reference, d)
        diff = (mine["correct"] - ref["correct"]).to_numpy()
        diffs.append(diff)
        per_ds.append(diff.mean())
        costs.append(mine["p_tokens"].to_numpy())
        ref_costs.append(ref["p_tokens"].to_numpy())
    return {"item_diff": 100.0 * float(np.concatenate(diffs).mean()), "macro_diff": 100.0 * float(np.mean(per_ds)),
            "cost_ratio": float(np.concatenate(costs).sum() / np.concatenate(ref_costs).sum())}


def search(cache: ItemCache, space: Space, reference: dict[str, Any], datasets: list[str], *, seed: int,
           n_trials: int, canonical: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> pd.DataFrame:
    """The TPE search on ``datasets``: one row per trial (parameters, in-sample figures). The reference's
    parameters are the first trial; ``canonical`` maps a suggestion to the configuration it stands for (so
    configurations that act alike share a cache entry)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial(dict(reference))
    rows: list[dict[str, Any]] = []

    def objective(trial: Any) -> float:
        params = suggest(trial, space)
        if canonical is not None:
            params = canonical(params)
        figures = in_sample(cache, params, reference, datasets)
        # feasible when both are <= 0, i.e. both in-sample differences >= 0 (the TPE sampler reads them)
        trial.set_constraint("item_diff>=0", -figures["item_diff"])
        trial.set_constraint("macro_diff>=0", -figures["macro_diff"])
        rows.append({**params, **figures})
        return figures["cost_ratio"]

    study.optimize(objective, n_trials=n_trials)
    return pd.DataFrame(rows)


def cheapest_within(trials: pd.DataFrame, space: Space, reference: dict[str, Any], margin: float) -> dict[str, Any]:
    """The cheapest trial with both in-sample differences >= ``margin`` points (``reference`` when none is, and
    at margin infinity)."""
    m = float(margin)
    t = trials
    ok = t[(t["item_diff"] >= m) & (t["macro_diff"] >= m)] if math.isfinite(m) else t.iloc[:0]
    if ok.empty:
        return dict(reference)
    return typed(ok.sort_values("cost_ratio", kind="stable").iloc[0], space)


def margin_grid(margins: tuple[float, ...]) -> list[dict[str, float]]:
    """The grid of a search: margin in ``margins``, then margin = infinity (the reference: the fallback)."""
    return [{"margin": m} for m in margins] + [{"margin": math.inf}]


def whole_training_datasets(compiled: CompiledPool, train_ids: np.ndarray, method: str) -> list[str]:
    """The datasets of the episodes ``train_ids``; a ValueError unless they are whole datasets (LODO folds)."""
    mask = np.isin(compiled.episode_ids, np.asarray(train_ids))
    datasets = list(dict.fromkeys(np.asarray(compiled.dataset)[mask].tolist()))
    whole = np.isin(np.asarray(compiled.dataset), datasets)
    if not np.array_equal(mask, whole):
        raise ValueError(f"{method} fits on whole datasets (leave-one-dataset-out folds)")
    return datasets


@dataclass
class FittedSearch:
    """The trials of one fit's search; ``policy(point)`` is the chosen configuration of its family."""

    trials: pd.DataFrame
    family: Family
    space: Space
    reference: dict[str, Any]

    @property
    def name(self) -> str:
        """The method's name, given to the policies."""
        return self.family.name

    def params(self, point: dict[str, float]) -> dict[str, Any]:
        """The cheapest trial with both in-sample differences >= ``point["margin"]`` (the reference's parameters
        when none is, and at margin infinity)."""
        return cheapest_within(self.trials, self.space, self.reference, point["margin"])

    def policy(self, point: dict[str, float]) -> Policy:
        """The family's policy at the point's configuration (label-free)."""
        return self.family.make(self.params(point), self.name)


class SearchMethod:
    """Optuna TPE over ``family``'s parameters on the training datasets (settings stated in advance)."""

    def __init__(self, family: Family, *, margins: tuple[float, ...] = SEARCH_MARGINS,
                 n_trials: int | None = None) -> None:
        n_trials = family.n_trials if n_trials is None else n_trials
        if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
            raise ValueError(f"n_trials must be an integer >= 1, got {n_trials!r}")
        values = tuple(margins)
        if not values or not all(isinstance(m, int | float) and not isinstance(m, bool) and math.isfinite(m)
                                 and m >= 0 for m in values):
            raise ValueError(f"margins must be finite numbers >= 0 (points; infinity is the fallback), got "
                             f"{margins!r}")
        self.family, self.name = family, family.name
        self.margins, self.n_trials = tuple(float(m) for m in values), n_trials
        self._cache: ItemCache | None = None

    def grid(self) -> list[dict[str, float]]:
        """margin in ``margins``, then margin = infinity (the reference)."""
        return margin_grid(self.margins)

    def fallback(self) -> dict[str, float]:
        """margin = infinity: the reference's own parameters."""
        return self.grid()[-1]

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedSearch:
        """Search on the training datasets of ``train_ids`` (each whole: LODO folds are whole datasets).

        ``budget`` is not used: the family's decisions and the p_tokens objective do not depend on B."""
        space, reference = self.family.space(compiled), self.family.reference(compiled)
        if self._cache is None or self._cache.compiled is not compiled:
            self._cache = ItemCache(compiled, self.family)
        datasets = whole_training_datasets(compiled, train_ids, self.name)
        trials = search(self._cache, space, reference, datasets, seed=seed, n_trials=self.n_trials,
                        canonical=self.family.canonical)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        trials.to_csv(out / "trials.csv", index=False)
        return FittedSearch(trials, self.family, space, reference)
