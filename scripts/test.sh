#!/usr/bin/env bash
# Set everything up (creating .venv if missing) and run the checks: ruff, then the pytest suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k env -x`. scripts/quick_check.sh runs this script
# with fewer extras (COBA_TEST_EXTRAS) and pytest arguments of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# ray: tests/test_ray_*.py start a local Ray cluster; serve: tests/test_serve*.py run `coba serve`;
# server-test: the real llama.cpp server of tests/llama_server.py (compiled once, see scripts/setup.sh)
COBA_EXTRAS="${COBA_TEST_EXTRAS:-dev,server-test,ray,serve}" source scripts/setup.sh
bash scripts/setup_browser.sh  # Chromium for the report.html test (tests/test_report_html.py)
echo "== setup done in $((SECONDS - started)) s"
echo "== ruff check ."
ruff check .
echo "== pytest $*"
tests_started=$SECONDS
# On every core (pytest-xdist), whole test files per worker (--dist loadfile): a module's fixtures (a local Ray
# cluster, the llama.cpp server, a bench folder several tests read) are built once per worker that runs the file,
# as in a serial run. --no-loadscope-reorder keeps the order tests/conftest.py gives under xdist, costliest files
# first (tests/file_order.py), so no long file starts last on one worker while the other idles. One BLAS/OpenMP
# thread per worker: two workers on two cores are already one process per core, and the idle threads of numpy's
# OpenBLAS and torch's OpenMP pools spin, burning the CPU the other worker needs. `-n 0` (given last) runs serially.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# pytest exits 5 when it collected no test; that is a failure here too.
python -m pytest -p no:cacheprovider -n auto --dist loadfile --no-loadscope-reorder "$@"
echo "== pytest done in $((SECONDS - tests_started)) s; all checks in $((SECONDS - started)) s"
