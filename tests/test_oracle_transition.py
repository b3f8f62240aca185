"""The cost-aware oracle's model and the env share one transition: a differential test over many layouts.

``train.oracle_model.OracleModel`` keeps the episode state as a hashable tuple (for the search), a second form
of ``CoBaEnv.step``'s transition. Over pools with 0 to 6 verifiers, selection rules and hard budgets, random
legal actions are played in both; after every step every output (legal actions, candidates revealed, verified
(candidate, verifier) pairs, fusion sums, the five costs; at STOP the selected candidate and its correctness)
is hashed, and the two forms' hashes must agree. Every pool is priced (``prices_usd_per_million_tokens``), so
the usd measure is a non-zero cost like the others.
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
from train.oracle_model import OracleModel

LAYOUTS = {
    "paper": PAPER_VERIFIERS,
    "none": {},
    "one": dict(list(VERIFIERS.items())[:1]),
    "five": dict(list(VERIFIERS.items())[:5]),
    "six": VERIFIERS,
    "rm-only": {"V3": ("RM-72B", 72.0, "reward_model")},
}
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


def _env_outputs(env: CoBaEnv, mask: np.ndarray) -> tuple:
    ev = env.evidence
    verified = tuple(sorted((c, t) for c in range(ev.n_revealed) for t in range(ev.n_tiers)
                            if ev.scores[c][t] is not None))
    return (tuple(np.flatnonzero(mask).tolist()), ev.n_revealed, verified, tuple(ev.fnum), tuple(ev.fden),
            tuple(ev.cost))


def _model_outputs(model: OracleModel, ep, state: tuple) -> tuple:
    n, ver, fnum, fden, cost = state
    t_n = model.n_tiers
    verified = tuple(sorted((c, t) for c in range(n) for t in range(t_n) if (ver >> (c * t_n + t)) & 1))
    legal = tuple(model.legal(ep, state, model.fusion(ep, state)))
    return legal, n, verified, tuple(fnum), tuple(fden), tuple(cost)


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
    model = OracleModel(pool, budget=env.budget, cost_model=env.cost_model, selection=env.selection,
                        n_max=env.n_max, tiers=env.enabled_tiers,
                        max_cost=env.max_cost if env.max_cost < float("inf") else None)
    assert model.layout == env.layout
    env_rows, model_rows, steps, _ = random_walks(env, model, 6, np.random.default_rng(setting), _env_outputs,
                                                  _model_outputs)
    assert steps > 100
    assert_same_outputs(model_rows, env_rows)
