"""The cost-aware oracle: for one episode and lambda, the action sequence maximizing 1[correct] - lambda * C / B.

Evaluator-side: it reads the correctness labels, so it is an upper bound and a teacher, never a deployable
policy. It replays the env's exact rules (masks, deterministic VERIFY targets by fusion rank, the STOP
selection) on a compact copy of the episode state (``train.oracle_model.OracleModel``: either grouping of the env, a
pair's one generator or an item's G generators), and searches as follows.

Why a shortest-path search is exact. Costs are additive and non-negative and the reward at STOP is 1 or 0,
so from a start state with cost C0 the best return is

    max(1[stop now is correct] - lambda * C0 / B,   1 - lambda * (C0 + D) / B)

where D is the least extra cost of any legal action sequence that reaches a state whose selection is correct
(when STOP is not yet legal, "stop now" becomes the best of the one-candidate stops: before the first
candidate every stopping path passes through one of the first SAMPLEs). D is found by A* over evidence
states keyed by (which candidate sits in each slot, verified (slot, verifier) set, the per-slot fusion sums):
a state's cost is the sum of what it revealed, so it does not depend on the path. The admissible lower bound
h (``train.oracle_bound``: the cost of revealing a correct candidate, and under fusion selection a relaxed
feasibility test over every final candidate set) prunes the search without losing optimality.

A path costing more than ``B / lambda`` above the cheapest stop can never pay off and is cut. The search
stops when the cheapest open state cannot beat the best correct state found (exact), or after
``node_limit`` expanded states (then the best plan found so far is returned with ``exact=False``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coba_env.compiled import CompiledPool
from coba_env.costs import cost_record
from train.oracle_bound import LowerBound
from train.oracle_model import EpisodeTables, OracleModel, SearchState

__all__ = ["DEFAULT_NODE_LIMIT", "CostAwareOracle", "OraclePlan", "oracle_plan"]

DEFAULT_NODE_LIMIT = 20_000
_EPS = 1e-9
#: Expansion counts at which the search runs a greedy dive for an incumbent.
_DIVE_AT = frozenset({64, 256, 1024, 4096, 16384})


@dataclass
class OraclePlan:
    """The oracle's plan from a start state: actions (ending with STOP), the episode's value and its costs.

    ``value`` and ``costs`` cover the whole episode (the prefix it was planned from included); ``exact`` is
    False only when the search hit its node limit.
    """

    actions: list[int]
    value: float
    correct: bool
    costs: dict[str, float]
    exact: bool
    nodes: int = 0
    selected: int = -1
    bound: float = math.nan  # certified upper bound on the optimal value (== value when exact)


@dataclass
class _Search:
    """Cached result of one min-cost-to-correct search from a start state."""

    path: list[int] | None
    goal_cost: float
    cap: float
    exact: bool
    nodes: int
    lower: float  # certified lower bound on the least cost to a correct state (within the cap)


class CostAwareOracle:
    """Plans with the env's exact rules (an ``OracleModel`` of one env configuration, either grouping); caches
    its searches per episode. Build it for an env with ``for_env`` or for a pool with ``for_pool``."""

    def __init__(self, model: OracleModel, node_limit: int = DEFAULT_NODE_LIMIT) -> None:
        self.model = model
        self.pool, self.cost_model, self.k, self.n_max = model.pool, model.cost_model, model.k, model.n_max
        self.budget, self.selection, self.weights = model.budget, model.selection, model.weights
        self.tier_on, self.max_cost = model.tier_on, model.max_cost
        self.node_limit = int(node_limit)
        self.lower_bound = LowerBound(model)
        self._searches: dict[int, dict[tuple, _Search]] = {}

    @classmethod
    def for_env(cls, env: Any, node_limit: int = DEFAULT_NODE_LIMIT) -> CostAwareOracle:
        """An oracle with exactly ``env``'s configuration (episodes, grouping, budget, cost model, rule, tiers)."""
        return cls(OracleModel.for_env(env), node_limit=node_limit)

    @classmethod
    def for_pool(cls, compiled: Any, *, node_limit: int = DEFAULT_NODE_LIMIT, **env_kwargs: Any) -> CostAwareOracle:
        """An oracle for ``CoBaEnv(compiled, **env_kwargs)`` (budget, cost model, selection, n_max, tiers,
        max_cost, grouping, ...), without building the env."""
        return cls(OracleModel.for_pool(compiled, **env_kwargs), node_limit=node_limit)

    # ------------------------------------------------------------------ search
    def _dive(self, ep: EpisodeTables, state: SearchState, best_cost: float, cap: float) -> tuple[list[int], float] | None:
        """Greedy descent on g + h from ``state`` to a correct state: an incumbent that tightens the search."""
        m, k, path = self.model, self.k, []
        for _ in range(self.n_max * (self.model.n_tiers + 1)):
            if m.is_correct(ep, state):
                return path, state.cost[k]
            r = m.fusion(ep, state)
            best = None
            for a in m.search_actions(ep, state, r):
                if a == self.model.stop:
                    continue
                child = m.apply(ep, state, a, r)
                g = child.cost[k]
                if g >= best_cost or g > cap:
                    continue
                f = g if m.is_correct(ep, child) else g + self.lower_bound(ep, child)
                if f < best_cost and f <= cap and (best is None or f < best[0]):
                    best = (f, a, child)
            if best is None:
                return None
            path.append(best[1])
            state = best[2]
        return None

    def _search(self, e: int, start: SearchState, cap: float) -> _Search:
        """Least-cost path from ``start`` to a state whose selection is correct, among paths costing <= cap."""
        m = self.model
        ep = m.episode(e)
        key0 = start.key()
        searches = self._searches.setdefault(e, {})
        cached = searches.get(key0)
        if cached is not None and (cached.path is not None or cached.cap >= cap or not cached.exact):
            return cached
        k = self.k
        c0 = start.cost[k]
        parents: dict[tuple, tuple] = {key0: (None, -1, start)}
        h0 = self.lower_bound(ep, start)
        best_key, best_tail, best_cost = None, [], math.inf
        heap: list[tuple[float, int, tuple]] = []
        if h0 < math.inf and c0 + h0 <= cap:
            heap.append((c0 + h0, 0, key0))
        tick, expanded, lower = 1, 0, math.inf
        while heap:
            f, _, key = heapq.heappop(heap)
            if f >= best_cost:
                lower = best_cost
                break
            if expanded >= self.node_limit:
                lower = f
                break
            expanded += 1
            state = parents[key][2]
            if expanded in _DIVE_AT:
                found = self._dive(ep, state, best_cost, cap)
                if found is not None:
                    best_key, best_tail, best_cost = key, found[0], found[1]
            r = m.fusion(ep, state)
            for a in m.search_actions(ep, state, r):
                if a == self.model.stop:
                    continue
                child = m.apply(ep, state, a, r)
                ck = child.key()
                if ck in parents:
                    continue
                g = child.cost[k]
                if g >= best_cost or g > cap:
                    continue
                parents[ck] = (key, a, child)
                if m.is_correct(ep, child):
                    best_key, best_tail, best_cost = ck, [], g
                    continue
                h = self.lower_bound(ep, child)
                if g + h >= best_cost or g + h > cap:
                    continue
                heapq.heappush(heap, (g + h, tick, ck))
                tick += 1
        else:
            lower = best_cost  # the open list ran dry: nothing cheaper (within the cap) exists
        path = None
        if best_key is not None:
            path = []
            key = best_key
            while parents[key][0] is not None:
                parent, a, _ = parents[key]
                path.append(a)
                key = parent
            path.reverse()
            path += best_tail
        exact = lower >= best_cost
        result = _Search(path=path, goal_cost=best_cost, cap=cap, exact=exact, nodes=expanded, lower=lower)
        searches[key0] = result
        if exact and path is not None:
            # Bellman: the suffix of an optimal path is optimal from every state on it.
            state = start
            for i, a in enumerate(path[:-1]):
                state = m.apply(ep, state, a)
                searches.setdefault(state.key(), _Search(path=path[i + 1:], goal_cost=best_cost, cap=cap,
                                                          exact=True, nodes=0, lower=best_cost))
        return result

    def _stop_options(self, ep: EpisodeTables, start: SearchState) -> list[tuple[list[int], SearchState]]:
        """The cheapest ways to a legal STOP from ``start``: (actions, state) pairs every stopping path passes
        through one of. STOP itself when legal; before the first candidate, each legal first SAMPLE."""
        m = self.model
        r = m.fusion(ep, start)
        legal = m.legal(ep, start, r)
        if m.stop in legal:
            return [([], start)]
        return [([a], m.apply(ep, start, a, r)) for a in legal]

    # ------------------------------------------------------------------ public
    def start_state(self, episode: int, prefix: Sequence[int] = ()) -> SearchState:
        """The compact state after the legal action ``prefix`` (raises ValueError on an illegal action)."""
        ep = self.model.episode(episode)
        state = self.model.root()
        for i, a in enumerate(prefix):
            r = self.model.fusion(ep, state)
            if a == self.model.stop or a not in self.model.legal(ep, state, r):
                raise ValueError(f"prefix action {a} at position {i} is not allowed (or ends the episode)")
            state = self.model.apply(ep, state, a, r)
        return state

    def plan(self, episode: int, lam: float, prefix: Sequence[int] = ()) -> OraclePlan:
        """The value-maximizing action sequence from the state after ``prefix`` (episode index, lambda)."""
        return self.plan_many(episode, [lam], prefix)[0]

    def plan_many(self, episode: int, lams: Sequence[float], prefix: Sequence[int] = ()) -> list[OraclePlan]:
        """Plans for several lambdas with one search (the least cost to a correct state is lambda-free)."""
        if any(lam < 0 for lam in lams):
            raise ValueError(f"lambda must be >= 0, got {list(lams)}")
        ep = self.model.episode(episode)
        start = self.start_state(episode, prefix)
        k, big_b = self.k, self.budget
        stops = self._stop_options(ep, start)
        stop_correct = [self.model.is_correct(ep, state) for _, state in stops]
        if len(stops) == 1 and stop_correct[0]:
            # Every path to a STOP passes through the one stop state, so it is the cheapest correct state too.
            stop_path, stop_state = stops[0]
            search = _Search(path=stop_path, goal_cost=stop_state.cost[k], cap=math.inf, exact=True, nodes=0,
                             lower=stop_state.cost[k])
        else:
            lam_min = min(lams)
            cheapest_stop = min(state.cost[k] for _, state in stops)
            cap = math.inf if lam_min == 0 else cheapest_stop + big_b / lam_min
            search = self._search(episode, start, cap)
        plans = []
        for lam in lams:
            stop_values = [(1.0 if ok else 0.0) - lam * state.cost[k] / big_b
                           for ok, (_, state) in zip(stop_correct, stops, strict=True)]
            v_stop = max(stop_values)
            stop_path = stops[stop_values.index(v_stop)][0]
            v_goal = 1.0 - lam * search.goal_cost / big_b if search.path is not None else -math.inf
            path = search.path if v_goal >= v_stop else stop_path
            plan = self._finish(ep, start, list(path), lam, search.exact, search.nodes)
            plan.bound = max(v_stop, 1.0 - lam * search.lower / big_b, plan.value)
            plan.exact = plan.bound <= plan.value + _EPS
            plans.append(plan)
        return plans

    def _finish(self, ep: EpisodeTables, start: SearchState, path: list[int], lam: float, exact: bool,
                nodes: int) -> OraclePlan:
        state = start
        for a in path:
            state = self.model.apply(ep, state, a)
        sel = self.model.selected(ep, state) if state.n > 0 else -1
        correct = self.model.is_correct(ep, state)
        cost = state.cost
        value = (1.0 if correct else 0.0) - lam * cost[self.k] / self.budget
        return OraclePlan(actions=path + [self.model.stop], value=value, correct=bool(correct),
                          costs=cost_record(cost), exact=exact, nodes=nodes,
                          selected=sel)

    def action_values(self, episode: int, lams: Sequence[float], prefix: Sequence[int] = ()) -> np.ndarray:
        """Oracle cost-to-go of every action from the state after ``prefix``: ``q[i, a]`` is the best episode
        value at ``lams[i]`` when ``a`` is played next (STOP: the value of stopping now); -inf where illegal."""
        ep = self.model.episode(episode)
        state = self.start_state(episode, prefix)
        r = self.model.fusion(ep, state)
        stop = self.model.stop
        q = np.full((len(lams), stop + 1), -np.inf)
        for a in self.model.legal(ep, state, r):
            if a == self.model.stop:
                won = 1.0 if self.model.is_correct(ep, state, r) else 0.0
                q[:, stop] = [won - lam * state.cost[self.k] / self.budget for lam in lams]
            else:
                q[:, a] = [p.value for p in self.plan_many(episode, lams, [*prefix, a])]
        return q

    def action(self, episode: int, lam: float, prefix: Sequence[int] = ()) -> int:
        """The oracle's next action from the state after ``prefix`` (the DAgger label)."""
        return self.plan(episode, lam, prefix).actions[0]

    def clear_cache(self) -> None:
        """Forget cached searches and tables (memory grows with the states planned from)."""
        self.model.clear()
        self.lower_bound.clear()
        self._searches.clear()


def oracle_plan(compiled: CompiledPool, episode: int, lam: float, *, node_limit: int = DEFAULT_NODE_LIMIT,
                prefix: Sequence[int] = (), **env_kwargs: Any) -> OraclePlan:
    """One-shot plan for ``episode`` (index into ``CoBaEnv(compiled, **env_kwargs)``'s episodes) at ``lam``; see
    ``CostAwareOracle``."""
    return CostAwareOracle.for_pool(compiled, node_limit=node_limit, **env_kwargs).plan(episode, lam, prefix)
