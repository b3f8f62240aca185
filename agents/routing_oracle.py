"""Oracles over generators: evaluator-side upper bounds of the route env that READ CORRECTNESS LABELS.

Like ``agents.oracle.PoolOracle`` (group ``oracle``, ``uses_labels``): never a deployable method, excluded
from fronts and comparisons. Both reveal, from one generator, the prefix of its candidates ending at its first
correct one, and STOP with selection ``last`` (that correct candidate). Which generator:

- ``route_pool_oracle``: the one whose prefix is cheapest in the env's cost measure (ties: layout order), so
  it is right whenever ANY generator holds a correct candidate within N_max: at least as accurate as the
  pool oracle of every single generator.
- ``route_cost_aware_oracle``: the exact optimum of ``1[correct] - lambda * C / B`` over every action
  sequence of the route env under selection ``last``: VERIFY never changes a ``last`` selection, a SAMPLE of
  another generator only adds cost, so the best plan is the cheapest correct prefix above, or, when
  ``lambda * (its cost - the cheapest single sample's) / B`` exceeds 1, one sample of the cheapest first
  candidate. At lambda = 0 it is the pool oracle. The exact search under the env's fusion selection (or any
  configured rule) is ``train.route_cost_aware_oracle.RouteCostAwareOracle`` (in ``train``: it is the replay
  oracle's A*; agents may not import train).

Without a correct candidate anywhere, both SAMPLE the cheapest first candidate once and STOP.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.configured import can, register
from agents.routing_base import RoutePolicy
from coba_env.evidence import Evidence


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


@register("route_pool_oracle")
class RoutePoolOracle(RoutePolicy):
    """Pool oracle over generators: the cheapest prefix ending at a correct candidate of any generator."""

    group: ClassVar[str] = "oracle"
    uses_labels: ClassVar[bool] = True
    min_generators: ClassVar[int] = 1
    defaults: ClassVar[dict[str, Any]] = {}
    #: Whether the plan weighs its cost against lambda (the cost-aware oracle).
    lambda_aware: ClassVar[bool] = False

    def configure(self) -> None:
        """Selection ``last``: the newest answered candidate (the correct one revealed last)."""
        self.selection = "last"
        self._target = (0, 1)

    def _plan(self, pool: Any, route: Any, episodes: np.ndarray, lam: np.ndarray, budget: float,
              cost_k: int, n_max: int) -> tuple[np.ndarray, np.ndarray]:
        g, n = route.n_generators, route.n_per_generator
        correct = pool.labels.correct[episodes].reshape(len(episodes), g, n)[:, :, :n_max]
        cost = pool.gen_cost[episodes, :, cost_k].reshape(len(episodes), g, n)[:, :, :n_max]
        return oracle_targets(correct, cost, route.available[episodes], lam if self.lambda_aware else None, budget)

    def reset(self, env: Any) -> None:
        """Read the episode's labels (evaluator side): which generator to sample and how many candidates."""
        super().reset(env)
        base = env.unwrapped
        ep = np.array([base.episode_index])
        g, k = self._plan(base.pool, base.route, ep, np.array([base.evidence.lam]), base.budget,
                          base.config.cost_k, base.n_max_per_generator)
        self._target = (int(g[0]), int(k[0]))

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE the planned generator up to its planned count, then STOP."""
        ev: Any = evidence
        g, k = self._target
        sample = self.layout.sample_action(g)
        if ev.gen_revealed[g] < k and can(action_mask, sample):
            return sample
        return self.stop_id

    batched = True

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Plan the rows' new episodes from the labels, as ``reset`` does for one (evaluator side only)."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_gen = np.zeros(venv.num_envs, dtype=np.int64)
            self._b_count = np.ones(venv.num_envs, dtype=np.int64)
            rows = np.arange(venv.num_envs)
        g, k = self._plan(venv.pool, venv.route, venv.ep[rows], venv.lams[rows], venv.budget, venv.cost_k,
                          venv.n_max_per_generator)
        self._b_gen[rows], self._b_count[rows] = g, k

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row."""
        rows = np.arange(venv.num_envs)
        sample = self.layout.sample_action(self._b_gen)
        revealed = venv.gen_revealed[self._b_gen, rows]
        go = (revealed < self._b_count) & (action_masks[rows, sample] > 0)
        return np.where(go, sample, self.stop_id).astype(np.int64)


@register("route_cost_aware_oracle")
class RouteCostAwareOracle(RoutePoolOracle):
    """Cost-aware oracle over generators: exact under selection ``last`` for the episode's lambda."""

    lambda_aware: ClassVar[bool] = True

