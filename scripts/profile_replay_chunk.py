"""Time the batched replay of the bench's policies on one chunk of a stored pool, one process, policy by policy.

What a chunk of ``coba bench``'s streaming replay costs (``eval.chunked_replay``): the bench's own policy list and
pool scan (captured by running ``eval.bench.run_bench`` up to its replay), the first ``--episodes`` episodes
compiled as the bench compiles a chunk, then ``eval.runner.run_policies([policy], chunk, workers=1)`` per policy
(best of ``--repeat``). ``--compare-tree DIR`` also times another checkout of the code (e.g. ``git archive``
of main) on the same chunk in a subprocess, the two alternating (each on ``PYTHONPATH``; the chunk pickled by this
one), and prints the ratio of their best totals::

    python scripts/profile_replay_chunk.py runs/x320/pool --episodes 100000
    python scripts/profile_replay_chunk.py runs/x320/pool --compare-tree /tmp/main-tree --rounds 2
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class _Captured(Exception):
    """Raised by the patched chunked replay once the bench handed it its policies and pool scan."""


def capture_chunk(pool: str, episodes: int, out: Path) -> None:
    """Pickle (the bench's policies, the first ``episodes`` episodes compiled as a chunk, the pool's budget)."""
    import eval.chunked_replay as chunked
    from coba_env.chunked_compile import compile_chunk
    from eval.bench import run_bench

    captured: dict = {}

    def stop(policies, scan, **_):
        captured.update(policies=policies, scan=scan)
        raise _Captured

    chunked.replay_in_chunks = stop
    with tempfile.TemporaryDirectory() as tmp:
        try:
            run_bench(pool, out_dir=Path(tmp) / "bench", progress=False)
        except _Captured:
            pass
    scan = captured["scan"]
    chunk = compile_chunk(scan, scan.chunks(episodes)[0])
    with open(out, "wb") as f:
        pickle.dump((captured["policies"], chunk, scan.budget("p_tokens")), f, protocol=5)


def _relink_costs(chunk) -> None:
    """Pickling splits the compiled cost table from its generation / verification views; lay them out again as
    ``coba_env.compiled`` does, so that the vector env reads the table as the bench's does (no copy)."""
    table = chunk.cost_rows()
    en = chunk.gen_cost.shape[0] * chunk.gen_cost.shape[1]
    object.__setattr__(chunk, "gen_cost", table[:en].reshape(chunk.gen_cost.shape))
    object.__setattr__(chunk, "ver_cost", table[en:-1].reshape(chunk.ver_cost.shape))
    object.__setattr__(chunk, "_cost_table", table)


def time_policies(chunk_file: Path, repeat: int) -> None:
    """Print each policy's replay wall and CPU seconds on the pickled chunk (best of ``repeat``), then the total."""
    from eval.runner import run_policies

    with open(chunk_file, "rb") as f:
        policies, chunk, budget = pickle.load(f)
    _relink_costs(chunk)
    wall_total = cpu_total = 0.0
    for policy in policies:
        best = (float("inf"), 0.0)
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            run_policies([policy], chunk, grouping="pair", progress=False, workers=1, generator_columns=False,
                         budget=budget)
            best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
        wall_total, cpu_total = wall_total + best[0], cpu_total + best[1]
        print(f"{policy.name:32s} {best[0]:7.3f} s  CPU {best[1]:7.3f} s", flush=True)
    print(f"total {wall_total:.3f} s  CPU {cpu_total:.3f} s  ({len(policies)} policies, {chunk.n_episodes} episodes)")


def _total(lines: str) -> float:
    return float(lines.strip().splitlines()[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pool", help="a stored pool directory (as `coba bench --pool`)")
    parser.add_argument("--episodes", type=int, default=100_000, help="episodes in the chunk (default: 100000)")
    parser.add_argument("--repeat", type=int, default=1, help="timings per policy, the best kept (default: 1)")
    parser.add_argument("--compare-tree", help="another checkout of the code, timed on the same chunk")
    parser.add_argument("--rounds", type=int, default=1, help="alternations with --compare-tree (default: 1)")
    parser.add_argument("--chunk-file", help=argparse.SUPPRESS)  # the subprocess's: time this pickled chunk
    args = parser.parse_args()
    if args.chunk_file:
        time_policies(Path(args.chunk_file), args.repeat)
        return
    print("load average at the start:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        chunk_file = Path(tmp) / "chunk.pkl"
        capture_chunk(args.pool, args.episodes, chunk_file)
        trees = [("this tree", Path(__file__).resolve().parents[1])]
        if args.compare_tree:
            trees.insert(0, ("compared tree", Path(args.compare_tree).resolve()))
        totals: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(args.rounds if args.compare_tree else 1):
            for name, tree in trees:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run([sys.executable, str(Path(__file__).resolve()), args.pool, "--chunk-file",
                                      str(chunk_file), "--repeat", str(args.repeat)], cwd=tree, env=env,
                                     capture_output=True, text=True, check=True).stdout
                print(f"-- {name} ({tree})\n{out}", flush=True)
                totals[name].append(_total(out))
    if args.compare_tree:
        best = {name: min(v) for name, v in totals.items()}
        print(f"best totals: compared tree {best['compared tree']:.3f} s, this tree {best['this tree']:.3f} s: "
              f"{best['compared tree'] / best['this tree']:.2f}x")
    print("load average at the end:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
