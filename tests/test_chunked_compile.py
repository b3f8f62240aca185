"""A pool compiled a chunk of episodes at a time (``coba_env.chunked_compile``) equals the whole pool's compile of
those episodes field by field, with chunks smaller than the pool, chunks lacking a verifier, graded scores or
recorded dollars, and episodes holding fewer than N candidates; its budget is the whole compile's default one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from coba_env.chunked_compile import compile_chunk, scan_pool
from coba_env.compiled import PER_EPISODE_FIELDS, POOL_WIDE_FIELDS, compile_pool
from coba_env.costs import COST_MEASURES
from coba_env.rules.config import default_budget
from pools.default import resolve_pool
from pools.store import load_pool, save_pool
from tests.conftest import make_synthetic_pool


def _uneven_pool():
    """A synthetic pool whose first episodes lack V2 and some candidates, with a few graded scores and one
    generator's dollars recorded on every call."""
    pool = make_synthetic_pool({"math500": 6, "aime2024": 3}, {"g-a": 7.0, "g-b": 14.0}, n_candidates=4)
    cand, ver = pool.candidates, pool.verifications
    pool.verifications = ver[~((ver["tier"] == "V2") & (ver["episode_id"] < 6))].reset_index(drop=True)
    gone = (cand["episode_id"] == 1) & (cand["candidate"] == 3)
    pool.candidates = cand[~gone].reset_index(drop=True)
    pool.verifications = pool.verifications[~((pool.verifications["episode_id"] == 1)
                                              & (pool.verifications["candidate"] == 3))].reset_index(drop=True)
    pool.candidates["graded_score"] = np.where(pool.candidates["episode_id"] == 9, 0.25, np.nan)
    b_rows = pool.candidates["episode_id"].map(pool.episodes.set_index("episode_id")["generator"]) == "g-b"
    pool.candidates["cost_usd"] = np.where(b_rows, 0.001, np.nan)
    return pool


def _equal(a, b, name):
    if isinstance(a, np.ndarray) and a.dtype == object:  # missing answers: the same missing value, nan or None
        assert a.shape == b.shape and [repr(x) for x in a.ravel()] == [repr(x) for x in b.ravel()], name
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=name)
        assert a.dtype == b.dtype, name
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    else:
        assert a == b, name


@pytest.mark.parametrize("make", [lambda: resolve_pool("tiny"), _uneven_pool], ids=["tiny", "uneven"])
@pytest.mark.parametrize("size", [5, 1000])
def test_each_chunk_is_the_whole_compile_of_its_episodes(tmp_path, make, size):
    save_pool(make(), tmp_path / "pool")
    whole = compile_pool(load_pool(tmp_path / "pool"))
    scan = scan_pool(tmp_path / "pool", chunk=3)
    np.testing.assert_array_equal(scan.episode_ids, whole.episode_ids)
    start = 0
    for ids in scan.chunks(size):
        part, expected = compile_chunk(scan, ids), whole.select(np.arange(start, start + len(ids)))
        start += len(ids)
        for name in (*PER_EPISODE_FIELDS, *POOL_WIDE_FIELDS, "n_candidates"):
            _equal(getattr(part, name), getattr(expected, name), name)
        for name in ("correct", "gold_cluster", "graded"):
            _equal(getattr(part.labels, name), getattr(expected.labels, name), name)
    assert start == whole.n_episodes
    for measure in COST_MEASURES:
        assert scan.budget(measure) == default_budget(whole, measure, whole.n_candidates)


def test_the_uneven_pool_has_what_the_chunks_must_not_lose(tmp_path):
    """The uneven pool's whole compile has V2 present, graded labels, g-b self-priced and a short episode."""
    save_pool(_uneven_pool(), tmp_path / "pool")
    whole = compile_pool(load_pool(tmp_path / "pool"))
    first = compile_chunk(scan_pool(tmp_path / "pool"), np.arange(5))
    assert "V2" in whole.tiers_present and whole.labels.graded is not None
    assert "g-b" in whole.priced_models and whole.n_available[1] == 3
    assert first.tiers_present == whole.tiers_present and first.labels.graded is not None


@pytest.mark.parametrize("make", [lambda: resolve_pool("tiny"), _uneven_pool], ids=["tiny", "uneven"])
def test_the_scan_gives_the_whole_compiles_episode_columns(tmp_path, make):
    from eval.bench import episode_columns_only

    save_pool(make(), tmp_path / "pool")
    expected = episode_columns_only(compile_pool(load_pool(tmp_path / "pool")))
    columns = scan_pool(tmp_path / "pool", chunk=4).episode_columns()
    for name in (*PER_EPISODE_FIELDS, *POOL_WIDE_FIELDS, "n_candidates"):
        _equal(getattr(columns, name), getattr(expected, name), name)
    for name in ("correct", "gold_cluster", "graded"):
        _equal(getattr(columns.labels, name), getattr(expected.labels, name), name)


def test_a_pool_saved_before_the_later_columns_compiles_in_chunks(tmp_path):
    """A candidate table without graded_score and cost_usd (an older pool) reads as NaN in both, as load_pool's."""
    import pyarrow.parquet as pq

    save_pool(resolve_pool("tiny"), tmp_path / "pool")
    table = pq.read_table(tmp_path / "pool" / "candidates.parquet")
    pq.write_table(table.drop_columns(["graded_score", "cost_usd"]), tmp_path / "pool" / "candidates.parquet")
    whole = compile_pool(load_pool(tmp_path / "pool"))
    scan = scan_pool(tmp_path / "pool")
    part = compile_chunk(scan, scan.episode_ids[:5])
    _equal(part.gen_cost, whole.gen_cost[:5], "gen_cost")
    assert part.labels.graded is None and part.priced_models == whole.priced_models
