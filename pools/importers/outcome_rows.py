"""Outcome rows: an outcome table in long form, one row per (query, model[, sample]), as numpy columns.

The wide and long table readers (``pools.importers.wide_table``, ``pools.importers.long_table``) turn their files
into ``OutcomeRows``; ``pools.importers.outcome_table.build_outcome_pool`` turns these into a pool. Each row
remembers its file and row number, and each field the name of the source column it came from, so every error
found later still names the file, the row and the column.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from pools.errors import PoolError

__all__ = ["OutcomeRows"]


@dataclass
class OutcomeRows:
    """Columns of equal length (object arrays hold str or None; float arrays NaN where missing)."""

    dataset: np.ndarray
    item_id: np.ndarray
    problem: np.ndarray
    gold: np.ndarray
    subject: np.ndarray
    generator: np.ndarray
    candidate: np.ndarray  # int64
    score: np.ndarray  # float64 in [0, 1]: the source's outcome of the call
    graded: np.ndarray  # bool: the score was a number (a graded score), not True/False
    text: np.ndarray
    answer: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cost_usd: np.ndarray
    #: Where each row came from: an index into ``files`` and its row (or line) number there.
    origin: np.ndarray
    row: np.ndarray
    #: (path, "row" or "line") per file.
    files: list[tuple[str, str]] = field(default_factory=list)
    #: The source column (or field path) each field was read from, for messages.
    columns: dict[str, str] = field(default_factory=dict)
    #: Scores outside [0, 1] clipped into it (``--scores-outside clip``): ``{"where", "column", "score"}`` each.
    clipped: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.score)

    def where(self, pos: int) -> str:
        """``<file>, row <n>`` (or ``line <n>``) of the row at position ``pos``."""
        path, unit = self.files[int(self.origin[pos])]
        return f"{path}, {unit} {int(self.row[pos])}"

    def error(self, message: str, pos: int, field_name: str) -> PoolError:
        """A ``PoolError`` naming the row at ``pos`` and the source column of ``field_name``."""
        return PoolError(message, file=self.where(pos), column=self.columns.get(field_name, field_name))

    @staticmethod
    def concat(parts: list[OutcomeRows]) -> OutcomeRows:
        """One ``OutcomeRows`` of ``parts`` in order (their files renumbered; the first part's column names)."""
        if not parts:
            raise ValueError("no outcome rows to join")
        arrays = {}
        offset, files, origins = 0, [], []
        for part in parts:
            origins.append(part.origin + offset)
            offset += len(part.files)
            files.extend(part.files)
        for f in fields(OutcomeRows):
            if f.name in ("files", "columns", "origin", "clipped"):
                continue
            arrays[f.name] = np.concatenate([getattr(p, f.name) for p in parts])
        columns = {}
        for part in parts:
            columns = {**part.columns, **columns}
        return OutcomeRows(**arrays, origin=np.concatenate(origins), files=files, columns=columns,
                           clipped=[c for p in parts for c in p.clipped])
