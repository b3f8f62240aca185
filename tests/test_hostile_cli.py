"""Hostile inputs to every ``coba`` subcommand (stable-baselines3 env-checker style, one parametrized case each).

Each case (``tests/hostile_cases.py``) asserts: no traceback, the exit code, a message naming the input and
what was expected (a regex), nothing partial written and nothing pre-existing changed (the case folder's
tree is identical before and after, temporary siblings included), and for output checks that no model
call was made before the refusal.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import small_jsonl_records, write_jsonl
from tests.fake_openai_server import FakeOpenAIServer
from tests.hostile_cases import CASES, Case
from tests.hostile_harness import populate, run_coba, snapshot

ALL_CASES = [pytest.param(command, case, id=f"{command}:{case.id}") for command, cases in CASES.items()
             for case in cases]
_SERVER_DEFAULTS = {"usage_override": None, "no_choices": False}


def _save_mlp(folder: Path, n_max: int) -> None:
    """A small MLP checkpoint written by the project's own ``save`` (random weights: only loading matters)."""
    import torch

    from agents.learned_mlp import build_network, save

    torch.manual_seed(0)
    n_inputs = 21 + 5  # the paper layout: 21 features and the 5-action mask (docs/ENV.md)
    config = {"hidden": [8], "budget": 1000.0, "cost_model": "p_tokens", "max_output_tokens": 256.0,
              "n_max": n_max, "feature_mean": [0.0] * n_inputs, "feature_scale": [1.0] * n_inputs,
              "default_lambda": 0.1}
    save(folder, build_network((8,), 21, 5), config)


@pytest.fixture(scope="session")
def fake_server():
    """One fake OpenAI-compatible server for every case; each case sets and resets its knobs."""
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def hostile_assets(tmp_path_factory, fake_server) -> Path:
    """The shared inputs every case folder starts with (see ``tests/hostile_cases.py``)."""
    from coba_cli.main import main

    root = tmp_path_factory.mktemp("hostile-assets")
    write_jsonl(root / "ok.jsonl", small_jsonl_records())
    assert main(["pools", "import", str(root / "ok.jsonl"), str(root / "pool")]) == 0
    _save_mlp(root / "ck_ok", n_max=3)
    _save_mlp(root / "ck_nmax16", n_max=16)
    shutil.copytree(root / "ck_ok", root / "ck_garbage")
    (root / "ck_garbage" / "model.pt").write_bytes(np.random.default_rng(0).bytes(300))
    shutil.copytree(root / "ck_ok", root / "ck_badjson")
    (root / "ck_badjson" / "controller.json").write_text("{not json")
    problems = root / "problems"
    problems.mkdir()
    rows = [{"id": i, "problem": f"What is {i} + 2 - {i}?", "answer": 2.0} for i in range(3)]
    (problems / "amc2023.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["pools", "generate", str(root / "work"), "--endpoint", f"{fake_server.url},gen-1.5B", "--dataset",
                 "amc2023", "--problems-dir", str(problems), "--n", "4", "--no-progress"]) == 0
    return root


@pytest.mark.parametrize(("command", "case"), ALL_CASES)
def test_hostile_input_is_refused_cleanly(command: str, case: Case, hostile_assets: Path, fake_server,
                                          tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    populate(folder, hostile_assets)
    if case.setup is not None:
        case.setup(folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COBA_CACHE_DIR", str(tmp_path / "cache"))
    capsys.readouterr()
    before = snapshot(folder)
    calls_before = len(fake_server.requests) + fake_server.failures
    for key, value in case.server.items():
        setattr(fake_server, key, value)
    try:
        code, _, err = run_coba([a.replace("{url}", fake_server.url) for a in case.argv], capsys)
    finally:
        for key, value in _SERVER_DEFAULTS.items():
            setattr(fake_server, key, value)
    assert code == case.code, f"exit {code}, stderr: {err}"
    assert "Traceback" not in err
    assert re.search(case.message, err), f"message {case.message!r} not in stderr: {err}"
    errors = [line for line in err.splitlines() if re.match(r"coba[\w ]*: error: ", line)]
    assert len(errors) == 1 and re.search(case.message, errors[0]), f"expected one error line with the message: {err}"
    after = snapshot(folder)
    allowed = [p for p in set(after) - set(before) if any(p == m or p.startswith(m + "/") for m in case.may_create)]
    for path in allowed:  # a work dir the run itself opened may stay, holding no completed call
        assert not (folder / path).is_file() or b'"generation"' not in (folder / path).read_bytes(), path
    created = sorted(set(after) - set(before) - set(allowed))
    assert not created, f"left behind: {created}"
    changed = sorted(p for p in before if after.get(p) != before[p])
    assert not changed, f"changed or lost: {changed}"
    if case.no_calls:
        assert len(fake_server.requests) + fake_server.failures == calls_before, "a model call was made first"


def test_every_command_has_hostile_cases() -> None:
    """The suite covers every subcommand of ``coba`` (the parser's own list), at least two cases each."""
    from coba_cli.main import build_parser

    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command").choices
    commands = {name for name in top if name != "pools"}
    pools = next(a for a in top["pools"]._actions if a.dest == "pools_command").choices
    commands |= {f"pools {name}" for name in pools}
    assert commands == set(CASES), sorted(commands ^ set(CASES))
    assert all(len(cases) >= 2 for cases in CASES.values())
