"""``validate_pool``'s checks of the two large tables (candidates, verifications), one batch of rows at a time.

``pools.validate.validate_pool`` checks a whole in-memory pool and stops at the first problem in a fixed order.
``pools.stored_validation`` gives the same first problem for a stored pool read a batch of rows at a time: the
checks of the small tables (items, models, episodes, manifest) run as ``validate_pool``'s own functions; the
checks of the large tables are the steps below, in ``validate_pool``'s order. A row check records the first row
it fails at (a batch is checked step by step up to its first failure, and a later batch only for steps before the
earliest failure so far); the checks that need the whole table (duplicate keys, candidate indices per episode,
cluster order, names) run at the end on compact arrays (``pools.whole_steps``). The messages are ``validate_pool``'s
(tests/test_stored_validation.py compares them case by case).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pools.column_kinds import KIND_NAMES, kind_problem
from pools.schema import TABLES
from pools.validate import HIGH_BOUNDS, ROW_MESSAGES, high_message

C, V = "candidates", "verifications"


def _range_steps(table: str) -> list[tuple[str, str, str]]:
    return [(kind, table, col) for col in HIGH_BOUNDS for kind in ("negative", "high")]


#: validate_pool's checks of the large tables in its order (kind, table, field); the thin checks of the small
#: tables run between them (``pools.stored_validation``). "whole" steps need the whole table (run at the end).
STEPS: tuple[tuple[str, str, str], ...] = (
    *[("kind", t, col) for t in (C, V) for col in TABLES[t]],
    ("whole_keys", C, "candidate"), ("whole_keys", V, "tier"),
    ("name", V, "model"),
    *_range_steps(C), *_range_steps(V),
    ("negative", C, "candidate"), ("finite", C, "latency_s"), ("unit", C, "repetition_score"),
    ("tier_form", V, "tier"), ("tier_case", V, "tier"), ("tier_role", V, "tier"),
    ("score", V, "score"), ("finite", V, "latency_s"),
    ("graded", C, "graded_score"), ("usd", C, "cost_usd"), ("outcome_key", C, "answer_key"),
    ("episode_ref", C, "episode_id"),
    ("whole_indices", C, "candidate"),
    ("candidate_ref", V, "candidate"), ("model_known", V, "model"), ("model_role", V, "model"),
    ("cluster_range", C, "cluster"), ("cluster_minus1", C, "cluster"), ("cluster_null", C, "cluster"),
    ("whole_order", C, "cluster"),
)
STEP_INDEX = {step: k for k, step in enumerate(STEPS)}

@dataclass
class Failure:
    """The first row a check fails at: table, row position, field and message (``{value}``: the row's value)."""

    table: str
    pos: int
    field: str
    message: str


@dataclass
class RowRecord:
    """The first failure of each step found so far, and the earliest step that failed (later steps are moot)."""

    failures: dict[int, Failure] = field(default_factory=dict)
    limit: int = len(STEPS)

    def record(self, step: int, failure: Failure) -> None:
        """Keep ``failure`` as ``step``'s first (batches come in table order) and lower the limit."""
        self.failures.setdefault(step, failure)
        self.limit = min(self.limit, step)

    def wants(self, step: tuple[str, str, str]) -> bool:
        """Whether ``step`` can still be the pool's first problem."""
        return STEP_INDEX[step] < self.limit


def numbers(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """A column as float64 with NaN for nulls (validate_pool's ``to_numpy(dtype=float, na_value=np.nan)``)."""
    return pc.cast(batch.column(name), pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def notnull(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """Whether each value of a column is set (validate_pool's ``notna``; NaN counts as missing)."""
    column = batch.column(name)
    mask = pc.is_valid(column).to_numpy(zero_copy_only=False)
    if pa.types.is_floating(column.type):
        mask &= ~np.isnan(column.to_numpy(zero_copy_only=False))
    return mask


def kind_failure(column: pa.Array, kind: str, whole_nulls: bool) -> tuple[int, str] | None:
    """``kind_problem`` of a batch's column converted as the whole column converts to pandas (an integer or
    boolean column with a null anywhere converts to float64 or object); strings need only the null check."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or (
            pa.types.is_dictionary(column.type) and pa.types.is_string(column.type.value_type)):
        if kind.rstrip("?") == "str":
            if kind.endswith("?") or not column.null_count:
                return None
            return int(np.argmax(pc.is_null(column).to_numpy(zero_copy_only=False))), "a null value"
        column = column.dictionary_decode() if pa.types.is_dictionary(column.type) else column
    series = column.to_pandas()
    if whole_nulls and pa.types.is_integer(column.type):
        series = series.astype(np.float64)
    elif whole_nulls and pa.types.is_boolean(column.type):
        series = series.astype(object)
    return kind_problem(pd.Series(series), kind)


def kind_message(kind: str, found: str) -> str:
    """validate_pool's message for a value that does not fit the column's kind."""
    expected = KIND_NAMES[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
    return f"expected {expected} ({kind}), found {found}"


def check_kinds(record: RowRecord, table: str, batch: pa.RecordBatch, start: int, whole_nulls: dict[str, bool]) -> bool:
    """The kind steps of ``table`` on one batch; False when one failed (the batch's later steps are then moot)."""
    for col, kind in TABLES[table].items():
        step = ("kind", table, col)
        if not record.wants(step):
            return False
        if col not in batch.schema.names:  # a nullable string column not read (nothing to check)
            continue
        problem = kind_failure(batch.column(col), kind, whole_nulls.get(col, False))
        if problem is not None:
            record.record(STEP_INDEX[step], Failure(table, start + problem[0], col, kind_message(kind, problem[1])))
            return False
    return True


def first_true(mask: np.ndarray) -> int | None:
    """The first position where ``mask`` holds, or None."""
    return int(np.argmax(mask)) if mask.any() else None


def run_steps(record: RowRecord, start: int, masks: list[tuple[tuple[str, str, str], Any]]) -> bool:
    """Record the first failing step of ``masks`` (step, mask or a function giving it), in order; False if one
    failed."""
    for step, mask in masks:
        if not record.wants(step):
            return False
        if step[0] == "whole_keys" or mask is None:  # checked elsewhere: a place in the order only
            continue
        pos = first_true(np.asarray(mask() if callable(mask) else mask, dtype=bool))
        if pos is not None:
            message = high_message(step[2]) if step[0] == "high" else ROW_MESSAGES[step[0]]
            record.record(STEP_INDEX[step], Failure(step[1], start + pos, step[2], message))
            return False
    return True


def range_masks(table: str, batch: pa.RecordBatch) -> list[tuple[tuple[str, str, str], Any]]:
    """The ``negative`` / ``high`` steps of the token and latency columns of ``table``."""
    out: list[tuple[tuple[str, str, str], Any]] = []
    for col, high in HIGH_BOUNDS.items():
        values = numbers(batch, col)
        out += [(("negative", table, col), lambda v=values: v < 0), (("high", table, col), lambda v=values, h=high: v > h)]
    return out


def name_pattern_ok(name: Any, pattern: str) -> bool:
    """Whether a verifier name matches ``pattern`` (validate_pool's well-formed check)."""
    return isinstance(name, str) and re.fullmatch(pattern, name) is not None
