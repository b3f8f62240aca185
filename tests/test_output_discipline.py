"""The output discipline's good paths: what ``--force`` and a re-run do replace, modes, strict JSON, recovery.

The refusals are in tests/test_hostile_cli.py; here: a pool or checkpoint coba-env wrote is replaced with
``--force`` (and only then), a folder someone added a file to is not, files and folders get the umask's
modes without the umask being touched, a failed folder write leaves the old folder whole, a verify run
stopped by a server with zero choices records nothing so a later healthy run scores every candidate, and
controller.json is strict JSON.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from coba_cli.main import main
from pools.atomic_write import OUTPUT_MARKER, atomic_dir, atomic_write_text
from pools.output_paths import OutputPathError, check_output_dir, project_made
from tests.conftest import small_jsonl_records, write_jsonl
from tests.fake_openai_server import FakeOpenAIServer


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "ok.jsonl", small_jsonl_records())


def test_force_replaces_a_pool_it_wrote_but_not_one_a_user_added_to(src: Path, tmp_path: Path, capsys) -> None:
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(src), str(dest)]) == 0
    assert project_made(dest) == "pool"
    assert main(["pools", "import", str(src), str(dest), "--force"]) == 0
    (dest / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["pools", "import", str(src), str(dest), "--force"]) == 2
    assert "holds files coba-env did not write" in capsys.readouterr().err
    assert (dest / "notes.txt").read_text() == "mine"


def test_a_pool_without_marker_is_still_recognised(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(src), str(dest)]) == 0
    (dest / OUTPUT_MARKER).unlink()  # as written by an older version
    assert project_made(dest) == "pool"
    assert main(["pools", "import", str(src), str(dest), "--force"]) == 0


def test_older_bench_and_sweep_folders_are_recognised_by_their_layout(tmp_path: Path) -> None:
    bench, sweep = tmp_path / "bench-out", tmp_path / "sweep-out"
    for folder, names in ((bench, ("report.md", "results.json")), (sweep, ("frontier.csv", "frontier.md"))):
        folder.mkdir()
        for name in names:
            (folder / name).write_text("old")
    assert project_made(bench) == "bench" and project_made(sweep) == "sweep"
    (bench / "notes.txt").write_text("mine")
    assert project_made(bench) is None


def test_modes_follow_the_umask_which_is_left_alone(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "f.txt", "x")
        atomic_dir(tmp_path / "d", lambda tmp: (tmp / "a.txt").write_text("y"))
        assert os.umask(0o027) == 0o027  # nothing changed it
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o750


def test_a_failed_folder_write_keeps_the_old_folder(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    atomic_dir(dest, lambda tmp: (tmp / "old.txt").write_text("old"), marker="bench")

    def fail(tmp: Path) -> None:
        (tmp / "new.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_dir(dest, fail, marker="bench")
    assert sorted(p.name for p in dest.iterdir()) == [OUTPUT_MARKER, "old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_kind_guard_and_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert check_output_dir(tmp_path / "empty", force=False, kind="bench") == tmp_path / "empty"
    atomic_dir(tmp_path / "b", lambda tmp: None, marker="bench")
    check_output_dir(tmp_path / "b", kind="bench")
    with pytest.raises(OutputPathError, match="holds a coba-env bench, not a sweep"):
        check_output_dir(tmp_path / "b", kind="sweep")


def test_verify_with_zero_choices_records_nothing_then_a_healthy_run_scores_all(tmp_path: Path, capsys) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "amc2023.jsonl").write_text("".join(
        json.dumps({"id": i, "problem": f"What is {i} + 2 - {i}?", "answer": 2.0}) + "\n" for i in range(3)))
    work = tmp_path / "work"
    with FakeOpenAIServer() as srv:
        assert main(["pools", "generate", str(work), "--endpoint", f"{srv.url},gen-1.5B", "--dataset", "amc2023",
                     "--problems-dir", str(problems), "--n", "2", "--no-progress"]) == 0
        journal = (work / "journal.jsonl").read_bytes()
        verify = ["pools", "verify", str(work), "--tier", "V1", "--endpoint", f"{srv.url},judge-1B",
                  "--no-progress", "--max-attempts", "1"]
        srv.no_choices = True
        capsys.readouterr()
        assert main(verify) == 2
        assert "the server answered with no choices" in capsys.readouterr().err
        assert (work / "journal.jsonl").read_bytes() == journal  # nothing counted as done
        srv.no_choices = False
        assert main(verify) == 0
    assert "V1: scored 6 candidates" in capsys.readouterr().out  # 3 items x 2 candidates, all still to do


def test_train_refuses_then_force_replaces_its_checkpoint_with_strict_json(src: Path, tmp_path: Path,
                                                                            capsys) -> None:
    pool, ck = tmp_path / "pool", tmp_path / "ck"
    assert main(["pools", "import", str(src), str(pool)]) == 0
    train = ["train", "mlp", "--pool", str(pool), "--rounds", "0", "--epochs", "1", "--episodes-per-round", "6",
             "--lambdas", "0.1,0.5", "--out", str(ck), "--no-progress"]
    assert main(train) == 0
    assert project_made(ck) == "checkpoint"
    capsys.readouterr()
    assert main(train) == 2
    assert "already exists (pass --force" in capsys.readouterr().err
    assert main([*train, "--force"]) == 0

    def no_constants(name: str) -> None:
        raise AssertionError(f"controller.json holds {name}")

    json.loads((ck / "controller.json").read_text(), parse_constant=no_constants)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "ok.jsonl", "pool"]
    shutil.rmtree(ck)
