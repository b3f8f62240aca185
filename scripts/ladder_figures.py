"""Print the ``ladder`` simulator profile's per-dataset, per-generator accuracy next to its targets.

Usage: python scripts/ladder_figures.py [--seed 0]
Simulates the built-in ``ladder`` profile and prints, per (dataset, generator), the pool's first-sample
accuracy and majority@8 (cluster vote, ties to the answer that appeared first) beside the profile's targets.
The targets marked "published" are the Qwen2.5-Math technical report's chain-of-thought figures
(docs/SIMULATOR.md, "The ladder profile"); the others are chosen.
"""

from __future__ import annotations

import argparse

from pools.inspect import episode_outcomes
from pools.simulate import load_profile, simulate_pool

#: (dataset, figure) pairs whose targets are published (arXiv:2409.12122, Tables 3 and 5); the rest are chosen.
PUBLISHED = {("gsm8k", "greedy"), ("gsm8k", "majority@8"), ("math500", "greedy"), ("math500", "majority@8"),
             ("aime2024", "greedy"), ("amc2023", "greedy")}


def main() -> None:
    """Simulate the ladder profile and print its figures beside the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    profile = load_profile("ladder")
    pool = simulate_pool(profile, seed=args.seed)
    outcomes = episode_outcomes(pool).join(pool.episodes.set_index("episode_id")[["dataset", "generator"]])
    figures = outcomes.groupby(["dataset", "generator"], sort=False)[["first_sample", "majority"]].mean() * 100
    print(f"ladder profile, seed {args.seed}: {len(pool.episodes)} episodes x {pool.n_candidates} candidates; "
          f"quota misses {pool.manifest['provenance']['quota_misses']}")
    print(f"{'dataset':<10} {'generator':<28} {'greedy':>7} {'target':>7} {'':<9} {'maj@8':>7} {'target':>7}")
    worst = 0.0
    for (dataset, generator), row in figures.iterrows():
        target = profile.data["datasets"][dataset]["generator_targets"][generator]
        cells = []
        for figure, value, goal in (("greedy", row["first_sample"], target["greedy"]),
                                    ("majority@8", row["majority"], target["majority"]["8"])):
            published = (dataset, figure) in PUBLISHED
            if published:
                worst = max(worst, abs(value - goal))
            cells.append(f"{value:7.2f} {goal:7.2f} {'published' if published else 'chosen':<9}")
        print(f"{dataset:<10} {generator:<28} {' '.join(cells)}")
    print(f"largest distance from a published figure: {worst:.2f} points")


if __name__ == "__main__":
    main()
