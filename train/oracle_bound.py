"""The cost-aware oracle's admissible lower bound: the least extra cost to a correct selection (or infinity).

Read by ``train.cost_aware_oracle``'s A*. Two parts, each a relaxation, so the bound never exceeds the true
least cost and the search stays exact:

- reveal: a correct candidate must be revealed, so while none is, the least generation cost, over generators,
  of revealing that generator's candidates up to its first correct one (inf when no generator has one left
  within its N_max);
- feasibility (fusion selection only): every final set of revealed candidates (each generator's revealed
  prefix grown to any length up to its N_max; a pair episode's one generator: every final N' from n to N_max)
  is enumerated, up to ``FEASIBILITY_COMBOS`` sets (beyond, only the reveal bound is used). For each set, the
  best fusion rank a correct candidate could reach (adding any subset of its unverified verifiers) against the
  lowest rank every incorrect one could be pushed to; if no correct candidate wins without its own
  verification, one of its verifications is due, and every incorrect candidate ranked above every reachable
  correct rank must be verified once. The bound is the least, over sets where a correct candidate can win, of
  the generation still to pay plus those verifications. It ignores the forced VERIFY order and the hard
  budget, so it only drops states that truly cannot lead to a correct selection.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from typing import Any

import numpy as np

from train.oracle_model import EpisodeTables, OracleModel, SearchState

__all__ = ["FEASIBILITY_COMBOS", "SETS_KEPT", "LowerBound"]

#: Most final candidate sets (products of per-generator prefix lengths) the feasibility bound enumerates.
FEASIBILITY_COMBOS = 4096
#: Final-set tables (per revealed counts) the bound keeps for the episode being searched, least recent dropped.
#: A 20,000-node route search on the paper pool reads about 230 revealed-count tuples (episode 262); at 64 the
#: tables were rebuilt over and over (a quarter of a hard search's time); each is at most 4,096 sets x 48
#: candidates of bytes, under 1 MB.
SETS_KEPT = 256
_EPS = 1e-9


class LowerBound:
    """``OracleModel``'s admissible extra cost to a correct selection, with its per-episode caches."""

    def __init__(self, model: OracleModel) -> None:
        self.model = model
        n_tiers = model.n_tiers
        #: Every subset of the verifiers as 0/1 rows [2 ** T, T] (the relaxation's verification choices).
        self._subsets = np.array([[(s >> t) & 1 for t in range(n_tiers)] for s in range(1 << n_tiers)],
                                 dtype=np.float64).reshape(1 << n_tiers, n_tiers)
        self._tables: dict[int, dict[str, Any] | None] = {}
        self._heavy_key: int | None = None
        self._heavy: dict[str, Any] = {}

    def __call__(self, ep: EpisodeTables, state: SearchState) -> float:
        """Admissible extra cost to a correct selection (inf when provably unreachable)."""
        m = self.model
        if not any(f >= 0 for f in ep.first_correct) and not m.correct_revealed(ep, state):
            return math.inf
        if m.selection.rule == "fusion":
            tables = self._feasibility_tables(ep)
            if tables is not None:
                combos = math.prod(cap - r + 1 for cap, r in zip(ep.caps, state.per_generator, strict=True))
                if combos <= FEASIBILITY_COMBOS:
                    return self._relaxed_cost(tables, ep, state)
        return self.reveal_bound(ep, state)

    def clear(self) -> None:
        """Forget the cached tables."""
        self._tables.clear()
        self._heavy_key, self._heavy = None, {}

    def reveal_bound(self, ep: EpisodeTables, state: SearchState) -> float:
        """0 once a correct candidate is revealed; else the least cost of revealing one (inf if none is left)."""
        if self.model.correct_revealed(ep, state):
            return 0.0
        best = math.inf
        for g, first in enumerate(ep.first_correct):
            r = state.per_generator[g]
            if first >= r:
                best = min(best, ep.prefix_cost[g][first + 1] - ep.prefix_cost[g][r])
        return best

    # ------------------------------------------------------------------ the feasibility relaxation
    def _feasibility_tables(self, ep: EpisodeTables) -> dict[str, Any] | None:
        """Per candidate the episode may reveal: cluster, gold/rival, usable weighted scores and costs."""
        key = id(ep)
        if key in self._tables:
            return self._tables[key]
        m, n = self.model, self.model.n_per_generator
        p = np.array([g * n + j for g, cap in enumerate(ep.caps) for j in range(cap)], dtype=np.int64)
        if len(p) == 0:
            self._tables[key] = None
            return None
        t_n = m.n_tiers
        cl = np.array(ep.cl)[p]
        slots = len(ep.cl)  # rows by slot count, not -1: a pool without verifiers has t_n = 0 columns
        has = np.array(ep.has, dtype=bool).reshape(slots, t_n)[p] & np.array(m.tier_on, dtype=bool)[None, :]
        score = np.array(ep.score, dtype=np.float64).reshape(slots, t_n)[p]
        usable = has & ~np.isnan(score)
        wt = np.array(m.weights[1:], dtype=np.float64)[None, :]
        ver_cost = np.array([[v[m.k] for v in ep.ver[q]] for q in p], dtype=np.float64).reshape(len(p), t_n)
        onehot = np.zeros((len(p), max(ep.n_clusters, 1)))
        onehot[np.flatnonzero(cl >= 0), cl[cl >= 0]] = 1.0
        correct = np.array(ep.correct)[p]
        tables = {"p": p, "index": {int(q): i for i, q in enumerate(p)}, "gen": p // n, "k": p % n,
                  "cl": np.maximum(cl, 0), "answered": cl >= 0, "onehot": onehot,
                  "gold": correct & (cl >= 0), "rival": ~correct & (cl >= 0),
                  "wnum": np.where(usable, wt * np.nan_to_num(score), 0.0), "wden": np.where(usable, wt, 0.0),
                  "ver_cost": np.where(usable, ver_cost, np.inf),
                  "prefix": _padded(ep.prefix_cost)}
        self._tables[key] = tables
        return tables

    def _relaxed_cost(self, t: dict[str, Any], ep: EpisodeTables, state: SearchState) -> float:
        """The relaxed cost of ``state``, cached by what it reads: the revealed count per generator and each
        revealed candidate's fusion sums and verified verifiers, not the slot order (interleavings share it)."""
        t_n = self.model.n_tiers
        key = (state.per_generator,
               tuple(sorted((q, state.fnum[slot], state.fden[slot], (state.verified >> (slot * t_n)) & ((1 << t_n) - 1))
                            for slot, q in enumerate(state.slots))))
        bounds = self._episode_cache(ep).setdefault("bounds", {})
        bound = bounds.get(key)
        if bound is None:
            bound = bounds[key] = self._relaxed_cost_of(t, ep, key)
        return bound

    def _final_sets(self, t: dict[str, Any], ep: EpisodeTables, revealed: tuple) -> dict[str, Any]:
        """Every final candidate set from ``revealed`` (each generator's prefix grown up to its N_max): which
        candidates each set includes, the generation it adds, and each candidate's cluster count."""
        sets = self._episode_cache(ep).setdefault("sets", OrderedDict())
        found = sets.get(revealed)
        if found is not None:
            sets.move_to_end(revealed)
            return found
        lengths = np.array(list(itertools.product(*[range(r, cap + 1) for r, cap in zip(revealed, ep.caps,
                                                                                          strict=True)])))
        included = t["k"][None, :] < lengths[:, t["gen"]]  # [S, P]
        counts = included @ t["onehot"]  # [S, C]
        total_n = np.maximum(lengths.sum(axis=1), 1)
        # Generation still to pay: each generator's prefix cost at its final length less at its revealed one
        # (differences of the env's running sums, so a pair's bound is that of its one prefix).
        gens = np.arange(len(revealed))
        prefix = t["prefix"]
        gen_cost = (prefix[gens[None, :], lengths] - prefix[gens, np.array(revealed)][None, :]).sum(axis=1)
        found = sets[revealed] = {
            "gen_cost": gen_cost, "total_n": total_n,
            "count": counts[:, t["cl"]].astype(np.int8), "counts": counts,
            "gold": included & t["gold"][None, :], "rival": included & t["rival"][None, :]}
        if len(sets) > SETS_KEPT:
            sets.popitem(last=False)
        return found

    def _episode_cache(self, ep: EpisodeTables) -> dict[str, Any]:
        """The bound's caches (bounds, final sets, rank tables) of the episode searched last; a new episode
        replaces them, so memory stays that of one episode however many are planned."""
        if self._heavy_key != id(ep):
            self._heavy_key, self._heavy = id(ep), {}
        return self._heavy

    def _rank_tables(self, t: dict[str, Any], ep: EpisodeTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a candidate never verified: its best, worst and plain fusion rank (any subset of its verifiers
        added) at every cluster count and total, ``[P, count, total]``, computed as ``_relaxed_cost_of`` does."""
        cache = self._episode_cache(ep)
        if "rank_tables" not in cache:
            w0, n_p, t_n = self.model.weights[0], len(t["p"]), self.model.n_tiers
            unver = np.ones((n_p, t_n), dtype=bool)
            num = np.zeros(n_p)[:, None] + (t["wnum"] * unver) @ self._subsets.T  # [P, 2 ** T]
            den = np.full(n_p, w0)[:, None] + (t["wden"] * unver) @ self._subsets.T
            most = n_p + 1
            count = np.arange(most, dtype=np.float64)[:, None]
            total = np.maximum(np.arange(most), 1)[None, :]
            freq = w0 * count / total  # [count, total]
            with np.errstate(divide="ignore", invalid="ignore"):
                r = (freq[None, :, :, None] + num[:, None, None, :]) / den[:, None, None, :]
            r = np.where(den[:, None, None, :] > 0, r, 0.0)
            cache["rank_tables"] = (r.max(axis=3), r.min(axis=3), r[..., 0])
        return cache["rank_tables"]

    def _relaxed_cost_of(self, t: dict[str, Any], ep: EpisodeTables, key: tuple) -> float:
        """The relaxed cost of the evidence ``key`` (revealed counts; per revealed candidate its fusion sums
        and verified bits): the least, over final sets where a correct candidate can win, of the generation
        still to pay plus the verifications due (see the module docstring)."""
        revealed, slots = key
        t_n, w0 = self.model.n_tiers, self.model.weights[0]
        n_p = len(t["p"])
        base_num, base_den = np.zeros(n_p), np.full(n_p, w0)
        unver = np.ones((n_p, t_n), dtype=bool)
        touched = []
        for q, num_q, den_q, bits in slots:
            i = t["index"][q]
            base_num[i], base_den[i] = num_q, den_q
            unver[i] = [not (bits >> v) & 1 for v in range(t_n)]
            if bits or num_q != 0.0 or den_q != w0:
                touched.append(i)
        subsets = self._subsets
        num = base_num[:, None] + (t["wnum"] * unver) @ subsets.T  # [P, 2 ** T]
        den = base_den[:, None] + (t["wden"] * unver) @ subsets.T
        sets = self._final_sets(t, ep, revealed)
        total_n, count = sets["total_n"], sets["count"]
        # Ranks of never-verified candidates from the tables; verified ones computed for this state.
        best_table, worst_table, plain_table = self._rank_tables(t, ep)
        cols = np.arange(n_p)[None, :]
        best, worst, plain = (best_table[cols, count, total_n[:, None]], worst_table[cols, count, total_n[:, None]],
                              plain_table[cols, count, total_n[:, None]])
        if touched:
            idx = np.array(touched)
            freq = w0 * sets["counts"][:, t["cl"][idx]] / total_n[:, None]  # [S, touched]
            with np.errstate(divide="ignore", invalid="ignore"):
                r = (freq[:, :, None] + num[idx][None]) / den[idx][None]
            r = np.where(den[idx][None] > 0, r, 0.0)
            best[:, idx], worst[:, idx], plain[:, idx] = r.max(axis=2), r.min(axis=2), r[:, :, 0]
        gold_mask, rival_mask = sets["gold"], sets["rival"]
        gold_best = np.where(gold_mask, best, -np.inf).max(axis=1)
        rival_floor = np.where(rival_mask, worst, -np.inf).max(axis=1)
        feasible = (gold_best > -np.inf) & (gold_best >= rival_floor - _EPS)
        if not feasible.any():
            return math.inf
        vc = np.where(unver, t["ver_cost"], np.inf).min(axis=1, initial=np.inf)  # no verifier: never verifiable
        gold_plain = np.where(gold_mask, plain, -np.inf).max(axis=1)
        gold_need = np.where(gold_plain >= rival_floor - _EPS, 0.0,
                             np.where(gold_mask, vc[None], np.inf).min(axis=1))
        above = rival_mask & (plain > gold_best[:, None] + _EPS)
        rival_need = np.where(above, vc[None], 0.0).sum(axis=1)
        cost = sets["gen_cost"] + gold_need + rival_need
        return float(np.where(feasible, cost, np.inf).min())


def _padded(prefix_cost: list[list[float]]) -> np.ndarray:
    """Per-generator prefix costs [G, max cap + 1], each row continued with its last value."""
    width = max(len(row) for row in prefix_cost)
    return np.array([row + [row[-1]] * (width - len(row)) for row in prefix_cost], dtype=np.float64)
