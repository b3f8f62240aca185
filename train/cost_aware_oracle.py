"""The cost-aware oracle: for one episode and lambda, the action sequence maximizing 1[correct] - lambda * C / B.

Evaluator-side: it reads the correctness labels, so it is an upper bound and a teacher, never a deployable
policy. It replays the env's exact rules (masks, deterministic VERIFY targets by fusion rank, the STOP
selection) on a compact copy of the episode state, and searches as follows.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.base import Policy
from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES, cost_index
from coba_env.env import CoBaEnv, default_budget
from coba_env.evidence import Evidence, clogc_table
from coba_env.selection import SelectionRule, select_candidate
from pools.schema import TIERS

SAMPLE, STOP = 0, len(TIERS) + 1
N_TIERS = len(TIERS)
DEFAULT_NODE_LIMIT = 20_000
_EPS = 1e-9
#: Expansion counts at which the search runs a greedy dive for an incumbent.
_DIVE_AT = frozenset({64, 256, 1024, 4096, 16384})
#: Tier subsets as 0/1 rows, used by the relaxed feasibility test.
_SUBSETS = np.array([[(s >> t) & 1 for t in range(N_TIERS)] for s in range(1 << N_TIERS)], dtype=np.float64)


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


@dataclass
class _Episode:
    """Per-episode tables the search reads (plain Python lists for speed)."""

    cl: list[int]
    gen: list[list[float]]
    has: list[list[bool]]
    score: list[list[float]]
    ver: list[list[list[float]]]
    correct: list[bool]
    counts_at: list[list[int]]  # counts_at[n][cluster]: cluster sizes among the first n candidates
    prefix_cost: list[float]  # generation cost (cost model) of the first n candidates
    first_correct: int  # first correct candidate index < n_max, or -1
    feas: Any = None  # numpy tables for the feasibility test
    searches: dict = field(default_factory=dict)


class CostAwareOracle:
    """Plans with the env's exact rules on one compiled pool and env configuration; caches per episode.

    The configuration mirrors ``CoBaEnv``'s: budget (default as the env's), cost model, selection rule,
    ``n_max``, enabled ``tiers`` and ``max_cost``.
    """

    def __init__(self, compiled: CompiledPool, *, budget: float | None = None, cost_model: str = "p_tokens",
                 selection: SelectionRule | dict | str | None = None, n_max: int | None = None,
                 tiers: Sequence[str] = TIERS, max_cost: float | None = None,
                 node_limit: int = DEFAULT_NODE_LIMIT) -> None:
        self.pool = compiled
        self.cost_model = cost_model
        self.k = cost_index(cost_model)
        self.n_max = int(n_max or compiled.n_candidates)
        if not 1 <= self.n_max <= compiled.n_candidates:
            raise ValueError(f"n_max must be in 1..{compiled.n_candidates}, got {n_max}")
        self.budget = float(budget) if budget is not None else default_budget(compiled, cost_model, self.n_max)
        self.selection = SelectionRule.from_spec(selection)
        self.weights = self.selection.weight_vector()
        self.tier_on = [t in tiers and t in compiled.tiers_present for t in TIERS]
        self.max_cost = float(max_cost) if max_cost is not None else math.inf
        self.node_limit = int(node_limit)
        self._rows = compiled.episode_rows()
        self._episodes: dict[int, _Episode] = {}

    # ------------------------------------------------------------------ episode tables
    def _episode(self, e: int) -> _Episode:
        ep = self._episodes.get(e)
        if ep is not None:
            return ep
        cl, _out, _cap, gen, has, score, ver, n_clusters = self._rows[e]
        correct = self.pool.labels.correct[e].tolist()
        counts = [0] * max(n_clusters, 1)
        counts_at = [list(counts)]
        prefix = [0.0]
        for c in range(self.n_max):
            if cl[c] >= 0:
                counts[cl[c]] += 1
            counts_at.append(list(counts))
            prefix.append(prefix[-1] + gen[c][self.k])
        first = next((c for c in range(self.n_max) if correct[c]), -1)
        ep = _Episode(cl=cl, gen=gen, has=has, score=score, ver=ver, correct=correct, counts_at=counts_at,
                      prefix_cost=prefix, first_correct=first)
        if self.selection.rule == "fusion" and first >= 0:
            ep.feas = self._feasibility_tables(ep)
        self._episodes[e] = ep
        return ep

    def _feasibility_tables(self, ep: _Episode) -> dict[str, np.ndarray]:
        n_max, w = self.n_max, self.weights
        cl = np.array(ep.cl[:n_max])
        counts = np.array([[row[x] if x >= 0 else 0 for x in ep.cl[:n_max]] for row in ep.counts_at])
        n_prime = np.maximum(np.arange(n_max + 1), 1)[:, None]
        freq = w[0] * counts / n_prime  # [N'+1, n_max], as the env computes wf * count / n
        visible = np.arange(n_max)[None, :] < np.arange(n_max + 1)[:, None]
        correct = np.array(ep.correct[:n_max], dtype=bool)
        answered = cl >= 0
        has = np.array(ep.has[:n_max], dtype=bool) & np.array(self.tier_on)[None, :]
        score = np.array(ep.score[:n_max], dtype=np.float64)
        usable = has & ~np.isnan(score)
        wt = np.array(w[1:])[None, :]
        ver_cost = np.array([[v[self.k] for v in row] for row in ep.ver[:n_max]])
        return {"freq": freq, "gold": visible & correct[None] & answered[None],
                "rival": visible & ~correct[None] & answered[None], "usable": usable,
                "wnum": np.where(usable, wt * np.nan_to_num(score), 0.0), "wden": np.where(usable, wt, 0.0),
                "ver_cost": np.where(usable, ver_cost, np.inf), "prefix": np.array(ep.prefix_cost),
                "shift": np.arange(n_max * N_TIERS, dtype=np.int64).reshape(n_max, N_TIERS)}

    # ------------------------------------------------------------------ state machine
    # A state is (n, verified bits, fnum, fden, cost): verified bit c * N_TIERS + t; fnum / fden the fusion
    # sums in the env's addition order; cost a 4-tuple accumulated in the env's order.
    def _root(self) -> tuple:
        return (0, 0, (), (), (0.0, 0.0, 0.0, 0.0))

    def _fusion(self, ep: _Episode, state: tuple) -> list[float]:
        n, _, fnum, fden, _ = state
        wf, cl, counts = self.weights[0], ep.cl, ep.counts_at[n]
        out = []
        for c in range(n):
            x = cl[c]
            if x < 0:
                out.append(-1.0)
            else:
                den = fden[c]
                out.append((wf * counts[x] / n + fnum[c]) / den if den > 0 else 0.0)
        return out

    def _target(self, ep: _Episode, state: tuple, r: list[float], t: int) -> int:
        ver, has, cl = state[1], ep.has, ep.cl
        best, best_r = -1, -3.0
        for c in range(state[0]):
            # As the env: a candidate without an answer is never a VERIFY target (it can never be selected).
            if cl[c] >= 0 and has[c][t] and not (ver >> (c * N_TIERS + t)) & 1 and r[c] > best_r:
                best, best_r = c, r[c]
        return best

    def _apply(self, ep: _Episode, state: tuple, a: int, r: list[float] | None = None) -> tuple:
        n, ver, fnum, fden, cost = state
        if a == SAMPLE:
            g = ep.gen[n]
            return (n + 1, ver, fnum + (0.0,), fden + (self.weights[0],),
                    (cost[0] + g[0], cost[1] + g[1], cost[2] + g[2], cost[3] + g[3]))
        t = a - 1
        c = self._target(ep, state, r if r is not None else self._fusion(ep, state), t)
        s = ep.score[c][t]
        g = ep.ver[c][t]
        if s == s:
            w = self.weights[t + 1]
            fnum = fnum[:c] + (fnum[c] + w * s,) + fnum[c + 1:]
            fden = fden[:c] + (fden[c] + w,) + fden[c + 1:]
        return (n, ver | (1 << (c * N_TIERS + t)), fnum, fden,
                (cost[0] + g[0], cost[1] + g[1], cost[2] + g[2], cost[3] + g[3]))

    def _legal(self, ep: _Episode, state: tuple, r: list[float]) -> list[int]:
        """Legal actions in the env's mask order (STOP last)."""
        n = state[0]
        if state[4][self.k] >= self.max_cost:
            return [STOP]
        acts = [SAMPLE] if n < self.n_max else []
        for t in range(N_TIERS):
            if self.tier_on[t] and self._target(ep, state, r, t) >= 0:
                acts.append(t + 1)
        if n > 0 or not acts:
            acts.append(STOP)
        return acts

    def _selected(self, ep: _Episode, state: tuple, r: list[float] | None = None) -> int:
        if self.selection.rule == "fusion":
            if r is None:
                r = self._fusion(ep, state)
            best, best_r = -1, -2.0
            for c in range(state[0]):
                if ep.cl[c] >= 0 and r[c] > best_r:
                    best, best_r = c, r[c]
            return best
        return select_candidate(self._evidence(ep, state), self.selection)

    def _evidence(self, ep: _Episode, state: tuple) -> Evidence:
        """An env ``Evidence`` for ``state`` (used only for non-fusion selection rules)."""
        n, ver = state[0], state[1]
        ev = Evidence(self.n_max, N_TIERS, len(ep.counts_at[0]), 0.0, self.weights)
        clogc = clogc_table(self.pool.n_candidates)
        for c in range(n):
            ev.add_candidate(ep.cl[c], 0.0, False, clogc)
        for c in range(n):
            for t in range(N_TIERS):
                if (ver >> (c * N_TIERS + t)) & 1:
                    ev.add_score(c, t, ep.score[c][t])
        ev.fnum, ev.fden = list(state[2]), list(state[3])
        return ev

    def _is_correct(self, ep: _Episode, state: tuple, r: list[float] | None = None) -> bool:
        if state[0] == 0:
            return False
        sel = self._selected(ep, state, r)
        return sel >= 0 and ep.correct[sel]

    # ------------------------------------------------------------------ search
    def _lower_bound(self, ep: _Episode, state: tuple) -> float:
        """Admissible extra cost to a correct selection (inf when provably unreachable)."""
        n = state[0]
        g0 = ep.first_correct
        if g0 < 0:
            return math.inf
        if ep.feas is not None:
            return self._relaxed_cost(ep, state)
        return max(ep.prefix_cost[g0 + 1] - ep.prefix_cost[n], 0.0) if n <= g0 else 0.0

    def _relaxed_cost(self, ep: _Episode, state: tuple) -> float:
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
        num = base_num[:, None] + (t["wnum"] * unver) @ _SUBSETS.T  # [nm, 8]
        den = base_den[:, None] + (t["wden"] * unver) @ _SUBSETS.T
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

    def _key(self, state: tuple) -> tuple:
        return state[:4]

    def _dive(self, ep: _Episode, state: tuple, best_cost: float, cap: float) -> tuple[list[int], float] | None:
        """Greedy descent on g + h from ``state`` to a correct state: an incumbent that tightens the search."""
        k, path = self.k, []
        for _ in range(self.n_max * (N_TIERS + 1)):
            if self._is_correct(ep, state):
                return path, state[4][k]
            r = self._fusion(ep, state)
            best = None
            for a in self._legal(ep, state, r):
                if a == STOP:
                    continue
                child = self._apply(ep, state, a, r)
                g = child[4][k]
                if g >= best_cost or g > cap:
                    continue
                f = g if self._is_correct(ep, child) else g + self._lower_bound(ep, child)
                if f < best_cost and f <= cap and (best is None or f < best[0]):
                    best = (f, a, child)
            if best is None:
                return None
            path.append(best[1])
            state = best[2]
        return None

    def _search(self, e: int, start: tuple, cap: float) -> _Search:
        """Least-cost path from ``start`` to a state whose selection is correct, among paths costing <= cap."""
        ep = self._episode(e)
        key0 = self._key(start)
        cached = ep.searches.get(key0)
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
            r = self._fusion(ep, state)
            for a in self._legal(ep, state, r):
                if a == STOP:
                    continue
                child = self._apply(ep, state, a, r)
                ck = self._key(child)
                if ck in parents:
                    continue
                g = child[4][k]
                if g >= best_cost or g > cap:
                    continue
                parents[ck] = (key, a, child)
                if self._is_correct(ep, child):
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
        ep.searches[key0] = result
        if exact and path is not None:
            # Bellman: the suffix of an optimal path is optimal from every state on it.
            state = start
            for i, a in enumerate(path[:-1]):
                state = self._apply(ep, state, a)
                ep.searches.setdefault(self._key(state), _Search(path=path[i + 1:], goal_cost=best_cost,
                                                                  cap=cap, exact=True, nodes=0, lower=best_cost))
        return result

    # ------------------------------------------------------------------ public
    def start_state(self, episode: int, prefix: Sequence[int] = ()) -> tuple:
        """The compact state after the legal action ``prefix`` (raises ValueError on an illegal action)."""
        ep = self._episode(episode)
        state = self._root()
        for i, a in enumerate(prefix):
            r = self._fusion(ep, state)
            if a == STOP or a not in self._legal(ep, state, r):
                raise ValueError(f"prefix action {a} at position {i} is not allowed (or ends the episode)")
            state = self._apply(ep, state, a, r)
        return state

    def plan(self, episode: int, lam: float, prefix: Sequence[int] = ()) -> OraclePlan:
        """The value-maximizing action sequence from the state after ``prefix`` (episode index, lambda)."""
        return self.plan_many(episode, [lam], prefix)[0]

    def plan_many(self, episode: int, lams: Sequence[float], prefix: Sequence[int] = ()) -> list[OraclePlan]:
        """Plans for several lambdas with one search (the least cost to a correct state is lambda-free)."""
        if any(lam < 0 for lam in lams):
            raise ValueError(f"lambda must be >= 0, got {list(lams)}")
        ep = self._episode(episode)
        start = self.start_state(episode, prefix)
        k, big_b = self.k, self.budget
        r = self._fusion(ep, start)
        legal = self._legal(ep, start, r)
        if STOP in legal:
            stop_path: list[int] = []
            stop_state = start
        else:  # only reachable at n = 0: the cheapest legal STOP is after one SAMPLE
            stop_path = [SAMPLE]
            stop_state = self._apply(ep, start, SAMPLE, r)
        stop_correct = self._is_correct(ep, stop_state)
        if stop_correct:
            # Every path to a STOP passes through stop_state, so this is the cheapest correct state too.
            search = _Search(path=stop_path, goal_cost=stop_state[4][k], cap=math.inf, exact=True, nodes=0,
                             lower=stop_state[4][k])
        else:
            lam_min = min(lams)
            cap = math.inf if lam_min == 0 else stop_state[4][k] + big_b / lam_min
            search = self._search(episode, start, cap)
        plans = []
        for lam in lams:
            v_stop = (1.0 if stop_correct else 0.0) - lam * stop_state[4][k] / big_b
            v_goal = 1.0 - lam * search.goal_cost / big_b if search.path is not None else -math.inf
            path = search.path if v_goal >= v_stop else stop_path
            plan = self._finish(ep, start, list(path), lam, search.exact, search.nodes)
            plan.bound = max(v_stop, 1.0 - lam * search.lower / big_b, plan.value)
            plan.exact = plan.bound <= plan.value + _EPS
            plans.append(plan)
        return plans

    def _finish(self, ep: _Episode, start: tuple, path: list[int], lam: float, exact: bool,
                nodes: int) -> OraclePlan:
        state = start
        for a in path:
            state = self._apply(ep, state, a)
        sel = self._selected(ep, state) if state[0] > 0 else -1
        correct = sel >= 0 and ep.correct[sel]
        cost = state[4]
        value = (1.0 if correct else 0.0) - lam * cost[self.k] / self.budget
        return OraclePlan(actions=path + [STOP], value=value, correct=bool(correct),
                          costs=dict(zip(COST_MEASURES, cost, strict=True)), exact=exact, nodes=nodes,
                          selected=sel)

    def action_values(self, episode: int, lams: Sequence[float], prefix: Sequence[int] = ()) -> np.ndarray:
        """Oracle cost-to-go of every action from the state after ``prefix``: ``q[i, a]`` is the best episode
        value at ``lams[i]`` when ``a`` is played next (STOP: the value of stopping now); -inf where illegal."""
        ep = self._episode(episode)
        state = self.start_state(episode, prefix)
        r = self._fusion(ep, state)
        q = np.full((len(lams), STOP + 1), -np.inf)
        for a in self._legal(ep, state, r):
            if a == STOP:
                won = 1.0 if self._is_correct(ep, state, r) else 0.0
                q[:, STOP] = [won - lam * state[4][self.k] / self.budget for lam in lams]
            else:
                q[:, a] = [p.value for p in self.plan_many(episode, lams, [*prefix, a])]
        return q

    def action(self, episode: int, lam: float, prefix: Sequence[int] = ()) -> int:
        """The oracle's next action from the state after ``prefix`` (the DAgger label)."""
        return self.plan(episode, lam, prefix).actions[0]

    def clear_cache(self) -> None:
        """Forget cached searches (memory grows with the states planned from)."""
        self._episodes.clear()

    @classmethod
    def for_env(cls, env: CoBaEnv, node_limit: int = DEFAULT_NODE_LIMIT) -> CostAwareOracle:
        """An oracle with exactly ``env``'s configuration (pool subset, budget, cost model, rule, tiers)."""
        return cls(env.pool, budget=env.budget, cost_model=env.cost_model, selection=env.selection,
                   n_max=env.n_max, tiers=env.enabled_tiers, max_cost=env.max_cost if env.max_cost < math.inf
                   else None, node_limit=node_limit)


