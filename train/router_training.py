"""Training a prompt-aware router on a pool's training items: ``coba train knn_router`` (and the other router kinds).

Reads top to bottom (``fit_router``):

1. The training items: the episodes of ``datasets`` / ``episode_ids``, and their label-free problem table
   (``coba_env.problems.problems_of``).
2. The problem featurizer, fitted on those items only (``coba_env.featurizers.fit_featurizer``; sources
   ``problem_features``, default ``DEFAULT_FEATURES``).
3. The options (generator, samples) and each one's outcome and cost on every training item (``option_outcomes``):
   the pool's own replay of best-of-k (``agents.sampling.BestOfN``, majority selection) on each generator's
   episodes, so the labels are what the route env gives the router at STOP. A generator that costs nothing in
   the cost model is refused (every lambda would route to it).
4. The predictor (``train.router_fit.fit_router_predictor``: its setting chosen by inner cross-validation over
   the training items), then the checkpoint (``agents.prompt_router.save_router``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.prompt_router import PromptRouter, save_router
from agents.router_predictors import Predictor
from coba_env.compiled import CompiledPool
from coba_env.featurizers import Featurizer, fit_featurizer
from coba_env.problems import problems_of
from coba_env.rules.config import default_budget, episode_subset
from train.router_fit import fit_router_predictor

#: Problem feature sources of a router unless given (the prior router's: ``meta``).
DEFAULT_FEATURES = "meta,text"
#: The categorical fields the per-category prior groups by (those the featurizer has).
PRIOR_FIELDS: tuple[str, ...] = ("dataset", "subject", "category")
#: The lambda a router acts at when none is given.
DEFAULT_LAMBDA = 0.1


@dataclass
class OptionTable:
    """Every option (generator, samples) on every item: outcome Y [n, O] (NaN: no candidates) and cost C [n, O]."""

    options: list[tuple[str, int]]
    outcome: np.ndarray
    cost: np.ndarray


def router_spec(kind: str) -> dict[str, Any]:
    """The ``router`` fields of the controller kind ``kind``; a ValueError when it is not a router kind."""
    from agents.controller_kinds import controller_kind

    spec = controller_kind(kind).router
    if spec is None:
        raise ValueError(f"{kind} is not a router kind (agents/controllers.yaml: no 'router' fields)")
    return dict(spec)


def route_generators(compiled: CompiledPool) -> list[str]:
    """The pool's generators in the route env's order (first appearance)."""
    return list(dict.fromkeys(str(g) for g in compiled.generator))


def option_outcomes(episodes: CompiledPool, problems: pd.DataFrame, generators: Sequence[str],
                    samples: Sequence[int], cost_model: str) -> OptionTable:
    """Outcome and cost of best-of-k on each generator for every item of ``problems`` (evaluator side: labels)."""
    from agents.sampling import BestOfN
    from eval.runner import run_policy

    keys = pd.MultiIndex.from_arrays([problems["dataset"], problems["item_id"]])
    options = [(g, k) for g in generators for k in samples]
    outcome = np.full((len(problems), len(options)), np.nan)
    cost = np.full((len(problems), len(options)), np.nan)
    for k in samples:
        records = run_policy(BestOfN(n=int(k)), episodes, grouping="pair", cost_model=cost_model)
        at = keys.get_indexer(pd.MultiIndex.from_arrays([records["dataset"], records["item_id"]]))
        for g in generators:
            rows = (records["generator"] == g).to_numpy()
            o = options.index((g, k))
            outcome[at[rows], o] = records.loc[rows, "correct"].to_numpy(dtype=np.float64)
            cost[at[rows], o] = records.loc[rows, cost_model].to_numpy(dtype=np.float64)
    return OptionTable(options=options, outcome=outcome, cost=cost)


def group_columns(featurizer: Featurizer) -> np.ndarray:
    """The feature indices of the prior's categories: the one-hot columns of ``PRIOR_FIELDS``."""
    prefixes = tuple(f"{f}=" for f in PRIOR_FIELDS)
    return np.array([i for i, n in enumerate(featurizer.names) if n.startswith(prefixes)], dtype=np.int64)


