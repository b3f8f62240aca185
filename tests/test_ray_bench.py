"""Ray runs equal local runs: the generic map, the sharded bench (results.json and episode table, on the tiny
and paper pools), sweep points as Ray tasks, and ``--ray-address`` without Ray (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from coba_cli.main import main as coba
from coba_env.parallel import RAY_MISSING, RayUnavailable, connect_ray, map_tasks
from eval.ray_bench import shard_episodes
from tests.ray_cluster import ray_address_fixture, subprocess_env  # noqa: F401  (fixture "ray_address")

#: results.json entries that are wall times or run facts, not results (the replay's worker count included).
RUN_FACTS = {"replay_seconds", "created", "timings", "workers"}


def _results(folder: Path) -> dict:
    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in RUN_FACTS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads((folder / "results.json").read_text()))


def _power(x: int, k: int) -> int:
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x**k


def test_shard_episodes_cuts_in_order_without_gaps():
    parts = shard_episodes([5, 6, 7, 8, 9, 10, 11], 3)
    assert parts == [[5, 6, 7], [8, 9], [10, 11]]
    assert shard_episodes([1, 2], 8) == [[1], [2]]  # never an empty shard


def test_map_tasks_on_ray_keeps_input_order_and_equals_the_local_loop(ray_address):
    items = list(range(12))
    expected = [x**3 for x in items]  # computed here, not by the code under test
    assert map_tasks(_power, items, shared=(3,)) == expected
    assert map_tasks(_power, items, shared=(3,), ray_address=ray_address) == expected


def test_map_tasks_on_ray_raises_the_task_error_itself(ray_address):
    with pytest.raises(ValueError, match="negative input -2"):
        map_tasks(_power, [1, -2, 3], shared=(2,), ray_address=ray_address)


def _bench(argv: list[str]) -> None:
    assert coba(["bench", "--no-progress", "--no-figures", *argv]) == 0


@pytest.mark.parametrize("pool, extra", [("tiny", []), ("paper", ["--policies", "main", "--resamples", "200"])])
def test_sharded_bench_equals_local_bench(ray_address, tmp_path, pool, extra):
    local, sharded = tmp_path / "local", tmp_path / "ray"
    _bench(["--pool", pool, "--out", str(local), *extra])
    _bench(["--pool", pool, "--out", str(sharded), "--ray-address", ray_address, *extra])
    assert _results(sharded) == _results(local)
    a = pd.read_parquet(local / "episodes.parquet")
    b = pd.read_parquet(sharded / "episodes.parquet")
    assert len(a) > 0 and a["episode_id"].nunique() > 4  # more episodes than one shard holds
    pd.testing.assert_frame_equal(b, a)
    assert json.loads((sharded / "results.json").read_text())["meta"]["workers"] == 4  # 2 CPUs x 2 shards


def test_route_bench_on_ray_equals_local_bench(ray_address, tmp_path):
    """A route bench on Ray runs one task per policy (an item's generators stay together): same results."""
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    _bench(["--env", "route", "--pool", "tiny", "--out", str(local)])
    _bench(["--env", "route", "--pool", "tiny", "--out", str(on_ray), "--ray-address", ray_address])
    assert _results(on_ray) == _results(local)
    pd.testing.assert_frame_equal(pd.read_parquet(on_ray / "episodes.parquet"),
                                  pd.read_parquet(local / "episodes.parquet"))
    results = json.loads((on_ray / "results.json").read_text())
    assert results["meta"]["workers"] == len(results["meta"]["policies"])  # one task per policy


def test_bench_subprocess_connects_by_address(ray_address, tmp_path):
    """A separate `coba` process reaches the cluster by its address, as on a real cluster."""
    local, sharded = tmp_path / "local", tmp_path / "ray"
    _bench(["--pool", "tiny", "--out", str(local)])
    proc = subprocess.run([sys.executable, "-m", "coba_cli.main", "bench", "--pool", "tiny", "--no-figures",
                           "--no-progress", "--out", str(sharded), "--ray-address", ray_address],
                          env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _results(sharded) == _results(local)
    pd.testing.assert_frame_equal(pd.read_parquet(sharded / "episodes.parquet"),
                                  pd.read_parquet(local / "episodes.parquet"))


def test_sweep_points_as_ray_tasks_equal_the_local_sweep(ray_address, tmp_path, capsys):
    local, spread = tmp_path / "local", tmp_path / "ray"
    assert coba(["sweep", "--pool", "tiny", "--no-progress", "--out", str(local)]) == 0
    assert coba(["sweep", "--pool", "tiny", "--no-progress", "--out", str(spread), "--ray-address", ray_address]) == 0
    assert (spread / "frontier.md").read_text() == (local / "frontier.md").read_text()
    pd.testing.assert_frame_equal(pd.read_csv(spread / "frontier.csv"), pd.read_csv(local / "frontier.csv"))
    pd.testing.assert_frame_equal(pd.read_csv(spread / "episodes.csv"), pd.read_csv(local / "episodes.csv"))


@pytest.mark.parametrize("argv", [
    ["bench", "--pool", "tiny"],
    ["sweep", "--pool", "tiny"],
    ["train", "mlp", "--lodo", "--pool", "tiny"],
])
def test_ray_address_without_ray_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys, argv):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails and find_spec("ray") is None: not installed
    out = tmp_path / "out"
    assert coba([*argv, "--out", str(out), "--ray-address", "10.0.0.5:6379"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"coba: error: {RAY_MISSING}"
    assert "install coba-env[ray]" in err
    assert not out.exists()  # refused before any work


@pytest.mark.parametrize("address, match", [
    ("", "expected a Ray cluster address"),
    ("   ", "expected a Ray cluster address"),
])
def test_connect_ray_rejects_a_blank_address(address, match):
    with pytest.raises(RayUnavailable, match=match):
        connect_ray(address)


def test_ray_address_and_workers_exit_2(tmp_path, capsys):
    assert coba(["bench", "--pool", "tiny", "--out", str(tmp_path / "b"), "--ray-address", "h:1", "--workers", "2"]) == 2
    assert "--workers sets the local worker processes" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_ray_address_needs_lodo_for_train(tmp_path, capsys):
    assert coba(["train", "mlp", "--pool", "tiny", "--out", str(tmp_path / "t"), "--ray-address", "h:1"]) == 2
    assert "--seeds, --held-out, --ray-address and --workers need --lodo" in capsys.readouterr().err


def test_protocol_folds_as_ray_tasks_equal_the_local_run(ray_address, tmp_path, capsys):
    """``coba train rollout --lodo --ray-address``: the (seed, outer fold) tasks on Ray give the local run's
    held-out records, chosen points and statistics."""
    from tests.test_protocol import save_small_paper_pool

    pool = str(save_small_paper_pool(tmp_path / "pool"))
    args = ["train", "rollout", "--pool", pool, "--lodo", "--seeds", "3", "--held-out", "amc2023,aime2024",
            "--no-progress"]
    assert coba([*args, "--out", str(tmp_path / "local")]) == 0
    assert coba([*args, "--out", str(tmp_path / "ray"), "--ray-address", ray_address]) == 0
    capsys.readouterr()
    for name in ("episodes.csv", "chosen.csv", "inner.csv", "stats.csv"):
        local, on_ray = pd.read_csv(tmp_path / "local" / name), pd.read_csv(tmp_path / "ray" / name)
        if "seconds" in local.columns:
            local, on_ray = local.drop(columns="seconds"), on_ray.drop(columns="seconds")
        pd.testing.assert_frame_equal(local, on_ray, obj=name)


def test_protocol_with_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path, capsys):
    assert coba(["train", "rollout", "--pool", "tiny", "--lodo", "--out", str(tmp_path / "t"),
                 "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "127.0.0.1:1" in err
    assert not (tmp_path / "t").exists()
