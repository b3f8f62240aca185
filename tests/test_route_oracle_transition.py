"""The route oracle's model and ``RouteEnv`` share one transition: a differential test over random walks.

``train.route_oracle_model.RouteOracleModel`` keeps a route episode's state as a hashable tuple (for the
search), a second form of ``RouteEnv.step``'s transition. Over pools with 2 and 3 generators (one with
problems missing a generator), 0 to 5 verifiers, selection rules, per-generator N_max and hard budgets,
random legal actions are played in both (ten walks per problem); after every step every output (legal actions, candidates revealed
per generator, the candidate in each slot, verified (slot, verifier) pairs, fusion sums, the cost measures;
at STOP the selected slot and its correctness) is hashed, and the two forms' hashes must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

from coba_env import RouteEnv, compile_pool
from tests.conftest import PAPER_VERIFIERS, make_synthetic_pool
from tests.test_many_generators import VERIFIERS
from tests.test_oracle_transition import assert_same_outputs, random_walks
from train.route_oracle_model import RouteOracleModel

POOLS = {
    "paper-2g": ({"gA": 1.5, "gB": 7.0}, PAPER_VERIFIERS, False),
    "paper-3g-partial": ({"gA": 1.5, "gB": 7.0, "gC": 72.0}, PAPER_VERIFIERS, True),
    "none-2g": ({"gA": 1.5, "gB": 7.0}, {}, False),
    "five-3g": ({"gA": 1.5, "gB": 7.0, "gC": 72.0}, dict(list(VERIFIERS.items())[:5]), False),
}
SETTINGS = [
    {},
    {"selection": "last"},
    {"selection": "majority", "n_max": 3},
    {"selection": {"rule": "max_score", "tier": "V3"}},
    {"max_cost": 30_000.0, "cost_model": "tokens"},
]


def route_test_pool(generators: dict[str, float], verifiers: dict, partial: bool, seed: int):
    """A synthetic pool of 6 problems, N = 5; ``partial``: every third problem lacks one generator."""
    compiled = compile_pool(make_synthetic_pool({"d": 6}, generators, n_candidates=5, seed=seed,
                                                verifiers=verifiers))
    if not partial:
        return compiled
    names = list(generators)
    items = compiled.item_id.tolist()
    keep = np.array([not (i % 3 == 0 and str(g) == names[i % len(names)])
                     for i, g in zip([sorted(set(items)).index(x) for x in items], compiled.generator.tolist(),
                                     strict=True)])
    assert not keep.all()
    return compiled.select(keep)


def _env_outputs(env: RouteEnv, mask: np.ndarray) -> tuple:
    ev = env.evidence
    verified = tuple(sorted((c, t) for c in range(ev.n_revealed) for t in range(ev.n_tiers)
                            if ev.scores[c][t] is not None))
    return (tuple(np.flatnonzero(mask).tolist()), tuple(ev.gen_revealed), tuple(env._slot_cand), verified,
            tuple(ev.fnum), tuple(ev.fden), tuple(ev.cost))


def _model_outputs(model: RouteOracleModel, ep, state: tuple) -> tuple:
    n, ver, fnum, fden, cost, cand, revealed, _ = state
    t_n = model.n_tiers
    verified = tuple(sorted((c, t) for c in range(n) for t in range(t_n) if (ver >> (c * t_n + t)) & 1))
    legal = tuple(model.legal(ep, state, model.fusion(ep, state)))
    return legal, revealed, cand, verified, tuple(fnum), tuple(fden), tuple(cost)


#: Every (pool, setting) pair but max_score on V3 over a pool without a V3.
CASES = [(p, s) for p in POOLS for s in range(len(SETTINGS)) if "tier" not in str(SETTINGS[s]) or "V3" in POOLS[p][1]]


@pytest.mark.parametrize(("pool_name", "setting"), CASES)
def test_route_oracle_model_transition_equals_the_route_env(pool_name, setting):
    generators, verifiers, partial = POOLS[pool_name]
    kwargs = SETTINGS[setting]
    pool = route_test_pool(generators, verifiers, partial, seed=setting)
    env = RouteEnv(pool, lam=0.0, **kwargs)
    model = RouteOracleModel.for_env(env)
    assert model.layout == env.layout
    env_rows, model_rows, steps, stops = random_walks(env, model, 10, np.random.default_rng(setting),
                                                      _env_outputs, _model_outputs)
    assert steps > 200 and stops == 10 * env.n_episodes
    assert_same_outputs(model_rows, env_rows)
