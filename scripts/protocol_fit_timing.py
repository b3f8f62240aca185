"""Time one protocol method on the TRAINING side of one outer fold; print seconds only, never accuracy.

The timing check behind every method's size in docs/LEARNING.md ("Protocol"): on the paper pool with one
dataset held out (default aime2025, whose episodes are never touched), it times

- every inner fit (for each training dataset: fit on the others) and the replay of every grid point beside the
  arena's reference on that inner validation dataset (a training dataset);
- the refit on every training dataset;

and extrapolates to a full run: seeds x outer folds x (this outer fold's inner fits and replays + refit +
held-out replay, taken as the mean inner replay per grid point). It prints timings only, so running it reveals
nothing a setting could be tuned on. Each figure is given as wall seconds and as the process's CPU seconds: on a
shared machine the CPU figure is the estimate for a quiet one (one core, the protocol's fits run one at a time).
Caches a method shares across fits (the route MLP's teacher answers) are as warm as after this one outer fold:
later folds reuse them, so the extrapolation from the first fold is an upper estimate for such a method.

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
    fits, replays = [], []  # (wall, CPU) seconds each
    with tempfile.TemporaryDirectory() as tmp:
        for inner in inner_splits(compiled, train_ids):
            t0 = _clocks()
            fitted = method.fit(compiled, inner.train_episode_ids, budget=budget, seed=0,
                                out_dir=Path(tmp) / "inner" / inner.held_out, progress=False)
            fits.append(_since(t0))
            policies = [fitted.policy(p) for p in grid]
            for pol, point in zip(policies, grid, strict=True):
                pol.name = point_name(method.name, point)
            t0 = _clocks()
            arena.replay(policies, episodes_of(compiled, inner.eval_episode_ids), progress=False)
            replays.append(_since(t0))
            print(f"inner fold without {inner.held_out}: fit {_show(fits[-1])}; replay of {len(grid)} grid points "
                  f"+ reference {_show(replays[-1])}", flush=True)
        t0 = _clocks()
        method.fit(compiled, train_ids, budget=budget, seed=0, out_dir=Path(tmp) / "final", progress=False)
        refit = _since(t0)
    print(f"refit {_show(refit)}")
    for i, clock in enumerate(("wall", "CPU")):
        per_fold = (sum(f[i] for f in fits) + sum(r[i] for r in replays) + refit[i]
                    + sum(r[i] for r in replays) / len(replays) / max(len(grid), 1))
        total = len(SEEDS) * len(datasets) * per_fold
        print(f"estimate of the full run ({len(SEEDS)} seeds x {len(datasets)} outer folds, one core) from {clock} "
              f"time: {total / 60:.1f} min ({per_fold:.0f} s per outer fold)")


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds since ``t0``."""
    now = _clocks()
    return now[0] - t0[0], now[1] - t0[1]


def _show(t: tuple[float, float]) -> str:
    return f"{t[0]:.1f} s wall, {t[1]:.1f} s CPU"


if __name__ == "__main__":
    main()
