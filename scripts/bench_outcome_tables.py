"""Time and peak memory of importing and benching a large wide outcome table (issue 36, scale of models).

Writes a synthetic RouterBench-shaped table (``tests/outcome_table_factory.py``: one row per query, per model a
True/False column and a dollar-cost column) of G generators x Q queries, then runs as subprocesses, each measured
alone (wall and CPU seconds, peak RSS from ``os.wait4``):

1. ``coba pools import TABLE --format wide --columns id=id,category=category,cost={model}|cost``
2. ``coba pools inspect`` of the pool;
3. ``coba bench --env route --cost usd`` on the imported pool (its default routing policies: an 'Always
   <generator>' per generator, the oracles; the answer-comparing routers say 'not applicable').

    python scripts/bench_outcome_tables.py                          # 30 x 100,000, in a temporary folder
    python scripts/bench_outcome_tables.py --generators 20 --queries 5000 --dir /tmp/tables

Goals (issue 36): import < 60 s, bench < 120 s, < 4 GB. Figures and the machine load go in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.bench_scale import coba, run_measured  # noqa: E402  (this checkout first on sys.path)
from tests.outcome_table_factory import write_wide_outcome_table  # noqa: E402

COLUMNS = "id=id,category=category,cost={model}|cost"


def measure(folder: Path, generators: int, queries: int, suffix: str) -> None:
    """Write the table, import, inspect and bench it; print one markdown row per step."""
    start = time.perf_counter()
    table = write_wide_outcome_table(folder / f"table{suffix}", generators, queries)
    print(f"table: {table.name}, {generators} generators x {queries:,} queries, "
          f"{table.stat().st_size / 1e6:.0f} MB, written in {time.perf_counter() - start:.1f} s", flush=True)
    pool, bench = folder / "pool", folder / "bench"
    steps = {
        "coba pools import": coba("pools", "import", str(table), "--format", "wide", "--columns", COLUMNS,
                                  "--out", str(pool), "--force"),
        "coba pools inspect": coba("pools", "inspect", str(pool)),
        "coba bench --env route --cost usd": coba("bench", "--pool", str(pool), "--env", "route", "--cost", "usd",
                                                  "--out", str(bench), "--no-figures", "--no-progress"),
    }
    print("| step | wall s | CPU s | peak RSS GB |\n|---|---:|---:|---:|")
    for name, cmd in steps.items():
        wall, cpu, rss, code = run_measured(cmd)
        status = "" if code == 0 else f" (failed, exit {code})"
        print(f"| {name}{status} | {wall:.1f} | {cpu:.1f} | {rss:.2f} |", flush=True)
        if code:
            return


def main() -> int:
    """Parse arguments, measure, print the table and the load average."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generators", type=int, default=30, help="models in the table (default 30)")
    parser.add_argument("--queries", type=int, default=100_000, help="queries in the table (default 100000)")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table file (default csv)")
    parser.add_argument("--dir", type=Path, default=None, help="folder for the table, pool and bench (kept; a "
                        "bench already there stops the run); default: a temporary folder, removed at the end")
    args = parser.parse_args()
    if args.generators < 2 or args.queries < 1:
        parser.error("--generators must be >= 2 and --queries >= 1")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        measure(args.dir, args.generators, args.queries, f".{args.format}")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            measure(Path(tmp), args.generators, args.queries, f".{args.format}")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
