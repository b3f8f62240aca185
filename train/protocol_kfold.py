"""The K-fold routing protocol: prompt-aware routers on a two-generator pool, fixed before any held-out run
(docs/ROUTING.md, "Protocol").

Reads top to bottom:

1. Every item's outcome and cost with each generator (``train.router_training.option_outcomes``, evaluator
   side): the weak generator is the less accurate one, the strong the more accurate.
2. For every seed in ``SEEDS``: ``K`` folds over the items (``coba_env.splits.item_kfold``, stratified by category
   where there is one). For every fold and every router kind (the kinds asked for, then ``REFERENCE``, the
   per-category prior), ``train.router_training.fit_router`` on the other folds' items only: the featurizer, the
   predictor and its setting (inner cross-validation) never see a held-out item. Each held-out item gets its
   *switch lambda*: the lambda below which the fold's router sends it to the strong generator,
   ``(P_strong - P_weak) / ((cost_strong - cost_weak) / B)`` (``switch_scores``).
3. The routing curve of each (seed, router) thresholds the switch lambdas at the strong-call shares 0, 0.1, ..,
   1 (``eval.routing_metrics``; ties broken at random from the seed): exactly the lambda sweep of the fold's
   routers. ``train.protocol_kfold_stats`` gives CPT(50%), CPT(80%) and APGR with 95% CIs (paired bootstrap over
   items), the difference from the prior router, the seed-mean, the references (random, oracle, always-cheapest,
   always-largest) and the verdict of the stated target.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coba_env.compiled import CompiledPool
from coba_env.problems import problems_of
from coba_env.splits import fold_strata, item_kfold
from train.router_training import fit_router, option_outcomes, route_generators

#: The protocol's constants, stated before any held-out run (docs/ROUTING.md, "Protocol").
K = 5
SEEDS: tuple[int, ...] = (0, 1, 2)
#: The routers of the protocol's table (BEST-Route joins them on pools with more than one candidate per generator).
ROUTERS: tuple[str, ...] = ("knn_router", "mf_router", "logistic_router", "mlp_router")
#: The reference every router is compared with (paired): the per-category prior router.
REFERENCE = "prior_router"


def protocol_cost_model(compiled: CompiledPool) -> str:
    """The protocol's cost measure: dollars on a pool that prices every model, else p_tokens."""
    return "usd" if compiled.usd_priced else "p_tokens"


@dataclass
class Outcomes:
    """Every item's correctness and cost with the weak and the strong generator (evaluator side)."""

    problems: pd.DataFrame
    weak: str
    strong: str
    weak_correct: np.ndarray
    strong_correct: np.ndarray
    weak_cost: np.ndarray
    strong_cost: np.ndarray


def pool_outcomes(compiled: CompiledPool, cost_model: str) -> Outcomes:
    """Step 1: each item's outcome with each of the pool's two generators; weak = the less accurate."""
    generators = route_generators(compiled)
    if len(generators) != 2:
        raise ValueError(f"the K-fold routing protocol scores two-generator pools (APGR, CPT); the pool has "
                         f"{len(generators)}: {generators}")
    problems = problems_of(compiled)
    table = option_outcomes(compiled, problems, generators, [1], cost_model)
    if np.isnan(table.outcome).any():
        raise ValueError("the K-fold routing protocol needs both generators' answer on every item")
    weak, strong = np.argsort(table.outcome.mean(axis=0), kind="stable")
    return Outcomes(problems, generators[weak], generators[strong], table.outcome[:, weak] > 0,
                    table.outcome[:, strong] > 0, table.cost[:, weak], table.cost[:, strong])


def switch_scores(fitted: Any, x: np.ndarray, weak: str, strong: str) -> np.ndarray:
    """Each row's switch lambda under ``fitted``'s rule (P_strong - P_weak over the cost gap in its own units); the
    predicted gain itself when the strong generator is not dearer than the weak one."""
    options = [tuple(o) for o in fitted.config["options"]]
    w, s = options.index((weak, 1)), options.index((strong, 1))
    p = fitted.predictor.predict(x)
    gap = (fitted.config["option_cost"][s] - fitted.config["option_cost"][w]) / fitted.config["budget"]
    return (p[:, s] - p[:, w]) / gap if gap > 0 else p[:, s] - p[:, w]


