"""The cost-aware oracle's model and the env share one transition: a differential test over many layouts.

``train.oracle_model.OracleModel`` keeps the episode state as a hashable ``SearchState`` (for the search), a
second form of ``CoBaEnv.step``'s transition, for both groupings of the env. Over pools with 0 to 6 verifiers,
selection rules and hard budgets (pair grouping), and over pools with 2 and 3 generators (one with problems
missing a generator), per-generator N_max and the same rules (item grouping), random legal actions are played
in both; after every step every output (legal actions, candidates revealed, the generator of every slot,
verified (slot, verifier) pairs, fusion sums, every cost measure; at STOP the selected slot and its
correctness) is hashed, and the two forms' hashes must agree. Every pair pool is priced
(``prices_usd_per_million_tokens``), so the usd measure is a non-zero cost like the others.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from coba_env import compile_pool
from coba_env.costs import USD
from coba_env.env import CoBaEnv
from pools.prices import PRICES_KEY
from tests.conftest import PAPER_VERIFIERS, make_synthetic_pool
from tests.test_many_generators import VERIFIERS
from train.oracle_model import OracleModel, SearchState

LAYOUTS = {
    "paper": PAPER_VERIFIERS,
    "none": {},
    "one": dict(list(VERIFIERS.items())[:1]),
    "five": dict(list(VERIFIERS.items())[:5]),
    "six": VERIFIERS,
    "rm-only": {"V3": ("RM-72B", 72.0, "reward_model")},
}
#: Item-grouped pools: generators (billions of parameters), verifiers, whether some problems lack a generator.
ITEM_POOLS = {
    "paper-2g": ({"gA": 1.5, "gB": 7.0}, PAPER_VERIFIERS, False),
    "paper-3g-partial": ({"gA": 1.5, "gB": 7.0, "gC": 72.0}, PAPER_VERIFIERS, True),
    "none-2g": ({"gA": 1.5, "gB": 7.0}, {}, False),
    "five-3g": ({"gA": 1.5, "gB": 7.0, "gC": 72.0}, dict(list(VERIFIERS.items())[:5]), False),
}
ITEM_SETTINGS = [
    {},
    {"selection": "last"},
    {"selection": "majority", "n_max": 3},
    {"selection": {"rule": "max_score", "tier": "V3"}},
    {"max_cost": 30_000.0, "cost_model": "tokens"},
]
SETTINGS = [
    {},
    {"selection": "majority"},
    {"selection": {"rule": "weighted_vote", "tier": "V1"}},
    {"selection": {"rule": "max_score", "tier": "V3"}, "n_max": 6},
    {"max_cost": 40_000.0, "cost_model": "tokens"},
    {"cost_model": "usd"},
    {"max_cost": 0.02, "cost_model": "usd"},
]


def priced(pool):
    """``pool`` with a price for every model: $1 per million prompt tokens, $(1 + k) per million output tokens."""
    names = pool.models["name"].astype(str).tolist()
    pool.manifest[PRICES_KEY] = {m: {"input": 1.0, "output": 1.0 + k} for k, m in enumerate(names)}
    return pool


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


def _env_outputs(env: CoBaEnv, mask: np.ndarray) -> tuple:
    ev = env.evidence
    verified = tuple(sorted((c, t) for c in range(ev.n_revealed) for t in range(ev.n_tiers)
                            if ev.scores[c][t] is not None))
    # The generator of each slot (item grouping's evidence names it; a pair's one generator is 0).
    generators = tuple(getattr(ev, "slot_generator", None) or [0] * ev.n_revealed)
    return (tuple(np.flatnonzero(mask).tolist()), ev.n_revealed, generators, verified, tuple(ev.fnum),
            tuple(ev.fden), tuple(ev.cost))


def _model_outputs(model: OracleModel, ep, state: SearchState) -> tuple:
    t_n = model.n_tiers
    verified = tuple(sorted((c, t) for c in range(state.n) for t in range(t_n) if (state.verified >> (c * t_n + t)) & 1))
    legal = tuple(model.legal(ep, state, model.fusion(ep, state)))
    generators = tuple(model.slot_generator(state, c) for c in range(state.n))
    return legal, state.n, generators, verified, state.fnum, state.fden, state.cost


def _digest(rows: list) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def random_walks(env, model, walks: int, rng: np.random.Generator, env_outputs, model_outputs) -> tuple:
    """``walks`` random legal walks per episode through ``env`` and ``model`` side by side: (the env's outputs,
    the model's outputs, steps, stops), each output row taken before every action and at the end."""
    env_rows, model_rows, steps, stops = [], [], 0, 0
    for e in range(env.n_episodes):
        for _ in range(walks):
            _, info = env.reset(options={"episode": e})
            ep, state = model.episode(e), model.root()
            while True:
                mask = info["action_mask"]
                env_rows.append(env_outputs(env, mask))
                model_rows.append(model_outputs(model, ep, state))
                a = int(rng.choice(np.flatnonzero(mask)))
                _, _, done, _, info = env.step(a)
                steps += 1
                if done:
                    env_rows.append((info["selected_candidate"], bool(info["correct"])))
                    model_rows.append((model.selected(ep, state), model.is_correct(ep, state)))
                    stops += 1
                    break
                state = model.apply(ep, state, a)
    return env_rows, model_rows, steps, stops


def assert_same_outputs(model_rows: list, env_rows: list) -> None:
    """Equal digests of every output; on a difference, the first differing row in the message."""
    assert _digest(model_rows) == _digest(env_rows), next(
        (i, m, v) for i, (m, v) in enumerate(zip(model_rows, env_rows, strict=True)) if m != v)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_oracle_model_transition_equals_the_env(layout, setting):
    kwargs = SETTINGS[setting]
    pool = compile_pool(priced(make_synthetic_pool({"d": 6}, {"g-7B": 7.0, "g-72B": 72.0}, n_candidates=8,
                                                   seed=setting, verifiers=LAYOUTS[layout])))
    assert pool.usd_priced and pool.gen_cost[..., USD].max() > 0
    env = CoBaEnv(pool, lam=0.0, **kwargs)
    model = OracleModel.for_pool(pool, budget=env.budget, lam=0.0, **kwargs)
    assert model.layout == env.layout
    env_rows, model_rows, steps, _ = random_walks(env, model, 6, np.random.default_rng(setting), _env_outputs,
                                                  _model_outputs)
    assert steps > 100
    assert_same_outputs(model_rows, env_rows)


#: Every (pool, setting) pair but max_score on V3 over a pool without a V3.
ITEM_CASES = [(p, s) for p in ITEM_POOLS for s in range(len(ITEM_SETTINGS))
              if "tier" not in str(ITEM_SETTINGS[s]) or "V3" in ITEM_POOLS[p][1]]


@pytest.mark.parametrize(("pool_name", "setting"), ITEM_CASES)
def test_oracle_model_transition_equals_the_item_grouped_env(pool_name, setting):
    generators, verifiers, partial = ITEM_POOLS[pool_name]
    pool = route_test_pool(generators, verifiers, partial, seed=setting)
    env = CoBaEnv(pool, grouping="item", lam=0.0, **ITEM_SETTINGS[setting])
    model = OracleModel.for_env(env)
    assert model.layout == env.layout and model.n_generators == len(generators)
    env_rows, model_rows, steps, stops = random_walks(env, model, 10, np.random.default_rng(setting),
                                                      _env_outputs, _model_outputs)
    assert steps > 200 and stops == 10 * env.n_episodes
    assert_same_outputs(model_rows, env_rows)
