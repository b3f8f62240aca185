"""The route oracle's model of ``RouteEnv``: what a route episode would do, in a compact hashable state.

The route env's transition is the replay env's with one addition: ``SAMPLE_<g>`` puts generator g's next
candidate into the next slot. So a state is the replay oracle's (``train.oracle_model``) plus which candidate
sits in each slot: ``(n, verified bits, fnum, fden, cost, cand, revealed per generator, cluster counts)``.
``cand[c]`` is the route pool's candidate index (``g * N + k``) in slot c; verified bit ``c * T + t`` and the
fusion sums are per slot, in the env's addition order. The slot order is part of the state's key: the fusion
rank breaks ties to the earliest slot (the STOP selection and every VERIFY target), so two interleavings of
the same candidates are different states. Every rule is the rules layer's (``rank_list``, ``best_of``,
``verify_target_bits``, ``mask_bits``, ``select_candidate``); ``tests/test_route_oracle_transition.py`` pins
this model to ``RouteEnv`` over random walks. Evaluator side: it reads the correctness labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from coba_env.costs import COST_MEASURES
from coba_env.evidence import Evidence
from coba_env.route_pool import RoutePool
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig
from coba_env.rules.features import clogc_table
from coba_env.rules.fusion import best_of, rank_list
from coba_env.rules.masks import legal_actions, mask_bits, stop_bit
from coba_env.rules.selection import select_candidate
from coba_env.rules.verify import verify_target_bits
from train.oracle_model import useful_actions

__all__ = ["RouteEpisode", "RouteOracleModel"]


@dataclass
class RouteEpisode:
    """One route episode's tables, indexed by the route pool's candidate ``g * N + k`` (plain lists)."""

    cl: list[int]
    gen: list[list[float]]
    has: list[list[bool]]
    score: list[list[float]]
    ver: list[list[list[float]]]
    correct: list[bool]
    n_clusters: int
    caps: list[int]  # most candidates each generator may reveal (0 when the item has none of it)
    prefix_cost: list[list[float]]  # prefix_cost[g][k]: generation cost of g's first k candidates
    first_correct: list[int]  # first correct k < caps[g] of each generator, or -1


class RouteOracleModel:
    """``RouteEnv``'s rules on one route pool and configuration, over hashable state tuples (see module doc)."""

    def __init__(self, route: RoutePool, n_max_per_generator: int, config: EnvConfig) -> None:
        self.route, self.pool = route, route.pool
        self.n_per_generator, self.n_max_per_generator = route.n_per_generator, n_max_per_generator
        self.n_generators = route.n_generators
        self.cost_model, self.k, self.n_max = config.cost_model, config.cost_k, config.n_max
        self.budget, self.selection, self.weights = config.budget, config.selection, config.weights
        self.tier_on, self.max_cost = list(config.tier_on), config.max_cost
        #: The route env's layout: ``SAMPLE_<g>`` per generator, ``VERIFY_<v>`` per verifier, ``STOP``.
        self.layout = ActionLayout(generators=route.generators, verifiers=tuple(route.pool.tiers))
        self.n_tiers = self.layout.n_verifiers
        self.stop, self._stop_bit = self.layout.stop_action, stop_bit(self.layout)
        self.sample = self.layout.sample_action()  # SAMPLE_<first generator>; every SAMPLE id is its generator
        self._strong = config.features.strong
        self._rows = route.pool.episode_rows()
        self._episodes: dict[int, RouteEpisode] = {}

    @classmethod
    def for_env(cls, env) -> RouteOracleModel:
        """The model of a ``RouteEnv`` (its route pool, N_max per generator and validated configuration)."""
        return cls(env.route, env.n_max_per_generator, env.config)

    # ------------------------------------------------------------------ episode tables
    def episode(self, e: int) -> RouteEpisode:
        """The (cached) tables of route episode ``e``."""
        ep = self._episodes.get(e)
        if ep is not None:
            return ep
        row, n = self._rows[e], self.n_per_generator
        correct = self.pool.labels.correct[e].tolist()
        caps = [self.n_max_per_generator if on else 0 for on in self.route.available[e].tolist()]
        prefix, first = [], []
        for g, cap in enumerate(caps):
            acc = [0.0]
            for j in range(cap):
                acc.append(acc[-1] + row.gen_cost[g * n + j][self.k])
            prefix.append(acc)
            first.append(next((j for j in range(cap) if correct[g * n + j]), -1))
        ep = RouteEpisode(cl=row.cluster, gen=row.gen_cost, has=row.has_score, score=row.score, ver=row.ver_cost,
                          correct=correct, n_clusters=row.n_clusters, caps=caps, prefix_cost=prefix,
                          first_correct=first)
        self._episodes[e] = ep
        return ep

    def clear(self) -> None:
        """Forget the cached episode tables."""
        self._episodes.clear()

    # ------------------------------------------------------------------ state machine
    def root(self) -> tuple:
        """The state at the start of a route episode."""
        return (0, 0, (), (), (0.0,) * len(COST_MEASURES), (), (0,) * self.n_generators, ())

    @staticmethod
    def key(state: tuple) -> tuple:
        """The evidence part of ``state``: slot order, verified bits, fusion sums (the cost follows from it)."""
        return state[1], state[2], state[3], state[5]

    def slot_clusters(self, ep: RouteEpisode, state: tuple) -> list[int]:
        """The answer cluster of every revealed slot."""
        cl = ep.cl
        return [cl[p] for p in state[5]]

    def fusion(self, ep: RouteEpisode, state: tuple) -> list[float]:
        """The fusion rank R of every revealed slot (-1 for one without an answer)."""
        counts = state[7] or (0,)
        return rank_list(self.weights[0], state[0], list(counts), self.slot_clusters(ep, state), state[2], state[3])

    def target(self, ep: RouteEpisode, state: tuple, r: list[float], t: int) -> int:
        """The slot a VERIFY of verifier ``t`` would score (-1 if none)."""
        has = ep.has
        return verify_target_bits(r, self.slot_clusters(ep, state), [has[p] for p in state[5]], state[1],
                                  self.n_tiers, t)

    def apply(self, ep: RouteEpisode, state: tuple, a: int, r: list[float] | None = None) -> tuple:
        """The state after the (legal, non-STOP) action ``a``; ``r`` is ``fusion(ep, state)`` if known."""
        n, ver, fnum, fden, cost, cand, revealed, counts = state
        if a < self.n_generators:  # SAMPLE_<a>: generator a's next candidate into slot n
            p = a * self.n_per_generator + revealed[a]
            g = ep.gen[p]
            cluster = ep.cl[p]
            if cluster >= 0:
                counts = counts or (0,) * max(ep.n_clusters, 1)
                counts = counts[:cluster] + (counts[cluster] + 1,) + counts[cluster + 1:]
            return (n + 1, ver, fnum + (0.0,), fden + (self.weights[0],),
                    (cost[0] + g[0], cost[1] + g[1], cost[2] + g[2], cost[3] + g[3], cost[4] + g[4]),
                    cand + (p,), revealed[:a] + (revealed[a] + 1,) + revealed[a + 1:], counts)
        t = self.layout.verifier_of(a)
        c = self.target(ep, state, r if r is not None else self.fusion(ep, state), t)
        p = cand[c]
        s = ep.score[p][t]
        g = ep.ver[p][t]
        if s == s:
            w = self.weights[t + 1]
            fnum = fnum[:c] + (fnum[c] + w * s,) + fnum[c + 1:]
            fden = fden[:c] + (fden[c] + w,) + fden[c + 1:]
        return (n, ver | (1 << (c * self.n_tiers + t)), fnum, fden,
                (cost[0] + g[0], cost[1] + g[1], cost[2] + g[2], cost[3] + g[3], cost[4] + g[4]),
                cand, revealed, counts)

    def legal(self, ep: RouteEpisode, state: tuple, r: list[float]) -> list[int]:
        """Legal actions in the env's mask order (STOP last), by the env's mask rule."""
        verify_bits = 0
        for t in range(self.n_tiers):
            if self.tier_on[t] and self.target(ep, state, r, t) >= 0:
                verify_bits |= 1 << self.layout.verify_action(t)
        revealed = state[6]
        sample_bits = 0
        for g, cap in enumerate(ep.caps):
            if revealed[g] < cap:
                sample_bits |= 1 << g
        return legal_actions(mask_bits(state[0], 0, verify_bits, state[4][self.k] >= self.max_cost,
                                       stop_bit=self._stop_bit, sample_bits=sample_bits), self.layout)

    def search_actions(self, ep: RouteEpisode, state: tuple, r: list[float]) -> list[int]:
        """The legal actions the oracle's search expands (``train.oracle_model.useful_actions``)."""
        return useful_actions(self.legal(ep, state, r), self.layout, self.selection)

    def selected(self, ep: RouteEpisode, state: tuple, r: list[float] | None = None) -> int:
        """The slot STOP would select in ``state`` (-1 if none)."""
        if self.selection.rule == "fusion":
            return best_of(r if r is not None else self.fusion(ep, state), self.slot_clusters(ep, state))
        return select_candidate(self.evidence(ep, state), self.selection)

    def evidence(self, ep: RouteEpisode, state: tuple) -> Evidence:
        """A pooled ``Evidence`` for ``state`` (used only for non-fusion selection rules)."""
        n, ver, cand = state[0], state[1], state[5]
        ev = Evidence(self.n_max, self.n_tiers, ep.n_clusters, 0.0, self.weights, self._strong)
        clogc = clogc_table(self.pool.n_candidates)
        for p in cand:
            ev.add_candidate(ep.cl[p], 0.0, False, clogc)
        for c in range(n):
            for t in range(self.n_tiers):
                if (ver >> (c * self.n_tiers + t)) & 1:
                    ev.add_score(c, t, ep.score[cand[c]][t])
        ev.fnum, ev.fden = list(state[2]), list(state[3])
        return ev

    def is_correct(self, ep: RouteEpisode, state: tuple, r: list[float] | None = None) -> bool:
        """Whether STOP in ``state`` would select a correct candidate."""
        if state[0] == 0:
            return False
        sel = self.selected(ep, state, r)
        return sel >= 0 and ep.correct[state[5][sel]]

    def slot_generator(self, state: tuple, slot: int) -> int:
        """The generator of the candidate in ``slot``."""
        return state[5][slot] // self.n_per_generator

    def correct_revealed(self, ep: RouteEpisode, state: tuple) -> bool:
        """Whether some revealed candidate is correct (labels: evaluator side)."""
        return any(ep.correct[p] for p in state[5])
