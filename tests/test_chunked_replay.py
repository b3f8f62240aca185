"""Every non-learned replay-env policy replayed a chunk of episodes at a time (``eval.chunked_replay``) gives the
records of the whole pool's replay, in the same order, with chunks smaller than the tiny pool: their compact
columns kept, the rest in the episode files' pieces."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from agents.sampling import fit_to_pool
from coba_env.chunked_compile import scan_pool
from coba_env.compiled import compile_pool
from eval.chunked_replay import replay_in_chunks
from eval.compact_records import compact_columns
from eval.episode_files import EpisodePieces, write_episode_files
from eval.policy_selection import resolve_policy_objects
from eval.records import RecordLayout
from eval.runner import run_policies
from pools.default import resolve_pool
from pools.store import load_pool, save_pool


def _policies(n_candidates: int) -> list:
    return fit_to_pool(resolve_policy_objects(None, None, "pair"), n_candidates, add_best_of_n=True)


@pytest.mark.parametrize(("replay", "chunk", "workers"), [("batched", 7, 1), ("batched", 7, 2), ("single", 20, 1)])
def test_chunks_give_the_whole_replays_records(tmp_path, replay, chunk, workers):
    """The chunked replay, in this process or in two chunk workers, keeps the compact columns of the whole
    replay's records and writes the rest to pieces (one per applicable policy and chunk) that join into the
    episode files the whole replay's records give (Parquet frame and CSV text)."""
    save_pool(resolve_pool("tiny"), tmp_path / "pool")
    whole_pool = compile_pool(load_pool(tmp_path / "pool"))
    options = dict(cost_model="p_tokens", seed=3, replay=replay, progress=False, workers=1)
    whole = run_policies(_policies(whole_pool.n_candidates), whole_pool, generator_columns=False, **options)
    layout = RecordLayout.of(whole_pool)
    (tmp_path / "pieces").mkdir()
    chunked = replay_in_chunks(_policies(whole_pool.n_candidates), scan_pool(tmp_path / "pool"),
                               chunk_episodes=chunk, pieces=EpisodePieces(tmp_path / "pieces", layout),
                               **{**options, "workers": workers})
    assert chunked.workers == workers
    assert [r.name for r in chunked.runs] == [r.name for r in whole.runs]
    assert sum(r.applicable for r in whole.runs) >= 10  # the default set runs on the tiny pool
    assert [r.not_applicable for r in chunked.runs] == [r.not_applicable for r in whole.runs]
    records = whole.records
    columns = compact_columns(layout)
    kept = chunked.compact.astype({key: "str" for key in ("policy", "dataset", "generator", "item_id")})
    pd.testing.assert_frame_equal(kept, records[columns], check_dtype=False)
    for mine, theirs in zip(chunked.runs, whole.runs, strict=True):
        assert len(mine.records) == len(theirs.records), mine.name

    applicable = [i for i, r in enumerate(whole.runs) if r.applicable]
    n_chunks = -(-whole_pool.n_episodes // chunk)
    assert sorted(p.name for p in (tmp_path / "pieces").glob("*.parquet")) == [
        f"{i:05d}-{c:07d}.parquet" for i in applicable for c in range(n_chunks)]
    frames = [r.records for r in whole.runs if r.applicable]
    write_episode_files(frames, tmp_path / "whole.parquet", tmp_path / "whole.csv.gz", layout=layout)
    pieces = EpisodePieces(tmp_path / "pieces", layout)
    assert pieces.join(tmp_path / "c.parquet", tmp_path / "c.csv.gz") == len(records)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "c.parquet"),
                                  pd.read_parquet(tmp_path / "whole.parquet"))
    with gzip.open(tmp_path / "c.csv.gz") as mine, gzip.open(tmp_path / "whole.csv.gz") as theirs:
        assert mine.read() == theirs.read()


def test_a_bench_of_chunks_smaller_than_the_pool_equals_the_whole_compiles(tmp_path, monkeypatch):
    """``coba bench`` on the stored tiny pool in chunks of 7 episodes (48 episodes) writes the results and episode
    table of the bench of the same pool given in memory (compiled whole)."""
    import json

    from eval import chunked_replay
    from eval.bench import run_bench

    save_pool(resolve_pool("tiny"), tmp_path / "pool")
    options = dict(progress=False, figures=False, workers=1, resamples=100, quiet=True)
    run_bench(load_pool(tmp_path / "pool"), out_dir=tmp_path / "whole", **options)
    monkeypatch.setattr(chunked_replay, "CHUNK_EPISODES", 7)
    monkeypatch.setattr(chunked_replay, "replay_in_chunks", _counting(chunked_replay.replay_in_chunks))
    run_bench(str(tmp_path / "pool"), out_dir=tmp_path / "chunked", **options)
    assert _counting.calls == 1

    def strip(value: object) -> object:  # the run facts (wall times, workers, how the pool was named) aside
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("replay_seconds", "created", "timings", "workers", "spec")}
        return [strip(v) for v in value] if isinstance(value, list) else value

    def results(name: str) -> dict:
        return strip(json.loads((tmp_path / name / "results.json").read_text()))

    assert results("chunked") == results("whole")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "chunked" / "episodes.parquet"),
                                  pd.read_parquet(tmp_path / "whole" / "episodes.parquet"))


def _counting(fn):
    def wrapped(*args, **kwargs):
        _counting.calls += 1
        return fn(*args, **kwargs)

    _counting.calls = 0
    return wrapped
