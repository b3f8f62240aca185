"""``coba pools simulate`` streams: the pool written chunk by chunk is the pool built whole, byte for byte.

The whole path (``simulate_pool`` then ``save_pool``: one ``pq.write_table`` per table) and the streamed
path (``write_simulated_pool``: rows built per chunk of episodes, appended as row groups) are independent
ways to the same files; the numeric draws taken in row blocks of any size give the same numbers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pools.output_paths import OutputPathError
from pools.pool_writer import TableWriter, to_arrow
from pools.schema import TABLES
from pools.simulate import model, simulate_pool, write_simulated_pool
from pools.store import load_pool, save_pool

FILES = [f"{name}.parquet" for name in TABLES] + ["manifest.json"]


def digests(folder: Path) -> dict[str, str]:
    """SHA-256 of each pool file."""
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}


@pytest.mark.parametrize("chunk_episodes", [1, 5, 1000])
def test_streamed_pool_is_the_saved_whole_pool(tmp_path: Path, chunk_episodes: int) -> None:
    whole = save_pool(simulate_pool("tiny", seed=3), tmp_path / "whole")
    manifest = write_simulated_pool("tiny", tmp_path / "streamed", seed=3, chunk_episodes=chunk_episodes)
    assert digests(tmp_path / "streamed") == digests(whole)
    assert manifest == load_pool(whole).manifest


def test_table_writer_row_groups_match_write_table(tmp_path: Path) -> None:
    """Frames of 3 rows appended in row groups of 4 give the file pq.write_table writes with row_group_size=4."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"episode_id": np.arange(10), "dataset": [f"d{i % 3}" for i in range(10)],
                       "item_id": [None if i == 4 else f"i{i}" for i in range(10)],
                       "generator": rng.choice(["g", "h"], 10)})
    pq.write_table(to_arrow(df, "episodes"), tmp_path / "one.parquet", compression="zstd", row_group_size=4)
    writer = TableWriter(tmp_path / "streamed.parquet", "episodes", row_group_rows=4)
    for lo in range(0, 10, 3):
        writer.write(df.iloc[lo:lo + 3])
    writer.close()
    assert (tmp_path / "streamed.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "streamed.parquet").metadata.num_row_groups == 3  # 4 + 4 + 2 rows
    assert writer.rows == 10


def test_table_writer_empty_table(tmp_path: Path) -> None:
    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in TABLES["models"]})
    pq.write_table(to_arrow(empty, "models"), tmp_path / "one.parquet", compression="zstd")
    writer = TableWriter(tmp_path / "streamed.parquet", "models")
    writer.close()
    assert pq.read_table(tmp_path / "streamed.parquet").equals(pq.read_table(tmp_path / "one.parquet"))


def test_row_blocks_do_not_change_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 7 rows (every whole-shape draw taken in many pieces) give the tables of the default blocks."""
    reference = simulate_pool("tiny", seed=1)
    monkeypatch.setattr(model, "_BLOCK_ROWS", 7)
    blocked = simulate_pool("tiny", seed=1)
    for name in TABLES:
        pd.testing.assert_frame_equal(blocked.table(name), reference.table(name))
    assert pa.Table.from_pandas(blocked.candidates).equals(pa.Table.from_pandas(reference.candidates))


def test_streamed_pool_never_replaces_a_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputPathError, match="holds files coba-env did not write; it is never replaced"):
        write_simulated_pool("tiny", tmp_path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
