"""Whole rows of a numpy array as single opaque items, for the vector envs' row copies and resets.

Viewing each row of a C-contiguous 2-D array as one ``np.void`` item turns a gather or scatter of whole rows
into one memcpy per row (numpy moves void items as bytes) instead of an element-wise loop over the columns.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_items", "zero_item"]


def row_items(a: np.ndarray) -> np.ndarray:
    """The rows of the 2-D array ``a`` (its last axis contiguous) as one item each, shape [len(a)]: a view that
    writes through."""
    return a.view(np.dtype((np.void, a.shape[1] * a.itemsize)))[:, 0]


def zero_item(width: int, dtype: np.dtype | type = np.float64) -> np.void:
    """One all-zero row of ``width`` values of ``dtype`` as an item, to assign into ``row_items`` of such rows."""
    return row_items(np.zeros((1, width), dtype=dtype))[0]
