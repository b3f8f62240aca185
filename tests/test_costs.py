"""The cost-row helpers of coba_env.costs: one record per row, named by COST_MEASURES."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env.costs import COST_MEASURES, cost_record, sum_costs


@pytest.mark.parametrize("row", [[1.0, 2.0, 3.0, 4.0, 5.0], (0.5, 250.0, 1.0, 0.01, 1e-6), np.arange(5.0)])
def test_cost_record_names_every_measure_in_order(row):
    record = cost_record(row)
    assert list(record) == list(COST_MEASURES) == ["tokens", "p_tokens", "calls", "latency", "usd"]
    assert list(record.values()) == list(row)


def test_cost_record_is_a_new_dict_each_time():
    row = [1.0, 2.0, 3.0, 4.0, 5.0]
    first, second = cost_record(row), cost_record(row)
    first["tokens"] = 9.0
    assert second["tokens"] == 1.0


@pytest.mark.parametrize("row", [[], [1.0, 2.0, 3.0, 4.0], [1.0] * 6])
def test_cost_record_refuses_a_row_of_another_length(row):
    with pytest.raises(ValueError, match=r"one value per measure \['tokens', 'p_tokens', 'calls', 'latency', 'usd'\]"):
        cost_record(row)


def test_sum_costs_adds_rows_in_order():
    """Hand-worked: 0.1 + 0.2 + 0.3 in that order is 0.6000000000000001, not 0.6."""
    rows = [[0.1, 1.0, 1.0, 0.0, 0.0], [0.2, 2.0, 1.0, 0.0, 0.0], [0.3, 3.0, 1.0, 0.0, 0.0]]
    total = sum_costs((0.0,) * 5, rows)
    assert total == (0.6000000000000001, 6.0, 3.0, 0.0, 0.0)
