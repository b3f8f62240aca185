"""Hostile edges of issue 39 that are not a refused command line (``tests/hostile_cases.py`` holds those): valid
input that was refused or mishandled, installed plugins, signals at the edges of a command, and file-size limits.

Each test failed on the commit before issue 39 (a940f7c): a traceback, an internal message, a silent exit 0, or a
refusal of input the tool should take.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from coba_cli.main import main
from tests.conftest import make_synthetic_pool, small_jsonl_records, write_jsonl

REPO = Path(__file__).resolve().parents[1]


def _bench(pool: Path | str, out: Path, *extra: str) -> int:
    return main(["bench", "--pool", str(pool), "--out", str(out), "--no-figures", "--no-progress", "--resamples", "20",
                 *extra])


def _small_pool(tmp_path: Path) -> Path:
    assert main(["pools", "import", str(write_jsonl(tmp_path / "ok.jsonl", small_jsonl_records())),
                 "--out", str(tmp_path / "pool")]) == 0
    return tmp_path / "pool"


# ------------------------------------------------------------------------------------- import edges (item 5)
def test_bench_without_cost_on_a_pool_without_model_sizes_uses_the_first_measure_it_supports(tmp_path, capsys):
    """RouteLLM's GPT-4 has no published size: the default p_tokens cannot weigh its calls, so the bench takes
    ``tokens`` (the cost table's first measure, which every pool records) and says so in one line."""
    from tests.test_routellm_pool import STRONG, _write

    assert main(["pools", "import", str(_write(tmp_path)), str(tmp_path / "pool"), "--format", "routellm"]) == 0
    capsys.readouterr()
    assert _bench(tmp_path / "pool", tmp_path / "out", "--policies", "greedy") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: --cost not given")]
    assert notes == [f"note: --cost not given: the pool gives {STRONG} no size (params_b 0), so p_tokens cannot weigh "
                     "its calls; costs are measured in tokens, the first measure the pool supports"]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["meta"]["cost_model"] == "tokens"


def _raw_reward_model_records() -> list[dict]:
    """The small records with V3 holding raw reward-model logits (outside [0, 1]); V1 stays a probability."""
    records = small_jsonl_records()
    for r in records:
        r["scores"]["V3"]["score"] = 4.0 if r["candidate"] == 0 else -2.5 + r["candidate"]
    return records


@pytest.mark.parametrize("transform", ["auto", "sigmoid"])
def test_raw_reward_model_scores_in_canonical_jsonl_import_with_a_score_transform(tmp_path, transform):
    """Raw reward-model scores were refused by every format but qwen-lists; ``--score-transform`` maps them with the
    logistic function (scipy's ``expit`` here), verifier by verifier under ``auto``."""
    from scipy.special import expit

    from pools.store import load_pool

    records = _raw_reward_model_records()
    src = write_jsonl(tmp_path / "raw.jsonl", records)
    assert main(["pools", "import", str(src), "--out", str(tmp_path / "p"), "--score-transform", transform]) == 0
    pool = load_pool(tmp_path / "p")
    v = pool.verifications.merge(pool.candidates[["episode_id", "candidate"]], on=["episode_id", "candidate"])
    for tier in ("V1", "V3"):
        raw = sorted(r["scores"][tier]["score"] for r in records)
        mapped = tier == "V3" or transform == "sigmoid"
        expected = sorted(expit(raw)) if mapped else raw
        assert sorted(v.loc[v["tier"] == tier, "score"]) == pytest.approx(expected), tier
    done = pool.manifest["provenance"]["score_transform"]
    assert done["V3"] == {"transform": "sigmoid", "inverse": "raw = ln(score / (1 - score))", "raw_range": [-1.5, 4.0]}
    assert ("V1" in done) == (transform == "sigmoid")


def test_routellm_response_longer_than_the_csv_modules_default_field_limit_imports(tmp_path):
    from pools.importers import import_pool
    from tests.test_routellm_pool import ROWS, _write

    long_text = "Let me think. " * 20_000 + "#### 18"  # ~280,000 characters: over csv's 131,072
    rows = [list(r) for r in ROWS]
    rows[-1][-1] = long_text
    pool = import_pool(str(_write(tmp_path, rows=rows)), "routellm")
    assert long_text in set(pool.candidates["text"])


#: Samples kept per (problem, generator) of the small records (3 each there): two pairs hold fewer.
RAGGED_KEEP = {("m1", "gen-small"): 1, ("a1", "gen-big"): 2}


def test_a_pool_whose_problems_hold_different_numbers_of_samples_imports_validates_and_benches(tmp_path, capsys):
    """Refused before ("episode ... has 1 candidates; expected 3 like the episode at ..."): N is now the most, each
    (problem, generator) keeps its own candidates, and a best-of-n that meets fewer says so in one line."""
    import pandas as pd

    records = [r for r in small_jsonl_records() if r["candidate"] < RAGGED_KEEP.get((r["item_id"], r["generator"]), 3)]
    assert main(["pools", "import", str(write_jsonl(tmp_path / "ragged.jsonl", records)), "--out",
                 str(tmp_path / "pool")]) == 0
    assert main(["pools", "validate", str(tmp_path / "pool")]) == 0
    assert "6 episodes x up to 3 candidates (min 1, median 3)" in capsys.readouterr().out
    assert main(["pools", "inspect", str(tmp_path / "pool")]) == 0
    assert ("candidates per episode: N = 3 is the most; min 1, median 3; 2 of 6 episodes hold fewer than N"
            in capsys.readouterr().out)
    assert _bench(tmp_path / "pool", tmp_path / "replay", "--policies", "bon2_majority,self_consistency") == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "episodes had fewer" in line]
    assert said == ["note: bon2_majority: 1 of 6 episodes had fewer than 2 candidates; it used what they had",
                    "note: self_consistency@3: 2 of 6 episodes had fewer than 3 candidates; it used what they had"]
    report = (tmp_path / "replay" / "report.md").read_text()
    assert said[1] in report and "N = 3 candidates at most (an item-generator pair holds 1 to 3, median 3)" in report
    held = {(r["item_id"], r["generator"]): r["candidate"] + 1 for r in records}  # the last index kept + 1
    rec = pd.read_parquet(tmp_path / "replay" / "episodes.parquet")
    sc = rec[rec["policy"] == "self_consistency@3"]
    assert sc["n_samples"].tolist() == [held[k] for k in zip(sc["item_id"], sc["generator"], strict=True)]
    assert main(["sweep", "--pool", str(tmp_path / "pool"), "--policies", "bon2_majority,greedy", "--out",
                 str(tmp_path / "sweep"), "--no-figures", "--no-progress"]) == 0
    assert said[0] in capsys.readouterr().err.splitlines()  # the sweep says it too
    assert _bench(tmp_path / "pool", tmp_path / "route", "--env", "route") == 0
    per_item = {i: sum(v for (item, _), v in held.items() if item == i) for i in ("m1", "m2", "a1")}  # 4, 6, 5
    rec = pd.read_parquet(tmp_path / "route" / "episodes.parquet")
    assert (rec["n_samples"] <= rec["item_id"].map(per_item)).all() and rec["n_samples"].min() >= 1


