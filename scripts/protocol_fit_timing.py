"""Time one protocol method on the TRAINING side of one outer fold; print seconds only, never accuracy.

The timing check behind every method's size in docs/LEARNING.md ("Protocol"): on the paper pool with one
dataset held out (default aime2025, whose episodes are never touched), it times

- every inner fit (for each training dataset: fit on the others) and the replay of every grid point beside the
  arena's reference on that inner validation dataset (a training dataset);
- the refit on every training dataset;

and extrapolates to a full run: seeds x outer folds x (this outer fold's inner fits and replays + refit +
held-out replay, taken as the mean inner replay per grid point). It prints timings only, so running it reveals
nothing a setting could be tuned on.

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
    from coba_cli.errors import UsageError

    arena = arena_named(args.env)
    try:
        method = protocol_method(args.kind, args.env)
    except UsageError as exc:
        parser.error(str(exc))
    compiled = as_compiled("paper")
    datasets = list(dict.fromkeys(compiled.dataset.tolist()))
    if args.held_out not in datasets:
        parser.error(f"--held-out: expected one of {datasets}, got {args.held_out!r}")
    budget = cost_unit(compiled)
    train_ids = compiled.episode_ids[compiled.dataset != args.held_out]
    grid = list(method.grid())
    print(f"command: python scripts/protocol_fit_timing.py {args.kind} --env {args.env} --held-out {args.held_out}")
    print(f"training side of the outer fold without {args.held_out}")
    fits, replays = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for inner in inner_splits(compiled, train_ids):
            t0 = time.perf_counter()
            fitted = method.fit(compiled, inner.train_episode_ids, budget=budget, seed=0,
                                out_dir=Path(tmp) / "inner" / inner.held_out, progress=False)
            fits.append(time.perf_counter() - t0)
            policies = [fitted.policy(p) for p in grid]
            for pol, point in zip(policies, grid, strict=True):
                pol.name = point_name(method.name, point)
            t0 = time.perf_counter()
            arena.replay(policies, episodes_of(compiled, inner.eval_episode_ids), progress=False)
            replays.append(time.perf_counter() - t0)
            print(f"inner fold without {inner.held_out}: fit {fits[-1]:.1f} s; replay of {len(grid)} grid points "
                  f"+ reference {replays[-1]:.1f} s")
        t0 = time.perf_counter()
        method.fit(compiled, train_ids, budget=budget, seed=0, out_dir=Path(tmp) / "final", progress=False)
        refit_s = time.perf_counter() - t0
    per_fold = sum(fits) + sum(replays) + refit_s + sum(replays) / len(replays) / max(len(grid), 1)
    total = len(SEEDS) * len(datasets) * per_fold
    print(f"refit {refit_s:.1f} s")
    print(f"estimate of the full run ({len(SEEDS)} seeds x {len(datasets)} outer folds, one core): "
          f"{total / 60:.1f} min ({per_fold:.0f} s per outer fold)")


if __name__ == "__main__":
    main()
