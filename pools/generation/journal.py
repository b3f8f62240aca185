"""The generation work dir's journal: an append-only, fsync'd JSONL log of every completed call.

A work dir holds ``journal.jsonl`` and a ``.lock`` file. Each line is one JSON object with a ``kind``:

- ``item``: a problem (dataset, item_id, problem, gold, level, subject, task, metadata).
- ``generation``: one completed sampling call: dataset, item_id, generator, params_b, settings, seed,
  prompt_tokens, latency_s, and ``candidates`` (candidate index, text, finish_reason, output_tokens,
  tokens_estimated) for the choices the server returned.
- ``verification``: one completed judge call: dataset, item_id, generator, candidate, tier, model,
  params_b, score (null = no usable score), method, prompt_tokens, output_tokens, latency_s.

Lines are written whole and fsync'd before the call counts as done, so a crash loses at most the calls in
flight; a torn last line (a crash mid-write) is cut off when the journal is next opened. Reading keeps the
first line per key, (dataset, item_id, generator, candidate) for candidates and (..., tier) for scores, so
nothing is ever counted twice. One process at a time may write a work dir (an exclusive ``flock``).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pools.errors import PoolError
from pools.parse_boundary import describe_bad_record, parse_json_line
from pools.schema import TIERS

__all__ = ["JOURNAL_NAME", "CandidateKey", "Journal", "JournalState", "ScoreKey", "read_journal"]

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = ".lock"

#: (dataset, item_id, generator, candidate)
CandidateKey = tuple[str, str, str, int]
#: (dataset, item_id, generator, candidate, tier)
ScoreKey = tuple[str, str, str, int, str]

_ITEM_FIELDS = ("problem", "gold", "level", "subject", "task", "metadata")


@dataclass
class JournalState:
    """What a journal holds, deduplicated: items, candidates and scores by key, in order of first appearance."""

    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    candidates: dict[CandidateKey, dict[str, Any]] = field(default_factory=dict)
    scores: dict[ScoreKey, dict[str, Any]] = field(default_factory=dict)
    by_episode: dict[tuple[str, str, str], set[int]] = field(default_factory=dict)
    duplicates: int = 0
    lines: int = 0

    def candidate_indices(self, dataset: str, item_id: str, generator: str) -> set[int]:
        """Candidate indices already generated for one episode."""
        return set(self.by_episode.get((dataset, item_id, generator), ()))

    def add(self, line: dict[str, Any], where: str) -> list[tuple]:
        """Fold one journal line into the state; returns the new keys it added (duplicates are skipped)."""
        return self._fold(line, where, writing=False)[1]

    def add_unseen(self, line: dict[str, Any], where: str) -> tuple[dict[str, Any] | None, list[tuple]]:
        """Fold in a line about to be journaled: returns it less the candidates already held (None when it
        adds nothing; then the state is unchanged) and the new keys. Raises when an item conflicts."""
        return self._fold(line, where, writing=True)

    def _fold(self, line: dict[str, Any], where: str, *, writing: bool) -> tuple[dict[str, Any] | None, list[tuple]]:
        """``add`` and ``add_unseen``: a writer skips what is already held without counting it a duplicate."""
        kind = line.get("kind")
        check_line_types(line, where)
        added: list[tuple] = []
        if kind == "item":
            key = (line["dataset"], line["item_id"])
            item = {f: line.get(f) for f in _ITEM_FIELDS}
            if key in self.items:
                if self.items[key] != item:
                    diff = [f for f in _ITEM_FIELDS if self.items[key][f] != item[f]]
                    raise PoolError(f"item (dataset {key[0]!r}, item_id {key[1]!r}) differs from the journal's "
                                    f"earlier line in {diff}; a work dir holds one version of each item",
                                    file=where, field=diff[0])
                return None, added
            self.items[key] = item
            added.append(key)
            unseen = line
        elif kind == "generation":
            base = (line["dataset"], line["item_id"], line["generator"])
            keys = [(*base, int(cand["candidate"])) for cand in line["candidates"]]
            call = {k: v for k, v in line.items() if k != "candidates"}
            fresh: list[dict[str, Any]] = []  # the candidates not held before this line
            for key, cand in zip(keys, line["candidates"], strict=True):
                if key in self.candidates:
                    if key in added:  # repeated within this line: journaled as given, counted as a duplicate
                        fresh.append(cand)
                        self.duplicates += 1
                    elif not writing:
                        self.duplicates += 1
                    continue
                self.candidates[key] = {**call, **cand}
                self.by_episode.setdefault(base, set()).add(key[3])
                added.append(key)
                fresh.append(cand)
            if writing and not fresh:
                return None, added
            unseen = line if len(fresh) == len(line["candidates"]) else {**line, "candidates": fresh}
        elif kind == "verification":
            key = (line["dataset"], line["item_id"], line["generator"], int(line["candidate"]), line["tier"])
            if key[4] not in TIERS:  # refused, not dropped: a score under an unknown tier would vanish in build
                raise PoolError(f"unknown verifier tier {key[4]!r}; expected one of {list(TIERS)}", file=where,
                                field="tier")
            if key in self.scores:
                if not writing:
                    self.duplicates += 1
                return None, added
            self.scores[key] = line
            added.append(key)
            unseen = line
        else:
            raise PoolError(f"unknown line kind {kind!r}; expected 'item', 'generation' or 'verification'",
                            file=where, field="kind")
        self.lines += 1
        return unseen, added


#: The type of each journal field a line may hold, by line kind (``None``: null allowed): a value of another type
#: (``prompt_tokens: "19"``) is refused, never converted, as ``pools import`` refuses it.
_INT, _NUMBER, _TEXT = "an integer", "a number", "a string"
LINE_TYPES: dict[str, dict[str, tuple[str, bool]]] = {
    "generation": {"dataset": (_TEXT, False), "item_id": (_TEXT, False), "generator": (_TEXT, False),
                   "params_b": (_NUMBER, False), "prompt_tokens": (_INT, False), "latency_s": (_NUMBER, False)},
    "verification": {"dataset": (_TEXT, False), "item_id": (_TEXT, False), "generator": (_TEXT, False),
                     "candidate": (_INT, False), "tier": (_TEXT, False), "model": (_TEXT, False),
                     "params_b": (_NUMBER, False), "score": (_NUMBER, True), "prompt_tokens": (_INT, True),
                     "output_tokens": (_INT, True), "latency_s": (_NUMBER, False)},
}
#: The fields of each candidate of a generation line.
CANDIDATE_TYPES: dict[str, tuple[str, bool]] = {"candidate": (_INT, False), "text": (_TEXT, True),
                                                "finish_reason": (_TEXT, False), "output_tokens": (_INT, True)}


def _type_ok(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    return {_INT: isinstance(value, int), _NUMBER: isinstance(value, int | float),
            _TEXT: isinstance(value, str)}[kind]


def _check_fields(obj: dict[str, Any], types: dict[str, tuple[str, bool]], where: str, prefix: str = "") -> None:
    for name, (kind, nullable) in types.items():
        if name in obj and not (obj[name] is None and nullable) and not _type_ok(obj[name], kind):
            value = obj[name]
            raise PoolError(f"expected {kind}{' or null' if nullable else ''}, got {str(value)[:60]!r} "
                            f"({type(value).__name__})", file=where, field=prefix + name)


def check_line_types(line: dict[str, Any], where: str) -> None:
    """Refuse a journal line whose fields are present with the wrong type (a hand-edited ``"prompt_tokens": "19"``);
    a missing field is reported where it is read."""
    types = LINE_TYPES.get(line.get("kind"))
    if types is None:
        return
    _check_fields(line, types, where)
    if line.get("kind") == "generation" and isinstance(line.get("candidates"), list):
        for k, cand in enumerate(line["candidates"]):
            if isinstance(cand, dict):
                _check_fields(cand, CANDIDATE_TYPES, where, prefix=f"candidates[{k}].")


def _iter_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        yield from _parsed_lines(path)
    except UnicodeDecodeError as exc:
        raise PoolError(f"the journal is not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from None


def _parsed_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            if not text.endswith("\n"):
                return  # a torn last line from a crash mid-write: that call was still in flight
            obj = parse_json_line(text, where=f"{path}, line {lineno}", what="journal line")
            if not isinstance(obj, dict):
                raise PoolError(f"expected a JSON object with a 'kind', got {type(obj).__name__} {text.strip()[:60]}",
                                file=f"{path}, line {lineno}")
            yield lineno, obj


def read_journal(workdir: str | os.PathLike[str]) -> JournalState:
    """Read a work dir's journal (read-only, no lock) into a deduplicated ``JournalState``."""
    path = Path(workdir) / JOURNAL_NAME
    if not path.is_file():
        raise PoolError("no journal here; run `coba pools generate` with this work dir first", file=str(path))
    state = JournalState()
    for lineno, obj in _iter_lines(path):
        try:
            state.add(obj, f"{path}, line {lineno}")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, PoolError):
                raise
            raise PoolError(f"journal line {describe_bad_record(exc)}", file=f"{path}, line {lineno}") from None
    return state


