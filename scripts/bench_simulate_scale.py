"""``coba pools simulate`` wall time and peak memory at a scale of the paper profile.

Writes the ``paper`` profile with every dataset's ``n_items`` x ``--scale`` (x320: 1,001,280 episodes x 16
candidates) to a profile file, runs ``coba pools simulate`` on it as a subprocess and prints its wall time and
peak RSS (``os.wait4``), with the machine's load before and after. The pool goes to a temporary folder
(removed at the end) unless ``--keep DIR``. With ``--against TREE`` (another checkout, e.g. main's, with its
own ``coba``) the same profile is simulated by that tree too, right after, and the script prints both runs,
their ratios and whether every file of the two pools is byte-identical.

    python scripts/bench_simulate_scale.py --scale 32
    python scripts/bench_simulate_scale.py --scale 32 --against /tmp/main-tree
    python scripts/bench_simulate_scale.py --scale 320 --keep runs/sim_x320   # ~3 GB (old code: ~19 GB)

Figures and the load go in docs/PERFORMANCE.md; ``scripts/compare_pool_tables.py`` checks a kept pool
against another one table by table.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.bench_scale import scaled_profile  # noqa: E402  (this checkout first on sys.path)


def run_measured(cmd: list[str], tree: Path = ROOT) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in GB, exit status) of ``cmd`` run from the checkout ``tree``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1e6, os.waitstatus_to_exitcode(status)


def simulate(tree: Path, profile: Path, seed: int, out: Path) -> tuple[float, float]:
    """Run ``coba pools simulate`` of checkout ``tree``; (wall seconds, peak RSS GB). Exits on failure."""
    cmd = [sys.executable, "-m", "coba_cli.main", "pools", "simulate", "--profile", str(profile), "--seed", str(seed),
           "--out", str(out), "--force"]
    load = os.getloadavg()[0]
    wall, peak_gb, code = run_measured(cmd, tree)
    if code != 0:
        sys.exit(f"coba pools simulate ({tree}) exited {code}")
    print(f"{tree}: wall {wall:.1f} s, peak RSS {peak_gb:.2f} GB (load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, {len(os.sched_getaffinity(0))} CPUs)")
    return wall, peak_gb


def same_files(a: Path, b: Path) -> list[str]:
    """Names of the pool files (Parquet tables and manifest.json) that differ between folders ``a`` and ``b``."""
    names = sorted(p.name for p in a.iterdir() if p.suffix in (".parquet", ".json"))
    return [n for n in names if not (b / n).exists() or not filecmp.cmp(a / n, b / n, shallow=False)]


def main() -> int:
    """Simulate the scaled profile (and with ``--against``, with the other tree too) and print the figures."""
    parser = argparse.ArgumentParser(description="Time coba pools simulate at a scale of the paper profile.")
    parser.add_argument("--scale", type=int, default=32, help="n_items multiplier of every dataset (default: 32)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default: 0)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the pool to DIR (replaced if it is a pool) and keep it; default: a temporary "
                        "folder, removed")
    parser.add_argument("--against", type=Path, default=None, metavar="TREE",
                        help="another checkout to run on the same profile (its pool goes to a temporary folder)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_simulate_"))
    try:
        out = args.keep if args.keep is not None else tmp / "pool"
        profile = scaled_profile(args.scale, tmp)
        wall, peak = simulate(ROOT, profile, args.seed, out)
        counts = json.loads((out / "manifest.json").read_text())["counts"]
        print(f"paper x{args.scale}: {counts['episodes']:,} episodes, {counts['candidates']:,} candidates, "
              f"{counts['verifications']:,} verifier rows")
        if args.against is not None:
            other_wall, other_peak = simulate(args.against.resolve(), profile, args.seed, tmp / "against")
            differ = same_files(out, tmp / "against")
            print(f"this tree / {args.against}: wall {wall / other_wall:.2f}x, peak RSS {peak / other_peak:.2f}x; "
                  f"files {'all byte-identical' if not differ else 'DIFFER: ' + ', '.join(differ)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
