"""``coba train KIND --lodo --workers N``: the protocol's outer folds in forked workers (one core each) give the
one-process run's tables; a fold's error reaches the command as itself; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest

from coba_cli.main import main as coba
from pools.errors import PoolError
from tests.test_protocol import SpyMethod, _paper_subset, save_small_paper_pool
from train.ppo_method import PPOMethod
from train.protocol import run_protocol
from train.protocol_workers import forked_fold_map


def _tables(result):
    return {name: getattr(result, name) for name in ("records", "inner", "chosen", "stats")}


def test_ppo_folds_in_two_workers_equal_the_one_process_run(tmp_path):
    """Lean PPO (2 threads in this process where 2 cores are free, 1 in each worker) on two outer folds; no warm
    start (it trains on one thread in either case) to keep the test short."""
    pool = _paper_subset(3)
    method = PPOMethod(lambdas=(0.0, 0.3), total_timesteps=256, n_envs=32, n_steps=8, batch_size=64,
                       warm_start=False)
    runs = {name: run_protocol(pool, method, seeds=(0,), held_out=("aime2024", "math500"), out_dir=tmp_path / name,
                               progress=False, fold_map=fold_map, resamples=50)
            for name, fold_map in (("one", map), ("two", forked_fold_map(2)))}
    for name, table in _tables(runs["one"]).items():
        pd.testing.assert_frame_equal(table, _tables(runs["two"])[name], obj=name)


class WhereMethod(SpyMethod):
    """Writes, per fit, the process it ran in and the threads it was given; fails in seed ``fail_seed``'s folds."""

    def __init__(self, fail_seed: int | None = None):
        super().__init__()
        self.fail_seed = fail_seed

    def fit(self, compiled, train_ids, *, budget, seed, out_dir, progress):
        import torch

        from train.masked_ppo import default_threads

        if seed == self.fail_seed:
            raise PoolError(f"no fit for seed {seed}", file="pool.parquet")
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "where.json").write_text(json.dumps({
            "pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0)), "lean_threads": default_threads(),
            "torch_threads": torch.get_num_threads()}))
        return super().fit(compiled, train_ids, budget=budget, seed=seed, out_dir=out_dir, progress=progress)


def test_each_worker_runs_on_one_core_with_one_thread(tmp_path):
    run_protocol(_paper_subset(3), WhereMethod(), seeds=(0, 1), held_out=("aime2024",), out_dir=tmp_path,
                 progress=False, fold_map=forked_fold_map(2), resamples=20)
    seen = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("seed*/**/where.json"))]
    assert len(seen) == 2 * 5  # per fold: 4 inner fits and the refit
    assert os.getpid() not in {w["pid"] for w in seen}
    assert all(len(w["cores"]) == 1 and w["lean_threads"] == 1 and w["torch_threads"] == 1 for w in seen)
    cores = {w["pid"]: w["cores"][0] for w in seen}  # a worker that ran both folds (it may) is one entry
    if len(os.sched_getaffinity(0)) >= len(cores):
        assert len(set(cores.values())) == len(cores)  # each worker on a core of its own


def test_a_folds_error_is_raised_in_the_parent_as_itself(tmp_path):
    with pytest.raises(PoolError, match=r"^pool\.parquet: no fit for seed 1$"):
        run_protocol(_paper_subset(3), WhereMethod(fail_seed=1), seeds=(0, 1), held_out=("aime2024",),
                     out_dir=tmp_path, progress=False, fold_map=forked_fold_map(2), resamples=20)


@pytest.fixture(scope="module")
def small_pool(tmp_path_factory):
    return str(save_small_paper_pool(tmp_path_factory.mktemp("pool") / "pool"))


def test_cli_workers_2_writes_the_tables_of_workers_1(small_pool, tmp_path, capsys):
    args = ["train", "rollout", "--pool", small_pool, "--lodo", "--seeds", "3", "--held-out", "amc2023,aime2024",
            "--no-progress"]
    assert coba([*args, "--out", str(tmp_path / "one")]) == 0
    assert coba([*args, "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    capsys.readouterr()
    for name in ("episodes.csv", "chosen.csv", "inner.csv", "stats.csv"):
        one, two = pd.read_csv(tmp_path / "one" / name), pd.read_csv(tmp_path / "two" / name)
        pd.testing.assert_frame_equal(one, two, obj=name)


def test_cli_a_workers_error_is_the_commands_one_line(small_pool, tmp_path, monkeypatch, capsys):
    from train.rollout import RolloutMethod

    def fails(self, compiled, train_ids, **kwargs):
        raise PoolError("no fit here", file="pool.parquet")

    monkeypatch.setattr(RolloutMethod, "fit", fails)  # the workers are forked: they inherit the patch
    assert coba(["train", "rollout", "--pool", small_pool, "--lodo", "--seeds", "3", "--held-out",
                 "amc2023,aime2024", "--no-progress", "--workers", "2", "--out", str(tmp_path / "t")]) == 2
    assert capsys.readouterr().err.strip() == "coba: error: pool.parquet: no fit here"
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "rollout", "--lodo", "--workers", "0"], r"--workers: expected an integer >= 1, got 0"),
    (["train", "rollout", "--lodo", "--workers", "-2"], r"--workers: expected an integer >= 1, got -2"),
    (["train", "rollout", "--lodo", "--workers", "2", "--ray-address", "h:1"],
     r"--workers sets the local worker processes; with --ray-address the folds run on the cluster"),
    (["train", "mlp", "--pool", "tiny", "--workers", "2"],
     r"--seeds, --held-out, --ray-address and --workers need --lodo"),
    (["train", "knn_router", "--pool", "tiny", "--kfold", "--workers", "2"],
     r"--workers applies to --lodo only: the K-fold routing protocol fits its folds in one process"),
])
def test_bad_workers_is_one_line_exit_2(argv, message, tmp_path, capsys):
    """One error line, exit 2 (argparse's refusals come after its usage lines, as for every option)."""
    try:
        code = coba([*argv, "--out", str(tmp_path / "out"), "--no-progress"])
    except SystemExit as exc:  # argparse's type errors exit directly
        code = exc.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"coba( train)?: error: .*", lines[-1]) and re.search(message, lines[-1]), lines
    assert all(not line.startswith("coba") for line in lines[:-1]), lines
    assert not (tmp_path / "out").exists()
