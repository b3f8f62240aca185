"""A stored pool validated a batch of rows at a time (``pools.stored_validation``) gives ``load_pool``'s message.

Every malformed pool of tests/test_validate.py, read in batches of 4 rows, is refused with exactly the message
``load_pool`` (the whole tables, ``validate_pool``) gives; so is a bad row in a late batch of a larger pool (one
case per row check), and a pool whose tables are not in episode order. A valid pool's verifier diagnostics and
estimated tokens equal ``verifier_diagnostics`` and ``estimated_tokens`` of the loaded pool.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval.cost_notes import estimated_tokens
from pools.errors import PoolError
from pools.store import load_pool
from pools.stored_validation import read_stored_pool
from pools.verifier_quality import verifier_diagnostics
from tests.test_validate import POOL_CASES, edit_table, good_pool_dir, good_pool_template  # noqa: F401


def _message(call) -> str:
    with pytest.raises(PoolError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize(("case", "mutate", "message"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
@pytest.mark.parametrize("batch_rows", [4, 1 << 20])
def test_batched_validation_gives_load_pools_message(good_pool_dir, case, mutate, message, batch_rows):  # noqa: F811
    mutate(good_pool_dir)
    expected = _message(lambda: load_pool(good_pool_dir))
    assert _message(lambda: read_stored_pool(good_pool_dir, batch_rows=batch_rows)) == expected


def test_a_valid_pools_diagnostics_equal_the_whole_pools(good_pool_dir):  # noqa: F811
    pool = load_pool(good_pool_dir)
    for batch_rows in (1, 4, 1 << 20):
        stored = read_stored_pool(good_pool_dir, batch_rows=batch_rows)
        assert stored.verifiers == verifier_diagnostics(pool)
        assert stored.estimated == estimated_tokens(pool)
        pd.testing.assert_frame_equal(stored.pool.episodes, pool.episodes)
        pd.testing.assert_frame_equal(stored.pool.items, pool.items)
        assert stored.pool.manifest == pool.manifest


@pytest.fixture(scope="module")
def tiny_pool_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulated tiny pool saved once (60 episodes of 4 candidates, three verifiers)."""
    from pools.default import resolve_pool
    from pools.store import save_pool

    return save_pool(resolve_pool("tiny"), tmp_path_factory.mktemp("tiny") / "pool")


