#!/usr/bin/env bash
# Create .venv if missing and install coba-env with its dev tools. Sourced by scripts/test.sh and scripts/bench.sh.
#
# torch: the pinned CPU build (torch==2.13.0) is installed first so that no CUDA packages are downloaded on a
# CPU machine. For a CUDA build, set COBA_TORCH_SPEC before running, e.g.
#   COBA_TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" bash scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
# Reinstall only when the project's requirements changed since the last setup.
stamp=".venv/.coba-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install -q ${COBA_TORCH_SPEC:-torch==2.13.0}
    .venv/bin/python -m pip install -q -e ".[dev]"
    rm -f .venv/.coba-setup-*
    touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
