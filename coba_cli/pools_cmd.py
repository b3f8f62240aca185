"""``coba pools ...``: import, export, validate and inspect pools; generate and simulate where those modules exist."""

from __future__ import annotations

import argparse
import importlib

from coba_cli import embed_cmd, import_cmd
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples
from coba_cli.out_option import add_out_option, chosen_out, older_form_note
from pools.export import export_jsonl
from pools.inspect import format_inspection, inspect_pool, pool_summary
from pools.merge import MATCH_RULES, merge_pools
from pools.output_paths import check_output_dir, check_output_file
from pools.store import load_pool, save_pool
from pools.strict_json import strict_dumps

#: Modules of other layers that add their own ``coba pools`` subcommands through ``register(sub)``.
OPTIONAL_SUBCOMMAND_MODULES: tuple[str, ...] = ("coba_cli.generate_cmd", "coba_cli.simulate_cmd")


def _cmd_export(args: argparse.Namespace) -> int:
    args.dest, given_as = chosen_out(args)
    dest = check_output_file(args.dest, force=args.force, option=given_as, inputs=[args.pool])
    pool = load_pool(args.pool)
    export_jsonl(pool, dest, overwrite=args.force, inputs=[args.pool])
    print(f"exported {args.pool} -> {dest}: {len(pool.candidates)} lines")
    older_form_note(args.dest, given_as)
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    if len(args.pools) < 2:
        raise UsageError("merge joins two or more pools; give at least two POOL directories")
    dest = check_output_dir(args.out, force=args.force, option="--out", inputs=args.pools, kind="pool")
    pools = [load_pool(p) for p in args.pools]
    merged, report = merge_pools(pools, sources=args.pools, match=args.match)
    save_pool(merged, dest, overwrite=args.force, inputs=args.pools)
    print(f"merged {', '.join(args.pools)} -> {dest}: {pool_summary(merged)}")
    for line in report.lines():
        print(f"  {line}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    pool = load_pool(args.pool)
    print(f"ok: {args.pool}: {pool_summary(pool)}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    stats = inspect_pool(load_pool(args.pool))
    print(strict_dumps(stats, indent=2) if args.json else format_inspection(stats))  # NaN statistics -> null
    return 0


def _register_optional(sub: argparse._SubParsersAction, module: str) -> None:
    """Call ``module.register(sub)`` when that module is installed (it is another layer's, added separately)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return
        raise
    mod.register(sub)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba pools`` and its subcommands."""
    parser = subparsers.add_parser("pools", help="make, import, check and inspect candidate pools (coba pools "
                                   "--help lists every subcommand)", formatter_class=ExampleFormatter,
                                   epilog=examples("coba pools simulate --profile tiny --out runs/pools/tiny",
                                                   "coba pools import pool.jsonl --out runs/pools/mine",
                                                   "coba pools inspect runs/pools/mine"))
    sub = parser.add_subparsers(dest="pools_command", metavar="SUBCOMMAND")

    import_cmd.register(sub)
    embed_cmd.register(sub)

    p = sub.add_parser("export", help="write a pool as canonical JSONL", description="Write POOL as canonical "
                       "JSONL, one line per candidate, atomically.")
    p.add_argument("pool", help="pool directory")
    add_out_option(p, "JSONL file to write")
    p.add_argument("--force", action="store_true", help="replace DEST if it is an existing regular file")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("merge", help="join pools over the same items into one pool of all their generators",
                       description="Join POOLs over the same items (matched by dataset and item id, or by their "
                       "normalized problem text) into one pool with every pool's generators; prints how many items "
                       "matched. Refused in one line: a generator in two pools, a verifier name with two roles, "
                       "different gold answers for one item (docs/POOLS.md, 'Merging pools').",
                       formatter_class=ExampleFormatter,
                       epilog=examples("coba pools merge runs/pools/a runs/pools/b --out runs/pools/ab"))
    p.add_argument("pools", nargs="+", metavar="POOL", help="pool directories, two or more")
    p.add_argument("--out", required=True, metavar="DEST", help="pool directory to create")
    p.add_argument("--match", choices=list(MATCH_RULES), default="auto",
                   help="how items are matched: by (dataset, item_id), by normalized problem text, or auto (by id "
                   "when any id is shared, else by text; default)")
    p.add_argument("--force", action="store_true", help="replace DEST if it is a pool coba-env wrote")
    p.set_defaults(func=_cmd_merge)

    p = sub.add_parser("validate", help="check a pool directory", description="Load and validate POOL; print "
                       "'ok: ...' and exit 0, or print the first problem and exit 2.")
    p.add_argument("pool", help="pool directory")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("inspect", help="per dataset x generator statistics of a pool, and how good each verifier is",
                       description="Accuracy of first-sample, majority@N and pass@N, tokens, score coverage per "
                       "verifier and grader agreement, per dataset x generator; then, per verifier by its own name, "
                       "its coverage, the AUROC of its score against the pool's correctness labels, its expected "
                       "calibration error (10 equal-width score bins) and the accuracy of best-of-N picked by it.")
    p.add_argument("pool", help="pool directory")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=_cmd_inspect)

    for module in OPTIONAL_SUBCOMMAND_MODULES:
        _register_optional(sub, module)
    # Listed from the parser itself, so a subcommand added later is named too.
    parser.description = f"Candidate pools, one subcommand each: {', '.join(sub.choices)}."
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
