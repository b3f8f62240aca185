#!/usr/bin/env bash
# Create .venv if missing and install coba-env with its dev tools. Sourced by scripts/test.sh and scripts/bench.sh.
#
# torch: the pinned CPU build (torch==2.13.0) is installed first so that no CUDA packages are downloaded on a
# CPU machine. For a CUDA build, set COBA_TORCH_SPEC before running, e.g.
#   COBA_TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" bash scripts/test.sh
#
# The server-test extra (the real OpenAI-compatible server of tests/llama_server.py) pins llama-cpp-python, which
# has no binary wheel on PyPI: the first install compiles llama.cpp from source (~15 CPU-minutes, 8-12 min on 2
# cores), later installs reuse pip's wheel cache. The build skips llama.cpp's tools, tests, examples and llava;
# set CMAKE_ARGS yourself to override (e.g. add -DGGML_CUDA=on), CMAKE_BUILD_PARALLEL_LEVEL for the job count.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
# Reinstall only when the project's requirements changed since the last setup with the same extras.
# COBA_EXTRAS picks the extras: scripts/test.sh asks for "dev,server-test", scripts/bench.sh for "dev" only.
# One stamp per extras set, .coba-setup-<extras>.<requirements hash>, so alternating the two scripts
# reinstalls nothing.
extras="${COBA_EXTRAS:-dev}"
extras_tag="$(printf '%s' "$extras" | tr -c 'A-Za-z0-9,_-' '_')"
stamp=".venv/.coba-setup-$extras_tag.$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install -q ${COBA_TORCH_SPEC:-torch==2.13.0}
    echo "setup: installing coba-env[$extras]"
    case ",$extras," in *,server-test,*)
        echo "setup: the server-test extra compiles llama-cpp-python from source on a first install (8-12 min on 2 cores)";;
    esac
    CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        .venv/bin/python -m pip install -q -e ".[$extras]"
    rm -f .venv/.coba-setup-"$extras_tag".* .venv/.coba-setup-????????????????  # and the older one-stamp name
    touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
