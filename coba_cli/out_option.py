"""One way to name a command's output: ``--out DEST``, with the older positional ``DEST`` still accepted.

``coba pools import SRC DEST`` (and ``export``, ``build``) predate ``--out``, which every other command uses;
both forms work, giving both is refused in one line.
"""

from __future__ import annotations

import argparse
import sys

from coba_cli.errors import UsageError


def add_out_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--out DEST`` and the older optional positional ``DEST`` (kept working) for ``what``."""
    parser.add_argument("dest", nargs="?", default=None, metavar="DEST",
                        help=f"{what} (older form of --out DEST, still accepted)")
    parser.add_argument("--out", dest="out", default=None, metavar="DEST", help=f"{what}")


def chosen_out(args: argparse.Namespace) -> tuple[str, str]:
    """(output path, how it was given: "--out" or "DEST"); exactly one of the two forms is required."""
    if args.out is not None and args.dest is not None:
        raise UsageError(f"give the output once: --out {args.out} or DEST {args.dest}, not both")
    if args.out is None and args.dest is None:
        raise UsageError("the output is missing: give --out DEST")
    return (args.out, "--out") if args.out is not None else (args.dest, "DEST")


def older_form_note(dest: str, given_as: str) -> None:
    """After a command succeeded with the positional DEST (``given_as``): one line on stderr saying ``--out DEST``
    is the form every command shares (nothing when ``--out`` was used)."""
    if given_as != "DEST":
        return
    print(f"note: the positional DEST is the older form; `--out {dest}` is the one every command takes",
          file=sys.stderr)
