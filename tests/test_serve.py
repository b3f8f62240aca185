"""``coba serve`` against stand-in model servers, called with the official ``openai`` client and raw HTTP.

Every figure is checked against what the stand-in servers themselves logged: the requests they answered and
the ``usage`` they reported (tests/fake_openai_server.py).
"""

from __future__ import annotations

import json
import re
import threading
import time

import openai
import pytest

from tests.fake_openai_server import FakeOpenAIServer
from tests.serve_helpers import fake_config, request, running_server

PROBLEM = [{"role": "user", "content": "What is 1+1?"}]


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def client(url: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=options.pop("api_key", "unused"), max_retries=0, **options)


def logged_usage(*servers: FakeOpenAIServer) -> tuple[int, int]:
    """(prompt, completion) tokens the stand-in servers reported, summed over every request they answered."""
    answers = [r for s in servers for r in s.responses]
    return (sum(r["usage"]["prompt_tokens"] for r in answers), sum(r["usage"]["completion_tokens"] for r in answers))


def sample_texts(srv: FakeOpenAIServer) -> list[str]:
    """The texts the stand-in sent back for sampling calls (judge calls carry 'Yes or No' in their prompt)."""
    return [resp["choices"][0]["message"]["content"] for req, resp in zip(srv.requests, srv.responses, strict=True)
            if "Yes or No" not in req["messages"][-1]["content"]]


def test_openai_client_gets_an_answer_whose_usage_is_every_internal_call(server):
    with running_server(fake_config(server.url)) as srv:
        reply = client(srv.url()).chat.completions.create(model="coba", messages=PROBLEM,
                                                          extra_body={"coba": {"gold": "2"}})
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == logged_usage(server)
    assert reply.usage.total_tokens == sum(logged_usage(server))
    coba = reply.model_extra["coba"]
    calls = [step for step in coba["path"] if step["action"] != "STOP"]
    assert len(calls) == len(server.requests) and coba["path"][-1]["action"] == "STOP"
    assert [c["model"] for c in calls] == [r["model"] for r in server.requests]  # each call's endpoint, in order
    assert coba["costs"]["calls"] == len(server.requests)
    selected = coba["path"][-1]["selected_candidate"]
    assert reply.choices[0].message.content == sample_texts(server)[selected]
    assert coba["correct"] == (coba["answer"] == "2")  # graded: the client gave a gold answer
    assert coba["policy"] == "coba_light" and reply.id == coba["request_id"]


def test_without_a_gold_answer_nothing_is_graded(server):
    with running_server(fake_config(server.url)) as srv:
        reply = client(srv.url()).chat.completions.create(model="coba_light", messages=PROBLEM)
    assert reply.model_extra["coba"]["correct"] is None


