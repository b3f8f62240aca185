"""A compiled pool derived from another (a subset of episodes, the route pool over the same items) carries every
field: each dataclass field is either per-episode, pool-wide, or rebuilt by the derivation (the count of candidate
slots, the labels)."""

from __future__ import annotations

import dataclasses

import numpy as np

from coba_env.compiled import PER_EPISODE_FIELDS, POOL_WIDE_FIELDS, CompiledPool, as_compiled

REBUILT = {"n_candidates", "labels"}


def test_every_field_of_a_compiled_pool_is_per_episode_pool_wide_or_rebuilt():
    public = {f.name for f in dataclasses.fields(CompiledPool) if not f.name.startswith("_")}
    assert set(PER_EPISODE_FIELDS) | set(POOL_WIDE_FIELDS) | REBUILT == public
    assert not set(PER_EPISODE_FIELDS) & set(POOL_WIDE_FIELDS)


def test_a_subset_takes_the_rows_of_every_per_episode_array_and_keeps_the_rest():
    pool = as_compiled("tiny")
    rows = np.array([5, 0, 7])
    sub = pool.select(rows)
    for name in PER_EPISODE_FIELDS:
        np.testing.assert_array_equal(getattr(sub, name), getattr(pool, name)[rows], err_msg=name)
    for name in POOL_WIDE_FIELDS:
        assert getattr(sub, name) is getattr(pool, name), name
    np.testing.assert_array_equal(sub.labels.correct, pool.labels.correct[rows])
