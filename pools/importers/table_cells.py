"""Cells of an outcome table read as values: an outcome (True/False or a score in [0, 1]), a token count, dollars,
text. Each reader takes a whole column at once and refuses its first bad cell in one line naming the file, the
row and the column (``RawTable.error``).

An empty cell (CSV ""), a null (Parquet, JSON) or a missing JSON field is *missing*: no outcome (the model did
not answer that query), or a cost the source did not record. A cell that says "NaN" or infinity is not missing
but broken, and is refused: an empty cell is how a table says "none".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pools.importers.table_files import RawTable, all_text
from pools.limits import MAX_TOKENS

__all__ = ["BOOLEAN_WORDS", "OUTSIDE_RULES", "count_cells", "dollar_cells", "missing_cells", "outcome_cells", "text_cells"]

#: Words read as an outcome of 1.0 or 0.0 (any case): what pandas and Python write for booleans.
BOOLEAN_WORDS: dict[str, float] = {"true": 1.0, "false": 0.0}


def missing_cells(cells: np.ndarray) -> np.ndarray:
    """Where a column's cells are missing: None, or a CSV's empty (all-blank) text."""
    if all_text(cells):  # "" or whitespace only (``str.isspace`` is False for ""): what ``not c.strip()`` says
        n = len(cells)
        return (np.fromiter(map(len, cells), dtype=np.int64, count=n) == 0) | \
            np.fromiter(map(str.isspace, cells), dtype=bool, count=n)
    return np.fromiter((c is None or (isinstance(c, str) and not c.strip()) for c in cells), dtype=bool,
                       count=len(cells))


def _numbers(cells: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as float64 with NaN where missing or unreadable, unreadable mask, boolean-cell mask)."""
    values = np.full(len(cells), np.nan)
    if all_text(cells):  # a CSV column: no Python bool or number among its cells
        is_bool, is_text = np.zeros(len(cells), dtype=bool), ~missing
    else:
        is_bool = np.fromiter((isinstance(c, bool | np.bool_) for c in cells), dtype=bool, count=len(cells))
        is_text = np.fromiter((isinstance(c, str) for c in cells), dtype=bool, count=len(cells)) & ~missing
    values[is_bool] = cells[is_bool].astype(float)
    plain = ~missing & ~is_bool & ~is_text
    if plain.any():  # numbers from Parquet or JSON (a list or an object is unreadable)
        values[plain] = [float(c) if isinstance(c, int | float) else math.nan for c in cells[plain]]
    if is_text.any():  # each distinct text read once (a True/False column has two)
        codes, distinct = pd.factorize(cells[is_text])
        text = pd.Series(distinct, dtype=object).str.strip()
        words = text.str.lower().map(BOOLEAN_WORDS)
        is_word = words.notna().to_numpy()
        parsed = pd.to_numeric(text.where(~is_word), errors="coerce").to_numpy(dtype=float)
        values[is_text] = np.where(is_word, words.to_numpy(dtype=float, na_value=np.nan), parsed)[codes]
        is_bool[np.flatnonzero(is_text)[is_word[codes]]] = True
    unreadable = ~missing & ~np.isfinite(values)
    return values, unreadable, is_bool


def _shown(cell: Any) -> str:
    text = repr(cell)
    return text if len(text) <= 60 else text[:57] + "..."


#: What an outcome table's score outside [0, 1] gets (``--scores-outside``): refused, or clipped into the range
#: with every clipped score listed in the manifest's ``provenance.scores_clipped`` and counted by the import.
OUTSIDE_RULES: tuple[str, ...] = ("refuse", "clip")


def outcome_cells(table: RawTable, column: str, outside_rule: str = "refuse",
                  clipped: list[dict[str, Any]] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score in [0, 1] as float64 with NaN where missing, missing mask, boolean mask) of an outcome column:
    True/False (any case) or a number in [0, 1]; a number outside is refused, or clipped (``outside_rule``
    "clip") and appended to ``clipped`` as ``{"where", "column", "score"}``."""
    cells = table.column(column)
    missing = missing_cells(cells)
    values, unreadable, is_bool = _numbers(cells, missing)
    if unreadable.any():
        pos = int(np.argmax(unreadable))
        raise table.error(f"is {_shown(cells[pos])}; expected True, False or a score in [0, 1] (the model's outcome "
                          "on the query; an empty cell when it has none)", pos, column)
    outside = (values < 0) | (values > 1)
    if outside.any() and outside_rule != "clip":
        pos = int(np.argmax(outside))
        raise table.error(f"score {_shown(cells[pos])} is outside [0, 1]; expected True, False or a score in [0, 1] "
                          "(--scores-outside clip clips such scores and lists them)", pos, column)
    for pos in np.flatnonzero(outside):
        if clipped is not None:
            clipped.append({"where": f"{table.path}, {table.unit} {int(table.rows[pos])}", "column": column,
                            "score": float(values[pos])})
    return np.clip(values, 0.0, 1.0), missing, is_bool


def count_cells(table: RawTable, column: str) -> np.ndarray:
    """A token-count column as float64, NaN where missing: whole numbers from 0 to ``MAX_TOKENS``."""
    return _amount_cells(table, column, lambda v: (v < 0) | (v > MAX_TOKENS) | (np.isfinite(v) & (v % 1 != 0)),
                         f"a whole number of tokens from 0 to {MAX_TOKENS:g}")


def dollar_cells(table: RawTable, column: str) -> np.ndarray:
    """A cost column in US dollars as float64, NaN where missing: finite numbers >= 0."""
    return _amount_cells(table, column, lambda v: v < 0, "the call's cost in dollars, a finite number >= 0")


def _amount_cells(table: RawTable, column: str, out_of_range: Callable[[np.ndarray], np.ndarray],
                  expected: str) -> np.ndarray:
    """A numeric column as float64, NaN where missing; an unreadable, boolean or ``out_of_range`` cell is refused
    with one line saying the ``expected`` value."""
    cells = table.column(column)
    values, unreadable, is_bool = _numbers(cells, missing_cells(cells))
    bad = unreadable | is_bool | out_of_range(values)
    if bad.any():
        pos = int(np.argmax(bad))
        raise table.error(f"is {_shown(cells[pos])}; expected {expected} (an empty cell when not recorded)", pos, column)
    return values


def text_cells(table: RawTable, column: str) -> np.ndarray:
    """A text column as an object array of str, None where missing; a number is kept as its text."""
    cells = table.column(column)
    bad = np.fromiter((c is not None and not isinstance(c, str | int | float) for c in cells), dtype=bool,
                      count=len(cells))
    if bad.any():
        pos = int(np.argmax(bad))
        raise table.error(f"is {_shown(cells[pos])}; expected text", pos, column)
    if all_text(cells):
        out = cells.copy()
    else:
        out = np.array([None if c is None or (isinstance(c, float) and math.isnan(c)) else str(c) for c in cells]
                       + [None], dtype=object)[:-1]
    out[missing_cells(out)] = None
    return out
