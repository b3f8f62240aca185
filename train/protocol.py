"""The learning protocol (issue 19, revised by issue 27), fixed before any held-out result is seen
(docs/LEARNING.md, "Protocol").

Reads top to bottom:

1. One cost unit for the pool: ``cost_unit`` (``coba_env.env.default_budget`` over every episode of the pool,
   a label-free statistic of the token counts), passed as B to every fit, inner and outer, so lambda and the
   budget mean the same trade-off in every fit.
2. Outer loop: leave-one-dataset-out over the pool's datasets (``coba_env.splits``), for every seed in
   ``SEEDS``. The method's feature statistics and targets come from its training datasets only.
3. Inside an outer fold, nested leave-one-dataset-out over the training datasets: for every inner fold the
   method is fit on the other training datasets and every point of its grid (stated in advance by
   ``Method.grid``) is replayed on the inner validation dataset beside ``REFERENCE`` on the same episodes.
4. ``select_point``: over the stacked validation datasets (paired item bootstrap, ``validation_summary``), the
   points whose item-pooled difference has its 95% CI lower end >= ``-SELECT_ITEM_MARGIN``, whose macro
   difference is >= ``-SELECT_MACRO_MARGIN`` and whose p_tokens ratio has its 95% CI upper end <
   ``SELECT_RATIO_HIGH_MAX`` qualify; among them the highest CI lower end (ties: the lower ratio upper end,
   then the earlier point). When none qualifies, the method's ``fallback`` point (or, for a method without
   one, the highest CI lower end).
5. The method is refit on all training datasets and that one point is replayed on the held-out dataset beside
   the reference. The held-out folds are stacked: every episode is evaluated once per seed, by a controller
   that never saw its dataset and whose settings were chosen without it.
6. ``train.protocol_stats`` compares the stack with the reference (per seed; on the seed-mean with a
   hierarchical bootstrap over seeds and items) and gives the verdict of ``protocol_stats.VERDICT_RULE``,
   "partial" unless every outer fold and at least 3 seeds ran.

Where it replays is its *arena* (``train.protocol_arena``): the replay env against ``REFERENCE`` (CoBa-Strong)
with the cost bound 0.9 by default, or the route env against the consistency cascade with the bound 0.8
(``run_protocol(..., arena=ROUTE)``, ``coba train KIND --lodo --env route``). Steps 1-6 are the same in both.

The outer folds are independent tasks run through ``fold_map`` (builtin ``map`` by default; a parallel map
such as ``coba_env.parallel.map_tasks`` has the same signature).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.env import default_budget
from coba_env.splits import Split, leave_one_dataset_out
from pools.safe_names import path_under
from train.protocol_arena import REPLAY, Arena

#: The protocol's constants, stated before any held-out run (docs/LEARNING.md, "Protocol").
POOL = "paper"
SEEDS: tuple[int, ...] = (0, 1, 2)
#: The replay env's reference (``train.protocol_arena.REPLAY``); the route env's is ``ROUTE.reference``.
REFERENCE = REPLAY.reference
COST_MODEL = "p_tokens"
#: The selection rule's margins (issue 27), stated before any held-out run: the inner item-pooled difference's
#: 95% CI lower end >= -SELECT_ITEM_MARGIN points, the inner macro difference >= -SELECT_MACRO_MARGIN points
#: and the inner p_tokens ratio's 95% CI upper end < SELECT_RATIO_HIGH_MAX (the verdict's own bounds).
SELECT_ITEM_MARGIN = 0.5
SELECT_MACRO_MARGIN = 0.5
SELECT_RATIO_HIGH_MAX = 0.9
#: Resamples of the inner paired bootstrap.
SELECT_RESAMPLES = 1000

FoldMap = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]


class Fitted(Protocol):
    """A method fit on one fold's training episodes; gives a label-free policy per grid point."""

    def policy(self, point: dict[str, float]) -> Policy:
        """The controller at operating point ``point`` (it uses the fold's budget)."""
        ...


class Method(Protocol):
    """A learning method run by the protocol: its grid of operating points is stated in advance."""

    name: str

    def grid(self) -> list[dict[str, float]]:
        """Every operating point the nested selection may choose from, in a fixed order."""
        ...

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> Fitted:
        """Fit on the episodes ``train_ids`` (pool episode ids) with budget ``budget``."""
        ...


def point_name(method_name: str, point: dict[str, float]) -> str:
    """A policy name for one operating point, e.g. ``rollout[lam=0.1,tau=0.05]``."""
    return f"{method_name}[" + ",".join(f"{k}={v:g}" for k, v in point.items()) + "]"


