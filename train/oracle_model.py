"""The cost-aware oracle's model of the env: what ``CoBaEnv`` would do in a compact, hashable episode state.

It replays the env's exact rules (action masks, deterministic VERIFY targets by fusion rank, the STOP
selection) on per-episode tables read from the compiled pool, labels included (evaluator side). The search
over these states lives in ``train.cost_aware_oracle``.

A state is the tuple ``(n, verified bits, fnum, fden, cost)``: ``n`` candidates revealed; verified bit
``c * T + t`` set once verifier ``t`` (of the pool's T) verified candidate ``c``; ``fnum`` / ``fden`` the per-candidate fusion
sums in the env's addition order; ``cost`` the tuple of cost measures accumulated in the env's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES, add_costs
from coba_env.evidence import Evidence
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig
from coba_env.rules.features import clogc_table
from coba_env.rules.fusion import best_of, rank_list
from coba_env.rules.masks import legal_actions, mask_bits, stop_bit
from coba_env.rules.selection import SelectionRule, select_candidate
from coba_env.rules.verify import verify_target_bits

__all__ = ["SCORE_FREE_RULES", "Episode", "OracleModel", "useful_actions"]

#: Selection rules that read no verifier score (``coba_env.rules.selection.select_candidate``: ``majority``
#: picks the top answer's first candidate, ``last`` the newest answered one).
SCORE_FREE_RULES = frozenset({"majority", "last"})


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
class Episode:
    """Per-episode tables the oracle reads (plain Python lists for speed)."""

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


class OracleModel:
    """The env's rules on one compiled pool and env configuration, over hashable state tuples.

    The configuration mirrors ``CoBaEnv``'s: budget (default as the env's), cost model, selection rule,
    ``n_max``, enabled ``tiers`` and ``max_cost``. Episode tables are built on first use and cached.
    """

    def __init__(self, compiled: CompiledPool, *, budget: float | None = None, cost_model: str = "p_tokens",
                 selection: SelectionRule | dict | str | None = None, n_max: int | None = None,
                 tiers: Sequence[str] | None = None, max_cost: float | None = None) -> None:
        config = EnvConfig.for_pool(compiled, budget=budget, cost_model=cost_model, selection=selection,
                                    n_max=n_max, tiers=tiers, max_cost=max_cost)
        self.pool = compiled
        self.cost_model, self.k, self.n_max = config.cost_model, config.cost_k, config.n_max
        self.budget, self.selection, self.weights = config.budget, config.selection, config.weights
        self.tier_on, self.max_cost = list(config.tier_on), config.max_cost
        #: The env's replay layout (``SAMPLE``, ``VERIFY_<v>`` per verifier of the pool, ``STOP``).
        self.layout = ActionLayout(verifiers=tuple(compiled.tiers))
        self.n_tiers = self.layout.n_verifiers
        self.sample, self.stop, self._stop_bit = self.layout.sample_action(), self.layout.stop_action, \
            stop_bit(self.layout)
        self._strong = config.features.strong
        #: Every subset of the verifiers as 0/1 rows [2 ** T, T] (the feasibility bound's verification choices).
        self._subsets = np.array([[(s >> t) & 1 for t in range(self.n_tiers)] for s in range(1 << self.n_tiers)],
                                 dtype=np.float64)
        self._rows = compiled.episode_rows()
        self._episodes: dict[int, Episode] = {}

    # ------------------------------------------------------------------ episode tables
    def episode(self, e: int) -> Episode:
        """The (cached) tables of episode ``e``."""
        ep = self._episodes.get(e)
        if ep is not None:
            return ep
        row = self._rows[e]
        cl, gen, has, score, ver, n_clusters = (row.cluster, row.gen_cost, row.has_score, row.score, row.ver_cost,
                                                row.n_clusters)
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
        ep = Episode(cl=cl, gen=gen, has=has, score=score, ver=ver, correct=correct, counts_at=counts_at,
                     prefix_cost=prefix, first_correct=first)
        if self.selection.rule == "fusion" and first >= 0:
            ep.feas = self._feasibility_tables(ep)
        self._episodes[e] = ep
        return ep

    def clear(self) -> None:
        """Forget the cached episode tables."""
        self._episodes.clear()

    def _feasibility_tables(self, ep: Episode) -> dict[str, np.ndarray]:
        n_max, w = self.n_max, self.weights
        cl = np.array(ep.cl[:n_max])
        counts = np.array([[row[x] if x >= 0 else 0 for x in ep.cl[:n_max]] for row in ep.counts_at])
        n_prime = np.maximum(np.arange(n_max + 1), 1)[:, None]
        freq = w[0] * counts / n_prime  # [N'+1, n_max], as the env computes wf * count / n
        visible = np.arange(n_max)[None, :] < np.arange(n_max + 1)[:, None]
        correct = np.array(ep.correct[:n_max], dtype=bool)
        answered = cl >= 0
        t_n = self.n_tiers  # reshaped: with no verifier the nested lists have no inner length
        has = np.array(ep.has[:n_max], dtype=bool).reshape(n_max, t_n) & np.array(self.tier_on, dtype=bool)[None, :]
        score = np.array(ep.score[:n_max], dtype=np.float64).reshape(n_max, t_n)
        usable = has & ~np.isnan(score)
        wt = np.array(w[1:], dtype=np.float64)[None, :]
        ver_cost = np.array([[v[self.k] for v in row] for row in ep.ver[:n_max]], dtype=np.float64).reshape(n_max, t_n)
        return {"freq": freq, "gold": visible & correct[None] & answered[None],
                "rival": visible & ~correct[None] & answered[None], "usable": usable,
                "wnum": np.where(usable, wt * np.nan_to_num(score), 0.0), "wden": np.where(usable, wt, 0.0),
                "ver_cost": np.where(usable, ver_cost, np.inf), "prefix": np.array(ep.prefix_cost),
                "shift": np.arange(n_max * self.n_tiers, dtype=np.int64).reshape(n_max, self.n_tiers),
                "subsets": self._subsets}

    # ------------------------------------------------------------------ state machine
    def root(self) -> tuple:
        """The state at the start of an episode."""
        return (0, 0, (), (), (0.0,) * len(COST_MEASURES))

    @staticmethod
    def key(state: tuple) -> tuple:
        """The evidence part of ``state`` (its cost follows from it)."""
        return state[:4]

    def fusion(self, ep: Episode, state: tuple) -> list[float]:
        """The fusion rank R of every revealed candidate (-1 for one without an answer)."""
        n = state[0]
        return rank_list(self.weights[0], n, ep.counts_at[n], ep.cl, state[2], state[3])

    def target(self, ep: Episode, state: tuple, r: list[float], t: int) -> int:
        """The candidate a VERIFY of tier ``t`` would score (-1 if none)."""
        return verify_target_bits(r, ep.cl, ep.has, state[1], self.n_tiers, t)

    def apply(self, ep: Episode, state: tuple, a: int, r: list[float] | None = None) -> tuple:
        """The state after the (legal, non-STOP) action ``a``; ``r`` is ``fusion(ep, state)`` if known."""
        n, ver, fnum, fden, cost = state
        if a == self.sample:
            g = ep.gen[n]
            return (n + 1, ver, fnum + (0.0,), fden + (self.weights[0],),
                    add_costs(cost, g))
        t = self.layout.verifier_of(a)
        c = self.target(ep, state, r if r is not None else self.fusion(ep, state), t)
        s = ep.score[c][t]
        g = ep.ver[c][t]
        if s == s:
            w = self.weights[t + 1]
            fnum = fnum[:c] + (fnum[c] + w * s,) + fnum[c + 1:]
            fden = fden[:c] + (fden[c] + w,) + fden[c + 1:]
        return (n, ver | (1 << (c * self.n_tiers + t)), fnum, fden,
                add_costs(cost, g))

    def legal(self, ep: Episode, state: tuple, r: list[float]) -> list[int]:
        """Legal actions in the env's mask order (STOP last), by the env's mask rule."""
        verify_bits = 0
        for t in range(self.n_tiers):
            if self.tier_on[t] and self.target(ep, state, r, t) >= 0:
                verify_bits |= 1 << self.layout.verify_action(t)
        return legal_actions(mask_bits(state[0], self.n_max, verify_bits, state[4][self.k] >= self.max_cost,
                                       stop_bit=self._stop_bit), self.layout)

    def search_actions(self, ep: Episode, state: tuple, r: list[float]) -> list[int]:
        """The legal actions the oracle's search expands (``useful_actions``)."""
        return useful_actions(self.legal(ep, state, r), self.layout, self.selection)

    def selected(self, ep: Episode, state: tuple, r: list[float] | None = None) -> int:
        """The candidate STOP would select in ``state`` (-1 if none)."""
        if self.selection.rule == "fusion":
            return best_of(r if r is not None else self.fusion(ep, state), ep.cl)
        return select_candidate(self.evidence(ep, state), self.selection)

    def evidence(self, ep: Episode, state: tuple) -> Evidence:
        """An env ``Evidence`` for ``state`` (used only for non-fusion selection rules)."""
        n, ver = state[0], state[1]
        ev = Evidence(self.n_max, self.n_tiers, len(ep.counts_at[0]), 0.0, self.weights, self._strong)
        clogc = clogc_table(self.pool.n_candidates)
        for c in range(n):
            ev.add_candidate(ep.cl[c], 0.0, False, clogc)
        for c in range(n):
            for t in range(self.n_tiers):
                if (ver >> (c * self.n_tiers + t)) & 1:
                    ev.add_score(c, t, ep.score[c][t])
        ev.fnum, ev.fden = list(state[2]), list(state[3])
        return ev

    def is_correct(self, ep: Episode, state: tuple, r: list[float] | None = None) -> bool:
        """Whether STOP in ``state`` would select a correct candidate."""
        if state[0] == 0:
            return False
        sel = self.selected(ep, state, r)
        return sel >= 0 and ep.correct[sel]