def test_streaming_sends_the_answer_and_the_usage_in_the_last_chunk(server):
    with running_server(fake_config(server.url)) as srv:
        chunks = list(client(srv.url()).chat.completions.create(
            model="coba", messages=PROBLEM, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    last = chunks[-1]
    assert last.choices == [] and (last.usage.prompt_tokens, last.usage.completion_tokens) == logged_usage(server)
    assert all(c.usage is None for c in chunks[:-1])
    coba = last.model_extra["coba"]
    assert text == sample_texts(server)[coba["path"][-1]["selected_candidate"]]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_a_stream_without_include_usage_has_no_usage_chunk(server):
    with running_server(fake_config(server.url)) as srv:
        chunks = list(client(srv.url()).chat.completions.create(model="coba", messages=PROBLEM, stream=True))
    assert chunks[-1].choices and all(c.usage is None for c in chunks)


def test_the_model_name_picks_the_policy_and_lambda(server):
    config = fake_config(server.url, also_allow=("bon4_majority",), lambda_range=(0.0, 0.5))
    with running_server(config) as srv:
        api = client(srv.url())
        listed = [m.id for m in api.models.list().data]
        reply = api.chat.completions.create(model="bon4_majority@0.25", messages=PROBLEM)
        other = api.chat.completions.create(model="coba", messages=PROBLEM, extra_body={"coba": {"lambda": 0.5}})
    assert listed == ["coba", "coba_light", "bon4_majority"]
    assert (reply.model_extra["coba"]["policy"], reply.model_extra["coba"]["lambda"]) == ("bon4_majority", 0.25)
    assert [s["action"] for s in reply.model_extra["coba"]["path"]] == ["SAMPLE"] * 4 + ["STOP"]
    assert (other.model_extra["coba"]["policy"], other.model_extra["coba"]["lambda"]) == ("coba_light", 0.5)


def test_a_request_budget_bounds_its_calls(server):
    with running_server(fake_config(server.url, also_allow=("bon8_majority",))) as srv:
        reply = client(srv.url()).chat.completions.create(
            model="bon8_majority", messages=PROBLEM, extra_body={"coba": {"budget": {"calls": 3}}})
    assert len(server.requests) == 3
    assert reply.model_extra["coba"]["stop_reason"].startswith("budget: the next call could exceed")


# -------------------------------------------------------------------------------------------------- bad requests
USER = [{"role": "user", "content": "x"}]


def body(**fields) -> bytes:
    return json.dumps({"model": "coba", "messages": USER, **fields}).encode()


@pytest.mark.parametrize("raw, status, param, match", [
    (b'{"model": "coba", "messages": [', 400, None, r"^the request body is not valid JSON \(Expecting value"),
    (b"[1, 2]", 400, None, r"is a JSON list; expected a JSON object"),
    (b"\xff\xfe", 400, None, r"not UTF-8 text"),
    (b"[" * 3000, 400, None, r"nested too deeply"),
    (body(model="no_such_policy"), 404, "model", r"the model 'no_such_policy' does not exist; .*coba_light"),
    (body(coba={"policy": "no_such"}), 400, "coba.policy", r"coba.policy \"no_such\" is not a policy"),
    (body(model="coba_light@5"), 400, "model", r"lambda 5 is outside this server's range \[0, 1\]"),
    (body(coba={"lambda": -1}), 400, "coba.lambda", r"lambda -1 is outside this server's range"),
    (body(model="coba_light@x"), 400, "model", r"'x' after '@' is not a number"),
    (json.dumps({"model": "coba"}).encode(), 400, "messages", r"'messages' is missing"),
    (body(messages=[]), 400, "messages", r"expected a non-empty list"),
    (body(messages=USER * 9), 400, "messages", r"holds 9 messages; this server takes at most 8"),
    (body(messages=[{"role": "assistant", "content": "x"}]), 400, "messages[0]", r"must be the user's problem"),
    (body(messages=[{"role": "robot", "content": "x"}]), 400, "messages[0].role", r"expected one of system"),
    (body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 400, "messages[0].content",
     r"expected a text part"),
    (body(n=2), 400, "n", r"one answer per request"),
    (body(tools=[{"type": "function"}]), 400, "tools", r"'tools' is not supported"),
    (body(max_tokens=65), 400, "max_tokens", r"expected an integer >= 1 and <= 64 \(--sample-max-tokens\)"),
    (body(temperature="hot"), 400, "temperature", r"expected a number"),
    (body(coba={"budget": {"calls": 100}}), 400, "coba.budget.calls", r"above this server's limit 64 \(--max-calls\)"),
    (body(coba={"colour": 1}), 400, "coba.colour", r"not a field coba serve knows"),
    (b'{"model": "coba", "messages": [{"role": "user", "content": "\\ud800"}]}', 400, "messages[0].content",
     r"lone surrogate"),
    (body(messages=[{"role": "user", "content": "y" * 5000}]), 413, None, r"larger than this server's limit of 4096"),
])
def test_bad_requests_get_the_openai_error_shape_and_one_clear_line(server, raw, status, param, match):
    with running_server(fake_config(server.url, max_body_bytes=4096, max_messages=8)) as srv:
        reply = request("POST", srv.url() + "/chat/completions", content=raw)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param
    assert "\n" not in error["message"] and "Traceback" not in reply.text
    assert re.search(match, error["message"]), error["message"]
    assert server.requests == []  # refused before any model call


def test_the_official_client_raises_its_own_errors_on_bad_requests(server):
    with running_server(fake_config(server.url)) as srv:
        api = client(srv.url())
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            api.chat.completions.create(model="gpt-4", messages=PROBLEM)
        with pytest.raises(openai.BadRequestError, match="outside this server's range"):
            api.chat.completions.create(model="coba", messages=PROBLEM, extra_body={"coba": {"lambda": 2}})


@pytest.mark.parametrize("method, route, status", [("GET", "/v1/nothing", 404), ("GET", "/v1/chat/completions", 405)])
def test_unknown_routes_and_methods(server, method, route, status):
    with running_server(fake_config(server.url)) as srv:
        reply = request(method, srv.url().removesuffix("/v1") + route)
    assert reply.status_code == status and set(reply.json()["error"]) == {"message", "type", "param", "code"}


def test_an_api_key_is_required_once_set(server):
    with running_server(fake_config(server.url, api_key="s3cret")) as srv:
        with pytest.raises(openai.AuthenticationError, match="missing or wrong API key"):
            client(srv.url(), api_key="wrong").chat.completions.create(model="coba", messages=PROBLEM)
        assert request("GET", srv.url() + "/models").status_code == 401
        reply = client(srv.url(), api_key="s3cret").chat.completions.create(model="coba", messages=PROBLEM)
        assert request("GET", srv.url().removesuffix("/v1") + "/health").json()["status"] == "ok"
    assert reply.choices[0].message.content


# -------------------------------------------------------------------------------------------------- failing endpoints
def test_a_failing_judge_degrades_to_no_score_and_is_in_the_path(server):
    with FakeOpenAIServer() as judge:
        judge.fail_always = True
        with running_server(fake_config(server.url, judge.url)) as srv:
            reply = client(srv.url()).chat.completions.create(model="coba", messages=PROBLEM)
    verifies = [s for s in reply.model_extra["coba"]["path"] if s["action"] == "VERIFY_V1"]
    assert verifies and judge.failures == len(verifies)
    assert all(s["score"] is None and "HTTP 500" in s["error"] and "fake overload" in s["error"] for s in verifies)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == logged_usage(server)  # the judge reported none
    assert reply.choices[0].message.content in sample_texts(server)


def test_a_generator_failing_midway_stops_with_what_was_revealed(server):
    server.fail_after = 1  # the first sample succeeds, every later call fails
    with FakeOpenAIServer() as judge, running_server(fake_config(server.url, judge.url)) as srv:
        reply = client(srv.url()).chat.completions.create(model="coba", messages=PROBLEM)
    coba = reply.model_extra["coba"]
    assert [s["action"] for s in coba["path"]] == ["SAMPLE", "SAMPLE", "STOP"]
    assert coba["path"][1]["abandoned"] and "HTTP 500" in coba["path"][1]["error"]
    assert coba["stop_reason"].startswith("endpoint failure: ")
    assert reply.choices[0].message.content == sample_texts(server)[0]


def test_a_dead_generator_gives_a_clear_502_with_the_path(server):
    server.fail_always = True
    with FakeOpenAIServer() as judge, running_server(fake_config(server.url, judge.url)) as srv:
        reply = request("POST", srv.url() + "/chat/completions", json_body={"model": "coba", "messages": PROBLEM})
    assert reply.status_code == 502
    error, coba = reply.json()["error"], reply.json()["coba"]
    assert error["code"] == "endpoint_failed" and error["message"].startswith("no answer: generator: ")
    assert server.url not in error["message"]  # internal URLs stay inside
    assert coba["path"][0]["action"] == "SAMPLE" and "HTTP 500" in coba["path"][0]["error"]


def test_a_call_past_the_request_s_time_is_abandoned_and_answered_504(server):
    server.delay_s = 1.5
    with FakeOpenAIServer() as judge, running_server(fake_config(server.url, judge.url)) as srv:
        reply = request("POST", srv.url() + "/chat/completions", json_body={
            "model": "coba", "messages": PROBLEM, "coba": {"budget": {"seconds": 0.5}}})
    assert reply.status_code == 504 and reply.json()["error"]["code"] == "timeout"
    (step,) = reply.json()["coba"]["path"][:-1]
    assert step["action"] == "SAMPLE" and step["abandoned"] and "time budget ran out" in step["timed_out"]
    assert reply.json()["coba"]["stop_reason"].startswith("budget: the time budget ran out during the generator")


def test_retries_stay_within_the_request_s_time(server):
    server.fail_first = 1  # the first attempt gets HTTP 500; a retry comes after a ~1 s backoff
    with FakeOpenAIServer() as judge, running_server(fake_config(server.url, judge.url, max_attempts=2)) as srv:
        cut = request("POST", srv.url() + "/chat/completions", json_body={
            "model": "coba", "messages": PROBLEM, "coba": {"budget": {"seconds": 0.5}}})
        server.fail_first = 1
        retried = request("POST", srv.url() + "/chat/completions", json_body={"model": "coba", "messages": PROBLEM})
    assert cut.status_code == 504 and "while retrying" in cut.json()["coba"]["stop_reason"]
    assert retried.status_code == 200 and server.failures == 2  # the second request's retry succeeded


# -------------------------------------------------------------------------------------------------- concurrency
def test_a_full_queue_answers_429_at_once(server):
    server.delay_s = 0.2
    with running_server(fake_config(server.url, concurrency=1, queue=0)) as srv:
        first: list = []
        worker = threading.Thread(target=lambda: first.append(request(
            "POST", srv.url() + "/chat/completions", json_body={"model": "coba", "messages": PROBLEM})))
        worker.start()
        while not server.in_flight:  # the first request holds the only place
            time.sleep(0.01)
        second = request("POST", srv.url() + "/chat/completions", json_body={"model": "coba", "messages": PROBLEM})
        worker.join()
    assert second.status_code == 429 and second.json()["error"]["code"] == "queue_full"
    assert second.headers["retry-after"] == "1"
    assert first[0].status_code == 200


def test_internal_calls_per_endpoint_stay_within_the_limit(server):
    server.delay_s = 0.05
    with running_server(fake_config(server.url, concurrency=4, endpoint_concurrency=2,
                                    also_allow=("bon4_majority",))) as srv:
        threads = [threading.Thread(target=lambda: client(srv.url()).chat.completions.create(
            model="bon4_majority", messages=PROBLEM)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(server.requests) == 16 and server.max_in_flight == 2  # the stand-in's own count


def test_a_client_that_disconnects_stops_its_internal_calls(server, tmp_path):
    server.delay_s = 0.2
    config = fake_config(server.url, also_allow=("bon8_majority",), record=str(tmp_path / "rec"))
    with running_server(config) as srv:
        with pytest.raises(TimeoutError):  # the client gives up after 0.5 s and closes the connection
            request("POST", srv.url() + "/chat/completions",
                    json_body={"model": "bon8_majority", "messages": PROBLEM}, timeout=0.5)
        requests_file = tmp_path / "rec" / "requests.jsonl"
        deadline = time.monotonic() + 30
        while not requests_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (line,) = [json.loads(x) for x in requests_file.read_text().splitlines()]
    assert line["status"] == "cancelled"
    made = [s for s in line["path"] if s["action"] != "STOP"]
    assert len(server.requests) == len(made) < 8  # bon8 would have made 8 calls; the stand-in saw fewer


def test_a_streaming_client_that_disconnects_stops_its_internal_calls(server, tmp_path):
    import http.client
    from urllib.parse import urlsplit

    server.delay_s = 0.2
    config = fake_config(server.url, also_allow=("bon8_majority",), record=str(tmp_path / "rec"), keepalive_s=0.1)
    with running_server(config) as srv:
        where = urlsplit(srv.url())
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"model": "bon8_majority", "messages": PROBLEM, "stream": True}), headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        first = answer.readline()  # the role chunk comes at once
        while len(server.requests) < 2:  # two of the eight calls done, then the client goes away
            time.sleep(0.01)
        conn.sock.close()
        conn.close()
        requests_file = tmp_path / "rec" / "requests.jsonl"
        deadline = time.monotonic() + 30
        while not requests_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (line,) = [json.loads(x) for x in requests_file.read_text().splitlines()]
    assert answer.status == 200 and first.startswith(b"data: ") and b'"role": "assistant"' in first
    assert line["status"] == "cancelled"
    assert len(server.requests) == sum(s["action"] != "STOP" for s in line["path"]) < 8
