"""Issue 25's hostile cases that need more than one command line: a second process, a signal, a file that
appears while a command runs, a stalling server, dataset names that look like paths (crafted model files:
``tests/test_hostile_model_files.py``).

Every test states what must hold in the user's folder afterwards (a hash of the case folder before and after,
``tests.hostile_harness.snapshot``), besides the exit code and the one error line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pools.atomic_write import OUTPUT_MARKER
from tests.conftest import REPO_ROOT, small_jsonl_records, write_jsonl
from tests.fake_openai_server import FakeOpenAIServer
from tests.hostile_harness import run_coba, snapshot

BENCH = ("bench", "--policies", "greedy,coba_light", "--no-progress", "--no-figures", "--resamples", "20")


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory) -> Path:
    """A small imported pool (6 episodes, N = 3, tiers V1-V3)."""
    from coba_cli.main import main

    root = tmp_path_factory.mktemp("edges")
    write_jsonl(root / "ok.jsonl", small_jsonl_records())
    assert main(["pools", "import", str(root / "ok.jsonl"), str(root / "pool")]) == 0
    return root / "pool"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("coba: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------ the swap re-checks
def _user_file_appears_before_swap(monkeypatch, dest: Path) -> None:
    """While the command runs (after its up-front check, before its swap), the user creates dest/notes.txt."""
    import pools.atomic_write as atomic_write

    original = atomic_write.mark_output

    def mark_then_user_writes(folder, what):
        original(folder, what)
        if not (dest / "notes.txt").exists():
            dest.mkdir(exist_ok=True)
            (dest / "notes.txt").write_text("mine\n")

    monkeypatch.setattr(atomic_write, "mark_output", mark_then_user_writes)


@pytest.mark.parametrize("command", ["bench", "pools import", "pools simulate", "sweep"])
def test_a_file_that_appears_during_the_run_is_kept_with_the_new_result(command, pool_dir, tmp_path, monkeypatch,
                                                                         capsys):
    """Without the re-check the swap moved the user's new folder aside and deleted it (exit 0)."""
    dest = tmp_path / "out"
    argv = {"bench": [*BENCH, "--pool", str(pool_dir), "--out", str(dest)],
            "pools import": ["pools", "import", str(pool_dir.parent / "ok.jsonl"), str(dest)],
            "pools simulate": ["pools", "simulate", "--profile", "tiny", "--out", str(dest)],
            "sweep": ["sweep", "--pool", str(pool_dir), "--policies", "greedy", "--lambdas", "0.1", "--out", str(dest),
                      "--no-progress"]}[command]
    _user_file_appears_before_swap(monkeypatch, dest)
    code, _, err = run_coba(argv, capsys)
    assert code == 2, err
    line = _one_error_line(err)
    assert "changed while this command ran" in line and f"the new result is in {dest}.new" in line, line
    assert (dest / "notes.txt").read_text() == "mine\n" and sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    kept = json.loads((tmp_path / "out.new" / ".coba-output").read_text())
    assert kept["written_by"] == "coba-env" and kept["what"] != "in-progress"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.new"]  # no hidden temporary left


