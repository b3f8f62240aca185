"""The per-request overhead of ``coba serve`` over its internal calls, on loopback (goal: < 5 ms median).

``coba serve`` runs as its own process (the command, as users start it) over a stand-in model server
(tests/fake_openai_server.py, answering at once) in this process. One client sends ``--requests`` requests
one after another on a kept-alive connection (after ``--warmup``); for each, the overhead is the client's
wall time from sending to the whole answer read, less the internal calls' own latencies (the path's
``latency_s``, each timed by the server's model client around its HTTP exchange). So it counts everything the
proxy adds: HTTP in and out, request checks, the queue hop to a worker thread, the policy's decisions and
the env's steps, grading, and writing the record (``--record``).

Prints the median, 90th percentile and mean overhead, the internal calls' time per request, and the serve
process's CPU time per request (less sensitive than wall time to other jobs on a shared machine).
Usage: python scripts/serve_overhead.py [--policy coba_light] [--requests 300] [--warmup 30] [--record]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402


def start_serve(stand_in: str, policy: str, folder: Path, record: bool) -> tuple[subprocess.Popen, str, int]:
    """``coba serve`` as a process on a free loopback port, its log in ``folder``; returns (process, host, port)."""
    cmd = [sys.executable, "-m", "coba_cli.main", "serve", f"--policy={policy}", f"--generator={stand_in},gen,1.0",
           f"--judge={stand_in},j1,0.5", "--port=0", "--sample-max-tokens=64",
           *(["--record", str(folder / "rec")] if record else [])]
    log = folder / "serve.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=sink, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"listening on http://([\d.]+):(\d+)", log.read_text())
        if found:
            return proc, found.group(1), int(found.group(2))
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"coba serve did not start:\n{log.read_text()[-2000:]}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all threads (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(host: str, port: int, n: int) -> list[tuple[float, float, int]]:
    """(client seconds, internal calls' seconds, internal calls) of ``n`` requests on one connection."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    body = json.dumps({"model": "coba", "messages": [{"role": "user", "content": "What is 1+1?"}]}).encode()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        data = answer.read()
        seconds = time.perf_counter() - t0
        if answer.status != 200:
            raise SystemExit(f"HTTP {answer.status}: {data[:300]!r}")
        calls = [s for s in json.loads(data)["coba"]["path"] if s["action"] != "STOP"]
        out.append((seconds, sum(s["latency_s"] for s in calls), len(calls)))
    conn.close()
    return out


def main() -> int:
    """Measure and print the overhead figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="coba_light")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--record", action="store_true", help="serve with --record (a temporary folder)")
    args = parser.parse_args()
    with FakeOpenAIServer() as stand_in, tempfile.TemporaryDirectory() as tmp:
        proc, host, port = start_serve(stand_in.url, args.policy, Path(tmp), args.record)
        try:
            measure(host, port, args.warmup)
            cpu = cpu_seconds(proc.pid)
            rows = measure(host, port, args.requests)
            cpu = cpu_seconds(proc.pid) - cpu
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    overhead = sorted((total - calls) * 1000 for total, calls, _ in rows)
    inner = statistics.median(calls * 1000 for _, calls, _ in rows)
    print(f"coba serve overhead over its internal calls ({args.policy}, {statistics.median(n for *_, n in rows):g} "
          f"calls per request, record {'on' if args.record else 'off'}; {args.requests} requests after "
          f"{args.warmup} warm-up; load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    print(f"  overhead per request: median {statistics.median(overhead):.2f} ms, 90th percentile "
          f"{overhead[int(0.9 * len(overhead))]:.2f} ms, mean {statistics.fmean(overhead):.2f} ms")
    print(f"  internal calls per request (stand-in answering at once): median {inner:.2f} ms")
    print(f"  CPU time of the coba serve process per request (all its threads, its side of the internal calls "
          f"included): {cpu / args.requests * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
