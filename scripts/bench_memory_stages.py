"""Where ``coba bench``'s memory goes: the process's RSS before and after each stage, and its peak so far.

Runs ``eval.bench.run_bench`` in this process on a pool folder with each stage function wrapped (pool load and
validation, compile, cost estimates, verifier diagnostics, replay, analysis, episode files (written whole, or
joined from a streamed replay's pieces), report) and prints one
line per stage: seconds since the start, RSS before and after (``/proc/self/status`` VmRSS) and the peak RSS so
far (``getrusage`` ru_maxrss). Bench options as ``coba bench``'s defaults, no figures, one worker (``--workers``).

    python scripts/bench_memory_stages.py runs/x32 --out /tmp/b32
    python scripts/bench_memory_stages.py runs/x320/pool --out runs/b320 --workers 2

Figures and the load go in docs/PERFORMANCE.md ("`coba bench` memory by stage").
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval import bench, report  # noqa: E402  (this checkout first on sys.path)
from eval.episode_files import EpisodePieces  # noqa: E402

#: (module, function) wrapped and timed, in the order a bench calls them.
STAGES = ((bench, "resolve_pool"), (bench, "compile_pool"), (bench, "cost_estimates"),
          (bench, "verifier_diagnostics"), (bench, "_replay"), (bench, "analyse"), (report, "write_episode_files"),
          (EpisodePieces, "join"), (report, "write_all"))


def rss_gb() -> float:
    """This process's resident set size now, in GB."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1e6


def peak_gb() -> float:
    """This process's peak resident set size so far, in GB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def wrap(module: Any, name: str, start: float) -> None:
    """Replace ``module.name`` by a function that prints the RSS around each call."""
    inner = getattr(module, name)

    @functools.wraps(inner)
    def measured(*args: Any, **kwargs: Any) -> Any:
        before = rss_gb()
        out = inner(*args, **kwargs)
        print(f"| {name} | {time.perf_counter() - start:.1f} | {before:.2f} | {rss_gb():.2f} | {peak_gb():.2f} |",
              flush=True)
        return out

    setattr(module, name, measured)


def main() -> int:
    """Parse arguments, run the bench with its stages measured, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pool", type=Path, help="the pool folder")
    parser.add_argument("--out", type=Path, required=True, help="the bench output folder (replaced)")
    parser.add_argument("--workers", type=int, default=1, help="replay worker processes (default 1; the peak "
                        "counts this process only, not forked workers)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| stage | s since start | RSS before GB | RSS after GB | peak so far GB |\n|---|---:|---:|---:|---:|")
    start = time.perf_counter()
    for module, name in STAGES:
        wrap(module, name, start)
    bench.run_bench(str(args.pool), out_dir=args.out, progress=False, quiet=True, figures=False, workers=args.workers)
    print(f"\npeak RSS {peak_gb():.2f} GB, wall {time.perf_counter() - start:.1f} s; load average after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
