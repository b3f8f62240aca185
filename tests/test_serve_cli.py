"""The ``coba serve`` command: refused starts (one line, exit 2) and a real process on loopback stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coba_cli.main import main
from tests.fake_openai_server import FakeOpenAIServer
from tests.serve_helpers import request

GEN, V1 = "--generator={u},gen,1.0", "--judge={u},j1,0.5"


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize("args, match", [
    (["--policy=no_such_policy", GEN, V1], r"policy 'no_such_policy': unknown policy 'no_such_policy'"),
    (["--policy=coba_light", "--allow=nope", GEN, V1], r"policy 'nope': unknown policy"),
    (["--policy=route_cheapest_coba", GEN, V1], r"routes between generators; give at least two --generator"),
    (["--policy=coba_light", GEN], r"policy 'coba_light' cannot run with these endpoints: .*cheap judge"),
    (["--policy=pool_oracle", GEN, V1], r"reads correctness labels, which a live request does not have"),
    (["--policy=coba_light", "--generator=http://127.0.0.1:9,gen,1", V1],
     r"generator endpoint http://127.0.0.1:9 \(model gen\) is not usable"),
    (["--policy=coba_light", GEN, V1, "--lambda-range=2,1"], r"--lambda-range '2,1': expected LO,HI"),
    (["--policy=coba_light", GEN, V1, "--lambda-range=0,-1"], r"--lambda-range '0,-1': expected a number >= 0"),
    (["--policy=coba_light", GEN, V1, "--dataset= "], r"--dataset: .*expected a non-empty string"),
    (["--policy=coba_light", "--allow=coba=coba_balanced", GEN, V1], r"its name 'coba' is taken"),
])
def test_a_start_that_cannot_serve_exits_2_with_one_line(server, args, match, capsys):
    assert main(["serve", "--port=0", *[a.replace("{u}", server.url) for a in args]]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(match, err), err
    assert server.requests == []


def test_a_bad_key_in_the_environment_is_one_line(server, monkeypatch, capsys):
    monkeypatch.setenv("COBA_SERVE_API_KEY", "two\nlines")
    assert main(["serve", "--policy=coba_light", GEN.format(u=server.url), V1.format(u=server.url)]) == 2
    assert "$COBA_SERVE_API_KEY: expected the key as one line" in capsys.readouterr().err


def test_a_taken_port_is_one_line(server, capsys):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--policy=coba_light", GEN.format(u=server.url), V1.format(u=server.url),
                     f"--port={port}"]) == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in capsys.readouterr().err


def test_record_refuses_a_folder_of_other_files(server, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["serve", "--policy=coba_light", GEN.format(u=server.url), V1.format(u=server.url),
                 "--record", str(tmp_path)]) == 2
    assert "holds notes.txt, which coba serve did not write" in capsys.readouterr().err


def test_the_command_serves_on_loopback_logs_without_tracebacks_and_stops_on_sigterm(server, tmp_path):
    record = tmp_path / "rec"
    cmd = [sys.executable, "-m", "coba_cli.main", "serve", "--policy=coba_light", GEN.format(u=server.url),
           V1.format(u=server.url), "--port=0", "--sample-max-tokens=64", "--record", str(record),
           "--max-body-bytes=2048"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    log: list[str] = []
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            log.append(line)
            found = re.search(r"listening on (http://[\d.]+:\d+)", line)
            url = found and found.group(1)
        assert url and url.startswith("http://127.0.0.1:"), "".join(log)  # loopback unless told otherwise
        good = request("POST", url + "/v1/chat/completions",
                       json_body={"model": "coba", "messages": [{"role": "user", "content": "1+1?"}]})
        bad = [request("POST", url + "/v1/chat/completions", content=raw, timeout=60)
               for raw in (b"{oops", b"x" * 4096, b'{"model": "coba", "messages": [{"role": "user"}], "n": 3}')]
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    log.append(out)
    text = "".join(log)
    assert good.status_code == 200 and [b.status_code for b in bad] == [400, 413, 400]
    assert "Traceback" not in text and "Exception" not in text, text
    assert proc.returncode == 143 and "coba: terminated (SIGTERM)" in text
    (line,) = [json.loads(x) for x in (record / "requests.jsonl").read_text().splitlines()]
    assert line["request_id"] == good.json()["id"] and line["status"] == "ok"