def _late(table: str, column: str, value, row: int = -3):
    def edit(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        if isinstance(value, str) and not pd.api.types.is_string_dtype(df[column]):
            df[column] = df[column].astype(object)
        elif isinstance(value, float) and pd.api.types.is_integer_dtype(df[column]):
            df[column] = df[column].astype(float)
        df.loc[df.index[row], column] = value
        return df
    return edit_table(table, edit)


def _shuffled(table: str):
    return edit_table(table, lambda df: df.sample(frac=1.0, random_state=0).reset_index(drop=True))


def _late_cluster_order(df: pd.DataFrame) -> pd.DataFrame:
    """The last episode with two answer clusters, its cluster ids 0 and 1 swapped (1 then appears first)."""
    df = df.copy()
    counts = df[df["cluster"] >= 0].groupby("episode_id")["cluster"].max()
    rows = df["episode_id"] == counts[counts >= 1].index[-1]
    df.loc[rows, "cluster"] = df.loc[rows, "cluster"].replace({0: 1, 1: 0})
    return df


def _late_answer_dropped(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df.loc[df.index[df["cluster"] >= 0][-2], "answer_key"] = None
    return df


LATE_CASES = [
    ("negative output tokens", _late("candidates", "output_tokens", -3)),
    ("prompt tokens above the bound", _late("candidates", "prompt_tokens", 2 * 10**9)),
    ("output tokens of 2 to the 62", _late("candidates", "output_tokens", 2**62)),
    ("infinite latency", _late("candidates", "latency_s", float("inf"))),
    ("repetition above 1", _late("candidates", "repetition_score", 1.5)),
    ("graded score below 0", _late("candidates", "graded_score", -0.5)),
    ("negative dollars", _late("candidates", "cost_usd", -1.0)),
    ("a null in a required string", _late("candidates", "finish_reason", None)),
    ("a fraction in an int column", _late("candidates", "output_tokens", 2.5)),
    ("a null in an int column", _late("candidates", "prompt_tokens", None)),
    ("unknown episode", _late("candidates", "episode_id", 10**6)),
    ("duplicate candidate", _late("candidates", "candidate", 0)),
    ("cluster out of range", _late("candidates", "cluster", -5)),
    ("cluster without an answer key", edit_table("candidates", _late_answer_dropped)),
    ("cluster order", edit_table("candidates", _late_cluster_order)),
    ("score above 1", _late("verifications", "score", 1.25)),
    ("negative verifier latency", _late("verifications", "latency_s", -2.0)),
    ("unknown candidate", _late("verifications", "candidate", 99)),
    ("verifier without a role", _late("verifications", "tier", "V9")),
    ("malformed verifier name", _late("verifications", "tier", "V 9")),
    ("verifier names equal up to case", _late("verifications", "tier", "v1")),
    ("unknown verifier model", _late("verifications", "model", "ghost")),
    ("verifier model with a line break", _late("verifications", "model", "a\nb")),
    ("duplicate verification", _late("verifications", "candidate", 0, row=-1)),
    ("candidates shuffled, one duplicated", lambda d: (_shuffled("candidates")(d),
                                                       _late("candidates", "candidate", 0)(d))),
    ("verifications shuffled, bad score", lambda d: (_shuffled("verifications")(d),
                                                     _late("verifications", "score", 2.0)(d))),
    ("candidates shuffled, cluster order", lambda d: (edit_table("candidates", _late_cluster_order)(d),
                                                      _shuffled("candidates")(d))),
    ("candidates shuffled, valid", _shuffled("candidates")),
]


@pytest.mark.parametrize(("case", "mutate"), LATE_CASES, ids=[c[0] for c in LATE_CASES])
def test_a_bad_row_in_a_late_batch_gives_load_pools_message(tiny_pool_dir, tmp_path, case, mutate):
    pool_dir = Path(shutil.copytree(tiny_pool_dir, tmp_path / "pool"))
    mutate(pool_dir)
    try:
        whole = load_pool(pool_dir)
    except PoolError as exc:
        assert _message(lambda: read_stored_pool(pool_dir, batch_rows=7)) == str(exc)
    else:  # a valid pool: the same figures
        stored = read_stored_pool(pool_dir, batch_rows=7)
        assert stored.verifiers == verifier_diagnostics(whole) and stored.estimated == estimated_tokens(whole)


def test_a_table_written_in_small_row_groups_reads_the_same(tiny_pool_dir, tmp_path):
    pool_dir = Path(shutil.copytree(tiny_pool_dir, tmp_path / "pool"))
    f = pool_dir / "verifications.parquet"
    pq.write_table(pq.read_table(f), f, row_group_size=5)
    _late("verifications", "score", np.float64(3.0))(pool_dir)
    table = pq.read_table(f)
    pq.write_table(pa.Table.from_batches(table.to_batches()), f, row_group_size=5)
    assert _message(lambda: read_stored_pool(pool_dir, batch_rows=3)) == _message(lambda: load_pool(pool_dir))


@pytest.mark.parametrize(("case", "mutate", "message"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_bench_on_a_bad_stored_pool_exits_2_with_load_pools_message(good_pool_dir, tmp_path, capsys, case, mutate,  # noqa: F811
                                                                     message):
    from coba_cli.main import main

    mutate(good_pool_dir)
    expected = _message(lambda: load_pool(good_pool_dir))
    out = tmp_path / "bench"
    assert main(["bench", "--pool", str(good_pool_dir), "--out", str(out), "--no-progress", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err == f"coba: error: {expected}\n" and not out.exists()