@pytest.mark.parametrize(("samples", "expected"), [
    ({"a": [0, 1], "b": [0]}, None),  # model a sampled twice on the prompt, b once: N = 2, b's episode holds 1
    ({"a": [0, 2], "b": [0]}, r"runs\.jsonl, line 2, column 'candidate': query '0' of model 'a' has samples numbered "
                              r"\[0, 2\]; expected 0\.\.1 without gaps"),
])
def test_a_long_outcome_table_may_hold_fewer_samples_of_one_model(tmp_path, samples, expected):
    """An outcome table whose models were sampled different numbers of times was refused ("expected 0..1 like every
    other query and model"); now only a gap in a model's sample numbers is."""
    from pools.errors import PoolError
    from pools.importers import import_pool

    rows = [{"prompt": "2 + 2?", "model": m, "candidate": k, "score": 1, "ground_truth": "4", "prediction": "4"}
            for m, ks in samples.items() for k in ks]
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if expected is not None:
        with pytest.raises(PoolError, match=expected):
            import_pool(str(src), "long", fields="candidate=candidate")
        return
    pool = import_pool(str(src), "long", fields="candidate=candidate")
    assert pool.n_candidates == 2
    assert pool.candidates.groupby("episode_id").size().tolist() == [2, 1]


def test_a_chat_message_sent_as_a_bare_string_is_the_candidates_text():
    """A server that sends the message as its bare text: that text is the candidate (it was recorded empty)."""
    from pools.client.openai_client import _chat_text

    assert _chat_text("So the answer is 2.") == "So the answer is 2."
    assert _chat_text({"content": "So the answer is 2."}) == "So the answer is 2."  # the usual object, unchanged


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_the_oracle_plans_on_a_pool_without_verifiers(lam):
    """``coba train mlp`` on a pool without verifiers stopped in the oracle's bound ("zero-size array to reduction
    operation minimum"); its plans now replay in the env to the value the oracle claims."""
    from coba_env import compile_pool
    from coba_env.env import CoBaEnv
    from train.cost_aware_oracle import CostAwareOracle

    pool = compile_pool(make_synthetic_pool({"d1": 3}, {"a-1.5B": 1.5, "b-7B": 7.0}, n_candidates=4, seed=0,
                                            verifiers={}))
    env = CoBaEnv(pool, lam=lam)
    oracle = CostAwareOracle.for_env(env)
    for e in range(env.n_episodes):
        plan = oracle.plan(e, lam)
        _, info = env.reset(options={"episode": e, "lam": lam})
        total = sum(env.step(a)[1] for a in plan.actions)
        assert total == pytest.approx(plan.value, abs=1e-9)


