"""Generation, verifier scoring and pool building against a fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from coba_cli.generate_cmd import main as cli
from pools.client.judges import parse_steps, split_steps, steps_score
from pools.client.openai_client import EndpointError, OpenAIClient, guess_params_b, parse_endpoint
from pools.client.prompts import SamplingSettings
from pools.errors import PoolError
from pools.generation.generate import RunOptions, build_pool_from_workdir, generate
from pools.generation.journal import JOURNAL_NAME, Journal, read_journal
from pools.generation.verify_calls import verify
from pools.problems import Problem
from pools.store import load_pool
from tests.fake_openai_server import FakeOpenAIServer, count_tokens

REPO_ROOT = Path(__file__).resolve().parents[1]

PROBLEMS = [Problem("toy", f"q{i}", f"What is {i} + 2 - {i}?", "2") for i in range(3)]
FAST = RunOptions(concurrency=4, timeout_s=10, max_attempts=3, backoff_s=0.01, max_backoff_s=0.05, progress=False)


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def _toy_dir(tmp_path: Path) -> Path:
    """A problems folder with a 3-item amc2023.jsonl (so the CLI can load it with --problems-dir)."""
    folder = tmp_path / "problems"
    folder.mkdir(exist_ok=True)
    rows = [{"id": i, "problem": f"What is {i} + 2 - {i}?", "answer": 2.0} for i in range(3)]
    (folder / "amc2023.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _gen_args(work: Path, url: str, tmp_path: Path, *extra: str) -> list[str]:
    return ["generate", str(work), "--endpoint", f"{url},gen-1.5B", "--dataset", "amc2023", "--problems-dir",
            str(_toy_dir(tmp_path)), "--n", "4", "--no-progress", "--backoff", "0.01", "--max-attempts", "3",
            *extra]


def _raw_candidate_keys(work: Path) -> list[tuple]:
    keys = []
    for line in (work / JOURNAL_NAME).read_text().splitlines():
        obj = json.loads(line)
        if obj["kind"] == "generation":
            keys += [(obj["dataset"], obj["item_id"], obj["generator"], c["candidate"]) for c in obj["candidates"]]
    return keys


# --------------------------------------------------------------------------------------------------
# The whole path: generate -> verify V1/V2/V3 -> build -> load
# --------------------------------------------------------------------------------------------------


def test_generate_verify_build_tokens_equal_server_usage(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    stats = generate(work, PROBLEMS, [parse_endpoint(f"{server.url},gen-1.5B"), parse_endpoint(f"{server.url},b,7")],
                     SamplingSettings(n=4, max_tokens=64), FAST)
    assert stats["candidates"] == 3 * 2 * 4 and stats["calls"] == 24
    gen_responses = list(server.responses)
    for tier in ("V1", "V2", "V3"):
        verify(work, tier, [parse_endpoint(f"{server.url},judge-8B")], options=FAST)
    judge_responses = server.responses[len(gen_responses):]
    pool = build_pool_from_workdir(work, tmp_path / "pool")
    pool = load_pool(tmp_path / "pool")
    cands = pool.candidates
    assert len(cands) == 24 and pool.n_candidates == 4
    assert not cands["tokens_estimated"].any()
    # Every candidate's counts are the server's usage of its own call (n = 1 per request).
    assert sorted(cands["output_tokens"]) == sorted(r["usage"]["completion_tokens"] for r in gen_responses)
    assert sorted(cands["prompt_tokens"]) == sorted(r["usage"]["prompt_tokens"] for r in gen_responses)
    assert all(count_tokens(t) == o for t, o in zip(cands["text"], cands["output_tokens"], strict=True))
    verifs = pool.verifications
    assert len(verifs) == 3 * 24 and set(verifs["tier"]) == {"V1", "V2", "V3"}
    assert verifs["prompt_tokens"].sum() == sum(r["usage"]["prompt_tokens"] for r in judge_responses)
    assert verifs["output_tokens"].sum() == sum(r["usage"]["completion_tokens"] for r in judge_responses)
    # V1/V3: P(yes) / (P(yes) + P(no)) read off the first token's top log-probs (fake: 0.8 for \boxed{2}).
    merged = verifs.merge(cands, on=["episode_id", "candidate"])
    for tier in ("V1", "V3"):
        rows = merged[merged["tier"] == tier]
        expected = [0.8 if a == "2" else 0.3 for a in rows["raw_answer"]]
        assert rows["score"].tolist() == pytest.approx(expected)
    assert cands["correct"].tolist() == (cands["raw_answer"] == "2").tolist()
    assert pool.models.set_index("name")["params_b"].to_dict() == {"gen-1.5B": 1.5, "b": 7.0, "judge-8B": 8.0}


def test_cli_generate_verify_build_then_env_replays(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work, dest = tmp_path / "work", tmp_path / "pool"
    assert cli(_gen_args(work, server.url, tmp_path)) == 0
    assert cli(["verify", str(work), "--tier", "V1", "--endpoint", server.url, "--model", "judge-8B",
                "--no-progress", "--out", str(dest)]) == 0
    import coba_env

    env = coba_env.CoBaEnv(pool=load_pool(dest))
    obs, info = env.reset(seed=0)
    assert obs.dtype.name == "float32" and info["action_mask"][0] == 1
    assert cli(["build", str(work), str(dest)]) == 2  # exists, no --force
    assert cli(["build", str(work), str(dest), "--force"]) == 0


def test_completions_api(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert cli(_gen_args(work, server.url, tmp_path, "--api", "completions")) == 0
    assert cli(["verify", str(work), "--tier", "V1", "--endpoint", f"{server.url},j-1B", "--api", "completions",
                "--no-progress"]) == 0
    assert all("prompt" in body for body in server.requests)
    state = read_journal(work)
    assert {s["method"] for s in state.scores.values()} == {"logprobs"}


# --------------------------------------------------------------------------------------------------
# Servers that ignore n, honour it, fail, or are slow
# --------------------------------------------------------------------------------------------------


def test_server_ignoring_n_gets_separate_requests(tmp_path: Path) -> None:
    with FakeOpenAIServer(ignore_n=True) as srv:
        stats = generate(tmp_path / "w", PROBLEMS, [parse_endpoint(f"{srv.url},g-1B")],
                         SamplingSettings(n=4, n_per_request=4), RunOptions(concurrency=1, progress=False))
        # Learned on the first answer (a second call may already be on its way), then n is no longer asked.
        assert 1 <= stats["ignored_n"] <= 2 and srv.requests[0]["n"] == 4
        assert [b.get("n") for b in srv.requests[2:]] == [None] * 10
    state = read_journal(tmp_path / "w")
    assert all(state.candidate_indices("toy", p.item_id, "g-1B") == {0, 1, 2, 3} for p in PROBLEMS)
    texts = [c["text"] for c in state.candidates.values()]
    assert len(texts) == 12 and len(srv.requests) == 12
    assert not any(c["tokens_estimated"] for c in state.candidates.values())


def test_server_honouring_n_splits_usage_exactly(server: FakeOpenAIServer, tmp_path: Path) -> None:
    stats = generate(tmp_path / "w", PROBLEMS, [parse_endpoint(f"{server.url},g-1B")],
                     SamplingSettings(n=4, n_per_request=4), FAST)
    assert stats["calls"] == 3 and stats["ignored_n"] == 0
    state = read_journal(tmp_path / "w")
    total = sum(c["output_tokens"] for c in state.candidates.values())
    assert total == sum(r["usage"]["completion_tokens"] for r in server.responses)
    # A total over n choices is split by text length: flagged as estimated per candidate.
    assert all(c["tokens_estimated"] for c in state.candidates.values())


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_split_off_reasoning_is_kept_in_the_text(tmp_path: Path, field: str) -> None:
    """vLLM's reasoning parsers move the thinking to message.reasoning (reasoning_content before 0.11)."""
    with FakeOpenAIServer() as srv:
        srv.reasoning_field = field
        generate(tmp_path / "w", PROBLEMS[:1], [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=2), FAST)
        answers = [r["choices"][0]["message"] for r in srv.responses]
    texts = sorted(c["text"] for c in read_journal(tmp_path / "w").candidates.values())
    assert texts == sorted(f"<think>\n{m[field]}\n</think>\n\n{m['content']}" for m in answers)
    pool = build_pool_from_workdir(tmp_path / "w")
    assert sorted(pool.candidates["output_tokens"]) == sorted(count_tokens(m[field]) + count_tokens(m["content"])
                                                              for m in answers)
    assert set(pool.candidates["raw_answer"]) <= {"0", "1", "2", "3"}  # the answer is still found after </think>


