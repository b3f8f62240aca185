"""Output destinations, checked before any work: the right kind, writable, and never something not ours.

Every command that writes a folder (pools, bench reports, sweep tables, checkpoints) or a file (JSONL
exports, solve traces) checks its destination here first, then writes through ``pools.atomic_write``. The
rules (docs/OUTPUTS.md):

- a folder destination that exists is replaced only when the project made it (it holds the
  ``.coba-output`` marker and nothing the marker does not list, or it is a pool: ``manifest.json`` and
  pool tables only) or it is empty; and
  only with ``force`` when the command asks for it (pool writers do, bench and sweep folders are results
  a re-run replaces);
- a file destination that exists is replaced only with ``force`` and only when it is a regular file;
- a destination is never the command's own input (the source file, the work dir), nor holds it;
- the folder it goes into must be (or be creatable in) a writable folder.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from pools.atomic_write import OUTPUT_MARKER
from pools.destination_guard import hold_destination, record_checked
from pools.errors import PoolError

__all__ = ["OutputPathError", "check_output_dir", "check_output_file", "project_made"]

#: What a pool folder holds (``pools.store.save_pool``; ``embeddings.parquet``: the optional table of
#: ``pools.embeddings``); a folder of only these is a pool we wrote.
_POOL_FILES = frozenset({"manifest.json", "items.parquet", "models.parquet", "episodes.parquet",
                         "candidates.parquet", "verifications.parquet", "embeddings.parquet", OUTPUT_MARKER})


#: What a controller checkpoint folder holds (``coba train``).
_CHECKPOINT_FILES = frozenset({"controller.json", "model.pt", "model.zip", "checkpoints", "tb"})


#: What bench and sweep folders written before the marker existed hold (recognised by their layout).
_BENCH_FILES = frozenset({"report.md", "report.html", "results.json", "tables", "figures", "episodes.parquet",
                          "episodes.csv.gz"})
_SWEEP_FILES = frozenset({"frontier.csv", "frontier.md", "episodes.csv"})


#: Bytes the temporary sibling's name adds to the destination's ("." + ".tmp-" + pid + "-" + 8 hex digits).
_TMP_EXTRA = 32


class OutputPathError(PoolError):
    """An output destination that cannot or must not be written; the CLI exits 2 on it."""


def project_made(folder: Path) -> str | None:
    """What ``folder`` is, if coba-env wrote it and nobody added to it since: the kind its marker names
    ("pool", "bench", "sweep", "checkpoint", ...) when it holds only the entries the marker lists; for a
    folder without a marker (written by an older version) the kind its layout shows: a pool, a controller
    checkpoint, a bench or a sweep folder holding only the files those write; None for anything else."""
    names = {p.name for p in folder.iterdir()}
    marker = folder / OUTPUT_MARKER
    if marker.is_file():
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
            listed, kind = data["entries"], str(data.get("what") or "output")
        except (OSError, UnicodeDecodeError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
            return None
        ours = isinstance(listed, list) and names - {OUTPUT_MARKER} <= set(map(str, listed))
        return kind if ours else None
    if "manifest.json" in names and names <= _POOL_FILES:
        return "pool"
    if "controller.json" in names and names <= _CHECKPOINT_FILES:
        return "checkpoint"
    if "results.json" in names and names <= _BENCH_FILES:
        return "bench"
    if "frontier.csv" in names and names <= _SWEEP_FILES:
        return "sweep"
    return None


def _writable_parent(path: Path, option: str) -> None:
    """The nearest existing ancestor of ``path`` must be a writable folder (the rest is created)."""
    parent = path.parent
    while not parent.exists():
        if parent.is_symlink():  # a dangling link: mkdir would fail
            raise OutputPathError(f"{parent} is a broken symbolic link", file=_where(option, path))
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{parent} is not a folder", file=_where(option, path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write in {parent} (no write permission)", file=_where(option, path))
    # os.access does not see read-only mounts, and root passes it everywhere: try a real (empty) file.
    probe = parent / f".coba-write-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise OutputPathError(f"cannot write in {parent} ({exc.strerror})", file=_where(option, path)) from None
    probe.unlink()
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    # The temporary sibling is ".NAME.tmp-<pid>-<8 hex>": keep room for it.
    too_long = [p.name for p in (path, *path.parents) if len(os.fsencode(p.name)) + _TMP_EXTRA > name_max]
    if too_long:
        raise OutputPathError(f"the name {too_long[0][:40]}... is too long; expected at most "
                              f"{name_max - _TMP_EXTRA} bytes", file=_where(option, path))


def _claim(dest: Path, option: str) -> None:
    """Lock ``dest`` for this command (a second command writing it is refused) and remember what it holds now,
    so the final swap can tell whether something else appeared there meanwhile (``pools.destination_guard``)."""
    hold_destination(dest, option)
    record_checked(dest, option)


def _where(option: str, path: Path) -> str:
    return f"{option} {path}"


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _check_not_input(dest: Path, inputs: Sequence[str | os.PathLike[str] | None], option: str) -> None:
    target = dest.resolve()
    for given in inputs:
        if given is None or not str(given) or not Path(given).exists():  # e.g. a built-in profile name
            continue
        source = Path(given).resolve()
        if source.is_dir() and target != source and _inside(target, source):
            raise OutputPathError(f"the destination is inside this command's input {given}; choose another "
                                  "destination", file=_where(option, dest))
        if _inside(source, target):
            raise OutputPathError(f"the destination {'is' if source == target else 'holds'} this "
                                  f"command's input {given}; choose another destination", file=_where(option, dest))


def check_output_dir(dest: str | os.PathLike[str], *, force: bool = True, option: str = "destination",
                     inputs: Sequence[str | os.PathLike[str] | None] = (), force_flag: str = "--force",
                     kind: str | None = None) -> Path:
    """Check that folder ``dest`` may be written (see the module docstring); raise ``OutputPathError`` if not.

    ``force``: whether an existing project-made folder may be replaced (False: any existing non-empty
    folder is refused with a hint to pass ``force_flag``). ``kind``: replace only a folder of this kind
    ("pool", "bench", ...), so a bench never replaces a pool or a checkpoint.
    """
    dest = Path(dest)
    _check_not_input(dest, inputs, option)
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise OutputPathError("exists and is not a folder; give a folder path", file=_where(option, dest))
    if dest.is_dir():
        try:
            empty = not any(dest.iterdir())
        except PermissionError:
            raise OutputPathError("no permission to read this folder", file=_where(option, dest)) from None
        if not empty:
            made = project_made(dest)
            if made is None:
                raise OutputPathError("the folder exists and holds files coba-env did not write; "
                                      "it is never replaced: remove it yourself or choose another folder",
                                      file=_where(option, dest))
            if kind is not None and made != kind:
                raise OutputPathError(f"holds a coba-env {made}, not a {kind}; it is not replaced by this command: "
                                      "choose another folder", file=_where(option, dest))
            if not force:
                raise OutputPathError(f"already exists (pass {force_flag} to replace it)", file=_where(option, dest))
    _writable_parent(dest, option)
    _claim(dest, option)
    return dest


def check_output_file(dest: str | os.PathLike[str], *, force: bool = False, option: str = "destination",
                      inputs: Sequence[str | os.PathLike[str] | None] = (), force_flag: str = "--force") -> Path:
    """Check that file ``dest`` may be written: a missing file, or with ``force`` an existing regular file."""
    dest = Path(dest)
    _check_not_input(dest, inputs, option)
    if dest.is_dir():
        raise OutputPathError("is a folder; expected a file path", file=_where(option, dest))
    if dest.exists() or dest.is_symlink():
        if not dest.is_file() or dest.is_symlink():
            raise OutputPathError("exists and is not a regular file", file=_where(option, dest))
        if not force:
            raise OutputPathError(f"already exists (pass {force_flag} to replace it)", file=_where(option, dest))
    _writable_parent(dest, option)
    _claim(dest, option)
    return dest
