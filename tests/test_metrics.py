"""Macro vs pooled means, per-dataset / per-generator averaging, the allocation audit and the oracle-gap split,
all on a hand-built records frame with hand-computed expectations."""

from __future__ import annotations

import pandas as pd
import pytest

from eval import metrics
from eval.records import RecordLayout

# (dataset, generator, correct, tokens, n_samples, n_v1, n_v3, oracle_available)
ROWS_A = [
    ("d1", "g1", 1, 100, 2, 2, 0, True),
    ("d1", "g1", 1, 100, 2, 2, 0, True),
    ("d1", "g1", 1, 100, 2, 2, 0, True),
    ("d1", "g1", 0, 500, 4, 4, 2, True),   # wrong although the pool had a correct candidate
    ("d1", "g2", 1, 200, 2, 2, 0, True),
    ("d1", "g2", 0, 200, 2, 2, 0, False),  # wrong, no correct candidate in the pool
    ("d2", "g1", 0, 300, 8, 8, 4, False),
    ("d2", "g2", 1, 400, 2, 0, 0, True),
]


def _frame() -> pd.DataFrame:
    rows = []
    for k, (ds, gen, ok, tok, s, v1, v3, avail) in enumerate(ROWS_A):
        rows.append({"policy": "A", "episode_id": k, "dataset": ds, "generator": gen, "item_id": f"i{k}",
                     "correct": bool(ok), "tokens": float(tok), "p_tokens": 10.0 * tok, "calls": float(s + v1 + v3),
                     "latency": 1.0, "n_samples": s, "n_v1": v1, "n_v2": 0, "n_v3": v3, "oracle_available": avail})
    # Policy B: always right, one sample each.
    for k, (ds, gen, *_rest) in enumerate(ROWS_A):
        rows.append({"policy": "B", "episode_id": k, "dataset": ds, "generator": gen, "item_id": f"i{k}",
                     "correct": True, "tokens": 50.0, "p_tokens": 500.0, "calls": 1.0, "latency": 2.0,
                     "n_samples": 1, "n_v1": 0, "n_v2": 0, "n_v3": 0, "oracle_available": True})
    return pd.DataFrame(rows)


def test_macro_is_mean_of_pair_means_and_pooled_is_mean_of_episodes():
    mac, poo = metrics.macro(_frame()), metrics.pooled(_frame())
    # pairs: (d1,g1) 3/4 = 75, (d1,g2) 1/2 = 50, (d2,g1) 0, (d2,g2) 100
    assert mac.loc["A", "acc"] == pytest.approx((75 + 50 + 0 + 100) / 4)  # 56.25
    assert poo.loc["A", "acc"] == pytest.approx(100 * 5 / 8)  # 62.5
    # tokens: pair means 200, 200, 300, 400 -> macro 275; pooled 1900 / 8
    assert mac.loc["A", "total_tokens"] == pytest.approx(275.0)
    assert poo.loc["A", "total_tokens"] == pytest.approx(1900 / 8)
    assert mac.loc["A", "p_tokens"] == pytest.approx(2750.0)
    assert mac.loc["A", "pairs"] == 4 and mac.loc["A", "n"] == 8
    assert mac.loc["B", "acc"] == 100.0 and mac.loc["B", "latency_s"] == 2.0


def test_per_dataset_averages_over_generators_and_per_generator_over_datasets():
    dset, gen = metrics.per_dataset(_frame()), metrics.per_generator(_frame())
    assert dset.loc[("A", "d1"), "acc"] == pytest.approx((75 + 50) / 2)
    assert dset.loc[("A", "d2"), "acc"] == pytest.approx((0 + 100) / 2)
    assert gen.loc[("A", "g1"), "acc"] == pytest.approx((75 + 0) / 2)
    assert gen.loc[("A", "g2"), "acc"] == pytest.approx((50 + 100) / 2)
    assert dset.loc[("A", "d1"), "n"] == 6


#: The paper's verifiers with their paper roles: record columns n_v1, n_v2, n_v3; V3 is the strong verifier.
PAPER = RecordLayout(("V1", "V2", "V3"), ("cheap_judge", "process_judge", "strong_verifier"))


def test_allocation_audit():
    alloc = metrics.allocation(_frame(), PAPER)
    row = alloc.loc[("A", "d1")]
    # (d1,g1): samples 10/4 = 2.5, V1 2.5, V3 0.5; (d1,g2): samples 2, V1 2, V3 0 -> mean over generators
    assert row["n_samples"] == pytest.approx((2.5 + 2) / 2)
    assert row["n_v1"] == pytest.approx((2.5 + 2) / 2)
    assert row["n_v3"] == pytest.approx((0.5 + 0) / 2)
    total = 2.25 + 2.25 + 0.25
    assert row["share_S"] == pytest.approx(2.25 / total)
    assert row["share_V3"] == pytest.approx(0.25 / total)
    assert row["share_V2"] == 0.0
    assert row["candidates"] == row["n_samples"] and row["strong_calls"] == row["n_v3"]
    shares = [row[f"share_{c}"] for c in ("S", "V1", "V2", "V3")]
    assert sum(shares) == pytest.approx(1.0)


def test_oracle_gap_split():
    gap = metrics.oracle_gap(_frame(), None)
    a = gap.loc["A"]
    assert (a["wrong"], a["allocation_errors"], a["generation_errors"]) == (3, 1, 2)
    assert a["allocation_errors_rate"] == pytest.approx(100 / 8)
    assert a["generation_errors_rate"] == pytest.approx(200 / 8)
    assert a["allocation_share"] == pytest.approx(1 / 3)
    assert gap.loc["B", "wrong"] == 0 and gap.loc["B", "allocation_share"] == 0.0
    by_ds = metrics.oracle_gap(_frame(), "dataset")
    assert by_ds.loc[("A", "d1"), "allocation_errors"] == 1
    assert by_ds.loc[("A", "d1"), "generation_errors"] == 1
    assert by_ds.loc[("A", "d2"), "generation_errors"] == 1


def test_summarize_is_plain_json():
    import json

    out = metrics.summarize(_frame(), PAPER)
    json.dumps(out, allow_nan=False)
    assert out["A"]["macro"]["acc"] == pytest.approx(56.25)
    assert out["A"]["per_dataset"]["d1"]["acc"] == pytest.approx(62.5)
    assert out["A"]["per_pair"]["d2/g2"]["acc"] == 100.0
    assert out["A"]["oracle_gap"]["overall"]["allocation_errors"] == 1
    assert set(out["A"]["allocation"]) == {"overall", "d1", "d2"}
