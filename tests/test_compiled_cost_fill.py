"""The compiled cost table is filled a slice of calls at a time: slices smaller than the pool give the table the
whole fill gives, and its tokens and calls measures are the rows' own prompt + output tokens and 1 per call."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env.compiled import _fill_calls, compile_pool
from coba_env.costs import COST_MEASURES
from pools.default import resolve_pool


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_slices_of_calls_fill_the_verification_costs_each_row_states(chunk):
    pool = resolve_pool("tiny")
    ver = pool.verifications.reset_index(drop=True)
    target = np.full((len(ver), len(COST_MEASURES)), np.nan)
    at = (np.arange(len(ver)),)
    _fill_calls(target, at, ver, np.ones(len(ver)), ver["model"].to_numpy(dtype=object), {}, chunk=chunk)
    tokens = ver["prompt_tokens"].to_numpy(float) + ver["output_tokens"].to_numpy(float)
    np.testing.assert_array_equal(target[:, COST_MEASURES.index("tokens")], tokens)
    np.testing.assert_array_equal(target[:, COST_MEASURES.index("calls")], np.ones(len(ver)))
    np.testing.assert_array_equal(target[:, COST_MEASURES.index("latency")], ver["latency_s"].to_numpy(float))


def test_the_compiled_verification_costs_are_each_calls_tokens():
    pool = resolve_pool("tiny")
    compiled = compile_pool(pool)
    ver = pool.verifications
    row = {int(e): i for i, e in enumerate(compiled.episode_ids)}
    first = ver.iloc[0]
    slot = compiled.tiers.index(first["tier"])
    k = COST_MEASURES.index("tokens")
    assert compiled.ver_cost[row[int(first["episode_id"])], int(first["candidate"]), slot, k] == \
        float(first["prompt_tokens"]) + float(first["output_tokens"])
