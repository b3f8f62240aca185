"""What the bench's statistics cost beside the replay: the paired tests, the 95% intervals, the verifier diagnostics.

Builds the ``paper`` simulation profile with every dataset's ``n_items`` x FACTOR (``scripts/bench_scale.py``'s
pools: x1 = 3,129 episodes, x32 = 100,128 episodes x 16 candidates), replays the paper's main table on it (the
batched replay), then times, in this one process and on the same records: the paired bootstrap of every pair
(``eval.bootstrap.pairwise``), the 95% intervals of every macro figure (``eval.intervals.bootstrap_intervals``:
the same resamples, every metric, per dataset too) and the verifier diagnostics (``pools.verifier_quality``), and
prints each in seconds and as a ratio to the replay.

    python scripts/time_statistics.py --factor 32 --dir /tmp/scale     # pools kept (and reused) in /tmp/scale

Figures and the machine load at the time go in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    """Time the statistics on one simulated pool and print the figures."""
    from scripts.bench_scale import build_pool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=int, default=32, help="n_items multiplier of the paper profile (default 32)")
    parser.add_argument("--dir", default=None, help="folder for the simulated pools (default: a temporary one)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        run(build_pool(folder, args.factor), args.resamples)
    return 0


def run(pool_dir: Path, resamples: int) -> None:
    """Replay the main table on ``pool_dir`` and time each statistic on its records."""
    from agents.registry import default_bench_policies, make_policy
    from coba_env.compiled import compile_pool
    from eval import bootstrap
    from eval.intervals import bootstrap_intervals
    from eval.runner import run_policies
    from pools.store import load_pool
    from pools.verifier_quality import verifier_diagnostics

    pool = load_pool(pool_dir)
    compiled = compile_pool(pool)
    names = default_bench_policies()
    t0 = time.perf_counter()
    run = run_policies([make_policy(n) for n in names], compiled, progress=False, workers=1)
    ran = [r.name for r in run.runs if r.applicable]
    t1 = time.perf_counter()
    bootstrap.pairwise(run.records, ran, resamples=resamples)
    t2 = time.perf_counter()
    bootstrap_intervals(run.records, ran, resamples=resamples)
    t3 = time.perf_counter()
    import sklearn.metrics  # noqa: F401  (imported once per process: timed apart from the diagnostics)
    t_import = time.perf_counter()
    verifier_diagnostics(pool, compiled.episode_ids)
    t4 = time.perf_counter()
    replay = t1 - t0
    print(f"pool {pool_dir.name}: {compiled.n_episodes} episodes x {len(ran)} policies, {resamples} resamples; "
          f"load {os.getloadavg()[0]:.1f}")
    for what, seconds in (("replay (batched, 1 worker)", replay), ("paired bootstrap, every pair", t2 - t1),
                          ("95% intervals, every metric", t3 - t2), ("import sklearn.metrics", t_import - t3),
                          ("verifier diagnostics", t4 - t_import)):
        print(f"  {what:<30} {seconds:7.2f} s  {seconds / replay:5.2f} x replay")


if __name__ == "__main__":
    sys.exit(main())
