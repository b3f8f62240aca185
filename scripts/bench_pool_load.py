"""Time ``load_pool`` (Parquet read + full validation) on a synthetic pool of the paper's size.

    .venv/bin/python scripts/bench_pool_load.py [--text-chars 200] [--repeats 5]

Builds 3,129 episodes x 16 candidates (1,043 items x 3 generators, V1 on every candidate, V2 on ~30%,
V3 on every candidate) with ``tests/conftest.py``'s ``make_synthetic_pool``, saves it to a temporary
folder and prints the load and validation times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pools.store import load_pool, save_pool  # noqa: E402
from pools.validate import validate_pool  # noqa: E402
from tests.conftest import make_synthetic_pool  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text-chars", type=int, default=200, help="characters of solution text per candidate")
    parser.add_argument("--repeats", type=int, default=5, help="timed loads (the median is reported)")
    args = parser.parse_args()

    pool = make_synthetic_pool(text_chars=args.text_chars)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_pool(pool, Path(tmp) / "pool")
        size_mb = sum(f.stat().st_size for f in path.iterdir()) / 1e6
        load_pool(path)  # warm-up: imports and file cache
        loads, validations = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            loaded = load_pool(path, validate=False)
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            validate_pool(loaded, source=str(path))
            validations.append(time.perf_counter() - start)
    read, check = statistics.median(loads), statistics.median(validations)
    print(f"pool: {len(pool.episodes)} episodes x {pool.n_candidates} candidates, "
          f"{len(pool.verifications)} verifications, {size_mb:.1f} MB on disk (text {args.text_chars} chars)")
    print(f"load_pool, median of {args.repeats}: read {read:.3f} s + validate {check:.3f} s = {read + check:.3f} s")


if __name__ == "__main__":
    main()