def test_retries_500_then_succeeds(tmp_path: Path) -> None:
    with FakeOpenAIServer(fail_first=3) as srv:
        client = OpenAIClient(srv.url, "m", max_attempts=5, backoff_s=0.01, max_backoff_s=0.02)
        result = client.chat([{"role": "user", "content": "hi"}], max_tokens=5)
        assert result.attempts == 4 and srv.failures == 3 and result.choices[0].text


def test_backoff_is_exponential_and_bounded() -> None:
    sleeps: list[float] = []
    client = OpenAIClient(f"http://127.0.0.1:{_free_port()}", "m", max_attempts=4, backoff_s=1.0, max_backoff_s=3.0,
                          sleep=sleeps.append, timeout_s=2)
    with pytest.raises(EndpointError, match=r"cannot connect .* \(after 4 attempts\)"):
        client.chat([{"role": "user", "content": "hi"}])
    assert len(sleeps) == 3
    for got, base in zip(sleeps, [1.0, 2.0, 3.0], strict=True):
        assert 0.75 * base <= got <= 1.25 * base


def test_retries_exhausted_on_500(tmp_path: Path) -> None:
    with FakeOpenAIServer() as srv:
        srv.fail_always = True
        client = OpenAIClient(srv.url, "m", max_attempts=3, backoff_s=0.01)
        with pytest.raises(EndpointError, match=r"/v1/chat/completions: giving up: HTTP 500: fake overload "
                                                r"\(after 3 attempts\)"):
            client.chat([{"role": "user", "content": "hi"}])
        assert srv.failures == 3


