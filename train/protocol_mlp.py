"""The MLP controller (``train.imitation``) as a protocol ``Method`` on either env: one fit serves every lambda.

``coba train mlp --lodo [--env route]`` runs ``MLPMethod(env)``. Reads top to bottom:

1. ``fit`` builds the env of the protocol's arena (``train.protocol_arena``: the replay env, or the route env,
   one episode per problem with every generator) over the fit's training episodes only
   (``train.protocol.episodes_of``) with the protocol's cost unit B, and its teacher
   ``CostAwareOracle.for_env(env)`` (it reads labels; the controller never does). On the route env the
   teacher's answers are shared by the fits through ``OracleCache`` (``MLPProtocol.share_teacher``): with one B,
   one N_max and one rule in every fit they are the same in every fit that trains on the problem, so folds
   sharing a training dataset ask the search once.
2. ``train.imitation.train_mlp_in_env`` runs the DAgger loop with the env's stated settings (``MLP_PROTOCOLS``).
3. ``policy(point)``: the checkpoint (``agents.learned_mlp``) at the point's lambda or, at the fallback point
   lambda = infinity (route env), the arena's reference itself (``route_cascade``).
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

#: The replay MLP's operating points (the lambda it acts at), stated in advance.
MLP_GRID_LAMBDAS = (0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
#: Training settings used under the protocol (stated in advance; smaller than ``train_mlp``'s defaults so that
#: 25 fits per seed fit the machine: 5 outer folds x (4 inner + 1 refit)).
MLP_PROTOCOL_SETTINGS: dict[str, Any] = {"dagger_rounds": 2, "episodes_per_round": 400, "epochs": 20,
                                         "balance_datasets": True, "tensorboard": False}
#: The route env's operating points, stated in advance. On the paper pool the cascade spends about 0.16 B per
#: problem at 93.1% (item-pooled); a controller reaching its accuracy at 0.8x its cost trades about 0.03 B for
#: the last points of accuracy, i.e. marginal slopes of roughly 0.1 to 2 accuracy per B. The grid spans that
#: range geometrically (about x1.7 per step; six points, not more, for the replay time of the 60 inner
#: validations); lambda = infinity is the fallback.
ROUTE_MLP_GRID_LAMBDAS: tuple[float, ...] = (0.1, 0.2, 0.35, 0.6, 1.0, 2.0)
#: Candidates per generator the route controller may draw (the route env's default: the pool's N, 16 on paper),
#: the same env the reference is replayed in.
ROUTE_N_MAX: int | None = None
#: DAgger settings on the route env (stated in advance, sized by timing only on the training side of the outer
#: fold without aime2025: ``scripts/protocol_fit_timing.py mlp --env route``, docs/LEARNING.md). Issue 37: 1,010
#: episodes per fit: round 0, 10 episodes of the oracle (its answers shared by every fit); then 2 rounds of 500
#: episodes played by the learner alone (beta 0: DAgger's "beta_i = 1 only in the first round", Ross et al. 2011),
#: labelled with its own continuation values in one batch (``train.learner_values``). With beta 0.5 as before,
#: the oracle's searches from the states the learner reaches were 222 of a fit's 240 s (node limit 2,000), so
#: that mixture cannot reach 1,000 episodes per fit within the protocol's time. Otherwise as the replay MLP's
#: protocol settings (dataset-balanced, Q-regression on rollout targets). Issue 37, sized from the same timing
#: (docs/LEARNING.md): every round's fit is 300 minibatch steps (``gradient_steps``; 20 epochs gave round 0's 258
#: rows 40 steps, an untrained first learner whose long episodes made round 1 cost 100 s), and a learner episode
#: labels at most 4 of its visited states (``states_per_episode``: continuations cost an episode's length squared).
#: Round 0 is 10 oracle episodes (20 before): its searches at every training lambda were most of a
#: refit's time (cProfile: the teacher's bound, ``oracle_bound``, on problems no earlier fit asked about).
ROUTE_MLP_SETTINGS: dict[str, Any] = {"dagger_rounds": 2, "episodes_per_round": 500, "round0_episodes": 10,
                                      "beta": 0.0, "epochs": 20, "gradient_steps": 300, "states_per_episode": 4,
                                      "balance_datasets": True, "tensorboard": False}
#: The fallback point of a method with one: its arena's reference itself.
FALLBACK_LAMBDA = math.inf


@dataclass(frozen=True)
class MLPProtocol:
    """The MLP method's settings on one env of the protocol, stated in advance.

    ``node_limit``: the teacher's search limit (the replay protocol's fits ran ``train_mlp``'s 300; the route
    env's the oracle's default); ``fallback``: whether the grid ends with the arena's reference (lambda =
    infinity); ``share_teacher``: whether the fits share the teacher's answers (``OracleCache``)."""

    name: str
    lambdas: tuple[float, ...]
    settings: dict[str, Any]
    node_limit: int
    fallback: bool
    share_teacher: bool


MLP_PROTOCOLS: dict[str, MLPProtocol] = {
    "replay": MLPProtocol("mlp", MLP_GRID_LAMBDAS, MLP_PROTOCOL_SETTINGS, 300, fallback=False, share_teacher=False),
    "route": MLPProtocol("route_mlp", ROUTE_MLP_GRID_LAMBDAS, ROUTE_MLP_SETTINGS, 20_000, fallback=True,
                         share_teacher=True),
}


@dataclass
class OracleCache:
    """The teacher's answers keyed by (B, N_max, layout, dataset, item, generator, lambdas, action prefix), and
    its searches keyed by (B, N_max, layout, dataset, item, generator) then by search state: a learner's
    rollout in one fit reaches states another fit's teacher already searched from."""

    plans: dict[tuple, Any] = field(default_factory=dict)
    values: dict[tuple, np.ndarray] = field(default_factory=dict)
    searches: dict[tuple, dict] = field(default_factory=dict)


