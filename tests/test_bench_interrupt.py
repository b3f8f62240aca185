"""An interrupted or repeated ``coba bench`` leaves the previous complete result or none, never a mix.

The bench runs in a subprocess and is interrupted at each named stage (``COBA_TEST_INTERRUPT_AT``, which
raises KeyboardInterrupt there as Ctrl-C would: before the replay, before the analysis, after the report
was written into the temporary folder, and between moving the old folder aside and moving the new one in),
and once by a real SIGINT sent while the report is being written. Each time the exit code is 130, the
message is one line without a traceback, and the output folder and its parent are byte-identical to
before (the previous result) or hold nothing (no previous result).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.bench import INTERRUPT_ENV
from tests.conftest import REPO_ROOT, small_jsonl_records, write_jsonl
from tests.hostile_harness import snapshot

STAGES = ("replay", "analyse", "write", "swap")
BENCH = ["bench", "--policies", "greedy,coba_light,bon4_majority", "--no-progress", "--resamples", "20"]


@pytest.fixture(scope="module")
def bench_pool(tmp_path_factory) -> Path:
    """A small imported pool (6 episodes, N = 3, tiers V1-V3)."""
    from coba_cli.main import main

    root = tmp_path_factory.mktemp("bench-interrupt")
    write_jsonl(root / "ok.jsonl", small_jsonl_records())
    assert main(["pools", "import", str(root / "ok.jsonl"), str(root / "pool")]) == 0
    return root / "pool"


def _env(stage: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MPLBACKEND": "Agg"}
    env.pop(INTERRUPT_ENV, None)
    if stage is not None:
        env[INTERRUPT_ENV] = stage
    return env


def _bench(pool: Path, out: Path, *extra: str, stage: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coba_cli.main", *BENCH, "--pool", str(pool), "--out", str(out),
                           *extra], env=_env(stage), capture_output=True, text=True, timeout=600)


#: The shell's status for Ctrl-C: exit code 130, or death by SIGINT itself (also $? = 130 in a shell), which a real
#: SIGINT gives now and then on a loaded machine after "coba: interrupted" was printed (seen with the code before and
#: after issue 37's last changes, once in ~10 runs under load; not explained: Python ends a process by SIGINT at exit
#: when a KeyboardInterrupt escaped, yet no traceback is printed).
CTRL_C_STATUSES = (130, -signal.SIGINT)


def _assert_interrupted(proc_code: int, err: str, statuses: tuple[int, ...] = (130,)) -> None:
    assert proc_code in statuses, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("coba: interrupted"), err


@pytest.fixture(scope="module")
def previous(bench_pool: Path, tmp_path_factory) -> Path:
    """A complete previous bench folder (without figures: fast)."""
    root = tmp_path_factory.mktemp("previous")
    done = _bench(bench_pool, root / "out", "--no-figures")
    assert done.returncode == 0, done.stderr
    assert {"report.md", "results.json", ".coba-output"} <= {p.name for p in (root / "out").iterdir()}
    return root / "out"


@pytest.mark.parametrize("stage", STAGES)
def test_interrupt_at_a_stage_keeps_the_previous_result(stage: str, bench_pool: Path, previous: Path) -> None:
    parent_before, before = snapshot(previous.parent), snapshot(previous)
    proc = _bench(bench_pool, previous, stage=stage)
    _assert_interrupted(proc.returncode, proc.stderr)
    assert snapshot(previous) == before
    assert snapshot(previous.parent) == parent_before  # no temporary or old sibling left


@pytest.mark.parametrize("stage", ("analyse", "write", "swap"))
def test_interrupt_without_a_previous_result_leaves_nothing(stage: str, bench_pool: Path, tmp_path: Path) -> None:
    proc = _bench(bench_pool, tmp_path / "out", stage=stage)
    _assert_interrupted(proc.returncode, proc.stderr)
    assert list(tmp_path.iterdir()) == []


def test_real_sigint_while_the_report_is_written(bench_pool: Path, previous: Path) -> None:
    """A real SIGINT while the temporary folder exists (the report written into it, the bench held there until a
    signal comes, so the signal lands there whatever the load): the previous result stays whole."""
    parent = previous.parent
    parent_before, before = snapshot(parent), snapshot(previous)
    proc = subprocess.Popen([sys.executable, "-m", "coba_cli.main", *BENCH, "--pool", str(bench_pool), "--out",
                             str(previous)], env=_env("write:wait"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 300
        while not any(p.name.startswith(f".{previous.name}.tmp-") for p in parent.iterdir()):
            assert proc.poll() is None, f"bench ended before writing: {proc.communicate()}"
            assert time.monotonic() < deadline, "the temporary folder never appeared"
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_interrupted(proc.returncode, err, CTRL_C_STATUSES)
    assert snapshot(previous) == before
    assert snapshot(parent) == parent_before


def test_a_second_bench_replaces_the_first_whole(bench_pool: Path, tmp_path: Path) -> None:
    """With figures, then without: the second folder holds no figures/ of the first, and the marker lists
    exactly what the second run wrote."""
    import json

    import pandas as pd

    from eval.bench import run_bench

    out = tmp_path / "out"
    run_bench(str(bench_pool), "greedy,coba_light", out_dir=out, progress=False, resamples=20, quiet=True)
    assert (out / "figures").is_dir()
    run_bench(str(bench_pool), "greedy", out_dir=out, progress=False, resamples=20, quiet=True, figures=False)
    names = {p.name for p in out.iterdir()}
    assert "figures" not in names and {"report.md", "results.json"} <= names
    marker = json.loads((out / ".coba-output").read_text())
    assert marker["what"] == "bench" and set(marker["entries"]) == names - {".coba-output"}
    assert set(pd.read_parquet(out / "episodes.parquet")["policy"]) == {"greedy"}  # the second run's records
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