def fallback_point(method: Any) -> dict[str, float] | None:
    """The method's stated fallback (``method.fallback()``), or None when it states none."""
    fallback = getattr(method, "fallback", None)
    return None if fallback is None else fallback()


def episodes_of(compiled: CompiledPool, ids: np.ndarray) -> CompiledPool:
    """The compiled pool restricted to the episodes with pool episode ids ``ids``."""
    return compiled.select(np.isin(compiled.episode_ids, np.asarray(ids)))


def cost_unit(compiled: CompiledPool, cost_model: str = COST_MODEL) -> float:
    """The pool's one cost unit B for every fit: the default budget (mean cost of N candidates) over all its
    episodes. Label-free (token counts only); one number, so lambda means the same trade-off in every fold."""
    return default_budget(compiled, cost_model, compiled.n_candidates)


def inner_splits(compiled: CompiledPool, train_ids: np.ndarray) -> list[Split]:
    """Leave-one-dataset-out inside the training episodes ``train_ids`` (the nested folds)."""
    return leave_one_dataset_out(episodes_of(compiled, train_ids))


def _replay(policies: list[Policy], compiled: CompiledPool, ids: np.ndarray, progress: bool,
            arena: Arena = REPLAY) -> pd.DataFrame:
    """Replay ``policies`` and the arena's reference on the episodes ``ids``."""
    return arena.replay(policies, episodes_of(compiled, ids), progress)


def validation_summary(records: pd.DataFrame, names: Sequence[str], *, resamples: int = SELECT_RESAMPLES,
                       reference: str = REFERENCE) -> pd.DataFrame:
    """Per point, over the stacked validation datasets against the reference (the selection rule's inputs):
    macro and item-pooled accuracy difference (points), the item-pooled difference's 95% CI lower end, the
    pooled p_tokens ratio and its 95% CI upper end (paired bootstrap over items, ``protocol_stats.compare``)."""
    from train.protocol_stats import compare

    rows = []
    for name in names:
        stats = compare(records, name, reference, resamples=resamples).set_index("scope")
        rows.append({"policy": name, "macro_diff": float(stats.loc["MACRO", "diff"]),
                     "item_diff": float(stats.loc["ALL", "diff"]), "item_ci_low": float(stats.loc["ALL", "ci_low"]),
                     "cost_ratio": float(stats.loc["ALL", "cost_ratio"]),
                     "ratio_high": float(stats.loc["ALL", "ratio_high"])})
    return pd.DataFrame(rows)


def select_point(summary: pd.DataFrame, grid: Sequence[dict[str, float]],
                 fallback: dict[str, float] | None, *, ratio_high_max: float = SELECT_RATIO_HIGH_MAX) -> tuple[int, str]:
    """The selection rule: (index into ``grid``, why). ``summary`` rows are in grid order.

    Qualify: item_ci_low >= -SELECT_ITEM_MARGIN, macro_diff >= -SELECT_MACRO_MARGIN and ratio_high <
    ``ratio_high_max`` (the arena's bound). Among them the highest item_ci_low (ties: lower ratio_high, then the earlier point);
    if none qualifies, ``fallback`` (must be a grid point), else the highest item_ci_low."""
    rows = range(len(summary))
    col = {c: summary[c].to_numpy(dtype=float) for c in ("item_ci_low", "macro_diff", "ratio_high")}
    ok = [i for i in rows if col["item_ci_low"][i] >= -SELECT_ITEM_MARGIN
          and col["macro_diff"][i] >= -SELECT_MACRO_MARGIN and col["ratio_high"][i] < ratio_high_max]
    key = lambda i: (-col["item_ci_low"][i], col["ratio_high"][i], i)  # noqa: E731
    if ok:
        return min(ok, key=key), "rule"
    if fallback is not None:
        return list(grid).index(fallback), "fallback"
    return min(rows, key=key), "highest item_ci_low"


@dataclass
class FoldResult:
    """One (seed, outer fold): the held-out records, every inner grid point's validation summary, the choice."""

    seed: int
    held_out: str
    budget: float
    records: pd.DataFrame
    inner: pd.DataFrame
    chosen: dict[str, Any]
    seconds: float