# ---------------------------------------------------------------------------------- plugins (item 6)
def _plugins(monkeypatch, tmp_path: Path, refs: dict[str, str]) -> None:
    """Installed plugins ``refs`` (entry-point name -> value) as the packages' metadata declares them, their modules
    importable from ``tmp_path``."""
    from importlib import metadata

    (tmp_path / "quitter.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = [metadata.EntryPoint(name, value, "coba_env.policies") for name, value in refs.items()]
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points",
                        lambda **kw: declared if kw.get("group") == "coba_env.policies" else real(**kw))


@pytest.mark.parametrize(("refs", "policies", "code", "message"), [
    ({"quitter": "quitter:Policy"}, "greedy", 0, None),  # not named: never imported, the bench runs
    ({"here": "rules.py:Mine"}, "greedy", 0, None),
    ({"quitter": "quitter:Policy"}, "greedy,quitter", 2,
     r"^coba: error: policy 'quitter:Policy': .*error while importing 'quitter': it called sys\.exit\(0\)$"),
    ({"here": "rules.py:Mine"}, "here", 2,
     r"^coba: error: .*plugin policy 'here': entry point value 'rules\.py:Mine' \(group 'coba_env\.policies'\) is not "
     r"module:Class; an entry point names a class in an importable module, never a file$"),
], ids=["exits-at-import-not-named", "file-value-not-named", "exits-at-import-named", "file-value-named"])
def test_a_plugin_is_imported_only_when_named_and_only_from_a_module(monkeypatch, tmp_path, capsys, refs, policies,
                                                                    code, message):
    pool = _small_pool(tmp_path)
    (tmp_path / "rules.py").write_text("raise SystemExit('ran a file of the current folder')\n")
    monkeypatch.chdir(tmp_path)
    _plugins(monkeypatch, tmp_path, refs)
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", policies) == code
    err = capsys.readouterr().err
    if message is None:
        assert (tmp_path / "out" / "results.json").is_file() and "error" not in err
    else:
        assert len(err.strip().splitlines()) == 1 and re.search(message, err.strip()), err
        assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------- signals (item 9)
