"""``coba bench``'s pool stage alone on a stored pool: validation a batch at a time, diagnostics, the light pass.

Runs ``eval.bench._prepare_pool`` (what a replay-env bench does before the replay: ``pools.stored_validation``'s
pass with the verifier diagnostics and estimated tokens, then ``coba_env.chunked_compile.scan_pool``) and prints
each part's wall seconds and the peak RSS (``getrusage`` ru_maxrss), one line each.

    python scripts/bench_pool_stage.py runs/x320/pool
    (git archive c4e69fa | tar -x -C /tmp/base) && python /tmp/base/scripts/bench_pool_stage.py runs/x320/pool
        # the same stage before (this script copied there: load_pool whole, diagnostics, scan)
    /usr/bin/time -v python scripts/bench_pool_stage.py runs/x320/pool   # the same peak, from outside

Figures and the load go in docs/PERFORMANCE.md ("Streaming, first steps").
"""

from __future__ import annotations

import argparse
import functools
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import coba_env.chunked_compile as chunked_compile  # noqa: E402  (this checkout first on sys.path)
from eval import bench  # noqa: E402


def cpu_s() -> float:
    """This process's CPU seconds so far (user + system: on a busy machine the wall time is mostly waiting)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_gb() -> float:
    """This process's peak RSS so far, in GB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def timed(module: object, name: str, laps: dict[str, tuple[float, float, float]]) -> None:
    """Wrap ``module.name`` so that its wall and CPU seconds and the peak RSS after it land in ``laps[name]``."""
    inner = getattr(module, name, None)
    if inner is None:  # an older checkout without it (the same script times the code before and after)
        return

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        t0, c0 = time.perf_counter(), cpu_s()
        try:
            return inner(*args, **kwargs)
        finally:
            wall, cpu, peak = laps.get(name, (0.0, 0.0, 0.0))
            laps[name] = (wall + time.perf_counter() - t0, cpu + cpu_s() - c0, peak_gb())

    setattr(module, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", help="a pool directory")
    args = parser.parse_args(argv)
    laps: dict[str, tuple[float, float, float]] = {}
    try:
        import pools.stored_validation as stored_validation

        timed(stored_validation, "read_stored_pool", laps)
    except ImportError:  # before the batched validation: the whole load, validation and diagnostics
        for name in ("resolve_pool", "verifier_diagnostics", "estimated_tokens"):
            timed(bench, name, laps)
    timed(chunked_compile, "scan_pool", laps)
    t0, c0, before = time.perf_counter(), cpu_s(), peak_gb()
    prepared = bench._prepare_pool(args.pool, 0, None, None, chunked=True)
    total, cpu = time.perf_counter() - t0, cpu_s() - c0
    print(f"pool {args.pool}: {len(prepared.scan.episodes)} episodes; peak RSS before the stage {before:.2f} GB")
    for name, (wall, cpu_lap, peak) in laps.items():
        print(f"{name}: {wall:.1f} s wall, {cpu_lap:.1f} s CPU, peak RSS so far {peak:.2f} GB")
    print(f"pool stage: {total:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak_gb():.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
