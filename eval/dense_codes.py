"""Factorizing and distinct-counting integer codes of a known range by marking a table instead of hashing.

The paired statistics (``eval.bootstrap``, ``eval.intervals``) group a bench's records (22M at 1M episodes x 22
policies) on integer codes of a few keys whose range is known (``eval.compact_records.key_codes``). Hashing them
(``pd.factorize``, ``pd.unique``, ``np.unique``) took ~2-6 s per call there; marking a boolean table of the range
takes a fraction of that and gives the same integers. A range much larger than the records (sparse codes) is
hashed as before.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: A range is marked when it is at most this many times the number of codes (or below ``_SMALL``), else hashed.
_SPARSE = 4
_SMALL = 1 << 24


def _dense(n_codes: int, size: int) -> bool:
    return size <= max(_SPARSE * n_codes, _SMALL)


def sorted_factorize(code: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(code, sort=True)`` of codes in ``[0, size)``: each code's rank among the distinct codes, and
    the distinct codes in increasing order."""
    if not _dense(len(code), size):
        ranks, uniques = pd.factorize(code, sort=True)
        return ranks, np.asarray(uniques)
    seen = np.zeros(size, dtype=bool)
    seen[code] = True
    rank = np.cumsum(seen, dtype=np.int64) - 1
    return rank[code], np.flatnonzero(seen).astype(np.asarray(code).dtype, copy=False)


def seen_pairs(group: np.ndarray, value: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
    """(n_groups x n_values) booleans: whether some position holds that (group, value) pair."""
    seen = np.zeros(n_groups * n_values, dtype=bool)
    flat = np.multiply(group, n_values, dtype=np.int64)
    flat += value  # in place: one array of the positions' size, not two
    seen[flat] = True
    return seen.reshape(n_groups, n_values)


def distinct_counts(group: np.ndarray, value: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
    """Per group in ``[0, n_groups)``, how many distinct values (in ``[0, n_values)``) its positions hold."""
    if not _dense(len(group), n_groups * n_values):
        return np.bincount(pd.unique(group * n_values + value) // n_values, minlength=n_groups)
    return seen_pairs(group, value, n_groups, n_values).sum(axis=1)
