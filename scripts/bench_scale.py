"""``coba bench`` time and memory against pool size, and replay throughput single vs batched.

Builds the ``paper`` simulation profile with every dataset's ``n_items`` x 1, x 4 and x 32 (3,129 / 12,516 /
100,128 episodes x 16 candidates; ``coba pools simulate``), runs ``coba bench`` on each as a subprocess and
prints its wall time, peak RSS (of the bench process and its children, from ``os.wait4``) and the per-stage
seconds from its ``results.json``. Then replays every registered policy on the x4 pool in this process, one
episode at a time and batched, and prints episode-policies per second and their ratio.

    python scripts/bench_scale.py                       # pools in a temporary folder, removed at the end
    python scripts/bench_scale.py --dir /tmp/scale      # pools kept (and reused) in /tmp/scale
    python scripts/bench_scale.py --sizes 1,4 --no-throughput
    python scripts/bench_scale.py --sizes 320 --pool-dir runs/x320/pool --dir /tmp/s320 --no-throughput
                                                        # the 1,001,280-episode bench on a pool already simulated

Figures and the machine load at the time go in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("pool_s", "compile_s", "replay_s", "metrics_s", "bootstrap_s", "tables_s", "figures_s", "episodes_s")


def coba(*args: str) -> list[str]:
    """The command line running this checkout's ``coba``."""
    return [sys.executable, "-m", "coba_cli.main", *args]


def child_env() -> dict[str, str]:
    """The environment of a subprocess: this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def scaled_profile(scale: int, folder: Path) -> Path:
    """The paper profile with n_items x ``scale``, named ``paper_x<scale>``, written into ``folder``."""
    profile = json.loads((ROOT / "pools/simulate/profiles/paper.json").read_text())
    profile["name"] = f"paper_x{scale}"
    for dataset in profile["datasets"].values():
        dataset["n_items"] *= scale
    path = folder / f"paper_x{scale}.json"
    path.write_text(json.dumps(profile, indent=1))
    return path


def build_pool(folder: Path, factor: int) -> Path:
    """The paper profile with n_items x ``factor``, simulated into ``folder/x<factor>`` (reused if present)."""
    out = folder / f"x{factor}"
    if (out / "manifest.json").exists():
        return out
    path = scaled_profile(factor, folder)
    subprocess.run(coba("pools", "simulate", "--profile", str(path), "--out", str(out)), check=True,
                   env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def run_measured(cmd: list[str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds (user + system), peak RSS in GB of the process tree, exit status) of ``cmd``."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (its peak RSS), unlike RUSAGE_CHILDREN
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace"))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1e6, code  # ru_maxrss: KiB on Linux


def bench_sizes(folder: Path, sizes: list[int], extra: list[str], pool_dir: Path | None = None) -> None:
    """Print one row per pool size: episodes, wall time, peak RSS and the bench's own stage timings; ``pool_dir``
    (one size only) is the pool of that size, already simulated (a pool too big to simulate on each run)."""
    print("| pool | episodes | wall s | CPU s | peak RSS GB | " + " | ".join(s[:-2] for s in STAGES) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(STAGES))
    for factor in sizes:
        pool = pool_dir or build_pool(folder, factor)
        out = folder / f"bench-x{factor}"
        wall, cpu, rss, code = run_measured(coba("bench", "--pool", str(pool), "--out", str(out), "--no-progress",
                                            *extra))
        if code:
            print(f"| x{factor} | coba bench failed (exit {code}) |")
            continue
        results = json.loads((out / "results.json").read_text())
        timings = results.get("meta", {}).get("timings", {})
        episodes = json.loads((pool / "manifest.json").read_text()).get("counts", {}).get("episodes", "?")
        cells = " | ".join(f"{timings.get(s, float('nan')):.1f}" for s in STAGES)
        print(f"| x{factor} | {episodes} | {wall:.1f} | {cpu:.1f} | {rss:.2f} | {cells} |", flush=True)


def throughput(pool_dir: Path) -> None:
    """Replay every registered policy on ``pool_dir`` single and batched; print episode-policies per second."""
    sys.path.insert(0, str(ROOT))
    from agents.registry import list_policies, make_policy
    from coba_env.compiled import compile_pool
    from eval.runner import replay_policy
    from pools.store import load_pool

    pool = compile_pool(load_pool(pool_dir))
    pool.episode_rows()  # the one-episode env's rows: built once, not timed (the bench builds them once too)
    names = list_policies()
    rates = {}
    for mode in ("single", "batched"):
        start = time.perf_counter()
        done = sum(len(replay_policy(make_policy(n), pool, replay=mode).records) for n in names)
        rates[mode] = done / (time.perf_counter() - start)
    print(f"\nreplay throughput on {pool_dir.name} ({pool.n_episodes} episodes x {len(names)} policies, one "
          f"process): single {rates['single']:,.0f} episode-policies/s, batched {rates['batched']:,.0f} "
          f"episode-policies/s, ratio {rates['batched'] / rates['single']:.1f}x")


def main() -> int:
    """Parse arguments, run the measurements, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="folder for the pools and bench outputs "
                        "(kept; pools already there are reused); default: a temporary folder")
    parser.add_argument("--sizes", default="1,4,32", help="n_items factors, comma-separated (default 1,4,32)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the single vs batched replay")
    parser.add_argument("--throughput-size", type=int, default=4,
                        help="n_items factor of the pool the single vs batched replay runs on (default 4)")
    parser.add_argument("--pool-dir", type=Path, default=None, help="the pool of the one size in --sizes, "
                        "already simulated (e.g. the paper profile x320), instead of simulating it into --dir; "
                        "default: none")
    parser.add_argument("--bench-args", default="", help="extra `coba bench` arguments, e.g. '--workers 2'")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        parser.error("--sizes must list positive integers")
    if args.pool_dir is not None and (len(sizes) != 1 or not (args.pool_dir / "manifest.json").is_file()):
        parser.error("--pool-dir takes a pool folder (with manifest.json) and exactly one size in --sizes")
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"CPUs: {len(os.sched_getaffinity(0))}\n")
    with tempfile.TemporaryDirectory(prefix="coba-scale-") as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        bench_sizes(folder, sizes, args.bench_args.split(), args.pool_dir)
        if not args.no_throughput:
            throughput(build_pool(folder, args.throughput_size))
    print(f"\nload average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
