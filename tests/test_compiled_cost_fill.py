"""The compiled cost table is filled a slice of calls at a time: slices smaller than the pool give the table the
whole fill gives, and its tokens and calls measures are the rows' own prompt + output tokens and 1 per call."""

from __future__ import annotations

import numpy as np
import pytest

from coba_env.compiled import compile_pool
from coba_env.cost_fill import fill_calls
from coba_env.costs import COST_MEASURES
from pools.default import resolve_pool


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_slices_of_calls_fill_the_verification_costs_each_row_states(chunk):
    pool = resolve_pool("tiny")
    ver = pool.verifications.reset_index(drop=True)
    target = np.full((len(ver), len(COST_MEASURES)), np.nan)
    at = (np.arange(len(ver)),)
    fill_calls(target, at, ver, np.ones(len(ver)), ver["model"].to_numpy(dtype=object), {}, chunk=chunk)
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


def test_a_compile_that_releases_the_candidate_table_gives_the_same_arrays():
    kept, released = resolve_pool("tiny"), resolve_pool("tiny")
    n_rows = len(released.candidates)
    a, b = compile_pool(kept), compile_pool(released, release=True)
    assert len(kept.candidates) == n_rows > 0 and len(released.candidates) == 0
    for name in ("cluster", "output_tokens", "gen_cost", "score", "ver_cost", "n_available"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.labels.correct, b.labels.correct)
    assert a.priced_models == b.priced_models
    assert a.problems.equals(b.problems)


def test_verification_slices_smaller_than_the_pool_give_the_whole_compile(monkeypatch):
    import coba_env.compiled as compiled_module

    whole = compile_pool(resolve_pool("tiny"))
    monkeypatch.setattr(compiled_module, "FILL_CHUNK", 7)
    sliced = compile_pool(resolve_pool("tiny"))
    for name in ("has_score", "score", "ver_cost", "gen_cost"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(sliced, name), err_msg=name)
    assert whole.verifier_models == sliced.verifier_models and whole.tiers_present == sliced.tiers_present
