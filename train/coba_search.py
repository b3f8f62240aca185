"""The structured searches of issue 27 as protocol methods: the searched families (``train.param_search``).

- ``coba_search`` (``coba train coba_search --lodo``): CoBa-Routed's own parameters (``agents.coba.CoBaPolicy``)
  on the replay env, against CoBa-Strong: warm-up K, N_max, strong routes, the stopping share and cheap-judge
  threshold, V2 on the warm-up (``SPACE``); ``skip_unanimous_routes`` stays on, as in CoBa-Strong.
  ``COBA_TRIALS`` trials, CoBa-Strong's own parameters enqueued as the first trial.
- ``route_search`` (``coba train route_search --lodo --env route``): the generalized consistency cascade
  (``agents.routing_ladder``, kind ``route_ladder``) on the route env, against the cascade: samples per rung
  below the largest generator (0 skips the rung), the agreeing samples that accept a rung, leaving a rung early,
  the largest generator's samples, an optional cheap-judge check of the first rung's first sample with its
  accept / escalate thresholds, the answer rule (``route_space``: one ``k_rungR`` per rung of the pool's ladder,
  built from the pool). ``LADDER_TRIALS`` trials, ``route_cascade``'s parameters enqueued as the first trial.

Both: Optuna's TPE sampler (seeded with the protocol seed); objective on the fit's training datasets only:
minimise the item-pooled p_tokens ratio to the reference subject to (Optuna constraints) item-pooled and macro
accuracy differences >= 0 points; every trial replays the configuration batched, a configuration's per-item
results on a dataset cached. Grid point ``margin`` m in ``param_search.SEARCH_MARGINS``: the cheapest trial whose
in-sample item-pooled and macro differences are both >= m points (the reference's parameters when none is);
fallback m = infinity, the reference itself. ``search_method(kind)`` is the method of a kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from agents.coba import CoBaPolicy
from agents.learned_rollout import STRONG_PARAMS
from agents.routing_ladder import LadderCascadePolicy
from coba_env.compiled import CompiledPool
from train import param_search

COST_MODEL = "p_tokens"
SEARCH_MARGINS = param_search.SEARCH_MARGINS

# ---------------------------------------------------------------------------------------------------- coba_search
#: Trials per fit of ``coba_search``, stated in advance (docs/LEARNING.md, "Protocol").
COBA_TRIALS = 100
#: name -> (kind, low, high, step) for ``trial.suggest_*``; "cat" lists the choices.
SPACE: param_search.Space = {
    "warmup_k": ("int", 1, 4, 1),
    "n_max": ("int", 2, 16, 1),
    "strong_routes": ("int", 0, 6, 1),
    "share_min": ("float", 0.4, 1.0, 0.05),
    "s1_min": ("float", 0.3, 0.95, 0.05),
    "use_v2": ("cat", (True, False)),
}


def strong_point() -> dict[str, Any]:
    """CoBa-Strong's parameters restricted to ``SPACE`` (the first trial and the fallback)."""
    return {k: STRONG_PARAMS[k] for k in SPACE}


def make_coba(params: dict[str, Any], name: str) -> CoBaPolicy:
    """CoBa-Routed with ``params`` over CoBa-Strong's other settings."""
    return CoBaPolicy(name=name, **{**STRONG_PARAMS, **params})


def coba_records(params: dict[str, Any], episodes: CompiledPool) -> pd.DataFrame:
    """The replay env's records of CoBa-Routed at ``params`` (one per episode)."""
    from eval.runner import replay_policy

    return replay_policy(make_coba(params, "search"), episodes, cost_model=COST_MODEL).records


# ---------------------------------------------------------------------------------------------------- route_search
#: Trials per fit of ``route_search``, stated in advance and sized from timing only (``scripts/time_route_search.py``,
#: the training side of the outer fold with aime2025 held out, the most expensive kind of fold: both large
#: datasets train):
#: 4 inner fits + the grid replays + the refit took 24 s of CPU (51-57 s wall at load 5-8 on the 2 shared cores)
#: at 300 trials, so the 15 (seed, fold) pairs of the 3-seed run take about 6-7 minutes on a free core (about 14
#: minutes at that load), inside the 20 minutes allowed.
LADDER_TRIALS = 300
#: Samples per rung: 0 skips the rung; 2 is the cascade's; above 4 one rung alone costs more than the cascade's
#: mean per problem on the paper pool (174k p_tokens, about 3 samples), so no saving lies there.
MAX_RUNG_SAMPLES = 4
#: Samples of the largest generator: 1 is the cascade's; 3 allows a majority of its own.
MAX_FINAL_SAMPLES = 3
#: Judge thresholds on a probability-like score in steps of 0.05: accepting needs the judge to call the answer
#: at least as likely right as wrong (>= 0.5); leaving the rung needs it to call it at most that (<= 0.5).
JUDGE_ACCEPT_RANGE = (0.5, 1.0)
JUDGE_ESCALATE_RANGE = (0.0, 0.5)
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


def ladder_records(params: dict[str, Any], episodes: CompiledPool) -> pd.DataFrame:
    """The route env's records of the ladder at ``params`` (one per problem)."""
    from eval.runner import replay_policy

    run = replay_policy(make_ladder(params, "search"), episodes, grouping="item", cost_model=COST_MODEL)
    if run.not_applicable:
        raise ValueError(f"route_search: the ladder is not applicable: {run.not_applicable}")
    return run.records


# ---------------------------------------------------------------------------------------------------- the families
FAMILIES: dict[str, param_search.Family] = {
    "coba_search": param_search.Family(
        name="coba_search", space=lambda _: SPACE, reference=lambda _: strong_point(), make=make_coba,
        records=coba_records, n_trials=COBA_TRIALS),
    "route_search": param_search.Family(
        name="route_search", space=lambda pool: route_space(ladder_rungs(pool), judge=judge_available(pool)),
        reference=lambda pool: cascade_point(ladder_rungs(pool)), make=make_ladder, records=ladder_records,
        n_trials=LADDER_TRIALS, canonical=canonical),
}


def search_method(kind: str = "coba_search", **settings: Any) -> param_search.SearchMethod:
    """The search method of ``kind`` ("coba_search" or "route_search") with its stated settings (``settings``:
    ``margins``, ``n_trials``)."""
    try:
        family = FAMILIES[kind]
    except KeyError:
        raise ValueError(f"unknown search {kind!r}; expected one of {list(FAMILIES)}") from None
    return param_search.SearchMethod(family, **settings)
