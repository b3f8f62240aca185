"""``eval.bench.episode_columns_only``: the compiled pool a replay-env report reads after the replay keeps every
episode column and the record layout, and holds no candidate arrays."""

from __future__ import annotations

import numpy as np

from coba_env.compiled import as_compiled
from eval.bench import episode_columns_only
from eval.records import RecordLayout


def test_the_light_pool_keeps_the_episodes_and_drops_the_candidates():
    pool = as_compiled("tiny")
    light = episode_columns_only(pool)
    assert light.n_episodes == pool.n_episodes == len(pool.episode_ids)
    for name in ("episode_ids", "dataset", "generator", "item_id", "n_available"):
        np.testing.assert_array_equal(getattr(light, name), getattr(pool, name), err_msg=name)
    assert RecordLayout.of(light) == RecordLayout.of(pool)
    assert light.n_candidates == pool.n_candidates and light.tiers == pool.tiers
    for name in ("cluster", "answer", "output_tokens", "cap_hit", "gen_cost", "has_score", "score", "ver_cost"):
        assert getattr(light, name).shape[:2] == (pool.n_episodes, 0), name
    assert light.labels.correct.shape == (pool.n_episodes, 0)
