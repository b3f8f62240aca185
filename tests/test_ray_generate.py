"""Generation through Ray Data's LLM HTTP processor against the real llama.cpp server (tests/llama_server.py):
the same requests, journal and pool shape as `coba pools generate`, spread over two endpoint URLs, resumable
after an interrupt (the resumed run sends only the calls the journal lacks), and verification the same way."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from coba_cli.main import main as coba
from pools.client.openai_client import OpenAIClient
from pools.generation.journal import JOURNAL_NAME, read_journal
from pools.generation.ray_data_http import (
    INTERRUPT_ENV,
    RayDataOptions,
    ReplayClient,
    _vllm_answer,
    _vllm_rows,
    engine_config,
)
from pools.store import load_pool
from tests.fake_openai_server import RecordingProxy
from tests.llama_server import MODEL, PARAMS_B
from tests.ray_cluster import ray_address_fixture  # noqa: F401  (fixture "ray_address")

N = 2
MAX_TOKENS = 24
# Two easy Reasoning Gym tasks, two items each: 4 problems x 2 samples = 8 calls per run.
RGYM_SMALL = {"seed": 11, "size_per_task": 2, "tasks": {
    "chain_sum": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
    "basic_arithmetic": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
}}
CALLS = 4 * N


def _generate(work: Path, endpoints: list[str], rgym: Path, *extra: str) -> int:
    argv = ["pools", "generate", str(work), "--dataset", "reasoning_gym", "--rgym-config", str(rgym), "--n", str(N),
            "--temperature", "0.8", "--max-tokens", str(MAX_TOKENS), "--seed", "3", "--timeout", "120",
            "--max-attempts", "2", "--backoff", "0.5", "--concurrency", "1", "--no-progress", *extra]
    for url in endpoints:
        argv += ["--endpoint", f"{url}/v1,{MODEL}"]
    return coba(argv)


def _bodies(exchanges: list) -> list[str]:
    return sorted(json.dumps(body, sort_keys=True) for _, body, _, _ in exchanges)


def test_generate_through_ray_data_equals_local_and_resumes(llama_server, ray_address, tmp_path, monkeypatch):
    rgym = tmp_path / "rgym.yaml"
    rgym.write_text(yaml.safe_dump(RGYM_SMALL))
    local_work, ray_work = tmp_path / "local", tmp_path / "ray"
    local_pool, ray_pool = tmp_path / "local-pool", tmp_path / "ray-pool"

    with RecordingProxy(llama_server) as local_proxy:
        assert _generate(local_work, [local_proxy.url], rgym, "--out", str(local_pool)) == 0
    assert len(local_proxy.exchanges) == CALLS

    ray_args = ["--ray-address", ray_address, "--ray-batch-size", "1"]
    # Interrupted after 3 journaled calls (as Ctrl-C there would): exit 130, the journal keeps them. The resumed
    # run goes through other proxies (of the same server), so a call the first run had in flight when it stopped
    # cannot be counted as the second run's.
    with RecordingProxy(llama_server) as a, RecordingProxy(llama_server) as b:
        monkeypatch.setenv(INTERRUPT_ENV, "3")
        assert _generate(ray_work, [a.url, b.url], rgym, *ray_args) == 130
        monkeypatch.delenv(INTERRUPT_ENV)
        kept = read_journal(ray_work)
        assert 3 <= len(kept.candidates) < CALLS
        urls = {a.url, b.url}
    with RecordingProxy(llama_server) as c, RecordingProxy(llama_server) as d:
        assert _generate(ray_work, [c.url, d.url], rgym, *ray_args, "--out", str(ray_pool)) == 0
        urls |= {c.url, d.url}
    # Resumed: exactly the calls the journal lacked were sent, spread over both endpoint URLs.
    resumed = c.exchanges + d.exchanges
    assert len(resumed) == CALLS - len(kept.candidates)
    assert len(c.exchanges) > 0 and len(d.exchanges) > 0
    kept_seeds = {line["seed"] for line in kept.candidates.values()}
    assert not kept_seeds & {body["seed"] for _, body, _, _ in resumed}
    sent = a.exchanges + b.exchanges + c.exchanges + d.exchanges

    # Through Ray Data the server got the very requests the local run sends (model, messages, seed, sampling).
    assert set(_bodies(sent)) == set(_bodies(local_proxy.exchanges))

    # The same journal content shape: one generation line per call, each with the local line's fields.
    local_lines = [json.loads(x) for x in (local_work / JOURNAL_NAME).read_text().splitlines()]
    ray_lines = [json.loads(x) for x in (ray_work / JOURNAL_NAME).read_text().splitlines()]
    kinds = Counter(line["kind"] for line in ray_lines)
    assert kinds == Counter(line["kind"] for line in local_lines) == {"item": 4, "generation": CALLS}
    gen_local = [x for x in local_lines if x["kind"] == "generation"]
    gen_ray = [x for x in ray_lines if x["kind"] == "generation"]
    assert {tuple(sorted(x)) for x in gen_ray} == {tuple(sorted(x)) for x in gen_local}
    assert {x["endpoint"] for x in gen_ray} <= urls
    assert all(x["latency_s"] > 0 and x["prompt_tokens"] > 0 for x in gen_ray)
    key = lambda x: (x["dataset"], x["item_id"], x["seed"])  # noqa: E731
    assert sorted(map(key, gen_ray)) == sorted(map(key, gen_local))

    # The finished pools have the same shape: episodes x candidates, the same items, fields and model.
    lp, rp = load_pool(local_pool), load_pool(ray_pool)
    assert (len(rp.episodes), rp.n_candidates, len(rp.candidates)) == (len(lp.episodes), lp.n_candidates,
                                                                      len(lp.candidates)) == (4, N, CALLS)
    assert list(rp.candidates.columns) == list(lp.candidates.columns)
    assert sorted(rp.items["item_id"]) == sorted(lp.items["item_id"])
    assert rp.models.set_index("name")["params_b"].to_dict() == {MODEL: PARAMS_B}
    # Token counts are the server's usage of an answered request, matched by text.
    served = {(ans["choices"][0]["message"]["content"], ans["usage"]["completion_tokens"]) for *_, ans in sent}
    assert set(zip(rp.candidates["text"], rp.candidates["output_tokens"], strict=True)) <= served

    # Verification through Ray Data: one judge call per candidate, journaled as V1 scores.
    with RecordingProxy(llama_server) as judge:
        assert coba(["pools", "verify", str(ray_work), "--tier", "V1", "--endpoint", f"{judge.url}/v1", "--model",
                     MODEL, "--timeout", "120", "--max-attempts", "2", "--no-progress", *ray_args]) == 0
    scores = read_journal(ray_work).scores
    assert len(judge.exchanges) == len(scores) == CALLS
    assert all(body.get("max_tokens") == 1 for _, body, _, _ in judge.exchanges)  # the V1 judge's own request


def test_vllm_engine_config_is_built_without_a_gpu():
    """`--ray-engine vllm` selects vLLM engine stages; only the config object is built here (no GPU, no vllm)."""
    options = RayDataOptions(address="auto", engine="vllm", model="Qwen/Qwen3-8B", batch_size=16,
                             actors_per_endpoint=2, engine_kwargs={"max_model_len": 8192})
    config = engine_config(options, "http://unused")
    assert type(config).__name__ == "vLLMEngineProcessorConfig"
    assert (config.model_source, config.batch_size, config.concurrency) == ("Qwen/Qwen3-8B", 16, 2)
    assert config.engine_kwargs["max_model_len"] == 8192
    # The vLLM stage's rows: the captured chat body in, an OpenAI-shaped answer out (hand-written engine output).
    body = {"model": MODEL, "messages": [{"role": "user", "content": "2+2?"}], "temperature": 0.6, "top_p": 0.95,
            "max_tokens": 5, "seed": 7}
    row = _vllm_rows({"task": 4, "body": json.dumps(body)})
    assert row["messages"] == body["messages"] and row["task"] == 4
    assert row["sampling_params"] == {"temperature": 0.6, "top_p": 0.95, "max_tokens": 5, "seed": 7}
    out = _vllm_answer({**row, "generated_text": "four", "num_input_tokens": 12, "num_generated_tokens": 5,
                        "time_taken_llm": 0.25})
    completion = ReplayClient(OpenAIClient("http://unused", MODEL), out["http_response"], "vllm").chat(
        body["messages"])
    assert [(c.text, c.finish_reason) for c in completion.choices] == [("four", "length")]  # 5 of max 5 tokens
    assert (completion.prompt_tokens, completion.completion_tokens, completion.latency_s) == (12, 5, 0.25)

    http = engine_config(RayDataOptions(address="auto", batch_size=3), "http://h:1/v1/chat/completions",
                         max_attempts=4, api_key="k")
    assert (type(http).__name__, http.url, http.batch_size, http.max_retries) == (
        "HttpRequestProcessorConfig", "http://h:1/v1/chat/completions", 3, 3)
    assert http.headers == {"Authorization": "Bearer k"}


@pytest.mark.parametrize("extra, message", [
    (["--ray-engine", "vllm"], "--ray-engine need --ray-address"),
    (["--ray-address", "h:1", "--ray-engine", "vllm"], "--ray-engine vllm needs --ray-model"),
    (["--ray-address", "h:1", "--ray-engine", "vllm", "--ray-model", "m", "--api", "completions"],
     "runs chat prompts only"),
    (["--ray-address", "h:1", "--ray-engine", "vllm", "--ray-model", "m", "--endpoint", "http://127.0.0.1:9/v1,other,1.5"],
     "the endpoints name 2 models"),
    (["--ray-address", "127.0.0.1:1"], "nothing answers on 127.0.0.1:1"),
])
def test_bad_ray_generation_options_exit_2(tmp_path, capsys, extra, message):
    argv = ["pools", "generate", str(tmp_path / "w"), "--endpoint", f"http://127.0.0.1:9/v1,{MODEL}", *extra]
    assert coba(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
