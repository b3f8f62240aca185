"""save_pool / load_pool: every table survives a round trip, overwrites are atomic, big pools load."""

from __future__ import annotations

import json
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pools.errors import PoolError
from pools.schema import TABLES
from pools.store import load_pool, save_pool
from tests.conftest import make_synthetic_pool

SMALL = {"math500": 6, "aime2024": 3}
GENERATORS = {"Qwen3-14B": 14.0, "Qwen3-8B": 8.2}


@pytest.fixture
def small_pool():
    return make_synthetic_pool(SMALL, GENERATORS, n_candidates=4, seed=1)


@pytest.mark.parametrize("table", list(TABLES))
def test_round_trip_preserves_every_table(tmp_path, small_pool, table):
    loaded = load_pool(save_pool(small_pool, tmp_path / "pool"))
    expected = small_pool.table(table)[list(TABLES[table])].reset_index(drop=True)
    pd.testing.assert_frame_equal(loaded.table(table), expected)


def test_round_trip_preserves_manifest(tmp_path, small_pool):
    loaded = load_pool(save_pool(small_pool, tmp_path / "pool"))
    assert loaded.manifest == small_pool.manifest
    assert loaded.manifest["counts"]["candidates"] == 9 * 2 * 4
    assert loaded.manifest["generation"] == {"temperature": 0.6, "top_p": 0.95}


def test_save_refuses_existing_destination(tmp_path, small_pool):
    dest = save_pool(small_pool, tmp_path / "pool")
    before = {f.name: f.read_bytes() for f in dest.iterdir()}
    with pytest.raises(PoolError, match=r"already exists \(pass --force to replace it\)"):
        save_pool(make_synthetic_pool(SMALL, GENERATORS, n_candidates=2), dest)
    assert {f.name: f.read_bytes() for f in dest.iterdir()} == before


def test_overwrite_replaces_the_whole_pool(tmp_path, small_pool):
    dest = save_pool(small_pool, tmp_path / "pool")
    save_pool(make_synthetic_pool(SMALL, GENERATORS, n_candidates=2), dest, overwrite=True)
    assert load_pool(dest).n_candidates == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool"]  # no temporary or old folders left


def test_failed_overwrite_leaves_the_old_pool_intact(tmp_path, small_pool, monkeypatch):
    dest = save_pool(small_pool, tmp_path / "pool")
    before = {f.name: f.read_bytes() for f in dest.iterdir()}
    real_write = pq.write_table

    def failing_write(table, where, **kwargs):
        if str(where).endswith("verifications.parquet"):
            raise OSError("disk full")
        return real_write(table, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", failing_write)
    with pytest.raises(OSError, match="disk full"):
        save_pool(make_synthetic_pool(SMALL, GENERATORS, n_candidates=2), dest, overwrite=True)
    assert {f.name: f.read_bytes() for f in dest.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool"]


def test_manifest_is_plain_sorted_json(tmp_path, small_pool):
    dest = save_pool(small_pool, tmp_path / "pool")
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert manifest["tiers"] == ["V1", "V2", "V3"]
    assert manifest["datasets"] == {"math500": 6, "aime2024": 3}


def test_paper_sized_pool_loads_and_validates(tmp_path):
    """3,129 episodes x 16 candidates. Timing is reported, not asserted: see scripts/bench_pool_load.py."""
    pool = make_synthetic_pool()
    dest = save_pool(pool, tmp_path / "pool")
    start = time.perf_counter()
    loaded = load_pool(dest)
    elapsed = time.perf_counter() - start
    print(f"load_pool (with validation) of 3,129 x 16: {elapsed:.3f} s")
    assert len(loaded.episodes) == 3129
    assert len(loaded.candidates) == 3129 * 16
    pd.testing.assert_frame_equal(loaded.candidates, pool.candidates)