def run_outer_fold(task: tuple[int, Split], *, compiled: CompiledPool, method: Method, out_dir: Path,
                   progress: bool, budget: float | None = None, arena: Arena = REPLAY) -> FoldResult:
    """Steps 3-5 of the protocol for one (seed, outer split): nested selection, refit, held-out replay on the
    arena's env beside its reference. Every fit gets ``budget`` (default: the pool's ``cost_unit``)."""
    seed, split = task
    budget = cost_unit(compiled) if budget is None else float(budget)
    t0 = time.perf_counter()
    grid = list(method.grid())
    names = [point_name(method.name, p) for p in grid]
    fold_dir = path_under(out_dir, f"seed{seed}", split.held_out)  # dataset names are data: never a raw path
    frames = []
    for inner in inner_splits(compiled, split.train_episode_ids):
        fitted = method.fit(compiled, inner.train_episode_ids, budget=budget, seed=seed,
                            out_dir=path_under(fold_dir, "inner", inner.held_out), progress=progress)
        policies = [fitted.policy(p) for p in grid]
        for pol, name in zip(policies, names, strict=True):
            pol.name = name
        frames.append(_replay(policies, compiled, inner.eval_episode_ids, progress, arena))
    val = pd.concat(frames, ignore_index=True)
    inner_table = validation_summary(val, names, reference=arena.reference)
    pick, why = select_point(inner_table, grid, fallback_point(method), ratio_high_max=arena.ratio_high_max)
    inner_table = inner_table.assign(seed=seed, held_out=split.held_out, chosen=[i == pick for i in range(len(grid))])
    # -- refit on every training dataset (the same cost unit); replay the one chosen point
    fitted = method.fit(compiled, split.train_episode_ids, budget=budget, seed=seed, out_dir=fold_dir / "final",
                        progress=progress)
    policy = fitted.policy(grid[pick])
    policy.name = method.name
    records = _replay([policy], compiled, split.eval_episode_ids, progress, arena).assign(seed=seed)
    chosen = {"seed": seed, "held_out": split.held_out, "point": names[pick], "how": why, "budget": budget,
              **{f"point_{k}": v if np.isfinite(v) else str(v) for k, v in grid[pick].items()}}
    return FoldResult(seed=seed, held_out=split.held_out, budget=budget, records=records, inner=inner_table,
                      chosen=chosen, seconds=time.perf_counter() - t0)


@dataclass
class ProtocolResult:
    """Every seed's stacked held-out records, the inner tables, the choices, the statistics and the verdict."""

    method: str
    records: pd.DataFrame
    inner: pd.DataFrame
    chosen: pd.DataFrame
    stats: pd.DataFrame
    verdict: dict[str, Any]
    seconds: float
    cost_unit: float
    timings: dict[str, float] = field(default_factory=dict)
    arena: Arena = REPLAY


def run_protocol(compiled: CompiledPool, method: Method, *, seeds: Sequence[int] = SEEDS, out_dir: str | Path,
                 progress: bool = True, fold_map: FoldMap = map, held_out: Sequence[str] | None = None,
                 resamples: int | None = None, pool_name: str = "unnamed pool",
                 arena: Arena = REPLAY) -> ProtocolResult:
    """Run the whole protocol for ``method`` on ``compiled`` (named ``pool_name`` in the verdict) in ``arena``
    (the env, its reference and cost bound: ``train.protocol_arena``); write its tables to ``out_dir``.

    ``held_out`` restricts the outer folds: a partial run, whose verdict says so and never beats."""
    from train import protocol_stats

    arena.check(compiled)
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_splits = leave_one_dataset_out(compiled)
    splits = all_splits if held_out is None else [s for s in all_splits if s.held_out in held_out]
    coverage = protocol_stats.Coverage(pool=str(pool_name), seeds=tuple(int(s) for s in seeds),
                                       folds=tuple(s.held_out for s in splits),
                                       all_folds=tuple(s.held_out for s in all_splits), env=arena.env,
                                       reference=arena.reference)
    budget = cost_unit(compiled)
    tasks = [(int(seed), split) for seed in seeds for split in splits]
    work = functools.partial(run_outer_fold, compiled=compiled, method=method, out_dir=out, progress=progress,
                             budget=budget, arena=arena)
    folds: list[FoldResult] = list(fold_map(work, tasks))
    records = pd.concat([f.records for f in folds], ignore_index=True)
    inner = pd.concat([f.inner for f in folds], ignore_index=True)
    chosen = pd.DataFrame([f.chosen for f in folds])
    kw = {} if resamples is None else {"resamples": resamples}
    stats = protocol_stats.compare_seeds(records, method.name, arena.reference, **kw)
    verdict = protocol_stats.verdict(stats, method.name, coverage, ratio_high_max=arena.ratio_high_max)
    result = ProtocolResult(method=method.name, records=records, inner=inner, chosen=chosen, stats=stats,
                            verdict=verdict, seconds=time.perf_counter() - t0, cost_unit=budget,
                            timings={f"seed{f.seed}_{f.held_out}_s": f.seconds for f in folds}, arena=arena)
    protocol_stats.write_tables(result, out)
    return result