class _SharedSearches:
    """``CostAwareOracle``'s per-episode search cache (``setdefault(episode, {})``, ``clear``) over an
    ``OracleCache``: one fit's episode index maps to its problem's key, so every fit shares the searches."""

    def __init__(self, keys: list[tuple], searches: dict[tuple, dict]) -> None:
        self._keys, self._searches = keys, searches

    def setdefault(self, episode: int, default: dict) -> dict:
        """The search cache of ``episode``'s problem (``default`` when it has none yet)."""
        return self._searches.setdefault(self._keys[episode], default)

    def clear(self) -> None:
        """Kept: the shared searches outlive one fit (``OracleCache`` is the method's)."""


class CachedOracle:
    """A ``CostAwareOracle`` of one fit's env behind an ``OracleCache`` keyed by problem, not env index."""

    def __init__(self, oracle: Any, env: Any, cache: OracleCache) -> None:
        self.oracle, self.cache = oracle, cache
        pool = env.pool
        layout = tuple(env.layout.names)  # action ids mean the same only under the same layout
        self._keys = [(float(env.budget), int(env.n_max), layout, str(d), str(i), str(g))
                      for d, i, g in zip(pool.dataset.tolist(), pool.item_id.tolist(), pool.generator.tolist(),
                                         strict=True)]
        # The search's state keys and cached answers depend only on the problem and the env's rules (one B, one
        # N_max, one layout in every fit), so they are shared like the answers.
        oracle._searches = _SharedSearches(self._keys, cache.searches)

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
class FittedMLP:
    """An MLP checkpoint fit on one fold; ``policy`` acts at the point's lambda with the fit's B."""

    path: Path
    reference: str

    def policy(self, point: dict[str, float]) -> Policy:
        """The checkpoint acting at ``point["lam"]``; the arena's reference at lambda = infinity (the fallback)."""
        lam = float(point["lam"])
        if math.isinf(lam):
            from agents.registry import make_policy

            return make_policy(self.reference)
        from agents.learned_mlp import load

        return load(self.path, lam=lam)


class MLPMethod:
    """DAgger imitation of the cost-aware oracle on ``env``'s arena, lambda-conditioned, dataset-balanced."""

    def __init__(self, env: str = "replay", *, lambdas: tuple[float, ...] | None = None, n_max: int | None = None,
                 settings: dict[str, Any] | None = None, problem_features: str | None = None) -> None:
        from coba_env.featurizers import parse_sources
        from train.imitation import MLPSettings
        from train.protocol_arena import arena_named

        self.arena, stated = arena_named(env), MLP_PROTOCOLS[env]
        self.protocol = stated
        #: Problem feature sources (``coba_env.featurizers``), fitted inside each fit on its training items only.
        self.problem_features = None if problem_features is None else ",".join(parse_sources(problem_features))
        self.name = stated.name if problem_features is None else f"{stated.name}+{self.problem_features.replace(',', '+')}"
        values = [float(v) for v in (stated.lambdas if lambdas is None else lambdas)]
        if not values or any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"lambdas must be finite numbers >= 0, got {list(values)}")
        if n_max is not None and (isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1):
            raise ValueError(f"n_max must be an integer >= 1 (candidates per generator) or None, got {n_max!r}")
        self.lambdas, self.n_max = tuple(values), n_max
        self.settings = dict(stated.settings if settings is None else settings)
        known = set(MLPSettings.names()) - {"lambdas", "seed", "progress", "name"}
        unknown = sorted(set(self.settings) - known)
        if unknown:
            raise ValueError(f"settings: unknown training option(s) {unknown}; expected some of {sorted(known)}")
        self.oracle_cache = OracleCache()

    def grid(self) -> list[dict[str, float]]:
        """One point per lambda of ``lambdas``, then the fallback when the env states one."""
        points = [{"lam": v} for v in self.lambdas]
        return points + [{"lam": FALLBACK_LAMBDA}] if self.protocol.fallback else points

    def fallback(self) -> dict[str, float] | None:
        """lambda = infinity (the reference) where stated; else None: the protocol takes the highest item-pooled
        difference."""
        return {"lam": FALLBACK_LAMBDA} if self.protocol.fallback else None

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedMLP:
        """Train on the episodes ``train_ids`` (replay-pool episode ids; on the route env the problems they cover)
        at B = ``budget``; training lambdas are the grid's."""
        from coba_env.env import CoBaEnv
        from train.cost_aware_oracle import CostAwareOracle
        from train.imitation import train_mlp_in_env
        from train.protocol import episodes_of

        if len(np.asarray(train_ids)) == 0:
            raise ValueError(f"{self.name}: no training episodes")
        episodes = episodes_of(compiled, train_ids)
        featurizer = None
        if self.problem_features is not None:  # fitted on this fit's training items only
            from coba_env.featurizers import fit_featurizer
            from coba_env.problems import problems_of

            featurizer = fit_featurizer(problems_of(episodes), self.problem_features, seed=int(seed))
        env = CoBaEnv(episodes, grouping=self.arena.grouping, budget=float(budget), n_max=self.n_max,
                      problem_features=featurizer)
        oracle: Any = CostAwareOracle.for_env(env, node_limit=self.protocol.node_limit)
        if self.protocol.share_teacher:
            oracle = CachedOracle(oracle, env, self.oracle_cache)
        path = train_mlp_in_env(env, oracle, out_dir, lambdas=self.lambdas, seed=int(seed), progress=progress,
                                name=self.name, **self.settings)
        return FittedMLP(Path(path), self.arena.reference)