# ------------------------------------------------------------------------------------ one run per destination
def test_a_second_command_into_the_same_destination_is_refused(pool_dir, tmp_path, capsys):
    """A first command (another process) holds --out; the second is refused at its check, nothing written."""
    dest = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pools.destination_guard import command_scope, hold_destination\n"
         f"with command_scope():\n    hold_destination({str(dest)!r}, '--out')\n    print('held', flush=True)\n"
         "    time.sleep(120)\n"], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(tmp_path)
        code, _, err = run_coba([*BENCH, "--pool", str(pool_dir), "--out", str(dest)], capsys)
        assert code == 2, err
        line = _one_error_line(err)
        assert f"--out {dest}: another coba command (process {holder.pid}) is writing here now" in line, line
        assert snapshot(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()
    code, _, err = run_coba([*BENCH, "--pool", str(pool_dir), "--out", str(dest)], capsys)  # free again
    assert code == 0, err


# ------------------------------------------------------------------------------------ SIGTERM and kill -9
def _start_bench(pool: Path, dest: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MPLBACKEND": "Agg"}
    return subprocess.Popen([sys.executable, "-m", "coba_cli.main", "bench", "--policies", "greedy,coba_light",
                             "--no-progress", "--resamples", "20", "--pool", str(pool), "--out", str(dest)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_temporary(proc: subprocess.Popen, dest: Path, *, marked: bool = False) -> None:
    """Wait until ``dest``'s temporary sibling exists (``marked``: and holds the project's in-progress marker,
    which is what lets a later run recognise it as its own; a kill between the folder and its marker leaves a
    folder no run may delete)."""
    deadline = time.monotonic() + 300

    def ready(p: Path) -> bool:
        if not p.name.startswith(f".{dest.name}.tmp-"):
            return False
        if not marked:
            return True
        try:
            return b'"written_by": "coba-env"' in (p / OUTPUT_MARKER).read_bytes()
        except OSError:
            return False

    while not any(ready(p) for p in dest.parent.iterdir()):
        assert proc.poll() is None, f"bench ended before writing: {proc.communicate()}"
        assert time.monotonic() < deadline, "the temporary folder never appeared"
        time.sleep(0.005)


def test_sigterm_exits_143_with_a_line_and_removes_the_temporary(pool_dir, tmp_path):
    dest = tmp_path / "out"
    before = snapshot(tmp_path)
    proc = _start_bench(pool_dir, dest)
    try:
        _wait_for_temporary(proc, dest)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("coba: terminated"), err
    assert snapshot(tmp_path) == before


def test_a_temporary_left_by_kill_9_is_cleaned_by_the_next_run(pool_dir, tmp_path, capsys):
    dest = tmp_path / "out"
    proc = _start_bench(pool_dir, dest)
    try:
        _wait_for_temporary(proc, dest, marked=True)
        proc.kill()  # SIGKILL: no handler runs
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]
    assert stale, "the killed run left no temporary (the test did not reproduce a kill -9)"
    lookalike = tmp_path / f".out.tmp-{proc.pid}-0badc0de"  # same name form, but not the project's: kept
    lookalike.mkdir()
    (lookalike / "mine.txt").write_text("mine\n")
    code, _, err = run_coba([*BENCH, "--pool", str(pool_dir), "--out", str(dest)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([lookalike.name, "out"])
    assert (lookalike / "mine.txt").read_text() == "mine\n"


@pytest.mark.parametrize("contents, cleaned", [
    ({}, True),                                                 # killed between the folder and its marker
    ({OUTPUT_MARKER: b'{\n "written_by": "coba-'}, True),       # killed while writing the marker
    ({"mine.txt": b"mine\n"}, False),                           # not the project's: never removed
    ({OUTPUT_MARKER: b"{}", "mine.txt": b"mine\n"}, False),
    ({f"{OUTPUT_MARKER}/mine.txt": b"mine\n"}, False),         # a folder named like the marker is no marker
])
def test_an_unmarked_temporary_of_a_dead_run_goes_only_when_empty(pool_dir, tmp_path, capsys, contents, cleaned):
    """A temporary of the project's name form whose process is gone holds nothing to lose when it is empty (or
    holds only a cut-short marker): the next run removes it; anything else in it keeps it."""
    finished = subprocess.Popen([sys.executable, "-c", "pass"])  # a process id that is no longer running
    finished.wait()
    stale = tmp_path / f".out.tmp-{finished.pid}-0123abcd"
    stale.mkdir()
    for name, data in contents.items():
        (stale / name).parent.mkdir(exist_ok=True)
        (stale / name).write_bytes(data)
    code, _, err = run_coba([*BENCH, "--pool", str(pool_dir), "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert stale.exists() is not cleaned
    if not cleaned:
        assert {str(p.relative_to(stale)): p.read_bytes() for p in stale.rglob("*") if p.is_file()} == contents


# ------------------------------------------------------------------------------------ server replies
@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def test_the_timeout_bounds_the_whole_request_against_a_trickling_server(server):
    """One byte every 0.05 s: each read is quick, the whole reply takes ~20 s; a 1 s timeout must end it."""
    from pools.client.openai_client import EndpointError, OpenAIClient

    server.trickle_s = 0.05
    client = OpenAIClient(server.url, "gen-1.5B", timeout_s=1.0, max_attempts=1)
    with pytest.raises(EndpointError, match=r"timed out after 1 s"):
        client.chat([{"role": "user", "content": "What is 1+1?"}], max_tokens=16)


def test_content_given_as_a_list_of_parts_is_joined(server):
    from pools.client.openai_client import OpenAIClient

    server.content_parts = True
    done = OpenAIClient(server.url, "gen-1.5B", max_attempts=1).chat([{"role": "user", "content": "What is 1+1?"}])
    parts = server.responses[-1]["choices"][0]["message"]["content"]
    assert isinstance(parts, list) and done.choices[0].text == "".join(p["text"] for p in parts) != ""


@pytest.mark.parametrize("payload", [{"data": "x"}, {"data": [1, 2]}, {"data": [{"name": "no id"}]}, [1]])
def test_a_models_list_of_the_wrong_shape_is_one_error(server, payload):
    from pools.client.openai_client import EndpointError, OpenAIClient

    server.models_payload = payload
    with pytest.raises(EndpointError, match=r"expected a list of objects with an 'id'|answered with an error|"
                                            r"not readable JSON"):
        OpenAIClient(server.url, "m", max_attempts=1).models()


# ------------------------------------------------------------------------------------ names from data as paths
@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "..", ".", ".hidden", "a/b", "x" * 300, "C:\\evil",
                                  "név ünïcode", "-rf"])
def test_every_name_maps_to_one_safe_part_inside_the_root(name, tmp_path):
    from pools.safe_names import path_under, safe_path_part

    part = safe_path_part(name)
    path = path_under(tmp_path, "seed0", name)
    assert path.parent == tmp_path / "seed0" and path.name == part
    assert "/" not in part and not part.startswith(".") and len(part) <= 80
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in part)


def test_distinct_names_never_share_a_part_and_safe_names_stay_as_they_are():
    from pools.safe_names import safe_path_part

    names = ["a/b", "a_b", "a b", "a:b", "a\\b", "../a_b"]
    assert len({safe_path_part(n) for n in names}) == len(names)
    assert [safe_path_part(n) for n in ("math500", "aime2024", "gsm8k-main", "v1.5")] == \
        ["math500", "aime2024", "gsm8k-main", "v1.5"]


def test_lodo_checkpoints_of_datasets_named_like_paths_stay_under_out(tmp_path):
    """Datasets named ``../../escape`` and an absolute path: every checkpoint the protocol writes is under
    ``out`` (before: ``out/seed0/../../escape`` and the absolute path itself were written)."""
    from coba_env.compiled import compile_pool
    from pools.default import resolve_pool
    from pools.store import Pool
    from train.protocol import run_protocol
    from train.protocol_mlp import MLPMethod

    full = resolve_pool("paper")
    eps = full.episodes.groupby("dataset", sort=False).head(3)
    victim = str(tmp_path / "victim")
    rename = {"amc2023": "../../escape", "aime2024": victim}
    items = full.items.merge(eps[["dataset", "item_id"]].drop_duplicates(), on=["dataset", "item_id"])
    keep = set(eps["episode_id"])
    pool = Pool(items=items.assign(dataset=items["dataset"].replace(rename)), models=full.models,
                episodes=eps.assign(dataset=eps["dataset"].replace(rename)).reset_index(drop=True),
                candidates=full.candidates[full.candidates["episode_id"].isin(keep)].reset_index(drop=True),
                verifications=full.verifications[full.verifications["episode_id"].isin(keep)].reset_index(drop=True),
                manifest=dict(full.manifest))
    pool.refresh_manifest()
    out = tmp_path / "a" / "b" / "out"
    out.mkdir(parents=True)
    method = MLPMethod(lambdas=(0.1,), settings={"dagger_rounds": 0, "epochs": 1, "episodes_per_round": 3,
                                                 "balance_datasets": True, "tensorboard": False})
    run_protocol(compile_pool(pool), method, seeds=(0,), out_dir=out, progress=False, held_out=["../../escape"])
    outside = [p for p in tmp_path.rglob("*") if p != out and out not in p.parents and p not in out.parents]
    assert outside == [], outside
    written = sorted(p.relative_to(out).parts[:2] for p in out.rglob("controller.json"))
    assert written and all(part[0] == "seed0" and not part[1].startswith(".") for part in written), written


# ------------------------------------------------------------------------------------ messages
def test_a_full_disk_names_the_destination_being_written(tmp_path, capsys):
    """ENOSPC carries no file name; the line names the destination the command checked."""
    import argparse
    import errno

    from coba_cli.errors import run_guarded
    from pools.output_paths import check_output_dir

    def command(_: argparse.Namespace) -> int:
        check_output_dir(tmp_path / "out", option="--out")
        raise OSError(errno.ENOSPC, "No space left on device")

    assert run_guarded(command, argparse.Namespace()) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"coba: error: {tmp_path / 'out'}: No space left on device while writing the result"), line


@pytest.mark.parametrize(("exc", "expected"), [
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
     "not UTF-8 text (invalid start byte at byte 0)"),
    (OverflowError("Python int too large to convert to C long"), "holds a number too large"),
])
def test_parse_errors_escaping_a_command_are_one_plain_line(exc, expected, capsys):
    import argparse

    from coba_cli.errors import run_guarded

    def command(_: argparse.Namespace) -> int:
        raise exc

    assert run_guarded(command, argparse.Namespace()) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert expected in line and "Error" not in line and "C long" not in line, line


def test_a_previous_result_moved_aside_by_a_killed_run_is_put_back(tmp_path):
    """Killed between moving the old folder aside and moving the new one in: the next run restores the old."""
    from pools.atomic_write import mark_output
    from pools.destination_guard import clean_stale_siblings

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    aside = tmp_path / f".out.old-{int(dead.stdout)}-0123abcd"
    aside.mkdir()
    (aside / "report.md").write_text("the previous result\n")
    mark_output(aside, "bench")
    before = snapshot(aside)
    assert clean_stale_siblings(tmp_path / "out") == [aside]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and snapshot(tmp_path / "out") == before
