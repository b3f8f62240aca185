"""Whether a table column holds the values of its schema kind (``pools.schema``: str, int, float, bool; ``?``
nullable): a dtype check first, element by element only to name the first value that does not fit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

__all__ = ["KIND_NAMES", "kind_problem"]

#: How a message names each base kind.
KIND_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean"}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


#: Per base kind: whether a column dtype holds it natively, which ``infer_dtype`` results of an object
#: column are acceptable, and the per-element test used to find the first offending value.
_DTYPE_OK = {
    "str": lambda d: isinstance(d, pd.StringDtype),
    "int": lambda d: ptypes.is_integer_dtype(d) and not ptypes.is_bool_dtype(d),
    "float": lambda d: ptypes.is_numeric_dtype(d) and not ptypes.is_bool_dtype(d),
    "bool": ptypes.is_bool_dtype,
}
_INFERRED_OK = {
    "str": ("string", "empty"),
    "int": ("integer", "empty"),
    "float": ("floating", "integer", "mixed-integer-float", "empty"),
    "bool": ("boolean", "empty"),
}
_ELEMENT_OK = {"str": lambda v: isinstance(v, str), "int": _is_int, "float": _is_number,
               "bool": lambda v: isinstance(v, (bool, np.bool_))}


def kind_problem(s: pd.Series, kind: str) -> tuple[int, str] | None:
    """Return (row position, what was found) of the first value in ``s`` that does not fit ``kind``."""
    base, nullable = kind.rstrip("?"), kind.endswith("?")
    dtype = s.dtype
    if _DTYPE_OK[base](dtype):
        pass
    elif base == "int" and ptypes.is_float_dtype(dtype):  # integral floats are fine (e.g. after a merge)
        values = s.to_numpy(dtype=float)
        bad = ~np.isfinite(values) | (values != np.round(values))
        if bad.any():
            pos = int(np.argmax(bad))
            return pos, f"{values[pos]!r}"
    elif ptypes.is_object_dtype(dtype):
        if ptypes.infer_dtype(s, skipna=True) not in _INFERRED_OK[base]:
            found = _first_element(s, _ELEMENT_OK[base])
            if found is not None:
                return found
    else:
        return 0, f"a column of {dtype}"
    if not nullable:
        nulls = s.isna().to_numpy()
        if nulls.any():
            return int(np.argmax(nulls)), "a null value"
    return None


def _first_element(s: pd.Series, ok: Any) -> tuple[int, str] | None:
    for pos, v in enumerate(s.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if not ok(v):
            return pos, f"{v!r} ({type(v).__name__})"
    return None
