#!/usr/bin/env bash
# Set everything up (creating .venv if missing) and run the checks: ruff, then the pytest suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k env -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
# ray: tests/test_ray_*.py start a local Ray cluster; serve: tests/test_serve*.py run `coba serve`
COBA_EXTRAS="dev,server-test,ray,serve" source scripts/setup.sh
bash scripts/setup_browser.sh  # Chromium for the report.html test (tests/test_report_html.py)
echo "== ruff check ."
ruff check .
echo "== pytest"
# pytest exits 5 when it collected no test; that is a failure here too.
python -m pytest -p no:cacheprovider "$@"
