"""The item-grouped CoBaVectorEnv keeps its per-generator block current by patching the rows a step changes: after every step
it must equal the block computed from scratch from the counters (``batch_generator_block``), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env.compiled import as_compiled
from coba_env.rules.features import batch_generator_block
from coba_env.vector_env import CoBaVectorEnv


def random_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform random legal action per row of ``mask``."""
    u = rng.random(len(mask))
    return np.array([np.flatnonzero(m)[int(x * m.sum())] for m, x in zip(mask, u, strict=True)])


def pool_named(name: str):
    """The paper pool, or a pool with 3 generators and ``name[-1]`` verifiers."""
    if name == "paper":
        return as_compiled("paper")
    from tests.test_many_generators import pool_with_verifiers

    return pool_with_verifiers(3, int(name[-1]))


@pytest.mark.parametrize("pool_name", ["paper", "verifiers=0", "verifiers=5"])
def test_patched_generator_block_equals_the_recomputed_one(pool_name):
    venv = CoBaVectorEnv(257, pool_named(pool_name), grouping="item")
    rng = np.random.default_rng(4)
    obs, info = venv.reset(seed=4)
    k = venv.generator_block.shape[1]
    finished = 0
    for _ in range(40):
        full = batch_generator_block(venv).T.astype(np.float32)
        assert np.array_equal(full.view(np.int32), venv.generator_block.view(np.int32))
        assert np.array_equal(obs[:, :k].view(np.int32), full.view(np.int32))  # the observation's leading block
        obs, _, terminated, _, info = venv.step(random_legal(info["action_mask"], rng))
        finished += int(terminated.sum())
    assert finished > 50  # rows reset mid-run, so the fresh-episode patch is exercised
