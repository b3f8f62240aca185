"""``coba pools verify POOL``: adding a judge's scores to an existing pool, against the real llama.cpp server.

The server (tests/llama_server.py) serves SmolLM2-135M-Instruct with a 2048-token context, so a candidate of
several thousand tokens is longer than its context.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from coba_cli.main import main
from pools.export import export_jsonl
from pools.generation.verify_pool import journal_path
from pools.store import load_pool
from tests.factory import Cand, Ep, build_pool
from tests.llama_server import MODEL, N_CTX, PARAMS_B

SHORT = ["2 + 2 = 4, so the answer is \\boxed{4}.", "2 + 2 = 5, so the answer is \\boxed{5}.",
         "Half of 10 is 5. The answer is \\boxed{5}."]
LONG = "We add one at a time: " + " + ".join(["1"] * 3000) + " = 3000. The answer is \\boxed{3000}."
DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: any call would fail


def make_pool(tmp_path, *, v3=False):
    """Two episodes x 2 candidates with texts; candidate (1, 1) is longer than the server's context."""
    scores = {"V3": 0.5} if v3 else {}
    pool = build_pool([Ep([Cand("4", scores=scores), Cand("5", scores=scores)], item_id="a"),
                       Ep([Cand("5", scores=scores), Cand("3000", scores=scores)], item_id="b")])
    pool.candidates["text"] = SHORT + [LONG]
    # an imported pool, as a user gets one: canonical JSONL -> coba pools import
    src = export_jsonl(pool, tmp_path / "pool.jsonl")
    assert main(["pools", "import", str(src), str(tmp_path / "pool")]) == 0
    return tmp_path / "pool"


def verify(pool, endpoint, *extra):
    """Run ``coba pools verify POOL --tier V1`` against ``endpoint``; its exit status."""
    return main(["pools", "verify", str(pool), "--tier", "V1", "--endpoint", f"{endpoint},{MODEL},{PARAMS_B}",
                 "--no-progress", "--max-attempts", "1", *extra])


def v1_rows(pool):
    ver = load_pool(pool).verifications
    return ver[ver["tier"] == "V1"].set_index(["episode_id", "candidate"]).sort_index()


def test_scores_a_pool_records_the_refused_candidate_and_a_rerun_calls_nothing(llama_server, tmp_path, capsys):
    pool = make_pool(tmp_path)
    assert len(LONG) // 2 > N_CTX  # "1 + " alone is two tokens per term
    assert verify(pool, llama_server) == 0
    out = capsys.readouterr().out
    assert "4 calls: 3 scored; without a usable score: 1 refused by the server, 0 unparsed" in out
    rows = v1_rows(pool)
    assert len(rows) == 4 and set(rows["model"]) == {MODEL}
    assert math.isnan(rows.loc[(1, 1), "score"])  # the server refused it: a call without a usable score
    short = rows.drop(index=(1, 1))["score"]
    assert short.between(0.0, 1.0).all()
    assert not journal_path(pool).exists()  # merged into the pool
    assert verify(pool, DEAD) == 0  # a dead endpoint: the re-run must call nothing
    again = capsys.readouterr().out
    assert "0 calls" in again and "4 already recorded" in again
    assert len(v1_rows(pool)) == 4
    # a crash after the save but before the journal's removal: its rows are in the pool already
    row = {"episode_id": 0, "candidate": 0, "tier": "V1", "model": MODEL, "score": 0.5, "prompt_tokens": 1,
           "output_tokens": 1, "latency_s": 0.1}
    journal_path(pool).write_text(json.dumps(row) + "\n")
    assert verify(pool, DEAD) == 0
    assert len(v1_rows(pool)) == 4 and not journal_path(pool).exists()


def test_context_tokens_cut_the_long_candidate_by_tokens_so_it_gets_a_score(llama_server, tmp_path, capsys):
    pool = make_pool(tmp_path)
    assert verify(pool, llama_server, "--context-tokens", str(N_CTX), "--role", "cheap_judge") == 0
    assert "1 solutions cut to fit the context" in capsys.readouterr().out
    rows = v1_rows(pool)
    assert not rows["score"].isna().any()
    assert 0 < rows.loc[(1, 1), "prompt_tokens"] <= N_CTX
    assert load_pool(pool).manifest["verifier_roles"] == {"V1": "cheap_judge"}


