#!/usr/bin/env bash
# The quick check of an install: scripts/test.sh without the server-test extra (nothing is compiled: no
# llama.cpp), skipping the tests that need the real llama.cpp server (marked `real_server` by
# tests/llama_server.py), on every core. A few minutes on 2 cores; docs/PERFORMANCE.md has the measured time.
# scripts/test.sh (what CI runs) still runs everything. Extra arguments go to pytest, e.g. `-x`.
set -euo pipefail
cd "$(dirname "$0")/.."
# One worker per core (pytest-xdist), whole test files per worker (--dist loadfile): a module's fixtures (a local
# Ray cluster, a bench folder several tests read) are built once, as in the serial run. --no-loadscope-reorder
# keeps the order tests/conftest.py gives under xdist, costliest files first (tests/file_order.py), instead of
# xdist's order by number of tests, so no long file starts last on one worker while the other idles.
# One BLAS/OpenMP thread per worker: two workers on two cores are already one process per core, and the idle
# threads of numpy's OpenBLAS and torch's OpenMP pools spin, burning CPU the other worker needs (measured:
# tests/test_ppo_protocol.py + test_masked_ppo.py took 35 s of CPU with the default 2 threads, 9 s with 1).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
COBA_TEST_EXTRAS="dev,ray,serve" exec bash scripts/test.sh -m "not real_server" -n auto --dist loadfile \
    --no-loadscope-reorder "$@"
