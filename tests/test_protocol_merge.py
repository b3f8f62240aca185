"""Merging per-seed protocol runs (train/protocol_merge.py) gives the tables of one run over all the seeds: the
K-fold routing protocol on the hand-made toy pool of tests/test_kfold_protocol.py, and the LODO protocol on the
small paper pool of tests/test_protocol.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from coba_cli.main import main
from coba_env.env import as_compiled
from tests.test_kfold_protocol import import_pool
from tests.test_protocol import save_small_paper_pool
from train.protocol_kfold import run_kfold
from train.protocol_merge import merge_kfold, merge_lodo


def _same_csv(a: Path, b: Path, drop: tuple[str, ...] = ()) -> None:
    left, right = pd.read_csv(a).drop(columns=list(drop)), pd.read_csv(b).drop(columns=list(drop))
    pd.testing.assert_frame_equal(left, right, check_exact=True)


def test_kfold_seeds_run_apart_and_merged_equal_one_run(tmp_path: Path):
    pool = import_pool(tmp_path)
    compiled = as_compiled(pool)
    whole = run_kfold(compiled, ["knn_router"], out_dir=tmp_path / "whole", seeds=(0, 1), progress=False,
                      pool_name="toy")
    for s in (0, 1):
        run_kfold(compiled, ["knn_router"], out_dir=tmp_path / f"seed{s}", seeds=(s,), progress=False, pool_name="toy")
    merged = merge_kfold(pool, [tmp_path / "seed0", tmp_path / "seed1"], tmp_path / "merged")
    for name in ("stats.csv", "scores.csv", "references.csv"):
        _same_csv(tmp_path / "whole" / name, tmp_path / "merged" / name)
    assert merged["routers"] == whole["routers"] and merged["seeds"] == [0, 1]


def test_lodo_seeds_run_apart_and_merged_equal_one_run(tmp_path: Path):
    save_small_paper_pool(tmp_path / "pool")
    common = ["train", "rollout", "--pool", str(tmp_path / "pool"), "--lodo", "--held-out", "amc2023", "--no-progress"]
    assert main([*common, "--seeds", "3,4", "--out", str(tmp_path / "whole")]) == 0
    for s in (3, 4):
        assert main([*common, "--seeds", str(s), "--out", str(tmp_path / f"seed{s}")]) == 0
    verdict = merge_lodo([tmp_path / "seed3", tmp_path / "seed4"], tmp_path / "merged")
    for name in ("stats.csv", "episodes.csv", "inner.csv", "chosen.csv"):
        _same_csv(tmp_path / "whole" / name, tmp_path / "merged" / name)
    assert verdict["seeds"] == [3, 4] and verdict["scope"] == "partial"
    with pytest.raises(ValueError, match=r"the folders repeat a seed: \(3, 3\)"):
        merge_lodo([tmp_path / "seed3", tmp_path / "seed3"], tmp_path / "again")


@pytest.mark.parametrize(("argv", "match"), [
    (["kfold", "{seed}"], "--pool is required with kfold"),
    (["lodo", "{seed}"], "a folder's protocol.json has no 'method'; expected finished lodo runs (one per seed)"),
])
def test_bad_merges_are_one_line_exit_2(argv, match, tmp_path, capsys):
    from train.protocol_merge import main as merge_main

    seed = tmp_path / "seed0"
    seed.mkdir()
    (seed / "protocol.json").write_text("{}")  # a folder that is not a finished LODO run
    with pytest.raises(SystemExit) as exit_info:
        merge_main([a.format(seed=seed) for a in argv] + ["--out", str(tmp_path / "merged")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err == f"protocol_merge: {match}"
