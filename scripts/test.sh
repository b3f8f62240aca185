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
# pytest exits 5 when it collected no test; that is a failure here too.
python -m pytest -p no:cacheprovider "$@"
echo "== pytest done in $((SECONDS - tests_started)) s; all checks in $((SECONDS - started)) s"
