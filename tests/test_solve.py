"""``coba solve``: the CLI against the fake server and a real llama.cpp server; bad input; record then replay."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agents.registry import make_policy
from agents.runner import make_env, run_episode
from coba_cli.main import main
from coba_env import compile_pool
from pools.grading import reasoning_gym_scorer
from pools.problems import load_reasoning_gym
from pools.store import load_pool
from tests.fake_openai_server import FakeOpenAIServer, count_tokens
from tests.llama_server import MODEL, PARAMS_B


@pytest.fixture(scope="module")
def controller(tmp_path_factory) -> Path:
    """A tiny MLP controller trained on the `tiny` simulated pool (N_max = 8), imitation of the oracle."""
    from train.imitation import train_mlp

    return train_mlp("tiny", tmp_path_factory.mktemp("ckpt") / "mlp", lambdas=[0.1], dagger_rounds=0, epochs=5,
                     hidden=(16,), episodes_per_round=24, seed=0, progress=False)


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def endpoints(url: str) -> list[str]:
    return ["--generator", f"{url},gen,1.0", "--judge", f"{url},j1,0.5", "--verifier", f"{url},j3,3"]


def check_result(result: dict, limits: dict) -> None:
    """An answer plus a complete, consistent trace within the budgets."""
    trace = result["trace"]
    assert trace[-1]["action"] == "STOP" and all(s["action"] != "STOP" for s in trace[:-1])
    assert [s["action"] for s in trace] == result["actions"]
    assert result["selected_candidate"] == trace[-1]["evidence"]["selected_candidate"]
    samples = [s for s in trace if s["action"] == "SAMPLE"]
    if result["selected_candidate"] >= 0:
        assert result["answer"] == samples[result["selected_candidate"]]["evidence"]["answer"]
    for measure in ("tokens", "calls", "latency"):
        assert result["costs"][measure] == pytest.approx(sum(s["cost"][measure] for s in trace))
    made = [c for c in result["live"]["calls"] if not c.get("abandoned")]  # a call cut by the time budget
    assert result["costs"]["calls"] == len(trace) - 1 == len(made)
    for key, cap in limits.items():
        if cap is not None:
            assert result["live"]["spent"][key] <= cap
    assert result["live"]["stop_reason"]


def test_solve_one_problem_prints_summary_and_writes_the_trace(server, tmp_path, capsys):
    out = tmp_path / "trace.json"
    code = main(["solve", "--policy", "coba_balanced", *endpoints(server.url), "--sample-max-tokens", "64",
                 "--max-calls", "12", "--json", str(out), "--gold", "2", "What is 1+1?"])
    assert code == 0
    report = json.loads(out.read_text())
    (result,) = report["results"]
    check_result(result, {"calls": 12})
    assert len(server.requests) == result["costs"]["calls"]
    assert sum(count_tokens("\n".join(m["content"] for m in b["messages"])) +
               count_tokens(r["choices"][0]["message"]["content"])
               for b, r in zip(server.requests, server.responses, strict=True)) == result["costs"]["tokens"]
    assert result["correct"] == (result["answer"] == "2")  # the fake answers are plain digits
    printed = capsys.readouterr().out
    assert f"answer {result['answer']!r}" in printed and "stopped:" in printed and "VERIFY_V1" in printed


def test_record_then_replay_gives_the_same_actions_and_answer(server, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"item_id": f"q{i}", "problem": f"What is {i}+1?", "gold": str(i + 1)})
                                + "\n" for i in range(3)))
    out, pool_dir = tmp_path / "trace.json", tmp_path / "recorded"
    assert main(["solve", "--policy", "coba_balanced", *endpoints(server.url), "--sample-max-tokens", "64",
                 "--file", str(problems), "--json", str(out), "--record", str(pool_dir), "--quiet"]) == 0
    results = json.loads(out.read_text())["results"]
    compiled = compile_pool(load_pool(pool_dir))
    policy = make_policy("coba_balanced")
    env = make_env(policy, compiled)
    assert compiled.n_episodes == 3 and all(len([s for s in r["trace"] if s["action"] == "SAMPLE"]) == 4
                                            for r in results)
    for e, result in enumerate(results):
        replayed = run_episode(env, policy, e)
        assert replayed["actions"] == result["actions"]
        assert replayed["selected_answer"] == result["answer"]
        assert replayed["correct"] == result["correct"]


GEN, V1, V3 = "--generator={u},gen,1.0", "--judge={u},j1,0.5", "--verifier={u},j3,3"


@pytest.mark.parametrize("args, match", [
    (["--policy=coba_balanced", GEN, V1, V3], "give exactly one of PROBLEM"),
    (["--policy=coba_balanced", GEN, V1, V3, "--file=F", "text"], "give exactly one of PROBLEM"),
    (["--policy=no_such_policy", GEN, V1, V3, "text"], "unknown policy 'no_such_policy'"),
    (["--policy=coba_balanced", "--generator=nourl,gen", V1, V3, "text"], "--generator: bad endpoint 'nourl,gen'"),
    (["--policy=coba_balanced", "--generator=http://x", V1, V3, "text"], "names no model"),
    (["--policy=coba_balanced", GEN, "text"], r"policy 'coba_balanced' cannot run .*needs a cheap judge"),
    (["--policy=coba_balanced", GEN, V1, V3, "--file=F", "--gold=2"], "--gold goes with a PROBLEM"),
    (["--policy=coba_light", "--generator=http://127.0.0.1:9,gen,1.0", V1, "text"],
     r"generator endpoint http://127.0.0.1:9 .* is not usable"),
    (["--policy=coba_light", GEN, V1, "--file=/no/such/file.jsonl"], r"/no/such/file.jsonl: no such file"),
    (["--policy=/tmp", GEN, V1, "text"], r"--policy /tmp: .*no controller.json"),
])
def test_bad_input_exits_2_with_a_clear_message(server, args, match, capsys):
    assert main(["solve", *[a.replace("{u}", server.url) for a in args]]) == 2
    assert re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("line, match", [
    ('{"problem": "x", "colour": 1}', r"line 1, field 'colour': unknown field"),
    ('{"item_id": "a"}', r"line 1, field 'problem': missing or empty"),
    ('{"problem": 3}', r"line 1, field 'problem': expected str, got int"),
    ('{"problem": "x"', r"line 1: malformed JSON"),
    ('[1, 2]', r"line 1: expected a JSON object"),
])
def test_bad_problem_file_names_the_line_and_field(server, tmp_path, line, match, capsys):
    path = tmp_path / "problems.jsonl"
    path.write_text(line + "\n")
    assert main(["solve", "--policy", "coba_light", *endpoints(server.url), "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert re.search(match, err)


def test_a_trained_controller_solves_through_its_checkpoint(server, controller, tmp_path):
    out = tmp_path / "trace.json"
    assert main(["solve", "--policy", str(controller), *endpoints(server.url), "--step-judge", f"{server.url},j2,0.5",
                 "--sample-max-tokens", "64", "--max-calls", "30", "--json", str(out), "--quiet", "What is 1+1?"]) == 0
    report = json.loads(out.read_text())
    assert report["env"]["n_max"] == 8  # the N_max it was trained with, from its checkpoint
    check_result(report["results"][0], {"calls": 30})
    assert report["policy"]["group"] == "learned"


# -------------------------------------------------------------------------------------------------- real server
@pytest.fixture(scope="module")
def rgym_file(tmp_path_factory) -> Path:
    problems = load_reasoning_gym({"tasks": {"basic_arithmetic": {}}, "size_per_task": 2, "seed": 1})
    path = tmp_path_factory.mktemp("rgym") / "problems.jsonl"
    path.write_text("".join(json.dumps(p.to_record()) + "\n" for p in problems))
    return path


def assert_graded_by_the_task_scorer(results: list[dict], rgym_file: Path) -> None:
    """Each result's correctness is the task's own score_answer on the returned answer (evaluator side)."""
    problems = [json.loads(line) for line in rgym_file.read_text().splitlines()]
    assert len(problems) == len(results)
    for problem, result in zip(problems, results, strict=True):
        entry = {"question": problem["problem"], "answer": problem["gold"], "metadata": problem["metadata"]}
        expected = result["answer"] is not None and bool(reasoning_gym_scorer(problem["task"], entry)(result["answer"]))
        assert result["correct"] is expected, (problem["item_id"], result["answer"])


def real_endpoints(url: str) -> list[str]:
    # One small model plays every role; no step judge (its 512-token replies would make the test slow).
    spec = f"{url},{MODEL},{PARAMS_B}"
    return ["--generator", spec, "--judge", spec, "--verifier", spec]


def test_coba_light_solves_reasoning_gym_problems_on_a_real_server(llama_server, rgym_file, tmp_path):
    out = tmp_path / "trace.json"
    limits = {"tokens": 3000, "calls": 6, "seconds": 60.0}
    assert main(["solve", "--policy", "coba_light", *real_endpoints(llama_server), "--file", str(rgym_file),
                 "--sample-max-tokens", "32", "--max-tokens", "3000", "--max-calls", "6", "--max-seconds", "60",
                 "--json", str(out), "--quiet"]) == 0
    results = json.loads(out.read_text())["results"]
    assert len(results) == 2
    for result in results:
        check_result(result, limits)
        assert result["actions"].count("SAMPLE") <= 2  # Light: N_max = 2
        assert "VERIFY_V3" not in result["actions"]  # Light routes nothing to the strong verifier
    assert_graded_by_the_task_scorer(results, rgym_file)


def test_trained_controller_solves_reasoning_gym_problems_on_a_real_server(llama_server, rgym_file, controller,
                                                                           tmp_path):
    out = tmp_path / "trace.json"
    limits = {"tokens": 3000, "calls": 5, "seconds": 60.0}
    assert main(["solve", "--policy", f"{controller}@0.1", *real_endpoints(llama_server), "--file", str(rgym_file),
                 "--sample-max-tokens", "32", "--max-tokens", "3000", "--max-calls", "5", "--max-seconds", "60",
                 "--json", str(out), "--quiet"]) == 0
    results = json.loads(out.read_text())["results"]
    assert len(results) == 2
    for result in results:
        check_result(result, limits)
    assert_graded_by_the_task_scorer(results, rgym_file)


# -------------------------------------------------------------------------------------------------- env scales
@pytest.mark.parametrize("cost, one_call", [
    ("p_tokens", (200 + 512) * 7.0),  # a typical 200-token prompt plus the cap, at the generators' mean size
    ("tokens", 200 + 512),
    ("calls", 1.0),
])
def test_without_a_reference_b_is_n_max_generator_calls_at_the_cap(cost, one_call):
    from eval.solve import live_env_settings
    from pools.client.openai_client import Endpoint
    from pools.client.prompts import SamplingSettings

    generators = [Endpoint("http://a", "small", 6.0), Endpoint("http://b", "big", 8.0)]  # mean size 7
    got = live_env_settings(make_policy("coba_light"), generators, SamplingSettings(n=1, max_tokens=512),
                            cost_model=cost)
    assert (got["n_max"], got["budget"], got["max_output_tokens"]) == (16, pytest.approx(16 * one_call), 512)
    assert got["selection"]["rule"] == "fusion"  # the policy's own env settings come along
    given = live_env_settings(make_policy("coba_light"), generators, SamplingSettings(n=1, max_tokens=512),
                              cost_model=cost, n_max=4, budget=100.0)
    assert (given["n_max"], given["budget"]) == (4, 100.0)


def test_live_env_settings_refuse_dollars():
    from eval.solve import SolveInputError, live_env_settings
    from pools.client.openai_client import Endpoint
    from pools.client.prompts import SamplingSettings

    with pytest.raises(SolveInputError, match=r"^--cost usd needs per-model prices, which live endpoints do not "
                                              r"carry; choose --cost p_tokens, tokens, calls or latency$"):
        live_env_settings(make_policy("coba_light"), [Endpoint("http://a", "g", 1.0)], SamplingSettings(n=1),
                          cost_model="usd")
