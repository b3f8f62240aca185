"""The cost-aware oracle: for one episode and lambda, the action sequence maximizing 1[correct] - lambda * C / B.

Evaluator-side: it reads the correctness labels, so it is an upper bound and a teacher, never a deployable
policy. It replays the env's exact rules (masks, deterministic VERIFY targets by fusion rank, the STOP
selection) on a compact copy of the episode state (``train.oracle_model.OracleModel``), and searches as
follows.

Why a shortest-path search is exact. Costs are additive and non-negative and the reward at STOP is 1 or 0,
so from a start state with cost C0 the best return is

    max(1[stop now is correct] - lambda * C0 / B,   1 - lambda * (C0 + D) / B)

where D is the least extra cost of any legal action sequence that reaches a state whose selection is correct
(when STOP is not yet legal, "stop now" becomes the cheapest way to a legal STOP: one SAMPLE). D is found by
A* over evidence states keyed by (candidates revealed, verified (candidate, tier) set, the per-candidate
fusion sums): a state's cost is the sum of what it revealed, so it does not depend on the path. Two
admissible devices prune the search without losing optimality:

- a lower bound h: a correct candidate must be revealed, so the generation cost up to the first correct
  candidate (within N_max) still to pay;
- a relaxed feasibility test (fusion selection only): for every future N' in n..N_max, the best fusion rank
  any correct candidate could reach (choosing freely which of its unverified tiers to add) against the
  worst rank every incorrect candidate could be pushed down to; a state where no N' passes cannot lead to
  a correct selection and is dropped. The relaxation ignores the forced VERIFY order, so it only drops
  states that are truly dead.

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
from coba_env.env import CoBaEnv
from coba_env.rules.selection import SelectionRule
from train.oracle_model import Episode, OracleModel

__all__ = ["DEFAULT_NODE_LIMIT", "CostAwareOracle", "OraclePlan", "oracle_plan"]

DEFAULT_NODE_LIMIT = 20_000
_EPS = 1e-9
#: Expansion counts at which the search runs a greedy dive for an incumbent.
_DIVE_AT = frozenset({64, 256, 1024, 4096, 16384})
#: Tier subsets as 0/1 rows, used by the relaxed feasibility test.


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
    """Plans with the env's exact rules on one compiled pool and env configuration; caches per episode.

    The configuration mirrors ``CoBaEnv``'s: budget (default as the env's), cost model, selection rule,
    ``n_max``, enabled ``tiers`` and ``max_cost``.
    """

    def __init__(self, compiled: CompiledPool, *, budget: float | None = None, cost_model: str = "p_tokens",
                 selection: SelectionRule | dict | str | None = None, n_max: int | None = None,
                 tiers: Sequence[str] | None = None, max_cost: float | None = None,
                 node_limit: int = DEFAULT_NODE_LIMIT) -> None:
        self._use_model(OracleModel(compiled, budget=budget, cost_model=cost_model, selection=selection,
                                    n_max=n_max, tiers=tiers, max_cost=max_cost), node_limit)

    def _use_model(self, m: Any, node_limit: int) -> None:
        """Search over ``m``'s states (an ``OracleModel`` or a model with its interface, e.g. a route episode's)."""
        self.model = m
        self.pool, self.cost_model, self.k, self.n_max = m.pool, m.cost_model, m.k, m.n_max
        self.budget, self.selection, self.weights = m.budget, m.selection, m.weights
        self.tier_on, self.max_cost = m.tier_on, m.max_cost
        self.node_limit = int(node_limit)
        self._searches: dict[int, dict[tuple, _Search]] = {}

    # ------------------------------------------------------------------ search
    def _lower_bound(self, ep: Episode, state: tuple) -> float:
        """Admissible extra cost to a correct selection (inf when provably unreachable)."""
        n = state[0]
        g0 = ep.first_correct
        if g0 < 0:
            return math.inf
        if ep.feas is not None:
            return self._relaxed_cost(ep, state)
        return max(ep.prefix_cost[g0 + 1] - ep.prefix_cost[n], 0.0) if n <= g0 else 0.0

    def _relaxed_cost(self, ep: Episode, state: tuple) -> float:
        """Least extra cost in a relaxation (fusion rule): any subset of unverified tiers may be added per
        candidate, ignoring the forced VERIFY order and the hard budget.

        For each final N' >= n: a correct candidate g must reach R(g) >= the lowest rank every incorrect
        candidate can be pushed to; if no correct candidate wins without its own verification, one of its
        verifications is due; each incorrect candidate ranked above every reachable R(g) must be verified
        once. The bound is the least, over feasible N', of generation up to N' plus those verifications.
        """
        n, ver, fnum, fden, _ = state
        t = ep.feas
        unver = ((np.int64(ver) >> t["shift"]) & 1) == 0  # [nm, T]
        base_num = np.zeros(self.n_max)
        base_den = np.full(self.n_max, self.weights[0])
        if n:
            base_num[:n] = fnum
            base_den[:n] = fden
        subsets = t["subsets"]
        num = base_num[:, None] + (t["wnum"] * unver) @ subsets.T  # [nm, 2 ** T]
        den = base_den[:, None] + (t["wden"] * unver) @ subsets.T
        f = t["freq"][n:]  # [N', nm]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (f[:, :, None] + num[None]) / den[None]
        r = np.where(den[None] > 0, r, 0.0)
        gold_mask, rival_mask = t["gold"][n:], t["rival"][n:]
        r_none = r[:, :, 0]
        gold_best = np.where(gold_mask, r.max(axis=2), -np.inf).max(axis=1)  # [N']
        rival_floor = np.where(rival_mask, r.min(axis=2), -np.inf).max(axis=1)
        feasible = gold_best >= rival_floor - _EPS
        if not feasible.any():
            return math.inf
        vc = np.where(unver, t["ver_cost"], np.inf).min(axis=1)  # cheapest useful verification per candidate
        gold_plain = np.where(gold_mask, r_none, -np.inf).max(axis=1)
        gold_need = np.where(gold_plain >= rival_floor - _EPS, 0.0,
                             np.where(gold_mask, vc[None], np.inf).min(axis=1))
        above = rival_mask & (r_none > gold_best[:, None] + _EPS)
        rival_need = np.where(above, vc[None], 0.0).sum(axis=1)
        total = t["prefix"][n:] - t["prefix"][n] + gold_need + rival_need
        return float(np.where(feasible, total, np.inf).min())

    def _dive(self, ep: Episode, state: tuple, best_cost: float, cap: float) -> tuple[list[int], float] | None:
        """Greedy descent on g + h from ``state`` to a correct state: an incumbent that tightens the search."""
        m, k, path = self.model, self.k, []
        for _ in range(self.n_max * (self.model.n_tiers + 1)):
            if m.is_correct(ep, state):
                return path, state[4][k]
            r = m.fusion(ep, state)
            best = None
            for a in m.search_actions(ep, state, r):
                if a == self.model.stop:
                    continue
                child = m.apply(ep, state, a, r)
                g = child[4][k]
                if g >= best_cost or g > cap:
                    continue
                f = g if m.is_correct(ep, child) else g + self._lower_bound(ep, child)
                if f < best_cost and f <= cap and (best is None or f < best[0]):
                    best = (f, a, child)
            if best is None:
                return None
            path.append(best[1])
            state = best[2]
        return None

    def _search(self, e: int, start: tuple, cap: float) -> _Search:
        """Least-cost path from ``start`` to a state whose selection is correct, among paths costing <= cap."""
        m = self.model
        ep = m.episode(e)
        key0 = m.key(start)
        searches = self._searches.setdefault(e, {})
        cached = searches.get(key0)
        if cached is not None and (cached.path is not None or cached.cap >= cap or not cached.exact):
            return cached
        k = self.k
        c0 = start[4][k]
        parents: dict[tuple, tuple] = {key0: (None, -1, start)}
        h0 = self._lower_bound(ep, start)
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
                ck = m.key(child)
                if ck in parents:
                    continue
                g = child[4][k]
                if g >= best_cost or g > cap:
                    continue
                parents[ck] = (key, a, child)
                if m.is_correct(ep, child):
                    best_key, best_tail, best_cost = ck, [], g
                    continue
                h = self._lower_bound(ep, child)
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
                searches.setdefault(m.key(state), _Search(path=path[i + 1:], goal_cost=best_cost, cap=cap,
                                                          exact=True, nodes=0, lower=best_cost))
        return result

    def _stop_options(self, ep: Episode, start: tuple) -> list[tuple[list[int], tuple]]:
        """The cheapest ways to a legal STOP from ``start``: (actions, state) pairs every stopping path passes
        through one of. STOP itself when legal; before the first candidate, one SAMPLE."""
        r = self.model.fusion(ep, start)
        if self.model.stop in self.model.legal(ep, start, r):
            return [([], start)]
        return [([self.model.sample], self.model.apply(ep, start, self.model.sample, r))]

    # ------------------------------------------------------------------ public
    def start_state(self, episode: int, prefix: Sequence[int] = ()) -> tuple:
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
            search = _Search(path=stop_path, goal_cost=stop_state[4][k], cap=math.inf, exact=True, nodes=0,
                             lower=stop_state[4][k])
        else:
            lam_min = min(lams)
            cheapest_stop = min(state[4][k] for _, state in stops)
            cap = math.inf if lam_min == 0 else cheapest_stop + big_b / lam_min
            search = self._search(episode, start, cap)
        plans = []
        for lam in lams:
            stop_values = [(1.0 if ok else 0.0) - lam * state[4][k] / big_b
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

    def _finish(self, ep: Episode, start: tuple, path: list[int], lam: float, exact: bool,
                nodes: int) -> OraclePlan:
        state = start
        for a in path:
            state = self.model.apply(ep, state, a)
        sel = self.model.selected(ep, state) if state[0] > 0 else -1
        correct = self.model.is_correct(ep, state)
        cost = state[4]
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
                q[:, stop] = [won - lam * state[4][self.k] / self.budget for lam in lams]
            else:
                q[:, a] = [p.value for p in self.plan_many(episode, lams, [*prefix, a])]
        return q

    def action(self, episode: int, lam: float, prefix: Sequence[int] = ()) -> int:
        """The oracle's next action from the state after ``prefix`` (the DAgger label)."""
        return self.plan(episode, lam, prefix).actions[0]

    def clear_cache(self) -> None:
        """Forget cached searches (memory grows with the states planned from)."""
        self.model.clear()
        self._searches.clear()

    @classmethod
    def for_env(cls, env: CoBaEnv, node_limit: int = DEFAULT_NODE_LIMIT) -> CostAwareOracle:
        """An oracle with exactly ``env``'s configuration (pool subset, budget, cost model, rule, tiers)."""
        return cls(env.pool, budget=env.budget, cost_model=env.cost_model, selection=env.selection,
                   n_max=env.n_max, tiers=env.enabled_tiers, max_cost=env.max_cost if env.max_cost < math.inf
                   else None, node_limit=node_limit)


def oracle_plan(compiled: CompiledPool, episode: int, lam: float, *, budget: float | None = None,
                cost_model: str = "p_tokens", selection: SelectionRule | dict | str | None = None,
                n_max: int | None = None, node_limit: int = DEFAULT_NODE_LIMIT, tiers: Sequence[str] | None = None,
                max_cost: float | None = None, prefix: Sequence[int] = ()) -> OraclePlan:
    """One-shot plan for ``episode`` (index into ``compiled``) at ``lam``; see ``CostAwareOracle``."""
    oracle = CostAwareOracle(compiled, budget=budget, cost_model=cost_model, selection=selection, n_max=n_max,
                             tiers=tiers, max_cost=max_cost, node_limit=node_limit)
    return oracle.plan(episode, lam, prefix)
