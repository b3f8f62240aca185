"""Entry point of the ``coba`` command: one argparse parser, one module per subcommand."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

#: Subcommand modules, in the order ``coba --help`` lists them. Each module defines
#: ``register(subparsers) -> None``, which adds its parser and sets ``func`` to a callable(args) -> int.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "coba_cli.pools_cmd",
    "coba_cli.bench_cmd",
    "coba_cli.train_cmd",
    "coba_cli.sweep_cmd",
    "coba_cli.solve_cmd",
    "coba_cli.calibrate_cmd",
    "coba_cli.serve_cmd",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coba-env")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``coba`` parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="coba",
        description="coba-env: test-time scaling as compute allocation. Build candidate pools, replay them "
        "in a Gymnasium environment, benchmark routing policies and train controllers.",
    )
    parser.add_argument("--version", action="version", version=f"coba-env {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a capability not installed in this build: no subcommand for it
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coba`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    try:  # start-up imports every subcommand's module: Ctrl-C there is one line too, not a traceback
        from coba_cli.arg_types import join_number_lists
        from coba_cli.errors import run_guarded

        parser = build_parser()
    except KeyboardInterrupt:
        print("coba: interrupted (during start-up; nothing was done)", file=sys.stderr)
        return 130
    args = parser.parse_args(join_number_lists(sys.argv[1:] if argv is None else list(argv)))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_guarded(args.func, args)


def cli() -> None:
    """The ``coba`` program: ``main`` and exit with its code. A SIGINT or SIGTERM that arrives once the command has
    returned (its result in place, its lines printed) is ignored: the exit code stays the command's."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    cli()
