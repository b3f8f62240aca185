"""A structured search over a routing policy's own parameters on the route env (issue 27, item 3), as a protocol
method (``coba train route_search --lodo --env route``): the route twin of ``train.coba_search``.

Reads top to bottom:

1. ``route_space``: the parameters of the generalized consistency cascade (``agents.routing_ladder``, kind
   ``route_ladder``): samples per rung below the largest generator (0 skips the rung), the agreeing samples
   that accept a rung, leaving a rung early, the largest generator's samples, an optional cheap-judge check
   of the first rung's first sample with its accept / escalate thresholds, the answer rule. The space has one
   ``k_rungR`` per rung of the pool's ladder: it is built from the pool, not fixed here.
2. ``search`` (``train.param_search``): Optuna's TPE sampler (seeded with the protocol seed), ``N_TRIALS``
   trials, the cascade's own parameters (``route_cascade``) enqueued as the first trial. Objective on the fit's
   training datasets only: minimise the item-pooled p_tokens ratio to the cascade subject to (Optuna
   constraints) item-pooled and macro accuracy differences >= 0 points. Every trial replays the configuration
   batched on the route env; a configuration's per-item results on a dataset are cached.
3. ``RouteSearchMethod``: grid point ``margin`` m in ``SEARCH_MARGINS``: the cheapest trial whose in-sample
   item-pooled and macro differences are both >= m points (the cascade's parameters when none is). Fallback
   m = infinity: the cascade's parameters, i.e. the reference itself. The protocol's nested selection chooses m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.routing_ladder import LadderCascadePolicy
from coba_env.compiled import CompiledPool
from train import param_search

#: Trials per fit, stated in advance and sized from timing only (``scripts/time_route_search.py``, the training
#: side of the outer fold with aime2025 held out, the most expensive kind of fold: both large datasets train):
#: 4 inner fits + the grid replays + the refit took 24 s of CPU (51-57 s wall at load 5-8 on the 2 shared cores)
#: at 300 trials, so the 15 (seed, fold) pairs of the 3-seed run take about 6-7 minutes on a free core (about 14
#: minutes at that load), inside the 20 minutes allowed.
N_TRIALS = 300
#: The required in-sample margins of the grid (points), as ``coba_search``: 0, then asking for a gain.
SEARCH_MARGINS: tuple[float, ...] = (0.0, 0.5, 1.0)
#: Samples per rung: 0 skips the rung; 2 is the cascade's; above 4 one rung alone costs more than the cascade's
#: mean per problem on the paper pool (174k p_tokens, about 3 samples), so no saving lies there.
MAX_RUNG_SAMPLES = 4
#: Samples of the largest generator: 1 is the cascade's; 3 allows a majority of its own.
MAX_FINAL_SAMPLES = 3
#: Judge thresholds on a probability-like score in steps of 0.05: accepting needs the judge to call the answer
#: at least as likely right as wrong (>= 0.5); leaving the rung needs it to call it at most that (<= 0.5).
JUDGE_ACCEPT_RANGE = (0.5, 1.0)
JUDGE_ESCALATE_RANGE = (0.0, 0.5)
COST_MODEL = "p_tokens"


def rung_param(r: int) -> str:
    """The search parameter of rung ``r`` (0 = the smallest generator): ``k_rung1``, ``k_rung2``, ..."""
    return f"k_rung{r + 1}"


def judge_available(compiled: CompiledPool) -> bool:
    """Whether the pool has a verifier serving the cheap judge's need (V1), the one the ladder's judge calls."""
    from coba_env.rules.roles import pool_role_map

    return pool_role_map(compiled).slot("V1") is not None


def route_space(n_rungs: int, judge: bool = True) -> param_search.Space:
    """The search space for a ladder of ``n_rungs`` rungs below the largest generator; without a cheap judge in
    the pool (``judge`` False) the judge stays off."""
    return {
        **{rung_param(r): ("int", 0, MAX_RUNG_SAMPLES, 1) for r in range(n_rungs)},
        "votes": ("int", 2, MAX_RUNG_SAMPLES, 1),
        "final_k": ("int", 1, MAX_FINAL_SAMPLES, 1),
        "early_escalate": ("cat", (False, True)),
        "judge": ("cat", (False, True) if judge else (False,)),
        "judge_accept": ("float", *JUDGE_ACCEPT_RANGE, 0.05),
        "judge_escalate": ("float", *JUDGE_ESCALATE_RANGE, 0.05),
        "answer": ("cat", ("last", "majority")),
    }


def cascade_point(n_rungs: int) -> dict[str, Any]:
    """``route_cascade``'s parameters in the space (the first trial and the fallback)."""
    d = LadderCascadePolicy.defaults
    return {**{rung_param(r): d["k"] for r in range(n_rungs)}, "votes": d["votes"], "final_k": d["final_k"],
            "early_escalate": d["early_escalate"], "judge": d["judge"], "judge_accept": d["judge_accept"],
            "judge_escalate": d["judge_escalate"], "answer": d["answer"]}