def test_ctrl_c_during_start_up_is_one_line(monkeypatch, capsys):
    import coba_cli.main

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(coba_cli.main, "build_parser", interrupted)
    assert coba_cli.main.main(["bench"]) == 130
    assert capsys.readouterr().err == "coba: interrupted (during start-up; nothing was done)\n"


@pytest.mark.parametrize(("signal_error", "code", "said"), [
    ("KeyboardInterrupt", 130, "coba: interrupted"),
    ("Terminated", 143, "coba: terminated (SIGTERM)"),
])
def test_a_signal_after_the_result_is_in_place_says_the_result_is_whole(tmp_path, capsys, signal_error, code, said):
    import argparse

    from coba_cli import errors
    from pools.destination_guard import note_written, record_checked

    dest = tmp_path / "out"

    def command(_args):
        record_checked(dest, "--out")
        dest.mkdir()
        note_written(dest)  # the result is in place; the signal arrives while the summary is printed
        raise KeyboardInterrupt if signal_error == "KeyboardInterrupt" else errors.Terminated()

    assert errors.run_guarded(command, argparse.Namespace()) == code
    assert capsys.readouterr().err == (f"{said} after the result was complete: {dest.resolve()} (written whole before "
                                       "the signal)\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_command_returned_keeps_its_exit_code(monkeypatch, signum):
    import coba_cli.main

    monkeypatch.setattr(coba_cli.main, "main", lambda: 0)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(SystemExit) as done:
            coba_cli.main.cli()
        os.kill(os.getpid(), signum)  # ignored: the command has finished
        assert done.value.code == 0
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


# ------------------------------------------------------------------------------- file-size limits (item 9)
_LIMITED = textwrap.dedent("""\
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    {body}
""")


def _run_limited(body: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _LIMITED.format(body=body)], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "COBA_CACHE_DIR": str(cwd / "cache")}, timeout=300,
                          check=False)


def test_a_file_size_limit_while_writing_a_pool_names_the_destination(tmp_path):
    records = small_jsonl_records()
    for r in records:
        r["text"] = r["text"] + " padding" * 400  # the pool's candidate table passes 4 KiB
    write_jsonl(tmp_path / "big.jsonl", records)
    done = _run_limited("from coba_cli.main import main; sys.exit(main(['pools', 'import', 'big.jsonl', 'p']))",
                        tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"coba: error: {tmp_path / 'p'}: ") and "file-size limit" in line, line
    assert not (tmp_path / "p").exists()


def test_a_file_size_limit_while_training_names_the_checkpoint_folder(tmp_path):
    """``coba train --out`` on a full disk gave torch's RuntimeError traceback (no errno, no path): the weights are
    now written by Python, an OSError the CLI reports in one line naming the destination."""
    argv = ["train", "mlp", "--pool", "tiny", "--rounds", "0", "--epochs", "1", "--episodes-per-round", "8", "--out",
            "ck", "--no-progress"]
    done = _run_limited(f"from coba_cli.main import main; sys.exit(main({argv!r}))", tmp_path)
    assert done.returncode == 2, done.stderr
    # (a fresh simulated-pool cache cannot be written either: a warning line, the command goes on)
    [line] = [t for t in done.stderr.splitlines() if t.startswith("coba")]
    assert line.startswith(f"coba: error: {tmp_path / 'ck'}: File too large while writing the result"), \
        done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ck" / "model.pt").exists()


# --------------------------------------------------------------------------- policy parameters (item 9)
def test_a_policy_n_max_above_the_pools_n_says_it_runs_capped(tmp_path, capsys):
    pool = _small_pool(tmp_path)
    n = len(np.unique([r["candidate"] for r in small_jsonl_records()]))  # candidates per episode, from the file
    (tmp_path / "spec.yaml").write_text("policies:\n  mine:\n    kind: coba\n    params:\n      n_max: 100\n")
    capsys.readouterr()
    assert _bench(pool, tmp_path / "out", "--policies", str(tmp_path / "spec.yaml")) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "n_max=100" in line]
    assert notes == [f"note: policy 'mine' has n_max=100, above the pool's {n} candidates per episode; it runs as "
                     f"n_max={n}"]
