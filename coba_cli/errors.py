"""Turn input errors into one-line messages and exit code 2, instead of tracebacks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from pools.errors import PoolError

#: Exit code for usage and input errors.
EXIT_USAGE = 2


class UsageError(Exception):
    """A command-line usage error (bad option combination, unknown name)."""


def run_guarded(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Call ``func(args)``; report PoolError / UsageError / FileNotFoundError as ``coba: error: ...`` with exit 2."""
    try:
        code = func(args)
    except (PoolError, UsageError, FileNotFoundError) as exc:
        print(f"coba: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("coba: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `coba pools inspect POOL | head`): stop quietly, as Unix tools do.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return int(code or 0)
