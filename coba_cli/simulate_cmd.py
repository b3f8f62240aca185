"""``coba pools simulate``: write a calibrated simulated pool to a directory."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from coba_cli.arg_types import seed_int
from pools.output_paths import check_output_dir
from pools.simulate import BUILTIN_PROFILES, load_profile, write_simulated_pool
from pools.simulate.profiles import Profile


def register(pools_subparsers: argparse._SubParsersAction) -> None:
    """Add ``simulate`` to the ``coba pools`` subcommands."""
    parser = pools_subparsers.add_parser(
        "simulate",
        help="generate a calibrated simulated pool (no model calls)",
        description="Generate a simulated candidate pool from a profile and write it as a pool directory. "
        "The 'paper' profile mirrors the CoBa paper's datasets, generators, verifier tiers and per-dataset "
        "accuracy (see docs/SIMULATOR.md). The tables are written in chunks of episodes, so memory holds the "
        "numeric draws and one chunk's rows, never the whole pool's tables.",
    )
    parser.add_argument("--profile", required=True, metavar="NAME_OR_PATH",
                        help=f"built-in profile {', '.join(BUILTIN_PROFILES)} or a path to a profile JSON file")
    parser.add_argument("--seed", type=seed_int, default=0, metavar="S",
                        help="random seed; the same profile and seed give byte-identical files (default: 0)")
    parser.add_argument("--out", required=True, metavar="DEST", help="pool directory to write")
    parser.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote (a "
                        "folder holding anything else is never replaced)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar (it shows only on a "
                        "terminal)")
    parser.set_defaults(func=func)


def func(args: argparse.Namespace) -> int:
    """Simulate the pool, write it atomically to ``args.out`` and print a one-line summary."""
    dest = check_output_dir(args.out, force=args.force, option="--out", inputs=[args.profile], kind="pool")
    profile = load_profile(args.profile)
    start = time.perf_counter()
    bar = None if args.no_progress else _bar(profile)
    try:
        manifest = write_simulated_pool(profile, dest, seed=args.seed, overwrite=args.force,
                                        progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    counts = manifest["counts"]
    print(f"simulated profile {profile.name!r} (seed {args.seed}): {counts['episodes']} episodes x "
          f"{manifest['n_candidates']} candidates, {counts['verifications']} verifier calls, tiers "
          f"{', '.join(manifest['tiers'])} -> {dest} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


def _bar(profile: Profile) -> Any:
    """A progress bar over the episodes written (None when stderr is not a terminal)."""
    if not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    total = len(profile.data["generators"]) * sum(d["n_items"] for d in profile.data["datasets"].values())
    return tqdm(total=total, desc="coba pools simulate", unit="ep", unit_scale=True, leave=False)