class Journal:
    """An open journal for writing: holds the work dir's lock; ``append`` writes, flushes and fsyncs a line."""

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.path = self.workdir / JOURNAL_NAME
        self._lock_fh = open(self.workdir / LOCK_NAME, "a+")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            raise PoolError("another process is writing this work dir (its .lock is held); wait for it or "
                            "stop it first", file=str(self.workdir)) from None
        self._cut_torn_tail()
        self.state = read_journal(self.workdir) if self.path.exists() else JournalState()
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._mutex = threading.Lock()

    def _cut_torn_tail(self) -> None:
        """Drop a last line without its newline (a crash mid-write), so the next append starts clean."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            block = 1 << 16
            pos = size
            while pos > 0:
                start = max(0, pos - block)
                fh.seek(start)
                chunk = fh.read(pos - start)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    fh.truncate(start + cut + 1)
                    break
                pos = start
            else:
                fh.truncate(0)
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, line: dict[str, Any]) -> list[tuple]:
        """Write one line durably, less anything already journaled (then maybe nothing); return the new keys."""
        return self.append_many([line])

    def append_many(self, lines: list[dict[str, Any]]) -> list[tuple]:
        """Write several lines with one fsync (each line still whole on its own); return the new keys."""
        with self._mutex:
            fresh: list[dict[str, Any]] = []
            added: list[tuple] = []
            for line in lines:
                unseen, keys = self.state.add_unseen(line, str(self.path))  # if the write fails, the run stops
                if unseen is not None:
                    fresh.append(unseen)
                    added += keys
            if fresh:
                self._fh.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in fresh))
                self._fh.flush()
                os.fsync(self._fh.fileno())
            return added

    def close(self) -> None:
        """Close the file and release the work dir's lock."""
        self._fh.close()
        fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
