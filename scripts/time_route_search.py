"""Time route_search under the protocol on the TRAINING side of one outer fold (the one with aime2025 held out).

Runs what one (seed, outer fold) of ``coba train route_search --lodo --env route`` runs, except the held-out
replay: the 4 inner fits (3 training datasets each), the replay of every grid point beside the cascade on each
inner validation dataset, and the refit on the 4 training datasets. Nothing of aime2025 is read or replayed, and
no accuracy is printed: only timings (wall and process CPU seconds) and the trial counts, to size ``LADDER_TRIALS``.

    OMP_NUM_THREADS=1 python scripts/time_route_search.py [--trials 300] [--seed 0]

The full 3-seed run is 15 (seed, outer fold) pairs; the aime2025 fold is one of the most expensive kind (both
large datasets, math500 and rgym_hard, train in it), so 15 x its time bounds the run.
"""

from __future__ import annotations

import argparse
import time

from coba_env.env import as_compiled
from coba_env.splits import leave_one_dataset_out
from train.coba_search import LADDER_TRIALS, search_method
from train.protocol import _replay, cost_unit, inner_splits, point_name
from train.protocol_arena import ROUTE

HELD_OUT = "aime2025"


def main() -> None:
    """Time one outer fold's training side and print the estimate for the 3-seed run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=LADDER_TRIALS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="/tmp/time_route_search", help="scratch folder for trials.csv")
    args = parser.parse_args()
    paper = as_compiled("paper")
    split = next(s for s in leave_one_dataset_out(paper) if s.held_out == HELD_OUT)
    method = search_method("route_search", n_trials=args.trials)
    grid, budget = method.grid(), cost_unit(paper)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for inner in inner_splits(paper, split.train_episode_ids):
        w, c = time.perf_counter(), time.process_time()
        fitted = method.fit(paper, inner.train_episode_ids, budget=budget, seed=args.seed,
                            out_dir=f"{args.out}/{inner.held_out}", progress=False)
        fit_w, fit_c = time.perf_counter() - w, time.process_time() - c
        w = time.perf_counter()
        policies = [fitted.policy(p) for p in grid]
        for policy, point in zip(policies, grid, strict=True):
            policy.name = point_name(method.name, point)
        _replay(policies, paper, inner.eval_episode_ids, False, ROUTE)
        print(f"inner fit without {inner.held_out}: {fit_w:.1f} s wall, {fit_c:.1f} s CPU; replay of "
              f"{len(grid)} points + the cascade on {inner.held_out}: {time.perf_counter() - w:.2f} s", flush=True)
    w, c = time.perf_counter(), time.process_time()
    fitted = method.fit(paper, split.train_episode_ids, budget=budget, seed=args.seed, out_dir=f"{args.out}/final",
                        progress=False)
    print(f"refit on the 4 training datasets: {time.perf_counter() - w:.1f} s wall, {time.process_time() - c:.1f} s "
          f"CPU ({len(fitted.trials)} trials)")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    print(f"one (seed, outer fold) without its held-out replay: {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"estimate of the 3-seed run (15 pairs): {15 * wall / 60:.1f} min wall here, {15 * cpu / 60:.1f} min CPU")


if __name__ == "__main__":
    main()
