"""The MLP controller on the route env (issue 27, item 3) as a protocol ``Method``: ``coba train mlp --lodo --env route``.

Reads top to bottom:

1. ``fit`` builds a ``coba_env.route_env.RouteEnv`` over the fit's training problems only
   (``train.protocol.episodes_of``: every generator of every training problem) with the protocol's cost unit B
   and ``ROUTE_N_MAX`` candidates per generator, and its teacher ``CostAwareOracle.for_env(env)`` (it
   reads labels; the controller never does).
2. ``train.imitation.train_mlp_in_env`` runs the replay MLP's DAgger loop on it (round 0: the oracle's
   rollouts relabelled with its cost-to-go at every training lambda; later rounds: the learner's rollouts,
   mixed with the oracle, relabelled with the learner's own continuation values; Q-regression), with the
   settings of ``ROUTE_MLP_SETTINGS``. The teacher's answers are cached per (problem, lambdas, action prefix)
   in ``OracleCache`` on the method: with one B, one N_max and one rule in every fit they are the same in every
   fit that trains on the problem, so folds sharing a training dataset ask the search once.
3. ``policy(point)``: the checkpoint as an ``agents.learned_route_mlp.RouteMLPController`` at the point's
   lambda, or, at the fallback point lambda = infinity, the reference itself (``route_cascade``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from coba_env.compiled import CompiledPool

#: The operating points (the lambda the controller acts at), stated in advance. On the paper pool the cascade
#: spends about 0.16 B per problem at 93.1% (item-pooled); a controller reaching its accuracy at 0.8x its cost
#: trades about 0.03 B for the last points of accuracy, i.e. marginal slopes of roughly 0.1 to 2 accuracy per
#: B. The grid spans that range geometrically (about x1.7 per step; six points, not more, for the replay time
#: of the 60 inner validations); lambda = infinity is the fallback.
ROUTE_MLP_GRID_LAMBDAS: tuple[float, ...] = (0.1, 0.2, 0.35, 0.6, 1.0, 2.0)
#: Candidates per generator the controller may draw (the route env's default: the pool's N, 16 on paper),
#: the same env the reference is replayed in.
ROUTE_N_MAX: int | None = None
#: DAgger settings under the protocol (stated in advance, sized by timing only: 75 fits plus replays within
#: 20 minutes on one core; see /work/notes/protocol-rmlp.md). As the replay MLP's protocol settings
#: (``train.protocol_mlp``: 2 DAgger rounds, dataset-balanced, Q-regression on rollout targets, 20 epochs)
#: with fewer episodes per round: a route episode carries every generator of a problem.
ROUTE_MLP_SETTINGS: dict[str, Any] = {"dagger_rounds": 2, "episodes_per_round": 20, "epochs": 20,
                                      "balance_datasets": True, "tensorboard": False}
#: The fallback point: the reference (the consistency cascade) itself.
FALLBACK_LAMBDA = math.inf


@dataclass
class OracleCache:
    """The teacher's answers keyed by (B, N_max, dataset, item, lambdas, action prefix), shared by the fits."""

    plans: dict[tuple, Any] = field(default_factory=dict)
    values: dict[tuple, np.ndarray] = field(default_factory=dict)


class CachedOracle:
    """``RouteCostAwareOracle`` of one fit's env behind an ``OracleCache`` keyed by problem, not env index."""

    def __init__(self, oracle: Any, env: Any, cache: OracleCache) -> None:
        self.oracle, self.cache = oracle, cache
        pool = env.pool
        layout = tuple(env.layout.names)  # action ids mean the same only under the same layout
        self._keys = [(float(env.budget), int(env.n_max_per_generator), layout, str(d), str(i))
                      for d, i in zip(pool.dataset.tolist(), pool.item_id.tolist(), strict=True)]

    def plan(self, episode: int, lam: float, prefix: Any = ()) -> Any:
        """``oracle.plan`` (a copy: the caller consumes its actions)."""
        key = (*self._keys[episode], float(lam), tuple(prefix))
        plan = self.cache.plans.get(key)
        if plan is None:
            plan = self.cache.plans[key] = self.oracle.plan(episode, lam, prefix)
        return dataclasses.replace(plan, actions=list(plan.actions))

    def action_values(self, episode: int, lams: Any, prefix: Any = ()) -> np.ndarray:
        """``oracle.action_values`` (a copy)."""
        key = (*self._keys[episode], tuple(float(v) for v in lams), tuple(prefix))
        q = self.cache.values.get(key)
        if q is None:
            q = self.cache.values[key] = self.oracle.action_values(episode, lams, prefix)
        return q.copy()


