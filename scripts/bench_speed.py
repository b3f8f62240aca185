"""Time the whole ``coba bench`` on the simulated paper pool (3,129 episodes, every non-learned policy).

Usage::

    .venv/bin/python scripts/bench_speed.py [--workers N] [--no-figures] [--repeat R] [--out DIR]

Prints the wall-clock seconds of each run (pool resolution, replay, statistics, tables, figures and every
file written), the CPU seconds used (this process plus its worker processes) and the stage breakdown from
``results.json``. CPU seconds are the better figure on a shared machine, where wall time depends on load.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.bench import run_bench  # noqa: E402


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _pool():
    """The paper pool: ``pools.default.resolve_pool()`` when available, else the simulator directly."""
    try:
        from pools.default import resolve_pool
    except ImportError:
        from pools.simulate import simulate_pool

        return simulate_pool("paper", seed=0)
    return resolve_pool(None)


def main() -> int:
    """Run the timing and print the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=None, help="replay worker processes (default: automatic)")
    parser.add_argument("--no-figures", action="store_true", help="skip the figures")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs (the pool is resolved once per run)")
    parser.add_argument("--out", default=None, help="output directory (default: a temporary one)")
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"CPUs available: {cpus}; load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or tmp
            t0, c0 = time.perf_counter(), _cpu()
            pool = _pool()
            t_pool = time.perf_counter() - t0
            results = run_bench(pool, None, out_dir=out, progress=False, figures=not args.no_figures,
                                workers=args.workers, quiet=True)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        meta = results["meta"]
        stages = ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in meta["timings"].items())
        print(f"run {k + 1}: {wall:.1f} s wall ({cpu:.1f} s CPU) for {meta['pool']['episodes']} episodes x "
              f"{len(meta['ran'])} policies, {meta['workers']} worker(s); pool {t_pool:.1f} s; stages (s): {stages}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
