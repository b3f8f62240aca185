"""``coba pools ...``: build, import, export, validate and inspect candidate pools."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba pools`` and its subcommands."""
    parser = subparsers.add_parser("pools", help="build, import, export, validate and inspect candidate pools",
                                   description="Build, import, export, validate and inspect candidate pools.")
    sub = parser.add_subparsers(dest="pools_command", metavar="SUBCOMMAND")
    del sub  # subcommands are registered here as they land
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
