"""``coba serve --record DIR``: served traffic that ``coba pools import`` turns into a pool ``coba bench`` runs on."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import openai
import pytest

from coba_cli.main import main
from eval.serving.record import REQUESTS_FILE, TrafficRecord
from pools.store import load_pool
from tests.fake_openai_server import FakeOpenAIServer
from tests.serve_helpers import fake_config, running_server


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def ask(url: str, problem: str, **extra) -> openai.types.chat.ChatCompletion:
    api = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    return api.chat.completions.create(model=extra.pop("model", "coba"), messages=[{"role": "user", "content": problem}],
                                       extra_body={"coba": extra} if extra else None)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_recorded_traffic_imports_and_benches(server, tmp_path, capsys):
    record = tmp_path / "rec"
    with running_server(fake_config(server.url, record=str(record))) as srv:
        graded = ask(srv.url(), "What is 1+1?", gold="2")
        ungraded = ask(srv.url(), "What is 2+2?")
    requests = lines(record / REQUESTS_FILE)
    assert [r["request_id"] for r in requests] == [graded.id, ungraded.id]
    assert [r["usage"] for r in requests] == [graded.usage.model_dump(exclude_none=True),
                                              ungraded.usage.model_dump(exclude_none=True)]
    (episodes,) = {e["file"] for r in requests for e in r["episodes"]}  # coba_light draws 2 candidates each time
    pool_dir = tmp_path / "pool"
    assert main(["pools", "import", str(record / episodes), "--out", str(pool_dir)]) == 0
    pool = load_pool(pool_dir)
    cands = pool.candidates.merge(pool.episodes, on="episode_id")
    assert sorted(cands["item_id"].unique()) == sorted([graded.id, ungraded.id])
    assert len(pool.verifications) == sum(1 for r in requests for s in r["path"] if s["action"] == "VERIFY_V1")
    mine = cands[cands["item_id"] == graded.id]
    selected = graded.model_extra["coba"]["selected_candidate"]
    assert bool(mine["correct"].iloc[selected]) == graded.model_extra["coba"]["correct"]  # graded by gold "2"
    assert cands[cands["item_id"] == ungraded.id]["correct"].isna().all()  # no gold: never guessed
    assert main(["bench", "--pool", str(pool_dir), "--policies", "coba_light", "--no-figures", "--out",
                 str(tmp_path / "bench")]) == 0
    assert "coba_light" in capsys.readouterr().out


def test_episodes_of_different_sizes_go_to_their_own_files(server, tmp_path):
    record = tmp_path / "rec"
    with running_server(fake_config(server.url, record=str(record), also_allow=("bon4_majority",))) as srv:
        ask(srv.url(), "What is 1+1?")
        ask(srv.url(), "What is 1+1?", model="bon4_majority")
    assert sorted(p.name for p in record.iterdir()) == ["episodes-n2.jsonl", "episodes-n4.jsonl", REQUESTS_FILE]
    assert [len(lines(record / f"episodes-n{n}.jsonl")) for n in (2, 4)] == [2, 4]
    for n in (2, 4):
        assert main(["pools", "import", str(record / f"episodes-n{n}.jsonl"), "--out", str(tmp_path / f"p{n}")]) == 0


def test_concurrent_requests_are_each_recorded_once(server, tmp_path):
    record = tmp_path / "rec"
    replies: list = []
    with running_server(fake_config(server.url, record=str(record), concurrency=4, queue=16)) as srv:
        threads = [threading.Thread(target=lambda i=i: replies.append(ask(srv.url(), f"What is {i}+1?")))
                   for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    requests = lines(record / REQUESTS_FILE)
    assert sorted(r["request_id"] for r in requests) == sorted(r.id for r in replies) and len(replies) == 12
    episodes = lines(record / "episodes-n2.jsonl")
    assert sorted({e["item_id"] for e in episodes}) == sorted(r.id for r in replies) and len(episodes) == 24
    assert sum(len(r["path"]) - 1 for r in requests) == len(server.requests)  # every call the stand-in served


def test_a_record_cut_by_a_kill_is_repaired_at_the_next_start(server, tmp_path):
    record = tmp_path / "rec"
    with running_server(fake_config(server.url, record=str(record))) as srv:
        ask(srv.url(), "What is 1+1?")
        ask(srv.url(), "What is 2+1?")
    episodes, requests = record / "episodes-n2.jsonl", record / REQUESTS_FILE
    whole = episodes.read_bytes()
    first_line = whole.split(b"\n")[2] + b"\n"  # the second request's first candidate
    episodes.write_bytes(whole + first_line[: len(first_line) // 2])  # a third episode cut mid-line
    requests.write_bytes(requests.read_bytes() + b'{"request_id": "cut')
    repaired = TrafficRecord(record).repaired
    assert repaired == [("episodes-n2.jsonl", len(first_line) // 2), (REQUESTS_FILE, len(b'{"request_id": "cut'))]
    assert episodes.read_bytes() == whole
    episodes.write_bytes(whole + first_line)  # cut at a line end: an episode with 1 of its 2 candidates
    TrafficRecord(record)
    assert episodes.read_bytes() == whole
    assert main(["pools", "import", str(episodes), "--out", str(tmp_path / "pool")]) == 0


def test_routed_requests_record_one_episode_per_generator_they_sampled(tmp_path):
    from pools.client.openai_client import Endpoint

    record = tmp_path / "rec"
    with FakeOpenAIServer() as small, FakeOpenAIServer() as large, FakeOpenAIServer() as judge:
        config = fake_config(small.url, judge.url, record=str(record), policy="route_cheapest_coba",
                             also_allow=("route_largest_coba",),
                             generators={"small": Endpoint(small.url, "gen-s", 1.0),
                                         "large": Endpoint(large.url, "gen-l", 7.0)})
        with running_server(config) as srv:
            cheap = ask(srv.url(), "What is 1+1?")
            big = ask(srv.url(), "What is 1+1?", model="route_largest_coba")
        served = (len(small.requests), len(large.requests))
    cheap_path, big_path = (r.model_extra["coba"]["path"] for r in (cheap, big))
    assert served == (sum(s["action"] == "SAMPLE_small" for s in cheap_path),
                      sum(s["action"] == "SAMPLE_large" for s in big_path))
    assert {s["endpoint"] for s in cheap_path if s["action"].startswith("SAMPLE")} == {"generator small"}
    requests = lines(record / REQUESTS_FILE)
    assert [[e["generator"] for e in r["episodes"]] for r in requests] == [["small"], ["large"]]
    assert cheap.model_extra["coba"]["selected_generator"] == "small"
