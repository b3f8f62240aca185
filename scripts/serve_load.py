"""``coba serve`` under load, on loopback only, bounded in count and in time (issue 38's load figures).

1. ``--requests`` (64) concurrent requests from the ``openai`` client to a server over a stand-in model
   server (tests/fake_openai_server.py, ``--delay`` seconds per call): every one is answered, and the record
   (``--record``) holds each exactly once: its line in requests.jsonl and its episode's candidates.
2. A client that disconnects: a Best-of-8 request whose client gives up after 0.5 s; the stand-in's own
   request log shows how many of the 8 internal calls were made.
3. A full queue: with every place taken (``--concurrency 2 --queue 2``, four slow requests in), 20 more
   requests are answered 429; their latency (connect to answer, median and largest) against the 100 ms goal.

Prints the figures; exits 1 if a check fails, 2 if the whole run takes longer than ``--time-limit`` seconds.
Usage: python scripts/serve_load.py [--requests 64] [--delay 0.02] [--time-limit 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai  # noqa: E402

from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402
from tests.serve_helpers import fake_config, request, running_server  # noqa: E402

PROBLEM = [{"role": "user", "content": "What is 1+1?"}]
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    """Print one check's outcome; remember a failure."""
    print(f"  [{'ok' if ok else 'FAILED'}] {what}")
    if not ok:
        failures.append(what)


def concurrent_requests(n: int, delay: float, folder: Path) -> None:
    """Part 1: ``n`` requests at once; all answered, each recorded once."""
    with FakeOpenAIServer(delay_s=delay) as stand_in:
        config = fake_config(stand_in.url, record=str(folder), concurrency=8, queue=n, endpoint_concurrency=8)
        with running_server(config) as srv:
            api = openai.OpenAI(base_url=srv.url(), api_key="unused", max_retries=0, timeout=60)
            replies: list = [None] * n
            seconds: list[float] = [0.0] * n
            start = threading.Barrier(n)

            def one(i: int) -> None:
                start.wait()
                t0 = time.perf_counter()
                replies[i] = api.chat.completions.create(model="coba", messages=PROBLEM)
                seconds[i] = time.perf_counter() - t0

            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
        calls = len(stand_in.requests)
    ids = [r.id for r in replies if r is not None]
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    episodes = [json.loads(x) for f in sorted(folder.glob("episodes-n*.jsonl")) for x in f.read_text().splitlines()]
    per_item: dict[str, int] = {}
    for rec in episodes:
        per_item[rec["item_id"]] = per_item.get(rec["item_id"], 0) + 1
    print(f"1. {n} concurrent requests, stand-in {delay * 1000:g} ms per call: all answered in {wall:.2f} s "
          f"(per request median {statistics.median(seconds):.3f} s, largest {max(seconds):.3f} s); "
          f"{calls} internal calls")
    check(len(ids) == n and len(set(ids)) == n, f"{len(set(ids))} distinct answers of {n}")
    check(sorted(r["request_id"] for r in lines) == sorted(ids), f"requests.jsonl: {len(lines)} lines, one per "
          f"request, none missing, none twice")
    check(sorted(per_item) == sorted(ids) and all(k == 2 for k in per_item.values()),
          f"episodes: {len(per_item)} requests x 2 candidates ({len(episodes)} lines), none missing, none twice")
    check(sum(len(r["path"]) - 1 for r in lines) == calls, "every internal call the stand-in served is in a path")


def disconnecting_client(folder: Path) -> None:
    """Part 2: the client of a Best-of-8 request goes away after 0.5 s."""
    with FakeOpenAIServer(delay_s=0.2) as stand_in:
        config = fake_config(stand_in.url, also_allow=("bon8_majority",), record=str(folder))
        with running_server(config) as srv:
            try:
                request("POST", srv.url() + "/chat/completions", timeout=0.5,
                        json_body={"model": "bon8_majority", "messages": PROBLEM})
            except TimeoutError:
                pass
            left = time.monotonic()
            while not (folder / "requests.jsonl").exists() and time.monotonic() < left + 30:
                time.sleep(0.02)
            stopped = time.monotonic() - left
        (line,) = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
        made = len(stand_in.requests)
    print(f"2. a client gone after 0.5 s (stand-in 200 ms per call): {made} of Best-of-8's 8 internal calls made; "
          f"the request ended {stopped:.2f} s after the client left, recorded as {line['status']!r}")
    check(made < 8 and line["status"] == "cancelled" and sum(s["action"] != "STOP" for s in line["path"]) == made,
          "the stand-in's log stops after the call in flight")


def full_queue() -> None:
    """Part 3: every place taken; 20 more requests are refused with 429."""
    with FakeOpenAIServer(delay_s=1.0) as stand_in:
        with running_server(fake_config(stand_in.url, concurrency=2, queue=2)) as srv:
            url = srv.url() + "/chat/completions"
            holders = [threading.Thread(target=request, args=("POST", url),
                                        kwargs={"json_body": {"model": "coba", "messages": PROBLEM}})
                       for _ in range(4)]
            for t in holders:
                t.start()
            while request("GET", srv.url().removesuffix("/v1") + "/health").json()["queued"] < 2:
                time.sleep(0.01)
            statuses, ms = [], []
            for _ in range(20):
                t0 = time.perf_counter()
                statuses.append(request("POST", url, json_body={"model": "coba", "messages": PROBLEM}).status_code)
                ms.append((time.perf_counter() - t0) * 1000)
            for t in holders:
                t.join()
    print(f"3. queue full (2 running, 2 waiting): 20 requests answered {sorted(set(statuses))} in median "
          f"{statistics.median(ms):.1f} ms, largest {max(ms):.1f} ms")
    check(all(s == 429 for s in statuses) and max(ms) < 100, "every one 429 within 100 ms")


def main() -> int:
    """Run the three parts; 0 if every check passed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.02, help="stand-in seconds per internal call")
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    watchdog = threading.Timer(args.time_limit, lambda: (print(f"time limit of {args.time_limit:g} s reached",
                                                               flush=True), os._exit(2)))
    watchdog.daemon = True
    watchdog.start()
    print(f"coba serve load on loopback (load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        concurrent_requests(args.requests, args.delay, Path(tmp) / "load")
        disconnecting_client(Path(tmp) / "gone")
    full_queue()
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
