"""``coba solve`` routing live between several ``--generator`` endpoints: two real llama.cpp servers; bad input.

The real-server tests run two llama.cpp servers of the same small model on two loopback ports (the session's
``llama_server`` and a second one started here with the same command) and read which endpoint each SAMPLE hit
off each server's own access log (one ``POST /v1/chat/completions`` line per request it served).
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack

import pytest

from coba_cli.main import main
from coba_env.live import EndpointSource, LiveEnv
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from pools.grading import cluster_answers
from pools.problems import Problem
from tests.fake_openai_server import FakeOpenAIServer
from tests.llama_server import MODEL, PARAMS_B, ServerProcess, require_alive

#: The size the tests declare for the second server's copy of the model (any size different from PARAMS_B):
#: routing policies choose by declared size, and a SAMPLE is charged at its generator's declared size.
BIG_PARAMS_B = 1.7
CHAT = "POST /v1/chat/completions"


# -------------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def servers():
    with ExitStack() as stack:
        yield [stack.enter_context(FakeOpenAIServer()) for _ in range(2)]


A, B, V1 = "--generator={0},gen,1.0", "--generator={1},gen,1.0", "--judge={0},j1,0.5"


@pytest.mark.parametrize("args, match", [
    (["--policy=route_cheapest_coba", A, B, V1, "text"],
     r"--generator '.*': duplicate generator name 'gen'; each generator needs its own name: give NAME="),
    (["--policy=route_cheapest_coba", "--generator=a={0},x,1", "--generator=a={1},y,2", V1, "text"],
     r"duplicate generator name 'a'"),
    (["--policy=route_cheapest_coba", A, V1, "text"],
     r"policy 'route_cheapest_coba' routes between generators; give at least two --generator \(got 1\)"),
    (["--policy=coba_light", "--generator=s={0},gen,1", "--generator=b={1},gen,7", V1, "text"],
     r"policy 'coba_light' \(group 'coba'\) samples one generator, but 2 --generator were given \(s, b\); "
     r"route between them with a routing policy"),
    (["--policy=route_cheapest_coba", "--generator=a b={0},gen,1", B, V1, "text"], r"bad NAME 'a b'"),
    (["--policy=route_cheapest_coba", "--generator=s={0},gen", B, V1, "text"], r"cannot tell the size of model"),
    (["--policy=route_cheapest_coba", "--generator=s={0},gen,1", B, "text"],
     r"policy 'route_cheapest_coba' cannot run with these endpoints: .*needs a cheap judge"),
])
def test_bad_routing_input_exits_2_with_one_line_before_any_call(servers, args, match, capsys):
    urls = [s.url for s in servers]
    assert main(["solve", *[a.format(*urls) for a in args]]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(match, err), err
    assert not any(s.requests for s in servers)  # no model was called


def test_one_generator_keeps_the_replay_layout(servers, tmp_path):
    out = tmp_path / "trace.json"
    assert main(["solve", "--policy=coba_light", f"--generator={servers[0].url},gen,1.0",
                 f"--judge={servers[1].url},j1,0.5", "--sample-max-tokens=64", "--json", str(out), "--quiet",
                 "What is 1+1?"]) == 0
    report = json.loads(out.read_text())
    (result,) = report["results"]
    assert set(result["actions"]) <= {"SAMPLE", "VERIFY_V1", "STOP"} and "SAMPLE" in result["actions"]
    assert report["generator"] == {"url": servers[0].url, "model": "gen", "params_b": 1.0}
    assert "generators" not in report and "samples_by_generator" not in result
    assert all("generator" not in s["evidence"] for s in result["trace"])


@pytest.mark.parametrize("name", ["route_cheapest_coba", "route_largest_coba"])
def test_record_a_routed_run_then_replay_it_in_the_route_env(servers, tmp_path, name):
    from agents.registry import make_policy
    from agents.runner import run_episode
    from coba_env import CoBaEnv, compile_pool
    from pools.store import load_pool

    with FakeOpenAIServer() as judge:
        problems = tmp_path / "problems.jsonl"
        problems.write_text("".join(json.dumps({"item_id": f"q{i}", "problem": f"What is {i}+1?",
                                                "gold": str(i + 1)}) + "\n" for i in range(3)))
        out, pool_dir = tmp_path / "trace.json", tmp_path / "recorded"
        assert main(["solve", "--policy", name, f"--generator=small={servers[0].url},gen-s,1",
                     f"--generator=big={servers[1].url},gen-b,7", f"--judge={judge.url},j1,0.5",
                     "--sample-max-tokens", "64", "--file", str(problems), "--json", str(out), "--record",
                     str(pool_dir), "--quiet"]) == 0
    results = json.loads(out.read_text())["results"]
    chosen = "small" if name == "route_cheapest_coba" else "big"
    compiled = compile_pool(load_pool(pool_dir))
    assert set(compiled.generator) == {chosen} and compiled.n_episodes == 3  # the other generator drew nothing
    policy = make_policy(name)
    env = CoBaEnv(compiled, grouping="item", **policy.env_kwargs())
    compared = 0
    for e, result in enumerate(results):
        assert all(a in (f"SAMPLE_{chosen}", "VERIFY_V1", "STOP") for a in result["actions"])
        replayed = run_episode(env, policy, e)
        assert replayed["actions"] == result["actions"]
        assert replayed["selected_answer"] == result["answer"]
        assert replayed["correct"] == result["correct"]
        compared += 1
    assert compared == 3  # every problem keeps all it revealed, so every one replays


# -------------------------------------------------------------------------------------------------- real servers
@pytest.fixture
def two_servers(llama_server_process: ServerProcess, second_llama_server_process: ServerProcess) -> tuple[ServerProcess, ...]:
    require_alive(llama_server_process)
    require_alive(second_llama_server_process)
    return llama_server_process, second_llama_server_process


def chat_requests(server: ServerProcess) -> int:
    """Chat completions the server has answered so far, by its own access log."""
    return server.log_tail(10**9).count(CHAT)


def test_routing_policies_sample_the_endpoint_they_choose_on_real_servers(two_servers, tmp_path):
    first, second = two_servers
    small, big = f"small={first.base_url},{MODEL},{PARAMS_B}", f"big={second.base_url},{MODEL},{BIG_PARAMS_B}"
    judge = f"{first.base_url},{MODEL},{PARAMS_B}"
    for policy, chosen in (("route_cheapest_coba", "small"), ("route_largest_coba", "big")):
        before = [chat_requests(s) for s in two_servers]
        out = tmp_path / f"{policy}.json"
        assert main(["solve", "--policy", policy, "--generator", small, "--generator", big, "--judge", judge,
                     "--sample-max-tokens", "32", "--max-calls", "4", "--max-seconds", "90", "--json", str(out),
                     "--quiet", "What is 2+3? Answer with the number."]) == 0
        report = json.loads(out.read_text())
        assert report["generators"] == {"small": {"url": first.base_url, "model": MODEL, "params_b": PARAMS_B},
                                        "big": {"url": second.base_url, "model": MODEL, "params_b": BIG_PARAMS_B}}
        (result,) = report["results"]
        samples = [s for s in result["trace"] if s["action"].startswith("SAMPLE")]
        verifies = [s for s in result["trace"] if s["action"] == "VERIFY_V1"]
        assert samples and all(s["action"] == f"SAMPLE_{chosen}" for s in samples)
        assert all(s["evidence"]["generator"] == chosen for s in samples)
        # Which endpoint each call hit, by the servers' logs: the judge runs on the first server.
        served = [chat_requests(s) - b for s, b in zip(two_servers, before, strict=True)]
        expected = [len(verifies), len(samples)] if chosen == "big" else [len(samples) + len(verifies), 0]
        assert served == expected
        # Costs per generator: each sample at its generator's declared size; nothing spent on the other.
        size = PARAMS_B if chosen == "small" else BIG_PARAMS_B
        for s in samples:
            assert s["cost"]["tokens"] > 0 and s["cost"]["p_tokens"] == pytest.approx(s["cost"]["tokens"] * size)
        spend = result["spend_by_generator"]
        assert spend[chosen]["p_tokens"] == pytest.approx(sum(s["cost"]["p_tokens"] for s in samples))
        assert spend["big" if chosen == "small" else "small"] == {"tokens": 0, "p_tokens": 0, "calls": 0,
                                                                  "latency": 0, "usd": 0}
        assert result["samples_by_generator"][chosen] == len(samples)
        assert result["live"]["spent"]["calls"] <= 4


def test_one_problem_routed_across_both_real_servers(two_servers):
    first, second = two_servers
    source = EndpointSource([Problem("live", "q1", "What is 2+3? Answer with the number.", "5")],
                            {"a": Endpoint(first.base_url, MODEL, PARAMS_B),
                             "b": Endpoint(second.base_url, MODEL, BIG_PARAMS_B)}, {},
                            settings=SamplingSettings(n=1, max_tokens=32), max_attempts=1)
    env = LiveEnv(source, n_max=2, budget=1000.0, max_output_tokens=32)
    before = [chat_requests(s) for s in two_servers]
    env.reset(options={"episode": 0})
    plan = ["SAMPLE_a", "SAMPLE_b", "SAMPLE_b", "STOP"]
    for name in plan:
        _, _, done, _, info = env.step(env.layout.action_id(name))
    assert done
    assert [chat_requests(s) - b for s, b in zip(two_servers, before, strict=True)] == [1, 2]
    trace = info["trace"].to_list()
    assert [s["action"] for s in trace] == plan
    samples = trace[:3]
    assert [s["evidence"]["generator"] for s in samples] == ["a", "b", "b"]
    sizes = {"a": PARAMS_B, "b": BIG_PARAMS_B}
    for s in samples:
        assert s["cost"]["p_tokens"] == pytest.approx(s["cost"]["tokens"] * sizes[s["evidence"]["generator"]])
    assert info["samples_by_generator"] == {"a": 1, "b": 2}
    assert info["spend_by_generator"]["b"]["tokens"] == samples[1]["cost"]["tokens"] + samples[2]["cost"]["tokens"]
    answers = [s["evidence"]["answer"] for s in samples]
    assert [s["evidence"]["cluster"] for s in samples] == cluster_answers(answers)
    assert info["selected_answer"] == (answers[info["selected_candidate"]] if info["selected_candidate"] >= 0
                                       else None)
