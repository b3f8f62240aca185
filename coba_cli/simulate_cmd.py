"""``coba pools simulate``: write a calibrated simulated pool to a directory."""

from __future__ import annotations

import argparse
import sys
import time

from coba_cli.arg_types import seed_int
from pools.output_paths import check_output_dir
from pools.simulate import BUILTIN_PROFILES, load_profile, simulate_pool
from pools.store import save_pool


def register(pools_subparsers: argparse._SubParsersAction) -> None:
    """Add ``simulate`` to the ``coba pools`` subcommands."""
    parser = pools_subparsers.add_parser(
        "simulate",
        help="generate a calibrated simulated pool (no model calls)",
        description="Generate a simulated candidate pool from a profile and write it as a pool directory. "
        "The 'paper' profile mirrors the CoBa paper's datasets, generators, verifier tiers and per-dataset "
        "accuracy (see docs/SIMULATOR.md).",
    )
    parser.add_argument("--profile", required=True, metavar="NAME_OR_PATH",
                        help=f"built-in profile {', '.join(BUILTIN_PROFILES)} or a path to a profile JSON file")
    parser.add_argument("--seed", type=seed_int, default=0, metavar="S",
                        help="random seed; the same profile and seed give byte-identical files (default: 0)")
    parser.add_argument("--out", required=True, metavar="DEST", help="pool directory to write")
    parser.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote (a "
                        "folder holding anything else is never replaced)")
    parser.set_defaults(func=func)


def func(args: argparse.Namespace) -> int:
    """Simulate the pool, save it atomically to ``args.out`` and print a one-line summary."""
    check_output_dir(args.out, force=args.force, option="--out", inputs=[args.profile], kind="pool")
    profile = load_profile(args.profile)
    start = time.perf_counter()
    pool = simulate_pool(profile, seed=args.seed)
    dest = save_pool(pool, args.out, overwrite=args.force)
    counts = pool.manifest["counts"]
    print(f"simulated profile {profile.name!r} (seed {args.seed}): {counts['episodes']} episodes x "
          f"{pool.n_candidates} candidates, {counts['verifications']} verifier calls, tiers "
          f"{', '.join(pool.tiers)} -> {dest} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0