def test_timeout_is_retried_then_reported() -> None:
    with FakeOpenAIServer(delay_s=0.5) as srv:
        client = OpenAIClient(srv.url, "m", max_attempts=2, backoff_s=0.01, timeout_s=0.1)
        with pytest.raises(EndpointError, match=r"timed out after 0.1 s \(after 2 attempts\)"):
            client.chat([{"role": "user", "content": "hi"}])


def test_client_error_is_not_retried(server: FakeOpenAIServer) -> None:
    server.reject_model = "nope"
    client = OpenAIClient(server.url + "/v1", "nope", max_attempts=5, backoff_s=0.01)
    with pytest.raises(EndpointError, match=r"HTTP 404: The model `nope` does not exist. \(after 1 attempt\)"):
        client.chat([{"role": "user", "content": "hi"}])


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    with FakeOpenAIServer(delay_s=0.1) as srv:
        t0 = time.perf_counter()
        generate(tmp_path / "w", PROBLEMS, [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=4),
                 RunOptions(concurrency=3, progress=False))
        elapsed = time.perf_counter() - t0
        assert srv.max_in_flight == 3
    assert elapsed < 12 * 0.1  # 12 calls of 0.1 s, three at a time


def test_round_robin_over_endpoints_of_one_model(tmp_path: Path) -> None:
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        generate(tmp_path / "w", PROBLEMS, [parse_endpoint(f"{a.url},g-1B"), parse_endpoint(f"{b.url},g-1B")],
                 SamplingSettings(n=4), FAST)
        assert len(a.requests) == len(b.requests) == 6
    assert len(read_journal(tmp_path / "w").candidates) == 12


