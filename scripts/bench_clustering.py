"""Time math clustering of a 10,000-candidate episode set (100 episodes x 100 candidates).

Two sets: the real Tree-of-Thoughts Game-of-24 pool (../shared/data/pools/tot-game24, answers extracted
from the texts, math clustering as if it had no task scorer), and a synthetic set of hard cases (per
episode ~60 distinct answers written as integers, decimals, fractions, LaTeX fractions, roots and
equations). Prints the wall and CPU seconds, distinct keys and math-verify comparisons of each.

    python scripts/bench_clustering.py [--episodes 100] [--candidates 100] [--no-prefilter]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from pools.grading import AnswerClusterer, extract_answer
from pools.grading.equivalence import answers_equivalent, numeric_value

TOT_FILE = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "pools" / "tot-game24" / (
    "gpt-4_0.7_naive_cot_sample_100_start900_end1000.json")


def tot_episodes(episodes: int, candidates: int) -> list[list[str | None]]:
    """The ToT pool's extracted answers, ``episodes`` x ``candidates``."""
    data = json.loads(TOT_FILE.resolve().read_text(encoding="utf-8"))
    return [[extract_answer(text).answer for text in puzzle["ys"][:candidates]] for puzzle in data[:episodes]]


def synthetic_episodes(episodes: int, candidates: int, seed: int = 0) -> list[list[str | None]]:
    """Answers of many surface forms: each value written as int, decimal, fraction, LaTeX or equation."""
    rng = random.Random(seed)
    forms = (
        lambda p, q: f"{p}/{q}", lambda p, q: f"\\frac{{{p}}}{{{q}}}", lambda p, q: f"{p / q:.6g}",
        lambda p, q: f"x = \\dfrac{{{p}}}{{{q}}}", lambda p, q: f"{p}+0={p}" if q == 1 else f"{p}/{q}",
        lambda p, q: f"\\sqrt{{{p * p}}}/{q}", lambda p, q: f"$\\boxed{{{p}/{q}}}$",
    )
    out = []
    for _ in range(episodes):
        values = [(rng.randint(-300, 300), rng.choice((1, 1, 2, 3, 7))) for _ in range(25)]
        out.append([None if rng.random() < 0.05 else rng.choice(forms)(*rng.choice(values))
                    for _ in range(candidates)])
    return out


def bench(name: str, sets: list[list[str | None]], prefilter: bool = True) -> None:
    """Cluster every episode with a fresh clusterer; print the timing and counts."""
    calls = 0

    def counted(a: str, b: str) -> bool:
        nonlocal calls
        calls += 1
        return answers_equivalent(a, b)

    wall, cpu = time.perf_counter(), time.process_time()
    clusters = keys = 0
    for answers in sets:
        clusterer = AnswerClusterer(equivalent=counted, value=numeric_value if prefilter else None)
        ids = [clusterer.add(a) for a in answers]
        clusters += len({i for i in ids if i >= 0})
        keys += clusterer.distinct_keys
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = sum(len(s) for s in sets)
    name += "" if prefilter else " (no numeric prefilter)"
    print(f"{name}: {len(sets)} episodes, {n} candidates, {keys} distinct keys, {clusters} clusters, "
          f"{calls} equivalence calls: {wall:.2f} s wall, {cpu:.2f} s CPU")


def main() -> None:
    """Run both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--no-prefilter", action="store_true", help="send every pair to math-verify (the old way)")
    args = parser.parse_args()
    prefilter = not args.no_prefilter
    bench("tot-game24 (math clustering)", tot_episodes(args.episodes, args.candidates), prefilter)
    bench("synthetic surface forms", synthetic_episodes(args.episodes, args.candidates), prefilter)


if __name__ == "__main__":
    main()
