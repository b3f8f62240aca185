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
    """Call ``func(args)``; report PoolError / UsageError / OSError as one ``coba: error: ...`` line with exit 2,
    Ctrl-C as ``coba: interrupted`` with exit 130."""
    try:
        code = func(args)
    except (PoolError, UsageError) as exc:
        print(f"coba: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a missing input, an unwritable output, a full disk: one line, not a traceback
        if isinstance(exc, BrokenPipeError):
            return _quiet_broken_pipe()
        print(f"coba: error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("coba: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


def _quiet_broken_pipe() -> int:
    """The reader went away (e.g. `coba pools inspect POOL | head`): stop quietly, as Unix tools do."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def describe_os_error(exc: OSError) -> str:
    """``path: reason`` for an OSError (``No such file or directory``, ``Permission denied``, ...)."""
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return reason
    where = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
    hint = "; check the path and its permissions" if isinstance(exc, PermissionError) else ""
    return f"{where}: {reason}{hint}"