def test_cap_hit_from_finish_reason_length(tmp_path: Path) -> None:
    with FakeOpenAIServer(max_tokens_cap=5) as srv:
        work = tmp_path / "w"
        generate(work, PROBLEMS[:1], [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=2, max_tokens=4), FAST)
    pool = build_pool_from_workdir(work)
    assert pool.candidates["cap_hit"].all() and set(pool.candidates["finish_reason"]) == {"length"}
    assert (pool.candidates["output_tokens"] == 4).all()


# --------------------------------------------------------------------------------------------------
# Failures and resuming
# --------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_exits_2_and_keeps_journal(server: FakeOpenAIServer, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "w"
    assert cli(_gen_args(work, server.url, tmp_path)) == 0
    before = (work / JOURNAL_NAME).read_bytes()
    dead = f"http://127.0.0.1:{_free_port()}"
    capsys.readouterr()
    args = ["generate", str(work), "--endpoint", f"{dead},other-1B", "--dataset", "amc2023", "--problems-dir",
            str(tmp_path / "problems"), "--n", "4", "--no-progress", "--backoff", "0.01", "--max-attempts", "2"]
    assert cli(args) == 2
    err = capsys.readouterr().err
    assert f"coba: error: {dead}/v1/chat/completions: giving up: cannot connect" in err
    assert "(after 2 attempts)" in err and "run the same command again to continue" in err
    assert (work / JOURNAL_NAME).read_bytes() == before
    assert cli(["verify", str(work), "--tier", "V1", "--endpoint", f"{dead},j-1B", "--no-progress",
                "--max-attempts", "1"]) == 2
    assert (work / JOURNAL_NAME).read_bytes() == before
    assert len(build_pool_from_workdir(work).candidates) == 12


def test_failure_midway_then_resume_exactly_n_no_duplicates(tmp_path: Path) -> None:
    work = tmp_path / "w"
    with FakeOpenAIServer(delay_s=0.01) as srv:
        srv.fail_after = 5
        with pytest.raises(EndpointError):
            generate(work, PROBLEMS, [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=4), FAST)
        done_first = len(read_journal(work).candidates)
        assert done_first == 5  # every successful call is journaled, in flight ones included
        srv.fail_after = None
        stats = generate(work, PROBLEMS, [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=4), FAST)
        assert stats["already_done"] == 5 and stats["candidates"] == 7
        assert len(srv.requests) == 12  # no candidate was ever sampled twice
    keys = _raw_candidate_keys(work)
    assert len(keys) == len(set(keys)) == 12
    assert Counter(k[:3] for k in keys) == {("toy", p.item_id, "g-1B"): 4 for p in PROBLEMS}


