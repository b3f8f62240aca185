"""The real-server fixture notices a server that died mid-run and reports its signal and log, not connection errors.

An inner pytest run (a subprocess) starts a small stand-in server through the same ``ServerProcess`` and
report hook that ``llama_server`` uses, kills it with SIGKILL inside a test, and then starts a second test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.llama_server import describe_exit

REPO_ROOT = Path(__file__).resolve().parents[1]

STAND_IN_SERVER = textwrap.dedent('''
    import http.server, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
        def log_message(self, *args):
            pass
    print("stand-in server log line: model loaded", flush=True)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
''')

INNER_CONFTEST = textwrap.dedent('''
    import sys
    import pytest
    from tests.llama_server import ServerProcess, _free_port, pytest_runtest_makereport, require_alive  # noqa: F401

    @pytest.fixture(scope="session")
    def stand_in_process(tmp_path_factory):
        port = _free_port()
        server = ServerProcess("stand-in server", [sys.executable, "-c", {code!r}, str(port)],
                               f"http://127.0.0.1:{{port}}/v1", tmp_path_factory.mktemp("srv") / "server.log")
        server.start()
        server.wait_ready(30)
        yield server
        server.stop()

    @pytest.fixture
    def stand_in(stand_in_process):
        return require_alive(stand_in_process)
''')

INNER_TESTS = textwrap.dedent('''
    import os, signal, urllib.request

    def test_a_server_killed_mid_test(stand_in, stand_in_process):
        os.kill(stand_in_process.proc.pid, signal.SIGKILL)
        stand_in_process.proc.wait()
        urllib.request.urlopen(stand_in + "/models", timeout=2)

    def test_b_starts_after_the_death(stand_in):
        urllib.request.urlopen(stand_in + "/models", timeout=2)
''')


def test_a_dead_server_is_reported_with_its_signal_and_log(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST.format(code=STAND_IN_SERVER))
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir",
                             str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 1 error" in out, out  # the second fails in its fixture: a setup error
    # The test during which the server was killed: the death, its signal and the server's own log come first.
    assert "the server died during this test: stand-in server was killed by signal 9 (SIGKILL)" in out, out
    assert "stand-in server log line: model loaded" in out, out
    # The next test fails at once with the same cause instead of a connection error.
    assert "before this test started: stand-in server was killed by signal 9 (SIGKILL)" in out, out


def test_describe_exit_names_statuses_and_signals() -> None:
    assert describe_exit(0) == "exited with status 0"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-11) == "was killed by signal 11 (SIGSEGV)"
    assert describe_exit(-6) == "was killed by signal 6 (SIGABRT)"