def oracle_plan(compiled: CompiledPool, episode: int, lam: float, *, budget: float | None = None,
                cost_model: str = "p_tokens", selection: SelectionRule | dict | str | None = None,
                n_max: int | None = None, node_limit: int = DEFAULT_NODE_LIMIT, tiers: Sequence[str] = TIERS,
                max_cost: float | None = None, prefix: Sequence[int] = ()) -> OraclePlan:
    """One-shot plan for ``episode`` (index into ``compiled``) at ``lam``; see ``CostAwareOracle``."""
    oracle = CostAwareOracle(compiled, budget=budget, cost_model=cost_model, selection=selection, n_max=n_max,
                             tiers=tiers, max_cost=max_cost, node_limit=node_limit)
    return oracle.plan(episode, lam, prefix)


class CostAwareOraclePolicy(Policy):
    """The oracle as a Policy (evaluator-side: reads labels; an upper bound, never a deployable method).

    It plans at the first ``act`` of an episode with the env's episode index and the episode's lambda, then
    replays the plan. Build it with ``CostAwareOraclePolicy.for_env(env)`` or pass an oracle configured like
    the env it will run in.
    """

    name = "cost_aware_oracle"
    label = "Cost-aware oracle"
    group = "oracle"
    uses_labels = True

    def __init__(self, oracle: CostAwareOracle | None = None, node_limit: int = DEFAULT_NODE_LIMIT) -> None:
        self.oracle = oracle
        self.node_limit = node_limit
        self._plan: list[int] = []
        self._episode = -1

    def reset(self, env: CoBaEnv) -> None:
        """Remember the env's episode; (re)build the oracle if it was built for another pool."""
        if self.oracle is None or self.oracle.pool is not env.pool:
            self.oracle = CostAwareOracle.for_env(env, self.node_limit)
        self._episode = env._ep
        self._plan = []
        self._started = False

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Replay the plan computed at the episode's first step."""
        if not self._started:
            self._plan = list(self.oracle.plan(self._episode, evidence.lam).actions)
            self._started = True
        return self._plan.pop(0)