@dataclass
class KFoldRun:
    """Every (seed, router)'s held-out switch lambdas over all items, with what the stats need."""

    outcomes: Outcomes
    kinds: list[str]
    seeds: tuple[int, ...]
    scores: dict[tuple[int, str], np.ndarray]
    settings: pd.DataFrame
    strata: str | None
    cost_model: str
    seconds: float
    #: The router every other is compared with (paired): ``REFERENCE``.
    reference: str
    timings: dict[str, float] = field(default_factory=dict)


def run_folds(compiled: CompiledPool, kinds: Sequence[str], *, seeds: Sequence[int] = SEEDS, k: int = K,
              cost_model: str | None = None, progress: bool = True) -> KFoldRun:
    """Steps 1-2: every router kind of ``kinds`` (and ``REFERENCE``) fitted per (seed, fold) on the other folds."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    cost_model = cost_model or protocol_cost_model(compiled)
    outcomes = pool_outcomes(compiled, cost_model)
    everyone = list(dict.fromkeys([*kinds, REFERENCE]))
    keys = pd.MultiIndex.from_arrays([outcomes.problems["dataset"], outcomes.problems["item_id"]])
    scores: dict[tuple[int, str], np.ndarray] = {}
    settings, timings = [], {}
    bar = tqdm(total=len(seeds) * k * len(everyone), desc="K-fold routing protocol", disable=not progress)
    for seed in seeds:
        for split in item_kfold(compiled, k, int(seed)):
            held = np.isin(compiled.episode_ids, split.eval_episode_ids)
            rows = keys.get_indexer(pd.MultiIndex.from_arrays([compiled.dataset[held], compiled.item_id[held]]))
            rows = np.unique(rows)
            featurizers: dict[str, Any] = {}  # fitted once per fold for the routers reading the same sources
            held_x: dict[tuple[str, ...], np.ndarray] = {}
            for kind in everyone:
                t1 = time.perf_counter()
                fitted = fit_router(kind, compiled, episode_ids=split.train_episode_ids, cost_model=cost_model,
                                    seed=int(seed), featurizers=featurizers)
                sources = tuple(fitted.featurizer.sources)
                if sources not in held_x:
                    held_x[sources] = fitted.featurizer.transform(outcomes.problems.iloc[rows]).astype(np.float64)
                x = held_x[sources]
                scores.setdefault((int(seed), kind), np.full(len(keys), np.nan))[rows] = \
                    switch_scores(fitted, x, outcomes.weak, outcomes.strong)
                settings.append({"seed": int(seed), "fold": split.held_out, "router": kind,
                                 "setting": fitted.config["setting"], "inner_brier": fitted.config["inner_brier"],
                                 "train_items": fitted.config["n_items"], "held_out_items": len(rows)})
                timings[f"seed{seed}_{split.held_out}_{kind}_s"] = time.perf_counter() - t1
                bar.update()
    bar.close()
    return KFoldRun(outcomes=outcomes, kinds=everyone, seeds=tuple(int(s) for s in seeds), scores=scores,
                    settings=pd.DataFrame(settings), strata=fold_strata(compiled)[0], cost_model=cost_model,
                    seconds=time.perf_counter() - t0, reference=REFERENCE, timings=timings)


def run_kfold(compiled: CompiledPool, kinds: Sequence[str], *, out_dir: str | Path, seeds: Sequence[int] = SEEDS,
              k: int = K, cost_model: str | None = None, progress: bool = True, pool_name: str = "unnamed pool",
              resamples: int | None = None) -> dict[str, Any]:
    """The whole protocol for ``kinds`` on ``compiled``: folds, statistics, verdict; tables written to ``out_dir``.
    Returns the verdict (``train.protocol_kfold_stats.verdict``)."""
    from train import protocol_kfold_stats as stats

    run = run_folds(compiled, kinds, seeds=seeds, k=k, cost_model=cost_model, progress=progress)
    kw = {} if resamples is None else {"resamples": resamples}
    table = stats.routing_stats(run, **kw)
    full = set(run.seeds) >= set(SEEDS) and k == K  # fewer seeds or another K: tables, but no claim
    verdict = stats.verdict(table, run, pool_name=pool_name, k=k, full=full)
    stats.write_tables(run, table, verdict, Path(out_dir))
    return verdict