def _coba_subprocess(args: list[str]) -> subprocess.Popen:
    """``coba ARGS`` in a child process (what the console script runs), output discarded but stderr kept."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-c", "import sys; from coba_cli.main import main; sys.exit(main())",
                             *args], cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop_after(proc: subprocess.Popen, journal: Path, kind: str, lines: int, sig: signal.Signals) -> tuple[int, str]:
    """Send ``sig`` once the journal holds ``lines`` lines of ``kind``; return (exit status, stderr)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count(f'"kind": "{kind}"') >= lines:
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.01)
    proc.send_signal(sig)
    status = proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return status, err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_generate_interrupted_midway_then_resumed(tmp_path: Path, sig: signal.Signals) -> None:
    """`coba pools generate` in a subprocess, stopped after 4 calls (kill -9 or Ctrl-C), then run again."""
    work = tmp_path / "w"
    n, n_items = 4, 3
    # 0.5 s a call: the 8 calls left after the 4th take ~2 s, so the signal lands before the end on a loaded machine
    with FakeOpenAIServer(delay_s=0.5) as srv:
        proc = _coba_subprocess(["pools", *_gen_args(work, srv.url, tmp_path, "--concurrency", "2")])
        status, err = _stop_after(proc, work / JOURNAL_NAME, "generation", 4, sig)
        if sig == signal.SIGKILL:
            assert status == -signal.SIGKILL
        else:  # Ctrl-C: a clear message and the shell's status for it, without waiting for calls in flight
            # 130, or death by SIGINT itself (the same $? in a shell): tests/test_bench_interrupt.CTRL_C_STATUSES
            assert status in (130, -signal.SIGINT) and "coba: interrupted; every call completed so far is kept in" in err
        while srv.in_flight:  # calls the stopped process left behind still complete on the server
            time.sleep(0.01)
        done_before = len(read_journal(work).candidates)
        assert 4 <= done_before < n * n_items
        journal = work / JOURNAL_NAME
        if sig == signal.SIGKILL:
            with open(journal, "a") as fh:  # as if the kill had come in the middle of a write
                fh.write('{"kind": "generation", "dataset": "amc2023", "item_id": "0", "gen')
        requests_before = len(srv.requests)
        assert cli(_gen_args(work, srv.url, tmp_path)) == 0
        resumed = len(srv.requests) - requests_before
    assert resumed == n * n_items - done_before
    keys = _raw_candidate_keys(work)
    assert len(keys) == len(set(keys)) == n * n_items  # no duplicate line, nothing missing
    assert requests_before <= done_before + 2  # at most the calls in flight (concurrency 2) were lost
    pool = build_pool_from_workdir(work)
    assert (pool.candidates.groupby("episode_id").size() == n).all()
    assert sorted(pool.candidates["candidate"]) == sorted(list(range(n)) * n_items)


def test_verify_killed_midway_then_resumed(tmp_path: Path) -> None:
    """`coba pools verify` in a subprocess, SIGKILLed after 4 scores, then run again: one score per candidate."""
    work = tmp_path / "w"
    with FakeOpenAIServer() as fast:
        assert cli(_gen_args(work, fast.url, tmp_path)) == 0
    with FakeOpenAIServer(delay_s=0.2) as srv:
        args = ["pools", "verify", str(work), "--tier", "V1", "--endpoint", f"{srv.url},judge-1B", "--concurrency",
                "2", "--no-progress"]
        status, _ = _stop_after(_coba_subprocess(args), work / JOURNAL_NAME, "verification", 4, signal.SIGKILL)
        assert status == -signal.SIGKILL
        while srv.in_flight:
            time.sleep(0.01)
        scored_before = len(read_journal(work).scores)
        assert 4 <= scored_before < 12
        requests_before = len(srv.requests)
        assert cli(args[1:]) == 0
        assert len(srv.requests) - requests_before == 12 - scored_before
    lines = [json.loads(x) for x in (work / JOURNAL_NAME).read_text().splitlines()]
    scored = [(x["item_id"], x["candidate"]) for x in lines if x["kind"] == "verification"]
    assert sorted(scored) == sorted((str(i), k) for i in range(3) for k in range(4))
    assert requests_before <= scored_before + 2


