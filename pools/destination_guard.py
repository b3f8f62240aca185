"""What keeps a destination safe between the up-front check and the final swap.

- **Re-check at the swap.** ``pools.output_paths`` records what a destination looked like when it was checked
  (``record_checked``); ``pools.atomic_write`` compares just before it puts the new result in place
  (``changed_since_check``). If something else appeared there meanwhile, nothing is replaced: the new result is
  kept beside it under a visible name and the command stops with one line saying where.
- **One run per destination.** ``lock_destination`` takes an exclusive ``flock`` on a lock file named after the
  destination, in a folder of the user's temporary directory (never in the user's folders); a second
  command aiming at the same destination is refused with one line naming the first one's process id. The
  operating system drops the lock when the process ends, however it ends.
- **Stale temporaries.** ``clean_stale_siblings`` removes temporary siblings (``.NAME.tmp-PID-HEX``) whose
  process is gone (a ``kill -9``), only when the name has that exact form and, for a folder, it holds the
  project's marker file or nothing else (a run killed before it wrote the marker); a moved-aside previous
  result (``.NAME.old-PID-HEX``) is put back when the destination is missing.

Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pools.errors import PoolError

try:
    import fcntl
except ImportError:  # not POSIX: no lock, the re-check at the swap still applies
    fcntl = None  # type: ignore[assignment]

__all__ = ["DestinationBusy", "DestinationChanged", "changed_since_check", "clean_stale_siblings", "command_scope", "hold_destination", "keep_aside",
           "last_destination",
           "lock_destination", "note_written", "completed_results", "record_checked", "release_destination_locks", "stale_sibling_pattern"]

#: Marker file name (the same as ``pools.atomic_write.OUTPUT_MARKER``; repeated so this module imports nothing).
_MARKER = ".coba-output"

_checked: dict[Path, tuple[object, str]] = {}
_locks: dict[Path, int] = {}
_order: list[Path] = []
_scope: list[bool] = []
_completed: list[Path] = []


class DestinationBusy(PoolError):
    """Another coba command is writing the same destination."""


class DestinationChanged(PoolError):
    """Something not written by this command appeared at its destination while it ran."""


def _key(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _fingerprint(path: Path) -> object:
    """None for a missing path or an empty folder; else what identifies its current content."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return ("dir", st.st_dev, st.st_ino)
        if not names:
            return None
        marker = path / _MARKER
        digest = hashlib.sha256(marker.read_bytes()).hexdigest() if marker.is_file() else None
        return ("dir", st.st_dev, st.st_ino, tuple(names), digest)
    return ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def record_checked(dest: str | os.PathLike[str], option: str) -> None:
    """Remember ``dest`` as checked now (what it holds and the option that named it)."""
    key = _key(Path(dest))
    _checked[key] = (_fingerprint(key), option)
    if key in _order:
        _order.remove(key)
    _order.append(key)


def note_written(dest: Path) -> None:
    """``dest`` now holds this command's own result: a later write of it by this command is no surprise, and a
    signal from now on arrives after that result is complete (``completed_results``)."""
    key = _key(dest)
    if key in _checked:
        _checked[key] = (_fingerprint(key), _checked[key][1])
        if key not in _completed:
            _completed.append(key)


def completed_results() -> list[Path]:
    """The checked destinations this command has written whole so far (named when a signal arrives after them)."""
    return list(_completed)


def last_destination() -> Path | None:
    """The destination this process checked last (named in a "disk full" message)."""
    return _order[-1] if _order else None


def changed_since_check(dest: Path) -> str | None:
    """The option that named ``dest`` if it changed since ``record_checked`` (else None)."""
    entry = _checked.get(_key(dest))
    if entry is None:
        return None
    expected, option = entry
    return None if _fingerprint(_key(dest)) == expected else option


