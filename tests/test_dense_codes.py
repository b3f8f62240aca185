"""Factorizing and distinct-counting codes by marking a table (``eval.dense_codes``) against pandas' hashing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eval import dense_codes


@pytest.mark.parametrize("size", [50, 10**9])  # marked, and a range too sparse to mark (hashed)
def test_sorted_factorize_equals_pandas(size):
    code = np.random.default_rng(0).integers(0, 50, 2000) * (size // 50)
    ranks, uniques = dense_codes.sorted_factorize(code, size)
    expected_ranks, expected_uniques = pd.factorize(code, sort=True)
    assert ranks.tolist() == expected_ranks.tolist() and uniques.tolist() == expected_uniques.tolist()


@pytest.mark.parametrize("n_values", [3, 10**7])
def test_distinct_counts_by_hand_and_against_pandas(n_values):
    group = np.array([0, 0, 0, 2, 2, 1, 0])
    value = np.array([1, 1, 2, 0, 0, 2, n_values - 3])  # the last: a third value of group 0
    assert dense_codes.distinct_counts(group, value, 4, n_values).tolist() == [3, 1, 1, 0]
    pairs = pd.DataFrame({"g": group, "v": value}).drop_duplicates()
    assert dense_codes.distinct_counts(group, value, 4, n_values).tolist() == \
        pairs.groupby("g").size().reindex(range(4), fill_value=0).tolist()
