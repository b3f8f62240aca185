#!/usr/bin/env bash
# The quick check of an install: scripts/test.sh without the server-test extra (nothing is compiled: no
# llama.cpp), skipping the tests that need the real llama.cpp server (marked `real_server` by
# tests/llama_server.py), on every core. A few minutes on 2 cores; docs/PERFORMANCE.md has the measured time.
# scripts/test.sh (what CI runs) still runs everything. Extra arguments go to pytest, e.g. `-x`.
set -euo pipefail
cd "$(dirname "$0")/.."
# scripts/test.sh runs pytest on every core (pytest-xdist), costliest test files first; see its comments.
COBA_TEST_EXTRAS="dev,ray,serve" exec bash scripts/test.sh -m "not real_server" "$@"