def keep_aside(new: Path, dest: Path) -> Path:
    """Rename the finished result ``new`` to a visible free name beside ``dest``; return that name."""
    for i in range(1, 1000):
        target = dest.with_name(f"{dest.name}.new" if i == 1 else f"{dest.name}.new{i}")
        if not (target.exists() or target.is_symlink()):
            os.rename(new, target)
            return target
    raise PoolError("no free name to keep the new result beside it", file=str(dest))


def _lock_dir() -> Path:
    folder = Path(tempfile.gettempdir()) / f"coba-env-locks-{os.getuid() if hasattr(os, 'getuid') else 0}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _take_lock(key: Path, option: str) -> bool:
    """Lock ``key`` for this process; False if this process already held it."""
    if fcntl is None or key in _locks:
        return False
    lock_file = _lock_dir() / (hashlib.sha256(os.fsencode(key)).hexdigest()[:32] + ".lock")
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise DestinationBusy(f"another coba command (process {owner}) is writing here now; wait for it to "
                              "finish or choose another destination", file=f"{option} {key}") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode("ascii"))
    _locks[key] = fd
    return True


def release_destination_locks() -> None:
    """Release every destination lock this process holds (the command finished)."""
    for fd in _locks.values():
        os.close(fd)  # closing the last descriptor drops the flock
    _locks.clear()
    _checked.clear()
    _order.clear()


def hold_destination(dest: str | os.PathLike[str], option: str) -> None:
    """Within a ``command_scope``: lock ``dest`` until the command ends (elsewhere ``atomic_dir`` locks it for
    the swap only)."""
    if _scope:
        _take_lock(_key(Path(dest)), option)


@contextmanager
def command_scope() -> Iterator[None]:
    """One command's run: destinations it checks stay locked until it ends; its records are dropped after."""
    _scope.append(True)
    try:
        yield
    finally:
        _scope.pop()
        if not _scope:
            release_destination_locks()
            _completed.clear()


@contextmanager
def lock_destination(dest: Path, option: str = "destination") -> Iterator[None]:
    """Hold ``dest``'s lock for the block (a no-op when this process already holds it)."""
    key = _key(dest)
    taken = _take_lock(key, option)
    try:
        yield
    except OSError as exc:
        # The outermost destination being written when a write failed: a "disk full" error carries no path, and
        # the destination checked last may be another (a cache written after --out was checked).
        exc.coba_destination = key
        raise
    finally:
        if taken:
            os.close(_locks.pop(key))


def stale_sibling_pattern(name: str) -> re.Pattern[str]:
    """The names of temporary (``tmp``) and moved-aside (``old``) siblings of ``name`` (group 1: kind, 2: pid)."""
    return re.compile(rf"\.{re.escape(name)}\.(tmp|old)-(\d+)-[0-9a-f]{{8}}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _is_ours(path: Path) -> bool:
    if path.is_symlink():
        return False
    if path.is_dir():
        marker = path / _MARKER
        try:
            # A run killed between making the folder and writing its marker leaves the folder empty, or holding
            # only a marker cut short: nothing anyone could lose, so it goes too.
            names = os.listdir(path)
            if not names or (names == [_MARKER] and not marker.is_symlink() and marker.is_file()):
                return True
            return marker.is_file() and b'"written_by": "coba-env"' in marker.read_bytes()
        except OSError:
            return False
    return path.is_file()


def clean_stale_siblings(dest: Path) -> list[Path]:
    """Remove ``dest``'s temporary siblings left by a process that no longer runs; put a moved-aside previous
    result back when ``dest`` is missing. Returns the paths removed or restored."""
    parent = dest.parent
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    pattern = stale_sibling_pattern(dest.name)
    done = []
    for name in names:
        match = pattern.fullmatch(name)
        if not match or _alive(int(match.group(2))):
            continue
        path = parent / name
        if not _is_ours(path):
            continue
        if match.group(1) == "old" and not (dest.exists() or dest.is_symlink()):
            os.rename(path, dest)  # the previous result, moved aside by a run killed before its swap ended
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        done.append(path)
    return done