def test_resume_with_other_settings_is_refused(server: FakeOpenAIServer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "w"
    assert cli(_gen_args(work, server.url, tmp_path)) == 0
    assert cli(_gen_args(work, server.url, tmp_path, "--temperature", "1.0")) == 2
    assert "generator 'gen-1.5B' was sampled here with other settings (['temperature']" in capsys.readouterr().err


def test_more_candidates_later_extends_episodes(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "w"
    assert cli(_gen_args(work, server.url, tmp_path)) == 0
    assert cli(_gen_args(work, server.url, tmp_path, "--n", "6")) == 0  # the last --n wins
    assert len(server.requests) == 18
    assert build_pool_from_workdir(work).n_candidates == 6
    assert build_pool_from_workdir(work, n=4).n_candidates == 4


def test_only_unscored_candidates_are_scored(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "w"
    generate(work, PROBLEMS, [parse_endpoint(f"{server.url},g-1B")], SamplingSettings(n=4), FAST)
    calls_before = len(server.requests)
    first = verify(work, "V1", [parse_endpoint(f"{server.url},j-1B")], options=FAST, limit=5)
    second = verify(work, "V1", [parse_endpoint(f"{server.url},j-1B")], options=FAST)
    third = verify(work, "V1", [parse_endpoint(f"{server.url},j-1B")], options=FAST)
    assert (first["scored"], second["scored"], third["scored"]) == (5, 7, 0)
    assert third["already_scored"] == 12 and len(server.requests) - calls_before == 12


def test_incomplete_episodes_refused_or_dropped(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "w"
    generate(work, PROBLEMS, [parse_endpoint(f"{server.url},g-1B")], SamplingSettings(n=4), FAST)
    generate(work, PROBLEMS[:1], [parse_endpoint(f"{server.url},g-1B")], SamplingSettings(n=5), FAST)
    with pytest.raises(PoolError, match=r"2 episode\(s\) have fewer than 5 candidates.*--drop-incomplete"):
        build_pool_from_workdir(work)
    pool = build_pool_from_workdir(work, drop_incomplete=True)
    assert len(pool.episodes) == 1 and pool.manifest["provenance"]["dropped_incomplete_episodes"] == 2


def test_one_writer_per_workdir(tmp_path: Path) -> None:
    with Journal(tmp_path):
        with pytest.raises(PoolError, match=r"another process is writing this work dir"):
            Journal(tmp_path)
    Journal(tmp_path).close()


def test_conflicting_item_is_refused(tmp_path: Path) -> None:
    with Journal(tmp_path) as journal:
        journal.append({"kind": "item", **PROBLEMS[0].to_record()})
        assert journal.append({"kind": "item", **PROBLEMS[0].to_record()}) == []
        changed = {**PROBLEMS[0].to_record(), "gold": "3"}
        with pytest.raises(PoolError, match=r"differs from the journal's earlier line in \['gold'\]"):
            journal.append({"kind": "item", **changed})


# --------------------------------------------------------------------------------------------------
# Judges
# --------------------------------------------------------------------------------------------------


def test_v1_falls_back_to_text_without_logprobs(tmp_path: Path) -> None:
    with FakeOpenAIServer(send_logprobs=False) as srv:
        work = tmp_path / "w"
        generate(work, PROBLEMS, [parse_endpoint(f"{srv.url},g-1B")], SamplingSettings(n=2), FAST)
        verify(work, "V1", [parse_endpoint(f"{srv.url},j-1B")], options=FAST)
    state = read_journal(work)
    for key, score in state.scores.items():
        assert score["method"] == "text"
        assert score["score"] == (1.0 if state.candidates[key[:4]]["text"].endswith("\\boxed{2}") else 0.0)


def test_v2_parse_failure_is_missing_score(server: FakeOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "w"
    generate(work, PROBLEMS, [parse_endpoint(f"{server.url},g-1B")], SamplingSettings(n=2), FAST)
    verify(work, "V2", [parse_endpoint(f"{server.url},prm-7B")], options=FAST)
    bad = tmp_path / "bad_steps.yaml"
    bad.write_text(yaml.safe_dump({"mode": "steps", "user": "Grade: {{steps}}", "max_tokens": 50}))
    verify(work, "V3", [parse_endpoint(f"{server.url},big-70B")], options=FAST, prompt=bad)
    pool = build_pool_from_workdir(work)
    v2 = pool.verifications[pool.verifications["tier"] == "V2"]
    v3 = pool.verifications[pool.verifications["tier"] == "V3"]
    assert v2["score"].notna().all() and v2["score"].between(0, 1).all()
    assert len(v3) == 6 and v3["score"].isna().all()  # a call was made (tokens kept) but gave no score
    assert (v3["prompt_tokens"] > 0).all()


@pytest.mark.parametrize("reply, n_steps, aggregate, score", [
    ("Step 1: correct\nStep 2: incorrect\nStep 3: correct", 3, "fraction", 2 / 3),
    ("Step 1: correct\nStep 2: incorrect", 3, "fraction", 1 / 2),
    ("**Step 1:** correct\nStep 2 - correct", 2, "min", 1.0),
    ("Step 1: correct\nStep 2: wrong", 2, "min", 0.0),
    ("Step 9: correct", 2, "fraction", None),
    ("I think it's fine.", 2, "fraction", None),
])
def test_steps_score(reply: str, n_steps: int, aggregate: str, score: float | None) -> None:
    got, method = steps_score(reply, n_steps, aggregate)
    assert method == ("steps" if score is not None else "unparsed")
    assert got == (pytest.approx(score) if score is not None else None)


def test_split_steps_merges_tail() -> None:
    text = "\n\n".join(f"para {i}" for i in range(30))
    steps = split_steps(text, max_steps=5)
    assert len(steps) == 5 and steps[-1].startswith("para 4") and steps[-1].endswith("para 29")
    assert parse_steps("Step 2: correct\nStep 2: incorrect", 5) == {2: True}


# --------------------------------------------------------------------------------------------------
# Endpoint specs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, message", [
    ("localhost:8000,m-1B", "the URL must start with http:// or https://"),
    ("http://h:1", "names no model; expected URL,MODEL"),
    ("http://h:1,m,x", "PARAMS_B 'x' is not a number"),
    ("http://h:1,mystery", "cannot tell the size of model 'mystery'"),
    ("http://h:1,a,1,2", "expected URL,MODEL\\[,PARAMS_B\\]"),
])
def test_bad_endpoint_specs(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_endpoint(spec)


@pytest.mark.parametrize("name, size", [("Qwen3-8B", 8.0), ("SmolLM2-135M-Instruct", 0.135),
                                        ("Qwen2.5-Math-7B-Instruct", 7.0), ("Phi-4-reasoning", None),
                                        ("Llama-3.1-70b", 70.0)])
def test_guess_params_b(name: str, size: float | None) -> None:
    assert guess_params_b(name) == size


def test_bad_endpoint_on_cli_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["generate", str(tmp_path / "w"), "--endpoint", "http://h:1,mystery"]) == 2
    assert "cannot tell the size of model 'mystery'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_wired_into_coba_pools(server: FakeOpenAIServer, tmp_path: Path) -> None:
    from coba_cli.main import main as coba

    work = tmp_path / "w"
    assert coba(["pools", *_gen_args(work, server.url, tmp_path)]) == 0
    assert coba(["pools", "build", str(work), str(tmp_path / "pool")]) == 0
    assert load_pool(tmp_path / "pool").n_candidates == 4


def test_journal_batch_skips_repeats_and_cuts_torn_tail(tmp_path: Path) -> None:
    item = {"kind": "item", **PROBLEMS[0].to_record()}
    line = {"kind": "generation", "dataset": "toy", "item_id": "q0", "generator": "g", "candidates": [
        {"candidate": 0, "text": "a"}, {"candidate": 1, "text": "b"}]}
    with Journal(tmp_path) as journal:
        assert journal.append_many([item, item, line]) == [("toy", "q0"), ("toy", "q0", "g", 0), ("toy", "q0", "g", 1)]
        again = {**line, "candidates": [{"candidate": 1, "text": "b2"}, {"candidate": 2, "text": "c"}]}
        assert journal.append(again) == [("toy", "q0", "g", 2)]
    lines = (tmp_path / JOURNAL_NAME).read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["candidates"] == [{"candidate": 2, "text": "c"}]
    with open(tmp_path / JOURNAL_NAME, "a") as fh:
        fh.write('{"kind": "generation", "dataset": "to')
    assert len(read_journal(tmp_path).candidates) == 3  # a torn last line is ignored when reading...
    with Journal(tmp_path) as journal:  # ...and cut off when the journal is opened for writing
        assert len(journal.state.candidates) == 3
    assert (tmp_path / JOURNAL_NAME).read_text().endswith("}\n")
