"""The cost-aware oracle's model of the env: what ``CoBaEnv`` would do, over a compact hashable ``SearchState``.

One model for both groupings of the env configuration (``EnvConfig.grouping``): an episode is one item with
the candidates of G generators, and ``SAMPLE_<g>`` puts generator g's next candidate into the next slot; a
"pair" episode (one item and one generator) is the case G = 1, whose one SAMPLE reveals the candidates in
pool order. Every rule is the env's rules layer (``rank_list``, ``best_of``, ``verify_target_bits``,
``mask_bits``, ``select_candidate``) and the cost arithmetic is ``coba_env.costs.add_costs``;
``tests/test_oracle_transition.py`` pins this model to the env over random walks of both groupings. The
search over these states lives in ``train.cost_aware_oracle``. Evaluator side: it reads the correctness labels.

The slot order is part of a state's key: the fusion rank breaks ties to the earliest slot (the STOP selection
and every VERIFY target), so two interleavings of the same candidates are different states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from agents.oracle import GeneratorAxis
from coba_env.costs import COST_MEASURES, add_costs
from coba_env.evidence import Evidence
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig
from coba_env.rules.features import clogc_table
from coba_env.rules.fusion import best_of, rank_list
from coba_env.rules.masks import legal_actions, mask_bits, stop_bit
from coba_env.rules.selection import SelectionRule, select_candidate
from coba_env.rules.verify import verify_target_bits

__all__ = ["SCORE_FREE_RULES", "EpisodeTables", "OracleModel", "SearchState", "useful_actions"]

#: Selection rules that read no verifier score (``coba_env.rules.selection.select_candidate``: ``majority``
#: picks the top answer's first candidate, ``last`` the newest answered one).
SCORE_FREE_RULES = frozenset({"majority", "last"})


class SearchState(NamedTuple):
    """One state of an episode, as the env would hold it after some legal actions (hashable).

    ``verified`` has bit ``slot * T + t`` set once verifier t (of the pool's T) scored that slot; ``fnum`` and
    ``fden`` are the per-slot fusion sums in the env's addition order; ``cost`` is one value per measure of
    ``COST_MEASURES``; ``slots`` the episode's candidate (``g * N + k``) in each revealed slot.
    """

    n: int  # candidates revealed (slots filled)
    verified: int
    fnum: tuple[float, ...]
    fden: tuple[float, ...]
    cost: tuple[float, ...]
    slots: tuple[int, ...]
    per_generator: tuple[int, ...]  # candidates revealed from each generator
    counts: tuple[int, ...]  # answer cluster sizes among the revealed ones (() before the first answer)

    def key(self) -> tuple:
        """The evidence part (slot order, verified bits, fusion sums): the cost follows from it."""
        return self.slots, self.verified, self.fnum, self.fden


def useful_actions(legal: list[int], layout: ActionLayout, selection: SelectionRule) -> list[int]:
    """The legal actions a min-cost search needs to expand: all of them, but no VERIFY under a score-free rule.

    Why dropping them is exact: under such a rule a VERIFY changes neither which candidates are revealed nor
    the selection, only adds cost; removing every VERIFY from a plan keeps each SAMPLE and the STOP legal (their
    masks read counts and the spend, which only falls) and reaches the same selection for less.
    """
    if selection.rule in SCORE_FREE_RULES:
        return [a for a in legal if not layout.is_verify(a)]
    return legal


@dataclass
class EpisodeTables:
    """One episode's tables, indexed by the episode's candidate ``g * N + k`` (plain lists for speed)."""

    cl: list[int]
    gen: list[list[float]]
    has: list[list[bool]]
    score: list[list[float]]
    ver: list[list[list[float]]]
    correct: list[bool]
    n_clusters: int
    caps: list[int]  # most candidates each generator may reveal (0 when the item has none of it)
    prefix_cost: list[list[float]]  # prefix_cost[g][k]: generation cost (cost model) of g's first k candidates
    first_correct: list[int]  # first correct k < caps[g] of each generator, or -1


class OracleModel:
    """The env's rules on one validated configuration (``EnvConfig``), over ``SearchState`` values."""

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        self.pool = config.pool
        self.axis = GeneratorAxis.of(config)
        self.n_generators, self.n_per_generator = len(self.axis.names), self.axis.n_per_generator
        self.cost_model, self.k, self.n_max = config.cost_model, config.cost_k, config.n_max
        self.budget, self.selection, self.weights = config.budget, config.selection, config.weights
        self.tier_on, self.max_cost = list(config.tier_on), config.max_cost
        #: The env's layout: ``SAMPLE_<g>`` per generator (one ``SAMPLE`` for a pair), ``VERIFY_<v>``, ``STOP``.
        self.layout = ActionLayout(generators=self.axis.names, verifiers=tuple(self.pool.tiers))
        self.n_tiers = self.layout.n_verifiers
        self.stop, self._stop_bit = self.layout.stop_action, stop_bit(self.layout)
        self.sample = self.layout.sample_action()  # SAMPLE_<first generator>; every SAMPLE id is its generator
        self._strong = config.features.strong
        self._rows = self.pool.episode_rows()
        self._episodes: dict[int, EpisodeTables] = {}

    @classmethod
    def for_env(cls, env: Any) -> OracleModel:
        """The model of ``env`` (either grouping): its validated configuration."""
        return cls(env.unwrapped.config)

    @classmethod
    def for_pool(cls, compiled: Any, **env_kwargs: Any) -> OracleModel:
        """The model of ``CoBaEnv(compiled, **env_kwargs)`` without building the env."""
        return cls(EnvConfig.build(compiled, **env_kwargs))

    # ------------------------------------------------------------------ episode tables
    def episode(self, e: int) -> EpisodeTables:
        """The (cached) tables of episode ``e``."""
        ep = self._episodes.get(e)
        if ep is not None:
            return ep
        row, n = self._rows[e], self.n_per_generator
        correct = self.pool.labels.correct[e].tolist()
        # The env's own caps (``EnvConfig.sample_caps``): N_max, or what a short episode / generator holds.
        caps = self.config.sample_caps.reshape(self.pool.n_episodes, -1)[e].tolist()
        prefix, first = [], []
        for g, cap in enumerate(caps):
            acc = [0.0]
            for j in range(cap):
                acc.append(acc[-1] + row.gen_cost[g * n + j][self.k])
            prefix.append(acc)
            first.append(next((j for j in range(cap) if correct[g * n + j]), -1))
        ep = EpisodeTables(cl=row.cluster, gen=row.gen_cost, has=row.has_score, score=row.score, ver=row.ver_cost,
                           correct=correct, n_clusters=row.n_clusters, caps=caps, prefix_cost=prefix,
                           first_correct=first)
        self._episodes[e] = ep
        return ep

    def clear(self) -> None:
        """Forget the cached episode tables."""
        self._episodes.clear()

    # ------------------------------------------------------------------ state machine
    def root(self) -> SearchState:
        """The state at the start of an episode."""
        return SearchState(0, 0, (), (), (0.0,) * len(COST_MEASURES), (), (0,) * self.n_generators, ())

    def slot_clusters(self, ep: EpisodeTables, state: SearchState) -> list[int]:
        """The answer cluster of every revealed slot."""
        cl = ep.cl
        return [cl[p] for p in state.slots]

    def fusion(self, ep: EpisodeTables, state: SearchState) -> list[float]:
        """The fusion rank R of every revealed slot (-1 for one without an answer)."""
        return rank_list(self.weights[0], state.n, list(state.counts or (0,)), self.slot_clusters(ep, state),
                         state.fnum, state.fden)

    def target(self, ep: EpisodeTables, state: SearchState, r: list[float], t: int) -> int:
        """The slot a VERIFY of verifier ``t`` would score (-1 if none)."""
        has = ep.has
        return verify_target_bits(r, self.slot_clusters(ep, state), [has[p] for p in state.slots], state.verified,
                                  self.n_tiers, t)

    def apply(self, ep: EpisodeTables, state: SearchState, a: int, r: list[float] | None = None) -> SearchState:
        """The state after the (legal, non-STOP) action ``a``; ``r`` is ``fusion(ep, state)`` if known."""
        n, verified, fnum, fden, cost, slots, per_generator, counts = state
        if a < self.n_generators:  # SAMPLE_<a>: generator a's next candidate into slot n
            p = a * self.n_per_generator + per_generator[a]
            cluster = ep.cl[p]
            if cluster >= 0:
                counts = counts or (0,) * max(ep.n_clusters, 1)
                counts = counts[:cluster] + (counts[cluster] + 1,) + counts[cluster + 1:]
            return SearchState(n + 1, verified, fnum + (0.0,), fden + (self.weights[0],), add_costs(cost, ep.gen[p]),
                               slots + (p,), per_generator[:a] + (per_generator[a] + 1,) + per_generator[a + 1:],
                               counts)
        t = self.layout.verifier_of(a)
        c = self.target(ep, state, r if r is not None else self.fusion(ep, state), t)
        p = slots[c]
        s = ep.score[p][t]
        if s == s:  # a NaN score drops out of the fusion rank (the env's ``Evidence.add_score``)
            w = self.weights[t + 1]
            fnum = fnum[:c] + (fnum[c] + w * s,) + fnum[c + 1:]
            fden = fden[:c] + (fden[c] + w,) + fden[c + 1:]
        return SearchState(n, verified | (1 << (c * self.n_tiers + t)), fnum, fden, add_costs(cost, ep.ver[p][t]),
                           slots, per_generator, counts)

    def legal(self, ep: EpisodeTables, state: SearchState, r: list[float]) -> list[int]:
        """Legal actions in the env's mask order (STOP last), by the env's mask rule."""
        verify_bits = 0
        for t in range(self.n_tiers):
            if self.tier_on[t] and self.target(ep, state, r, t) >= 0:
                verify_bits |= 1 << self.layout.verify_action(t)
        sample_bits = 0
        for g, cap in enumerate(ep.caps):
            if state.per_generator[g] < cap:
                sample_bits |= 1 << g
        return legal_actions(mask_bits(state.n, 0, verify_bits, state.cost[self.k] >= self.max_cost,
                                       stop_bit=self._stop_bit, sample_bits=sample_bits), self.layout)

    def search_actions(self, ep: EpisodeTables, state: SearchState, r: list[float]) -> list[int]:
        """The legal actions the oracle's search expands (``useful_actions``)."""
        return useful_actions(self.legal(ep, state, r), self.layout, self.selection)

    def selected(self, ep: EpisodeTables, state: SearchState, r: list[float] | None = None) -> int:
        """The slot STOP would select in ``state`` (-1 if none)."""
        if self.selection.rule == "fusion":
            return best_of(r if r is not None else self.fusion(ep, state), self.slot_clusters(ep, state))
        return select_candidate(self.evidence(ep, state), self.selection)

    def evidence(self, ep: EpisodeTables, state: SearchState) -> Evidence:
        """An env ``Evidence`` for ``state`` (used only for non-fusion selection rules)."""
        ev = Evidence(self.n_max, self.n_tiers, max(ep.n_clusters, 1), 0.0, self.weights, self._strong)
        clogc = clogc_table(self.pool.n_candidates)
        for p in state.slots:
            ev.add_candidate(ep.cl[p], 0.0, False, clogc)
        for c, p in enumerate(state.slots):
            for t in range(self.n_tiers):
                if (state.verified >> (c * self.n_tiers + t)) & 1:
                    ev.add_score(c, t, ep.score[p][t])
        ev.fnum, ev.fden = list(state.fnum), list(state.fden)
        return ev

    def is_correct(self, ep: EpisodeTables, state: SearchState, r: list[float] | None = None) -> bool:
        """Whether STOP in ``state`` would select a correct candidate."""
        if state.n == 0:
            return False
        sel = self.selected(ep, state, r)
        return sel >= 0 and ep.correct[state.slots[sel]]

    def slot_generator(self, state: SearchState, slot: int) -> int:
        """The generator of the candidate in ``slot``."""
        return state.slots[slot] // self.n_per_generator

    def correct_revealed(self, ep: EpisodeTables, state: SearchState) -> bool:
        """Whether some revealed candidate is correct (labels: evaluator side)."""
        return any(ep.correct[p] for p in state.slots)
