"""Time one protocol method on the TRAINING side of one outer fold; print seconds only, never accuracy.

The timing check behind every method's size in docs/LEARNING.md ("Protocol"): on the paper pool with one
dataset held out (default aime2025, whose episodes are never touched), it times

- one inner fit (the first inner fold: fit on the other training datasets but one) and the replay of every
  grid point beside the arena's reference on that inner validation dataset (a training dataset);
- the refit on every training dataset;

and extrapolates to a full run: seeds x outer folds x (inner folds x (fit + replay) + refit + held-out replay,
taken as one inner replay). It prints timings only, so running it reveals nothing a setting could be tuned on.

Usage::

    python scripts/protocol_fit_timing.py stop_gate
    python scripts/protocol_fit_timing.py route_search --env route
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    """Parse the arguments, time the fits and replays, print the estimate."""
    from coba_cli.train_cmd import protocol_method
    from coba_env.env import as_compiled
    from train.protocol import SEEDS, cost_unit, episodes_of, inner_splits, point_name
    from train.protocol_arena import arena_named

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", help="the method's kind (coba train KIND --lodo)")
    parser.add_argument("--env", default="replay", choices=("replay", "route"), help="the arena (default: replay)")
    parser.add_argument("--held-out", default="aime2025", help="the outer fold whose training side is timed "
                        "(default: aime2025; its episodes are never touched)")
    args = parser.parse_args()
    arena = arena_named(args.env)
    method = protocol_method(args.kind, args.env)
    compiled = as_compiled("paper")
    budget = cost_unit(compiled)
    datasets = list(dict.fromkeys(compiled.dataset.tolist()))
    train_ids = compiled.episode_ids[compiled.dataset != args.held_out]
    inner = inner_splits(compiled, train_ids)[0]
    grid = list(method.grid())
    print(f"command: python scripts/protocol_fit_timing.py {args.kind} --env {args.env} --held-out {args.held_out}")
    print(f"training side of the outer fold without {args.held_out}; inner fold: validate on {inner.held_out}")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        fitted = method.fit(compiled, inner.train_episode_ids, budget=budget, seed=0, out_dir=Path(tmp) / "inner",
                            progress=False)
        fit_s = time.perf_counter() - t0
        policies = [fitted.policy(p) for p in grid]
        for pol, point in zip(policies, grid, strict=True):
            pol.name = point_name(method.name, point)
        t0 = time.perf_counter()
        arena.replay(policies, episodes_of(compiled, inner.eval_episode_ids), progress=False)
        replay_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        method.fit(compiled, train_ids, budget=budget, seed=0, out_dir=Path(tmp) / "final", progress=False)
        refit_s = time.perf_counter() - t0
    n_inner = len(datasets) - 2
    per_fold = n_inner * (fit_s + replay_s) + refit_s + replay_s / max(len(grid), 1)
    total = len(SEEDS) * len(datasets) * per_fold
    print(f"inner fit {fit_s:.1f} s; replay of {len(grid)} grid points + reference {replay_s:.1f} s; "
          f"refit {refit_s:.1f} s")
    print(f"estimate of the full run ({len(SEEDS)} seeds x {len(datasets)} outer folds, one core): "
          f"{total / 60:.1f} min ({per_fold:.0f} s per outer fold)")


if __name__ == "__main__":
    main()