def test_a_journal_left_by_an_interrupted_run_is_merged_not_called_again(llama_server, tmp_path):
    pool = make_pool(tmp_path)
    left = {"episode_id": 0, "candidate": 0, "tier": "V1", "model": MODEL, "params_b": PARAMS_B, "score": 0.123,
            "method": "logprobs", "prompt_tokens": 90, "output_tokens": 1, "latency_s": 0.5, "cut": False}
    journal_path(pool).write_text(json.dumps(left) + "\n" + '{"episode_id": 0, "cand')  # a torn last line
    assert verify(pool, llama_server, "--limit", "1") == 0
    rows = v1_rows(pool)
    assert rows.loc[(0, 0), "score"] == pytest.approx(0.123) and rows.loc[(0, 0), "prompt_tokens"] == 90
    assert len(rows) == 2  # the journal's row and one new call (--limit 1), which is (0, 1)
    assert (0, 1) in rows.index


@pytest.mark.parametrize("setup, args, match", [
    ("v3", ["--tier", "V3"], "tier V3 already holds scores of \\['J3'\\]"),
    ("journal", ["--tier", "V1"], "the journal holds calls of \\[\\('V2', 'other'\\)\\]"),
    ("workdir", ["--tier", "V1", "--role", "reward_model"], "--role and --context-tokens apply to a pool"),
    ("corrupt", ["--tier", "V1"], "verify-journal.jsonl, line 1.*not a JSON line"),
    ("bad_field", ["--tier", "V1"], "verify-journal.jsonl, line 1.*field 'prompt_tokens'.*expected int"),
    ("stranger", ["--tier", "V1"], "call for episode 7 candidate 0, which the pool does not hold"),
    ("no_role", ["--tier", "judge-xl"], "verifier 'judge-xl' has no role; give --role"),
    ("bad_name", ["--tier", "judge xl", "--role", "cheap_judge"], "verifier name 'judge xl'; expected a name"),
    ("workdir_name", ["--tier", "judge-xl"], "unknown tier 'judge-xl'; a work dir takes the paper's tiers"),
])
def test_bad_verify_input_exits_2_before_any_call(tmp_path, capsys, setup, args, match):
    """Refused before any call: the endpoint is dead, so a call would fail differently."""
    pool = make_pool(tmp_path, v3=setup == "v3")
    row = {"episode_id": 0, "candidate": 0, "tier": "V1", "model": MODEL, "score": None, "prompt_tokens": 0,
           "output_tokens": 0, "latency_s": 0.1}
    lines = {"journal": [{**row, "tier": "V2", "model": "other"}], "corrupt": ["{oops", row],
             "bad_field": [{**row, "prompt_tokens": "many"}], "stranger": [{**row, "episode_id": 7}]}.get(setup)
    if lines:
        journal_path(pool).write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    target = tmp_path / "work" if setup.startswith("workdir") else pool
    code = main(["pools", "verify", str(target), *args, "--endpoint", f"{DEAD},{MODEL},{PARAMS_B}", "--no-progress"])
    assert code == 2
    assert re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("status, refused", [(400, True), (413, True), (422, True), (401, False), (404, False),
                                             (None, False)])
def test_which_endpoint_errors_are_one_refused_call(status, refused):
    from pools.client.openai_client import EndpointError
    from pools.generation.verify_pool import _refused

    message = "giving up: cannot connect" if status is None else f"HTTP {status}: x"
    assert _refused(EndpointError(message, url="u", attempts=1, status=status)) is refused
    assert _refused(EndpointError("the server answered with no choices", url="u", attempts=1))


def test_an_unreachable_server_stops_the_run_with_exit_2_and_records_nothing(tmp_path, capsys):
    pool = make_pool(tmp_path)
    assert verify(pool, DEAD) == 2
    err = capsys.readouterr().err
    assert "giving up" in err
    assert len(v1_rows(pool)) == 0 and not journal_path(pool).exists()
    # No call completed, so the message does not point at a journal that does not exist.
    assert "is kept in" not in err and "no call completed before the failure, so nothing was kept" in err


def test_a_pool_gains_a_verifier_of_any_name_with_its_role(llama_server, tmp_path, capsys):
    """Verifiers are data: ``--tier judge-s --role cheap_judge`` adds a verifier the env then offers by name."""
    from coba_env import CoBaEnv, compile_pool

    pool = make_pool(tmp_path)
    assert main(["pools", "verify", str(pool), "--tier", "judge-s", "--role", "cheap_judge", "--endpoint",
                 f"{llama_server},{MODEL},{PARAMS_B}", "--no-progress", "--max-attempts", "1"]) == 0
    loaded = load_pool(pool)
    assert loaded.manifest["verifier_roles"] == {"judge-s": "cheap_judge"} and loaded.tiers == ["judge-s"]
    assert len(loaded.verifications) == 4 and set(loaded.verifications["model"]) == {MODEL}
    env = CoBaEnv(compile_pool(loaded))
    assert env.layout.names == ("SAMPLE", "VERIFY_judge-s", "STOP")
    assert env.roles.slot("V1") == 0 and env.roles.slot("V3") is None  # a cheap judge serves V1, nothing V3