@dataclass
class FittedRouter:
    """A router fitted on training items: its featurizer, predictor, options and checkpoint fields."""

    featurizer: Featurizer
    predictor: Predictor
    config: dict[str, Any]

    def policy(self, lam: float | None = None) -> PromptRouter:
        """The router acting at ``lam``."""
        return PromptRouter(self.featurizer, self.predictor, self.config, lam=lam)


def router_sources(kind: str, problem_features: str | None = None) -> str:
    """The problem feature sources a router of ``kind`` reads: ``problem_features``, else its kind's, else
    ``DEFAULT_FEATURES``."""
    return problem_features or router_spec(kind)["features"] or DEFAULT_FEATURES


def fit_router(kind: str, compiled: CompiledPool, *, datasets: Any = None, episode_ids: Any = None,
               cost_model: str = "p_tokens", seed: int = 0, problem_features: str | None = None,
               budget: float | None = None, featurizers: dict[str, Any] | None = None) -> FittedRouter:
    """Fit a router of ``kind`` (a controller kind with ``router`` fields, ``agents/controllers.yaml``) on the
    training items of ``compiled`` (steps 1-4).

    ``featurizers``: a cache shared by routers fitted on the *same* training items with the same ``seed`` (sources
    -> (fitted featurizer, training features)); the featurizer is then fitted once for all of them, the same
    computation as fitting it per router."""
    spec = router_spec(kind)
    predictor_kind, label = spec["predictor"], spec["label"]
    episodes = episode_subset(compiled, datasets, None, episode_ids)
    problems = problems_of(episodes)
    sources = router_sources(kind, problem_features)
    cache = {} if featurizers is None else featurizers
    if sources not in cache:
        fitted_featurizer = fit_featurizer(problems, sources, seed=seed)
        cache[sources] = (fitted_featurizer, fitted_featurizer.transform(problems).astype(np.float64))
    featurizer, x = cache[sources]
    samples = [k for k in spec["samples"] if k <= compiled.n_candidates] or [1]
    table = option_outcomes(episodes, problems, route_generators(compiled), samples, cost_model)
    option_cost = np.nanmean(np.where(np.isnan(table.outcome), np.nan, table.cost), axis=0)
    free = [f"{g}" for (g, k), c in zip(table.options, option_cost, strict=True) if k == 1 and not c > 0]
    if free:
        raise ValueError(f"cost model {cost_model!r} gives {', '.join(free)} no cost (every lambda would route there); "
                         "choose another cost model (usd, tokens, calls)")
    extra = {"group_columns": group_columns(featurizer)} if predictor_kind == "prior" else {}
    predictor, setting, scores = fit_router_predictor(predictor_kind, x, table.outcome, seed, **extra)
    b = default_budget(compiled, cost_model, compiled.n_candidates) if budget is None else float(budget)
    config = {"kind": kind, "name": kind, "label": label, "env": "route", "n_max_per_generator": max(samples),
              "generators": route_generators(compiled), "options": [[g, int(k)] for g, k in table.options],
              "option_cost": [float(c) for c in option_cost], "budget": b, "cost_model": cost_model,
              "selection": "majority", "default_lambda": DEFAULT_LAMBDA, "problem_features": list(featurizer.sources),
              "setting": setting, "inner_brier": scores, "seed": int(seed), "n_items": len(problems),
              "datasets": list(dict.fromkeys(problems["dataset"].tolist()))}
    return FittedRouter(featurizer, predictor, config)


def train_router(compiled: CompiledPool, out_dir: str | Path, *, kind: str, grouping: str = "item",
                 datasets: Sequence[str] | None = None, episode_ids: Sequence[int] | None = None,
                 cost_model: str = "p_tokens", seed: int = 0, progress: bool = True,
                 problem_features: str | None = None, lambdas: Any = None) -> Path:
    """``coba train KIND`` for a router kind: fit on the training items, write the checkpoint to ``out_dir``.

    ``grouping`` is taken for the trainers' common signature and not read: a router is fitted on the pool's items
    whatever the episode grouping, and runs on the route env (``coba train`` refuses another ``--env``:
    ``ControllerKind.envs``)."""
    fitted = fit_router(kind, compiled, datasets=datasets, episode_ids=episode_ids, cost_model=cost_model, seed=seed,
                        problem_features=problem_features)
    return save_router(out_dir, fitted.config, fitted.predictor, fitted.featurizer)


