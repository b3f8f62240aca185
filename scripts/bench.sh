#!/usr/bin/env bash
# Set everything up (creating .venv if missing) and run the main job: `coba bench` on the embedded default pool.
# Extra arguments go to `coba bench`, e.g. `bash scripts/bench.sh --pool path/to/pool --out my-report`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
coba bench --out bench-out "$@"
# The setup put .venv/bin on this script's PATH only; say how to get `coba` in the caller's shell.
echo "coba is installed in .venv: run 'source .venv/bin/activate' to get the coba command on your PATH"
echo "(or call .venv/bin/coba directly), e.g. coba bench --help"
