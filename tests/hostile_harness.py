"""The harness of the hostile-input suite: a case folder, a tree snapshot, and one in-process ``coba`` run.

Every case runs in its own folder holding copies of the shared assets (``ok.jsonl``, a pool, checkpoints,
a generation work dir); the case's own setup adds what it needs. The runner calls ``coba_cli.main.main``
in-process (an exception escaping it is a traceback the user would see) and returns the exit code and
stderr. ``snapshot`` records every path under the folder with its content digest, so a test can assert
that a refused command changed nothing and left no temporary sibling behind.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Names of the shared assets every case folder starts with.
ASSETS = ("ok.jsonl", "pool", "ck_ok", "ck_nmax16", "ck_garbage", "ck_badjson", "work", "problems")


@dataclass(frozen=True)
class Case:
    """One hostile input: ``argv`` (``{url}`` is the fake server), what must come back, and how to set it up.

    ``setup(folder)`` prepares extra files; ``server`` sets attributes of the fake server for this case;
    ``may_create`` lists paths a refused run may leave (a generation work dir the run itself created);
    ``no_calls``: the server must not have been called (outputs are checked before any model call).
    """

    id: str
    argv: tuple[str, ...]
    code: int
    message: str
    setup: Callable[[Path], Any] | None = None
    server: dict[str, Any] = field(default_factory=dict)
    may_create: tuple[str, ...] = ()
    no_calls: bool = False


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> "dir", "link:<target>", "fifo" or the SHA-256 of the file's bytes, for everything under
    ``root``."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"link:{path.readlink()}"
        elif stat.S_ISFIFO(path.lstat().st_mode):  # reading a FIFO would wait for a writer
            out[rel] = "fifo"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def populate(folder: Path, assets: Path) -> None:
    """Copy the shared assets into a case folder."""
    for name in ASSETS:
        src = assets / name
        if src.is_dir():
            shutil.copytree(src, folder / name, symlinks=True)
        else:
            shutil.copy2(src, folder / name)


def run_coba(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """Run ``coba ARGV`` in-process: (exit code, stdout, stderr). An escaping exception is a test failure
    that shows the traceback a user would have seen."""
    from coba_cli.main import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - any escaping exception is what this suite exists to catch
        out = capsys.readouterr()
        raise AssertionError(f"coba {' '.join(argv)} ended in a traceback:\n{traceback.format_exc()}\n"
                             f"stderr: {out.err}") from None
    out = capsys.readouterr()
    return int(code), out.out, out.err


def write_json_lines(path: Path, records: list[Any]) -> Path:
    """Write ``records`` one JSON value per line (allow_nan so near-miss tests can write NaN tokens)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
