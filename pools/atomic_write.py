"""Atomic writes: a temporary sibling in the destination's folder, then ``os.replace`` / ``os.rename``.

A reader never sees a half-written file or folder, and a crash or Ctrl-C leaves the old one (if any) in
place. Files and folders get the usual permissions (``0o666`` / ``0o777`` less the process umask: they
are created with ``os.open`` / ``os.mkdir``, which apply the umask, so the umask is never read or changed).
Standard library only (and ``pools.destination_guard``), so every layer (pools, coba_env, agents, train, eval, the CLI) can use it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pools.destination_guard import (
    DestinationChanged,
    changed_since_check,
    clean_stale_siblings,
    keep_aside,
    lock_destination,
    note_written,
)

__all__ = ["OUTPUT_MARKER", "atomic_dir", "atomic_write", "atomic_write_bytes", "atomic_write_text", "mark_output",
           "scratch_dir"]

T = TypeVar("T")

#: A small file the project writes into every output folder it makes (pools, bench and sweep folders,
#: checkpoints); ``--force`` and a re-run replace only folders that hold it (see ``pools.output_paths``).
OUTPUT_MARKER = ".coba-output"


def _sibling(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold back SIGINT/SIGTERM (main thread, POSIX) while a swap or a clean-up runs, so that Ctrl-C can land
    only before or after it, never half-way; a signal that arrived meanwhile is delivered on exit."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it onto ``path``.

    The parent folder is created if missing; on any error (Ctrl-C included) the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_siblings(path)
    tmp = _sibling(path, "tmp")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask applies: the usual mode
        write(tmp)
        with _interrupts_deferred():
            option = changed_since_check(path)
            if option is not None:  # something appeared there while the command ran: keep both
                _refuse_swap(tmp, path, option)
            os.replace(tmp, path)
            note_written(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _refuse_swap(new: Path, dest: Path, option: str) -> None:
    """Keep ``new`` beside ``dest`` (which changed since it was checked) and stop with one line saying where."""
    kept = keep_aside(new, dest)
    raise DestinationChanged(f"changed while this command ran (something not written by it appeared there); it was "
                          f"left as it is, and the new result is in {kept}", file=f"{option} {dest}")


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def _mark_in_progress(folder: Path) -> None:
    """The marker of a folder still being filled: a run killed with ``kill -9`` leaves it, and the next run
    recognises the temporary folder as the project's by its name and this file (``clean_stale_siblings``)."""
    text = json.dumps({"written_by": "coba-env", "what": "in-progress", "pid": os.getpid(), "entries": []}, indent=1)
    (folder / OUTPUT_MARKER).write_text(text + "\n", encoding="utf-8")


@contextmanager
def scratch_dir(dest: str | Path) -> Iterator[Path]:
    """A new marked folder beside ``dest`` for a command's intermediate files (``.NAME.tmp-<pid>-<hex>``), removed
    on leaving the context, Ctrl-C and SIGTERM included; after a ``kill -9``, the next run for ``dest`` removes
    it (``clean_stale_siblings``), as it does the temporaries of ``atomic_dir``."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    folder = _sibling(dest, "tmp")
    try:
        os.mkdir(folder, 0o777)  # inside the try: a signal right after it still removes the folder
        _mark_in_progress(folder)
        yield folder
    finally:
        with _interrupts_deferred():
            shutil.rmtree(folder, ignore_errors=True)


def mark_output(folder: str | Path, what: str) -> None:
    """Write the project's marker into ``folder``, listing its entries: a file added later by hand makes the
    folder no longer ours (``pools.output_paths.project_made``), so it is never replaced."""
    folder = Path(folder)
    names = sorted(p.name for p in folder.iterdir() if p.name != OUTPUT_MARKER)
    text = json.dumps({"written_by": "coba-env", "what": what, "entries": names}, indent=1) + "\n"
    atomic_write_text(folder / OUTPUT_MARKER, text)


def atomic_dir(dest: str | Path, fill: Callable[[Path], T], *, marker: str = "output",
               before_swap: Callable[[], object] | None = None) -> T:
    """Call ``fill(tmp)`` on a new empty folder beside ``dest``, write the project's marker file into it
    (``marker`` says what the folder is, e.g. "pool", "bench"), then put it in place of ``dest`` (which may exist; check it first with ``pools.output_paths``).

    ``dest`` ends up holding either its old content or the complete new one: on any error (Ctrl-C
    included) the temporary folder is removed and ``dest`` is untouched. Returns what ``fill`` returns.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with lock_destination(dest):
        return _swap_in_dir(dest, fill, marker, before_swap)


def _swap_in_dir(dest: Path, fill: Callable[[Path], T], marker: str, before_swap: Callable[[], object] | None) -> T:
    clean_stale_siblings(dest)
    tmp = _sibling(dest, "tmp")
    old: Path | None = None
    try:
        os.mkdir(tmp, 0o777)  # umask applies; inside the try, so Ctrl-C right after it still removes it
        _mark_in_progress(tmp)
        result = fill(tmp)
        mark_output(tmp, marker)
        with _interrupts_deferred():
            option = changed_since_check(dest)
            if option is not None:  # something appeared there while the command ran: keep both
                _refuse_swap(tmp, dest, option)
            if dest.exists() or dest.is_symlink():
                old = _sibling(dest, "old")
                os.rename(dest, old)
            if before_swap is not None:  # a test hook: the old folder is aside, the new one not yet in place
                before_swap()
            os.rename(tmp, dest)
            note_written(dest)
    except BaseException:
        with _interrupts_deferred():
            if old is not None and old.exists() and not dest.exists():  # put the previous result back
                os.rename(old, dest)
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        with _interrupts_deferred():
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
    return result