def canonical(params: dict[str, Any]) -> dict[str, Any]:
    """The configuration ``params`` acts as: judge settings without a judge (or without a rung to judge) and
    votes above every rung's samples change nothing, so they take one value and share a cache entry."""
    out = dict(params)
    ks = [v for k, v in params.items() if k.startswith("k_rung")]
    d = LadderCascadePolicy.defaults
    if not out["judge"] or max(ks, default=0) == 0:
        out.update(judge=False, judge_accept=d["judge_accept"], judge_escalate=d["judge_escalate"])
    out["votes"] = max(2, min(out["votes"], max(ks, default=0)))
    return out


def make_ladder(params: dict[str, Any], name: str) -> LadderCascadePolicy:
    """The generalized cascade at ``params`` (a point of ``route_space``)."""
    ks = [int(params[rung_param(r)]) for r in range(sum(k.startswith("k_rung") for k in params))]
    rest = {k: params[k] for k in ("votes", "final_k", "early_escalate", "judge", "judge_accept", "judge_escalate",
                                   "answer")}
    return LadderCascadePolicy(name=name, rung_k=ks, **rest)


def ladder_rungs(compiled: CompiledPool) -> int:
    """Rungs below the largest generator in every dataset's route episodes; a ValueError unless every dataset of
    the pool has the same generators (each dataset's ladder must be the pool's)."""
    dataset, generator = np.asarray(compiled.dataset), np.asarray(compiled.generator)
    everyone = set(generator.tolist())
    if len(everyone) < 2:
        raise ValueError(f"route_search routes between 2 or more generators; the pool has {sorted(everyone)}")
    for d in dict.fromkeys(dataset.tolist()):
        missing = everyone - set(generator[dataset == d].tolist())
        if missing:
            raise ValueError(f"route_search needs every generator in every dataset; dataset {d!r} has none of "
                             f"{sorted(missing)}")
    return len(everyone) - 1


class RouteItemCache(param_search.ItemCache):
    """Per (configuration, dataset): per-problem correctness and p_tokens of the ladder, replayed once."""

    def records(self, params: dict[str, Any], episodes: CompiledPool) -> pd.DataFrame:
        """The route env's records of the ladder at ``params`` (one per problem)."""
        from eval.route_replay import replay_route_policy

        run = replay_route_policy(make_ladder(params, "search"), episodes, cost_model=COST_MODEL)
        if run.not_applicable:
            raise ValueError(f"route_search: the ladder is not applicable: {run.not_applicable}")
        return run.records


@dataclass
class FittedRouteSearch:
    """The trials of one fit's search; ``policy(point)`` is the chosen ladder configuration."""

    trials: pd.DataFrame
    n_rungs: int
    name: str = "route_search"

    def params(self, point: dict[str, float]) -> dict[str, Any]:
        """The cheapest trial with both in-sample differences >= ``point["margin"]`` (the cascade's parameters
        when none is, and at margin infinity)."""
        return param_search.cheapest_within(self.trials, route_space(self.n_rungs), cascade_point(self.n_rungs),
                                            point["margin"])

    def policy(self, point: dict[str, float]) -> LadderCascadePolicy:
        """The ladder at the point's configuration (label-free; a route policy with a batched form)."""
        return make_ladder(self.params(point), self.name)


@dataclass
class RouteSearchMethod:
    """Optuna TPE over the generalized cascade's parameters on the training datasets (settings stated in advance)."""

    name: str = "route_search"
    margins: tuple[float, ...] = SEARCH_MARGINS
    n_trials: int = N_TRIALS
    _cache: RouteItemCache | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if isinstance(self.n_trials, bool) or not isinstance(self.n_trials, int) or self.n_trials < 1:
            raise ValueError(f"n_trials must be an integer >= 1, got {self.n_trials!r}")
        margins = tuple(self.margins)
        if not margins or not all(isinstance(m, int | float) and not isinstance(m, bool) and math.isfinite(m)
                                  and m >= 0 for m in margins):
            raise ValueError(f"margins must be finite numbers >= 0 (points; infinity is the fallback), got "
                             f"{self.margins!r}")
        self.margins = tuple(float(m) for m in margins)

    def grid(self) -> list[dict[str, float]]:
        """margin in ``margins``, then margin = infinity (the cascade)."""
        return param_search.margin_grid(self.margins)

    def fallback(self) -> dict[str, float]:
        """margin = infinity: the cascade's own parameters (the reference)."""
        return self.grid()[-1]

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedRouteSearch:
        """Search on the training datasets of ``train_ids`` (each whole: LODO folds are whole datasets).

        ``budget`` is not used: the ladder's decisions and the p_tokens objective do not depend on B."""
        n_rungs = ladder_rungs(compiled)
        if self._cache is None or self._cache.compiled is not compiled:
            self._cache = RouteItemCache(compiled)
        datasets = param_search.whole_training_datasets(compiled, train_ids, self.name)
        space = route_space(n_rungs, judge=judge_available(compiled))
        trials = param_search.search(self._cache, space, cascade_point(n_rungs), datasets, seed=seed,
                                     n_trials=self.n_trials, canonical=canonical)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        trials.to_csv(out / "trials.csv", index=False)
        return FittedRouteSearch(trials, n_rungs, name=self.name)
