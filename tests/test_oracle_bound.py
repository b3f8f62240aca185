"""The oracle's relaxed feasibility bound, cached and table-driven, equals its definition computed directly.

``train.oracle_bound.LowerBound`` caches the bound by evidence (slot order aside) and reads the ranks of
never-verified candidates from per-episode tables. The reference below computes the definition from the
state alone, every final candidate set enumerated and every rank recomputed (the module docstring of
``train.oracle_bound``); along random legal walks (three generators grouped by item, or one generator per
pair; paper and five verifiers) the two must be equal to the last bit, including states that differ only in
slot order.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from coba_env.env import CoBaEnv
from tests.conftest import PAPER_VERIFIERS
from tests.test_many_generators import VERIFIERS
from tests.test_oracle_transition import route_test_pool
from train.cost_aware_oracle import CostAwareOracle
from train.oracle_model import SearchState

EPS = 1e-9


def reference_relaxed_cost(oracle: CostAwareOracle, ep, state: SearchState) -> float:
    """The relaxed cost by its definition: one pass over every final set, nothing cached."""
    t = oracle.lower_bound._feasibility_tables(ep)
    ver, fnum, fden, cand, revealed = state.verified, state.fnum, state.fden, state.slots, state.per_generator
    t_n, w0 = oracle.model.n_tiers, oracle.weights[0]
    n_p = len(t["p"])
    base_num, base_den = np.zeros(n_p), np.full(n_p, w0)
    unver = np.ones((n_p, t_n), dtype=bool)
    for slot, q in enumerate(cand):
        i = t["index"][q]
        base_num[i], base_den[i] = fnum[slot], fden[slot]
        unver[i] = [not (ver >> (slot * t_n + v)) & 1 for v in range(t_n)]
    subsets = np.array([[(s >> v) & 1 for v in range(t_n)] for s in range(1 << t_n)], dtype=np.float64)
    subsets = subsets.reshape(1 << t_n, t_n)
    num = base_num[:, None] + (t["wnum"] * unver) @ subsets.T
    den = base_den[:, None] + (t["wden"] * unver) @ subsets.T
    lengths = np.array(list(itertools.product(*[range(r, cap + 1) for r, cap in zip(revealed, ep.caps,
                                                                                      strict=True)])))
    included = t["k"][None, :] < lengths[:, t["gen"]]
    # generation still to pay: per generator, its prefix cost at the final length less at the revealed one
    to_pay = np.array([sum(ep.prefix_cost[g][length] - ep.prefix_cost[g][r]
                           for g, (length, r) in enumerate(zip(row, revealed, strict=True))) for row in lengths])
    counts = included @ t["onehot"]
    total_n = np.maximum(lengths.sum(axis=1), 1)
    freq = np.where(t["answered"][None, :], w0 * counts[:, t["cl"]] / total_n[:, None], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (freq[:, :, None] + num[None]) / den[None]
    r = np.where(den[None] > 0, r, 0.0)
    gold_mask, rival_mask = included & t["gold"][None, :], included & t["rival"][None, :]
    gold_best = np.where(gold_mask, r.max(axis=2), -np.inf).max(axis=1)
    rival_floor = np.where(rival_mask, r.min(axis=2), -np.inf).max(axis=1)
    feasible = (gold_best > -np.inf) & (gold_best >= rival_floor - EPS)
    if not feasible.any():
        return math.inf
    vc = np.where(unver, t["ver_cost"], np.inf).min(axis=1)
    gold_plain = np.where(gold_mask, r[:, :, 0], -np.inf).max(axis=1)
    gold_need = np.where(gold_plain >= rival_floor - EPS, 0.0, np.where(gold_mask, vc[None], np.inf).min(axis=1))
    above = rival_mask & (r[:, :, 0] > gold_best[:, None] + EPS)
    rival_need = np.where(above, vc[None], 0.0).sum(axis=1)
    cost = to_pay + gold_need + rival_need
    return float(np.where(feasible, cost, np.inf).min())


@pytest.mark.parametrize("grouping", ["item", "pair"])
@pytest.mark.parametrize("verifiers", [PAPER_VERIFIERS, dict(list(VERIFIERS.items())[:5])])
def test_cached_relaxed_cost_equals_its_definition_along_random_walks(verifiers, grouping):
    pool = route_test_pool({"gA": 1.5, "gB": 7.0, "gC": 72.0}, verifiers, False, seed=3)
    env = CoBaEnv(pool, lam=0.0, grouping=grouping)
    oracle = CostAwareOracle.for_env(env)
    m, rng, bound = oracle.model, np.random.default_rng(0), oracle.lower_bound
    checked = finite = 0
    for e in range(env.n_episodes // 3):
        ep = m.episode(e)
        if bound._feasibility_tables(ep) is None:
            continue
        for _ in range(8):
            state = m.root()
            while True:
                expected = reference_relaxed_cost(oracle, ep, state)
                assert bound._relaxed_cost(bound._feasibility_tables(ep), ep, state) == expected
                checked += 1
                finite += expected < math.inf
                legal = [a for a in m.legal(ep, state, m.fusion(ep, state)) if a != m.stop]
                if not legal:
                    break
                state = m.apply(ep, state, int(rng.choice(legal)))
    # the walks reach many states, some where a correct selection stays possible and some where it cannot
    assert checked > 200 and 0 < finite < checked
