"""The compact records the analysis reads (``eval.compact_records``): the same values as the full records, and
grouped on integer codes with the groups, their order and their means of pandas' grouping on the key strings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eval.compact_records import compact_records, grouped, key_codes, key_index
from eval.records import RecordLayout

LAYOUT = RecordLayout(("V1", "V3"), ("cheap_judge", "strong_verifier"))


def _records(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Records with keys out of sorted order and costs whose sum depends on the order it is taken in."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "policy": pd.Series(rng.choice(["zeta", "alpha", "mid"], n), dtype="str"),
        "episode_id": np.arange(n),
        "dataset": pd.Series(rng.choice(["math500", "aime2024", "gpqa"], n), dtype="str"),
        "generator": pd.Series(rng.choice(["Qwen3-8B", "DeepSeek-R1"], n), dtype="str"),
        "item_id": pd.Series([f"i{k:03d}" for k in rng.integers(0, 40, n)], dtype="str"),
        "correct": rng.random(n) < 0.5, "oracle_available": rng.random(n) < 0.8,
        "n_samples": rng.integers(0, 9, n), "n_v1": rng.integers(0, 5, n), "n_v3": rng.integers(0, 3, n),
        **{m: rng.random(n) * 10.0 ** rng.integers(-8, 8, n) for m in ("tokens", "p_tokens", "calls", "latency")},
    })


def test_compact_records_hold_the_records_values():
    records = _records()
    compact = compact_records(records, LAYOUT)
    assert list(compact.columns) == ["policy", "dataset", "generator", "item_id", "correct", "oracle_available",
                                     "n_samples", "n_v1", "n_v3", "tokens", "p_tokens", "calls", "latency"]
    for column in compact.columns:
        assert compact[column].astype(records[column].dtype).tolist() == records[column].tolist(), column


@pytest.mark.parametrize("compact", [False, True])
def test_grouped_means_are_pandas_means_on_the_key_strings(compact):
    records = _records()
    frame = compact_records(records, LAYOUT) if compact else records
    keys = ["policy", "dataset", "generator"]
    mine = grouped(frame, keys, {"tokens": frame["tokens"].to_numpy(), "latency": frame["latency"].to_numpy()})
    by = records.groupby(keys, sort=False)
    theirs = by[["tokens", "latency"]].mean()
    theirs["n"] = by.size()
    pd.testing.assert_frame_equal(mine, theirs, check_exact=True)


def test_key_codes_order_keys_sorted_or_by_first_appearance():
    frame = pd.DataFrame({"d": ["b", "a", "b", "c"], "i": ["y", "z", "x", "y"]})
    for sort, expected in ((True, [("a", "z"), ("b", "x"), ("b", "y"), ("c", "y")]),
                           (False, [("b", "y"), ("b", "x"), ("a", "z"), ("c", "y")])):
        codes, names = key_codes(frame, ["d", "i"], sort=sort)
        assert key_index(np.unique(codes), names).tolist() == expected
