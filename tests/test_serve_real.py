"""``coba serve`` end to end on real llama.cpp servers: two generators (two processes of SmolLM2-135M under
different declared sizes) and a judge, called with the official ``openai`` client.

A ``RecordingProxy`` stands before each endpoint and keeps every answer the llama.cpp server sent, so the
usage the client gets is checked against llama.cpp's own ``usage`` figures. Greedy sampling (temperature 0)
makes a streamed request draw what the same request drew without streaming.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from coba_cli.main import main
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from tests.fake_openai_server import RecordingProxy
from tests.llama_server import MODEL, PARAMS_B, ServerProcess, require_alive
from tests.serve_helpers import fake_config, running_server

BIG_PARAMS_B = 1.7
PROBLEM = [{"role": "user", "content": "What is 2+3? Answer with the number."}]
ASK = {"max_tokens": 32, "temperature": 0.0}
BUDGET = {"budget": {"calls": 3, "seconds": 120}}


@pytest.fixture(scope="module")
def served(llama_server_process: ServerProcess, second_llama_server_process: ServerProcess,
           tmp_path_factory) -> Iterator[tuple[str, list[RecordingProxy], Path]]:
    """coba serve over recording proxies: small (session server), big (second process), judge (session)."""
    record = tmp_path_factory.mktemp("served") / "rec"
    with RecordingProxy(llama_server_process.base_url) as small, RecordingProxy(second_llama_server_process.base_url) as big, \
            RecordingProxy(llama_server_process.base_url) as judge:
        config = fake_config(small.url, record=str(record), policy="route_cheapest_coba",
                             also_allow=("route_largest_coba",), sampling=SamplingSettings(n=1, max_tokens=32),
                             max_seconds=180, call_timeout=120, generators={"small": Endpoint(small.url + "/v1", MODEL, PARAMS_B),
                                                           "big": Endpoint(big.url + "/v1", MODEL, BIG_PARAMS_B)},
                             judges={"V1": Endpoint(judge.url + "/v1", MODEL, PARAMS_B)})
        with running_server(config) as srv:
            yield srv.url(), [small, big, judge], record


@pytest.fixture
def live(served, llama_server_process: ServerProcess, second_llama_server_process: ServerProcess):
    require_alive(llama_server_process)
    require_alive(second_llama_server_process)
    return served


def llama_usage(proxies: list[RecordingProxy], since: list[int]) -> tuple[int, int, int]:
    """(calls, prompt tokens, completion tokens) the llama.cpp servers reported since the counts ``since``."""
    answers = [resp for p, n in zip(proxies, since, strict=True) for resp in p.responses()[n:]]
    return (len(answers), sum(r["usage"]["prompt_tokens"] for r in answers),
            sum(r["usage"]["completion_tokens"] for r in answers))


def test_usage_is_llama_cpp_s_own_sum_and_a_stream_gives_the_same_answer(live):
    url, proxies, _ = live
    api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    before = [len(p.responses()) for p in proxies]
    reply = api.chat.completions.create(model="route_largest_coba", messages=PROBLEM, extra_body={"coba": BUDGET},
                                        **ASK)
    middle = [len(p.responses()) for p in proxies]
    coba = reply.model_extra["coba"]
    calls = [s for s in coba["path"] if s["action"] != "STOP"]
    assert llama_usage(proxies, before) == (len(calls), reply.usage.prompt_tokens, reply.usage.completion_tokens)
    assert [m - b for m, b in zip(middle, before, strict=True)][0] == 0  # largest: nothing asked of "small"
    assert {s["action"] for s in calls} <= {"SAMPLE_big", "VERIFY_V1"} and calls[0]["action"] == "SAMPLE_big"

    chunks = list(api.chat.completions.create(model="route_largest_coba", messages=PROBLEM, stream=True,
                                              stream_options={"include_usage": True}, extra_body={"coba": BUDGET},
                                              **ASK))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply.choices[0].message.content and text
    last = chunks[-1]
    assert llama_usage(proxies, middle) == (len(calls), last.usage.prompt_tokens, last.usage.completion_tokens)
    assert last.model_extra["coba"]["answer"] == coba["answer"]


def test_the_default_routes_to_the_cheapest_grades_with_gold_and_the_record_benches(live, tmp_path):
    url, proxies, record = live
    api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    before = [len(p.responses()) for p in proxies]
    reply = api.chat.completions.create(model="coba", messages=PROBLEM, extra_body={"coba": {**BUDGET, "gold": "5"}},
                                        **ASK)
    coba = reply.model_extra["coba"]
    assert coba["policy"] == "route_cheapest_coba" and coba["correct"] == (coba["answer"] == "5")
    assert llama_usage(proxies, before)[1:] == (reply.usage.prompt_tokens, reply.usage.completion_tokens)
    assert len(proxies[1].responses()) == before[1]  # cheapest: nothing asked of "big"
    episodes = sorted(record.glob("episodes-n*.jsonl"))
    assert episodes
    pool = tmp_path / "pool"
    assert main(["pools", "import", str(episodes[0]), "--out", str(pool)]) == 0
    # Each served problem was asked of one generator only (largest: "big", cheapest: "small"), so a routing policy
    # has no episode where every generator has candidates: the record benches with the pair grouping, one
    # (problem, generator) episode each, and a non-routing policy runs on every one of them.
    assert main(["bench", "--pool", str(pool), "--env", "replay", "--policies", "greedy", "--no-figures",
                 "--out", str(tmp_path / "bench")]) == 0
    ran = json.loads((tmp_path / "bench" / "results.json").read_text())["policies"]["greedy"]
    assert ran["applicable"], ran

