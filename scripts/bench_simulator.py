"""Time the pool simulator: generation of a profile's pool (and, optionally, saving it).

    .venv/bin/python scripts/bench_simulator.py                 # paper profile, 5 runs
    .venv/bin/python scripts/bench_simulator.py --profile tiny --runs 20 --save

Prints one line per measurement with the median and the best run; the figures quoted in
docs/SIMULATOR.md come from this script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from pools.simulate import load_profile, simulate_pool
from pools.store import save_pool


def main() -> None:
    """Parse arguments, time the runs and print the summary."""
    parser = argparse.ArgumentParser(description="Time simulate_pool (and save_pool) for a profile.")
    parser.add_argument("--profile", default="paper", help="built-in profile name or profile JSON path")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first run; run i uses seed + i")
    parser.add_argument("--runs", type=int, default=5, help="number of timed runs (after one warm-up)")
    parser.add_argument("--save", action="store_true", help="also time save_pool to a temporary directory")
    args = parser.parse_args()

    profile = load_profile(args.profile)
    simulate_pool(profile, seed=args.seed)  # warm-up: imports, allocator, page cache
    gen, save = [], []
    for i in range(args.runs):
        start = time.perf_counter()
        pool = simulate_pool(profile, seed=args.seed + i)
        gen.append(time.perf_counter() - start)
        if args.save:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                save_pool(pool, Path(tmp) / "pool")
                save.append(time.perf_counter() - start)
    counts = pool.manifest["counts"]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"profile {profile.name}: {counts['episodes']} episodes, {counts['candidates']} candidates, "
          f"{counts['verifications']} verifier rows; {cpus} CPU(s) available, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"simulate_pool: median {statistics.median(gen):.2f} s, best {min(gen):.2f} s over {args.runs} runs")
    if save:
        print(f"save_pool:     median {statistics.median(save):.2f} s, best {min(save):.2f} s")


if __name__ == "__main__":
    main()
