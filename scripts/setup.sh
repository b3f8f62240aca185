#!/usr/bin/env bash
# Create .venv if missing and install coba-env with its dev tools. Sourced by scripts/test.sh and scripts/bench.sh.
#
# torch: the pinned CPU build (torch==2.13.0) is installed first so that no CUDA packages are downloaded on a
# CPU machine. For a CUDA build, set COBA_TORCH_SPEC before running, e.g.
#   COBA_TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" bash scripts/test.sh
#
# The server-test extra (the real OpenAI-compatible server of tests/llama_server.py) pins llama-cpp-python, which
# has no binary wheel on PyPI: it is compiled from source (~15 CPU-minutes, 8-12 min on 2 cores) for a portable
# x86-64 baseline (GGML_NATIVE=OFF: AVX2/FMA/F16C, no AVX-512, no AMX), so the same wheel runs on any CI host;
# a native build faults on hosts whose CPU advertises AMX tiles that the virtual machine does not permit.
# The wheel is built with pip's cache off and kept in a folder of our own keyed by version and CMake arguments
# ($COBA_WHEEL_CACHE, default ~/.cache/coba-env/wheels), so a re-run reuses only a wheel built with the same
# arguments, never one pip cached from an earlier (native) build. The build skips llama.cpp's tools, tests,
# examples and llava. COBA_LLAMA_CMAKE_ARGS replaces the portable CMake arguments (e.g. "-DGGML_CUDA=on");
# CMAKE_BUILD_PARALLEL_LEVEL sets the job count.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
# The llama-cpp-python pin, read from pyproject.toml so it is written once.
LLAMA_CPP_SPEC="$(grep -o 'llama-cpp-python\[server\]==[0-9][0-9.]*' pyproject.toml | sed 's/\[server\]//')"
LLAMA_CMAKE_ARGS="${COBA_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"

# Build (once per version and CMake arguments) and install the portable llama-cpp-python wheel.
install_portable_llama_cpp() {
    local key wheel_dir wheel
    key="$(printf '%s|%s' "$LLAMA_CPP_SPEC" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)"
    wheel_dir="${COBA_WHEEL_CACHE:-$HOME/.cache/coba-env/wheels}/$key"
    wheel="$(ls "$wheel_dir"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)"
    if [ -z "$wheel" ]; then
        echo "setup: compiling $LLAMA_CPP_SPEC for a portable x86-64 baseline (8-12 min on 2 cores, once)"
        echo "setup: CMAKE_ARGS=$LLAMA_CMAKE_ARGS"
        mkdir -p "$wheel_dir.tmp"
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
            -w "$wheel_dir.tmp" "$LLAMA_CPP_SPEC"
        printf '%s\n' "$LLAMA_CMAKE_ARGS" > "$wheel_dir.tmp/CMAKE_ARGS"
        rm -rf "$wheel_dir" && mv "$wheel_dir.tmp" "$wheel_dir"
        wheel="$(ls "$wheel_dir"/llama_cpp_python-*.whl | head -n 1)"
    else
        echo "setup: reusing the portable llama-cpp-python wheel $wheel"
    fi
    # --force-reinstall: replaces any llama-cpp-python already in .venv (e.g. a native build from pip's cache).
    .venv/bin/python -m pip install -q --no-deps --force-reinstall "$wheel"
}

# Reinstall only when the project's requirements changed since the last setup with the same extras.
# COBA_EXTRAS picks the extras: scripts/test.sh asks for "dev,server-test,ray,serve", scripts/bench.sh for "dev" only.
# One stamp per extras set, .coba-setup-<extras>.<requirements hash>, so alternating the two scripts
# reinstalls nothing.
extras="${COBA_EXTRAS:-dev}"
extras_tag="$(printf '%s' "$extras" | tr -c 'A-Za-z0-9,_-' '_')"
# The stamp also covers the torch and CMake choices, so changing COBA_TORCH_SPEC or COBA_LLAMA_CMAKE_ARGS on an
# existing .venv reinstalls.
stamp=".venv/.coba-setup-$extras_tag.$( { cat pyproject.toml scripts/setup.sh; printf '%s|%s' "${COBA_TORCH_SPEC:-}" \
    "$LLAMA_CMAKE_ARGS"; } | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --no-compile --upgrade pip
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install -q --no-compile ${COBA_TORCH_SPEC:-torch==2.13.0}
    case ",$extras," in *,server-test,*)
        install_portable_llama_cpp;;
    esac
    echo "setup: installing coba-env[$extras]"
    .venv/bin/python -m pip install -q --no-compile -e ".[$extras]"
    rm -f .venv/.coba-setup-"$extras_tag".* .venv/.coba-setup-????????????????  # and the older one-stamp name
    # pip --no-compile above, then the whole venv compiled on every core at once: pip compiles file by file
    # on one core (measured: setup 61 s -> 52 s on 2 cores). compileall exits 1 (and warns) when a package ships a file
    # that is not Python 3.11 (test data); such a file is simply left as source.
    .venv/bin/python -m compileall -q -j 0 .venv/lib >/dev/null 2>&1 || true
    touch "$stamp"
fi
# Bytecode for the project's own modules (cheap when up to date). Where Python runs with PYTHONDONTWRITEBYTECODE
# set (this CI machine does), nothing writes it, and every `coba` process would compile the project's modules
# from source again (~0.25 s of CPU each: the test suite starts hundreds).
.venv/bin/python -m compileall -q -j 0 coba_env agents pools eval train coba_cli >/dev/null
export PATH="$PWD/.venv/bin:$PATH"
