"""Turn input errors into one-line messages and exit code 2, instead of tracebacks."""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agents.policy_calls import PolicyCodeError
from pools.destination_guard import command_scope, completed_results, last_destination
from pools.errors import PoolError
from pools.parse_boundary import parse_problem

#: Exit code for usage and input errors.
EXIT_USAGE = 2


class UsageError(Exception):
    """A command-line usage error (bad option combination, unknown name)."""


class Terminated(BaseException):
    """SIGTERM arrived (``kill PID``): unwinds like Ctrl-C, so temporary files and folders are removed."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the command runs (main thread only), SIGTERM raises ``Terminated`` instead of ending the process
    on the spot, so the same clean-up as for Ctrl-C runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_guarded(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Call ``func(args)``; report PoolError / UsageError / OSError and input that cannot be parsed as one
    ``coba: error: ...`` line with exit 2, Ctrl-C as ``coba: interrupted`` (exit 130), SIGTERM as
    ``coba: terminated`` (exit 143)."""
    with command_scope():  # the destinations it checked stay locked (and known, for messages) until it ends
        return _run_reporting(func, args)


def _run_reporting(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    try:
        with _sigterm_raises():
            code = func(args)
    except (PoolError, UsageError, PolicyCodeError) as exc:  # PolicyCodeError: a user's policy code failed
        return _error(str(exc))
    except OSError as exc:  # a missing input, an unwritable output, a full disk: one line, not a traceback
        if isinstance(exc, BrokenPipeError):
            return _quiet_broken_pipe()
        return _error(describe_os_error(exc))
    except (RecursionError, UnicodeError, OverflowError, MemoryError) as exc:  # input that escaped its own check
        return _error(f"the input cannot be used: {parse_problem(exc)}")
    except KeyboardInterrupt:
        print(f"coba: interrupted{_complete_note()}", file=sys.stderr)
        return 130
    except Terminated:
        print(f"coba: terminated (SIGTERM){_complete_note()}", file=sys.stderr)
        return 143
    return int(code or 0)


def _complete_note() -> str:
    """What a signal did not touch: the results this command had already put in place whole (none: "")."""
    done = completed_results()
    if not done:
        return ""
    return f" after the result was complete: {', '.join(map(str, done))} (written whole before the signal)"


def _error(message: str) -> int:
    print(f"coba: error: {one_line(message)}", file=sys.stderr)
    return EXIT_USAGE


def one_line(message: str) -> str:
    """``message`` on one line: line breaks and other control characters shown escaped."""
    if message.isprintable():
        return message
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in message)


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
        where = getattr(exc, "coba_destination", None) or last_destination()  # the one being written, if known
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and where is not None:
            return f"{where}: {reason} while writing the result; free some space and run the command again"
        if exc.errno == errno.EFBIG and where is not None:
            return (f"{where}: {reason} while writing the result (a file would pass the file-size limit, `ulimit -f`, "
                    "or the file system's largest file); raise the limit or write elsewhere")
        return reason
    where = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
    hint = "; check the path and its permissions" if isinstance(exc, PermissionError) else ""
    return f"{where}: {reason}{hint}"
