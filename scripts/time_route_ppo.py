"""Time route PPO's protocol steps on the TRAINING side of one outer fold; estimate the full 3-seed run.

Measures, on the outer fold that holds ``--held-out`` out (default aime2025; nothing of it is read or replayed):
one fit on all its training datasets (the refit), one inner fit (the training datasets minus ``--inner``), and
the replay of every grid point plus the cascade on the inner validation dataset ``--inner``. The estimate of the
full run (5 outer folds x 3 seeds x (4 inner fits + 1 refit), every grid point replayed on every inner validation
set, the chosen one on the held-out set) scales these timings by the episode counts. Prints the in-sample
figures of the fit (its training-time accuracy and cost, the warm start's agreement with the cascade) so one can
see that training runs and learns; no setting is chosen from them.

Times are process CPU seconds (one thread: torch runs on one), i.e. what one free core would take on a machine
shared with other jobs.

Usage: python scripts/time_route_ppo.py [--timesteps 65536] [--held-out aime2025] [--inner rgym_hard] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coba_env.env import as_compiled
from coba_env.splits import leave_one_dataset_out
from train.ppo_method import PPO_PROTOCOLS, PPOFitted, PPOMethod
from train.protocol import cost_unit, episodes_of, inner_splits
from train.protocol_arena import ROUTE

TOTAL_TIMESTEPS = PPO_PROTOCOLS["route"].total_timesteps


def main(argv: list[str] | None = None) -> int:
    """Time one refit, one inner fit and the inner replays; print the estimate of the 3-seed protocol run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="paper")
    parser.add_argument("--timesteps", type=int, default=TOTAL_TIMESTEPS)
    parser.add_argument("--held-out", default="aime2025", help="the outer fold's held-out dataset (never read)")
    parser.add_argument("--inner", default="rgym_hard", help="an inner validation dataset (a training dataset)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"command: python scripts/time_route_ppo.py --pool {args.pool} --timesteps {args.timesteps} "
          f"--held-out {args.held_out} --inner {args.inner} --seed {args.seed}")
    compiled = as_compiled(args.pool)
    budget = cost_unit(compiled)
    outer = next(s for s in leave_one_dataset_out(compiled) if s.held_out == args.held_out)
    if args.inner == args.held_out:
        raise SystemExit("--inner must be a training dataset of the fold, not its held-out dataset")
    inner = next(s for s in inner_splits(compiled, outer.train_episode_ids) if s.held_out == args.inner)
    method = PPOMethod("route", total_timesteps=args.timesteps)
    grid = method.grid()
    with tempfile.TemporaryDirectory(prefix="coba-route-ppo-time-") as tmp:
        t0 = time.process_time()
        method.fit(compiled, outer.train_episode_ids, budget=budget, seed=args.seed, out_dir=Path(tmp) / "refit",
                   progress=False)
        refit_s = time.process_time() - t0
        meta = json.loads((Path(tmp) / "refit" / "controller.json").read_text())
        # In-sample: the refit's grid on its own training problems beside the cascade (does training learn?).
        refit = PPOFitted(Path(tmp) / "refit")
        in_sample = [refit.policy(p) for p in grid[:-1]]
        for policy, point in zip(in_sample, grid, strict=False):
            policy.name = f"lam={point['lam']:g}"
        records = ROUTE.replay(in_sample, episodes_of(compiled, outer.train_episode_ids), progress=False)
        t0 = time.process_time()
        fitted = method.fit(compiled, inner.train_episode_ids, budget=budget, seed=args.seed,
                            out_dir=Path(tmp) / "inner", progress=False)
        inner_fit_s = time.process_time() - t0
        t0 = time.process_time()
        policies = [fitted.policy(p) for p in grid]
        for policy, point in zip(policies, grid, strict=True):
            policy.name = ",".join(f"{k}={v:g}" for k, v in point.items())
        ROUTE.replay(policies, episodes_of(compiled, inner.eval_episode_ids), progress=False)
        replay_s = time.process_time() - t0
    n_train = len(np.unique(compiled.item_id[np.isin(compiled.episode_ids, outer.train_episode_ids)]))
    t = meta["training"]
    print(f"refit on {sorted(meta['train_datasets'])}: {refit_s:.1f} CPU s ({t['cpu_seconds']:.1f} CPU s learn, "
          f"{t['timesteps'] if 'timesteps' in t else meta['timesteps']} steps, "
          f"{meta['timesteps'] / t['cpu_seconds']:.0f} steps per CPU s); warm start {meta['warm_start']}")
    print(f"inner fit without {args.inner}: {inner_fit_s:.1f} CPU s; replay of {len(grid)} points + cascade on "
          f"{args.inner}: {replay_s:.1f} CPU s")
    # 15 (seed, fold) pairs, each 4 inner fits + 1 refit, each counted at the larger of the two measured fits.
    # Replays: every inner validation set once per (seed, fold) = 4 x the training problems of a fold in all,
    # i.e. ~ n_train / n_inner_validation times the measured replay, plus the held-out replay (one point).
    n_val = len(np.unique(compiled.item_id[np.isin(compiled.episode_ids, inner.eval_episode_ids)]))
    replays = 15 * replay_s * n_train / max(n_val, 1) + 15 * replay_s / len(grid)
    fits = 75 * max(inner_fit_s, refit_s)
    print(f"estimate of the 3-seed run on one free core: fits {fits / 60:.1f} min + replays {replays / 60:.1f} min "
          f"= {(fits + replays) / 60:.1f} min (the budget: 20 min)")
    summary = records.groupby("policy", sort=False).agg(accuracy=("correct", "mean"), p_tokens=("p_tokens", "mean"))
    ref = summary.loc[ROUTE.reference]
    print("in-sample (the refit's own training problems, item-pooled), against the cascade:")
    for name, row in summary.iterrows():
        print(f"  {name:>14}: accuracy {100 * row.accuracy:6.2f} ({100 * (row.accuracy - ref.accuracy):+.2f}), "
              f"p_tokens ratio {row.p_tokens / ref.p_tokens:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