@dataclass
class FittedRouteMLP:
    """A route MLP checkpoint fit on one fold; ``policy`` acts at the point's lambda with the fit's B."""

    path: Path

    def policy(self, point: dict[str, float]) -> Policy:
        """The checkpoint acting at ``point["lam"]``; the reference cascade at lambda = infinity (the fallback)."""
        lam = float(point["lam"])
        if math.isinf(lam):
            from agents.registry import make_policy

            return make_policy("route_cascade")
        from agents.learned_route_mlp import load_route

        return load_route(self.path, lam=lam)


class RouteMLPMethod:
    """DAgger imitation of the route cost-aware oracle on the route env, lambda-conditioned, dataset-balanced."""

    name = "route_mlp"

    def __init__(self, lambdas: tuple[float, ...] = ROUTE_MLP_GRID_LAMBDAS, n_max: int | None = ROUTE_N_MAX,
                 settings: dict[str, Any] | None = None) -> None:
        values = [float(v) for v in lambdas]
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"lambdas must be finite numbers >= 0, got {list(lambdas)}")
        if n_max is not None and (isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1):
            raise ValueError(f"n_max must be an integer >= 1 (candidates per generator) or None, got {n_max!r}")
        self.lambdas = tuple(values)
        self.n_max = n_max
        self.settings = dict(ROUTE_MLP_SETTINGS if settings is None else settings)
        import inspect

        from train.imitation import train_mlp_in_env

        fixed = {"env", "oracle", "out_dir", "budget", "max_output_tokens", "lambdas", "extra_config", "seed",
                 "progress", "name"}
        known = set(inspect.signature(train_mlp_in_env).parameters) - fixed
        unknown = sorted(set(self.settings) - known)
        if unknown:
            raise ValueError(f"settings: unknown training option(s) {unknown}; expected some of {sorted(known)}")
        self.oracle_cache = OracleCache()

    def grid(self) -> list[dict[str, float]]:
        """One point per lambda of ``lambdas``, then the fallback (the cascade)."""
        return [{"lam": v} for v in self.lambdas] + [self.fallback()]

    def fallback(self) -> dict[str, float]:
        """lambda = infinity: the reference cascade itself."""
        return {"lam": FALLBACK_LAMBDA}

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedRouteMLP:
        """Train on the route episodes of the problems of ``train_ids`` (replay episode ids) at B = ``budget``."""
        from coba_env.env import CoBaEnv
        from train.cost_aware_oracle import CostAwareOracle
        from train.imitation import train_mlp_in_env
        from train.protocol import episodes_of

        if len(np.asarray(train_ids)) == 0:
            raise ValueError(f"{self.name}: no training episodes")
        train = episodes_of(compiled, train_ids)
        env = CoBaEnv(train, grouping="item", budget=float(budget), n_max=self.n_max)
        oracle = CachedOracle(CostAwareOracle.for_env(env), env, self.oracle_cache)
        path = train_mlp_in_env(env, oracle, out_dir, budget=float(budget),
                                max_output_tokens=float(train.max_output_tokens), lambdas=self.lambdas,
                                extra_config={"env": "route", "n_max_per_generator": int(env.n_max_per_generator)},
                                seed=int(seed), progress=progress, name=self.name, **self.settings)
        return FittedRouteMLP(Path(path))
