"""The pool oracles: evaluator-side upper bounds that READ CORRECTNESS LABELS. Never a deployable method.

One rule for both groupings of the env (a replay episode is one generator's candidates of a problem, a route
episode every generator's; ``GeneratorAxis``): reveal, from one generator, the prefix of its candidates ending
at its first correct one, and STOP with selection ``last`` (that correct candidate). Which generator: the one
whose prefix is cheapest in the env's cost measure (ties: layout order), so the oracle is right whenever ANY
generator holds a correct candidate within N_max; on a replay episode, the one generator. Without a correct
candidate anywhere it SAMPLEs the cheapest first candidate once and STOPs (the cheapest way to stop). Its cost
is therefore that of the shortest prefix containing a correct answer, which matches the paper's ~1.5 calls per
item (Appendix C); exhausting the pool on unsolvable items would cost about +1.3 calls more there.

Registered names (group ``oracle``, ``uses_labels``; excluded from fronts and comparisons; every other policy is
proven label-free by tests/test_label_leak.py):

- ``pool_oracle``: the replay bench's row (paper Appendix C);
- ``route_pool_oracle``: the same rule on the route bench (a route policy): at least as accurate as the pool
  oracle of every single generator;
- ``route_cost_aware_oracle``: the exact optimum of ``1[correct] - lambda * C / B`` over every action sequence
  under selection ``last``: VERIFY never changes a ``last`` selection and a SAMPLE of another generator only adds
  cost, so the best plan is the cheapest correct prefix above, or, when ``lambda * (its cost - the cheapest
  single sample's) / B`` exceeds 1, one sample of the cheapest first candidate. At lambda = 0 it is the pool
  oracle. The exact search under the env's fusion selection (or any configured rule) is
  ``train.cost_aware_oracle.CostAwareOracle`` (in ``train``: it reads labels; agents may not import train).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agents.configured import ConfiguredPolicy, can, register
from agents.routing_base import RoutePolicy
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence

__all__ = ["GeneratorAxis", "PoolOracle", "RouteCostAwareOracle", "RoutePoolOracle", "oracle_targets"]


@dataclass(frozen=True)
class GeneratorAxis:
    """How an env's episodes split their candidates by generator: G generators of N candidates each, each capped
    at N_max (per generator); a replay episode has one generator, its own candidates."""

    names: tuple[str, ...]  # the layout's generator names (the one unnamed generator ``""`` of a replay episode)
    n_per_generator: int
    #: available[e, g]: episode e has generator g's candidates (bool [E, G]).
    available: np.ndarray
    cap: int  # most candidates one generator may reveal

    @classmethod
    def of(cls, config: Any) -> GeneratorAxis:
        """The axis of an env configuration (``EnvConfig``): its route pool's generators, or a pair's one."""
        route = config.route
        if route is None:  # "pair" grouping: one generator, whose candidates are the episode's own
            return cls(("",), config.pool.n_candidates, np.ones((config.pool.n_episodes, 1), dtype=bool), config.n_max)
        return cls(route.generators, route.n_per_generator, route.available, config.n_max_per_generator)


def oracle_targets(correct: np.ndarray, cost: np.ndarray, available: np.ndarray, lam: np.ndarray | None,
                   budget: float) -> tuple[np.ndarray, np.ndarray]:
    """(generator, candidates to reveal) per row from labels ``correct`` [R, G, N] and costs ``cost`` [R, G, N].

    ``available`` [R, G]: the item has the generator's candidates. ``lam`` [R] (None: the pool oracle) trades
    the correct prefix's cost against giving up with the cheapest single sample.
    """
    prefix = np.cumsum(cost, axis=2)
    hit = correct.any(axis=2)
    first = correct.argmax(axis=2)
    rows = np.arange(len(correct))[:, None]
    correct_cost = np.where(hit, prefix[rows, np.arange(correct.shape[1])[None, :], first], np.inf)
    best = correct_cost.argmin(axis=1)  # first minimum: ties in layout order
    best_cost = correct_cost[np.arange(len(correct)), best]
    single = np.where(available, cost[:, :, 0], np.inf)
    cheap = single.argmin(axis=1)
    cheap_cost = single[np.arange(len(correct)), cheap]
    solvable = np.isfinite(best_cost)
    if lam is not None:  # worth paying for the correct prefix rather than giving up with one cheap sample
        extra = np.where(solvable, best_cost - cheap_cost, 0.0)
        solvable &= lam * extra / budget <= 1.0
    g = np.where(solvable, best, cheap)
    k = np.where(solvable, first[np.arange(len(correct)), best] + 1, 1)
    return g.astype(np.int64), k.astype(np.int64)


@register("pool_oracle")
class PoolOracle(ConfiguredPolicy):
    """Pool oracle (paper Appendix C): the cheapest prefix of one generator ending at a correct candidate.

    !!! THIS POLICY READS CORRECTNESS LABELS (``env.pool.labels``) IN ``reset(env)`` / ``start_batch``.
    """

    group: ClassVar[str] = "oracle"
    uses_labels: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {}
    #: Whether the plan weighs its cost against lambda (the cost-aware oracle).
    lambda_aware: ClassVar[bool] = False

    def configure(self) -> None:
        """Selection ``last``: the newest revealed candidate with an answer (the correct one revealed last)."""
        self.selection = "last"
        self._target = (0, 1)

    def _plan(self, config: Any, pool: Any, episodes: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(generator, candidates) per episode of ``episodes`` from the labels (evaluator side)."""
        axis = GeneratorAxis.of(config)
        shape = (len(episodes), len(axis.names), axis.n_per_generator)
        correct = pool.labels.correct[episodes].reshape(shape)[:, :, :axis.cap]
        cost = pool.gen_cost[episodes, :, config.cost_k].reshape(shape)[:, :, :axis.cap]
        return oracle_targets(correct, cost, axis.available[episodes], lam if self.lambda_aware else None,
                              config.budget)

    def reset(self, env: CoBaEnv) -> None:
        """Read the episode's labels: which generator to sample and how many of its candidates."""
        super().reset(env)
        base = env.unwrapped
        # CoBaEnv keeps the current episode's row index private; this evaluator-side policy is its one reader.
        g, k = self._plan(base.config, base.pool, np.array([base.episode_index]), np.array([base.evidence.lam]))
        self._target = (int(g[0]), int(k[0]))

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE the planned generator up to its planned count (it samples no other one), then STOP."""
        g, k = self._target
        sample = self.layout.sample_action(g)
        if evidence.n_revealed < k and can(action_mask, sample):
            return sample
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Plan the rows' new episodes from the labels, as ``reset`` does for one (evaluator side only)."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_gen = np.zeros(venv.num_envs, dtype=np.int64)
            self._b_count = np.ones(venv.num_envs, dtype=np.int64)
            rows = np.arange(venv.num_envs)
        self._b_gen[rows], self._b_count[rows] = self._plan(venv.config, venv.pool, venv.ep[rows], venv.lams[rows])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        sample = self.layout.sample_action(self._b_gen)
        go = (venv.n < self._b_count) & (np.take_along_axis(action_masks, sample[:, None], axis=1)[:, 0] > 0)
        return np.where(go, sample, self.stop_id).astype(np.int64)


@register("route_pool_oracle")
class RoutePoolOracle(RoutePolicy, PoolOracle):
    """The pool oracle on the route bench: the cheapest correct prefix of any generator (a route policy)."""

    group: ClassVar[str] = "oracle"
    min_generators: ClassVar[int] = 1


@register("route_cost_aware_oracle")
class RouteCostAwareOracle(RoutePoolOracle):
    """Cost-aware oracle over generators: exact under selection ``last`` for the episode's lambda."""

    lambda_aware: ClassVar[bool] = True
