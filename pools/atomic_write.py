"""Atomic file writes: a temporary file in the destination's folder, then ``os.replace``.

A reader never sees a half-written file, and a crash leaves the old file (if any) in place. The file gets
the usual permissions (``0o666`` less the process umask), not ``mkstemp``'s ``0600``. Standard library only,
so every layer (pools, coba_env, agents, train, eval, the CLI) can use it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text"]

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it onto ``path``.

    The parent folder is created if missing; on any error the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))
