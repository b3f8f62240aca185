"""``coba serve --record DIR``: served traffic as canonical JSONL that ``coba pools import`` turns into a pool.

Each request adds, in this order:

- its episodes (one per generator it sampled: every candidate with its text and tokens, every verification;
  ``pools.importers.jsonl``'s canonical records) to ``DIR/episodes-n<N>.jsonl``, N the episode's candidate
  count. A pool holds the same N candidates in every episode, so each file is one importable pool:
  ``coba pools import DIR/episodes-n2.jsonl --out POOL``;
- one line to ``DIR/requests.jsonl``: request id, status, policy, lambda, usage, costs, the path, the answer
  and, with a gold answer, its grade; which episode files hold its candidates.

Each file gets the request's lines in one ``write`` on a file opened for appending, under a lock: requests
never interleave and Ctrl-C or SIGTERM (which Python handles between writes) never cuts a request's lines.
A process killed mid-write (``kill -9``, a power cut) may leave a cut tail; the next start repairs it: the
cut line, and in an episode file the episode it belongs to, are cut off (reported on stderr). File names come
from N only: nothing of a request becomes a path.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pools.strict_json import strict_dumps

__all__ = ["REQUESTS_FILE", "TrafficRecord", "episode_file"]

REQUESTS_FILE = "requests.jsonl"
_TAIL_CHUNK = 1 << 16


def episode_file(n: int) -> str:
    """The file holding episodes of ``n`` candidates."""
    return f"episodes-n{int(n)}.jsonl"


class TrafficRecord:
    """Appends served requests to ``folder`` (created if missing; files already there are appended to)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        #: What the start-up repair cut off: (file name, bytes removed).
        self.repaired: list[tuple[str, int]] = []
        for path in sorted(self.folder.glob("episodes-n*.jsonl")) + [self.folder / REQUESTS_FILE]:
            if path.is_file():
                cut = _repair(path, _episode_size(path.name))
                if cut:
                    self.repaired.append((path.name, cut))

    def append(self, request: dict[str, Any], episodes: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Write ``episodes`` then the ``request`` line; returns where each episode went."""
        placed = []
        chunks: dict[str, list[str]] = {}
        for records in episodes:
            name = episode_file(len(records))
            chunks.setdefault(name, []).extend(strict_dumps(rec, ensure_ascii=False) + "\n" for rec in records)
            placed.append({"file": name, "generator": records[0]["generator"], "candidates": len(records)})
        line = strict_dumps({**request, "episodes": placed}, ensure_ascii=False) + "\n"
        with self._lock:
            for name, lines in chunks.items():
                _append(self.folder / name, "".join(lines).encode("utf-8"))
            _append(self.folder / REQUESTS_FILE, line.encode("utf-8"))
        return placed


def _append(path: Path, data: bytes) -> None:
    """``data`` at the end of ``path`` in one write (looping only if the system writes less)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _episode_size(name: str) -> int | None:
    """N of an episode file's name (``episodes-n4.jsonl`` -> 4); None for the requests file."""
    stem = name.removeprefix("episodes-n").removesuffix(".jsonl")
    return int(stem) if stem.isdigit() else None


def _repair(path: Path, n: int | None) -> int:
    """Cut a cut-short tail off ``path``: a last line without its newline or one that is not JSON, and in an
    episode file (``n`` candidates per episode) a last episode with fewer lines. Returns the bytes cut."""
    size = path.stat().st_size
    lines = _tail_lines(path, size, (n or 1) + 1)
    keep = size
    if lines and not lines[-1][1].endswith(b"\n"):
        keep = lines.pop()[0]
    while lines and not _is_json(lines[-1][1]):
        keep = lines.pop()[0]
    if n and lines:  # episodes are written whole: a cut leaves candidates 0..k of one, k < n - 1
        k = _candidate(lines[-1][1])
        if k != n - 1:
            keep = lines[-(k + 1)][0] if isinstance(k, int) and 0 <= k < len(lines) else lines[-1][0]
    if keep < size:
        os.truncate(path, keep)
    return size - keep


def _tail_lines(path: Path, size: int, count: int) -> list[tuple[int, bytes]]:
    """The last ``count`` lines of ``path`` (fewer if it has fewer) as (byte offset, raw line)."""
    chunk = _TAIL_CHUNK
    with open(path, "rb") as fh:
        while True:
            start = max(0, size - chunk)
            fh.seek(start)
            data = fh.read(size - start)
            if data.count(b"\n") > count or start == 0:
                break
            chunk *= 4
    raw = data.split(b"\n")
    pieces = [line + b"\n" for line in raw[:-1]] + ([raw[-1]] if raw[-1] else [])
    offsets, at = [], start
    for piece in pieces:
        offsets.append((at, piece))
        at += len(piece)
    if start > 0:
        offsets = offsets[1:]  # the first piece may be a partial line
    return offsets[-count:]


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def _candidate(raw: bytes) -> Any:
    record = json.loads(raw)
    return record.get("candidate") if isinstance(record, dict) else None
