"""Paired bootstrap: hand-worked cases, the item unit, and agreement between the vectorized and pairwise paths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eval import bootstrap


def test_identical_vectors_give_zero_difference_and_p_one():
    a = np.array([1, 0, 1, 1, 0, 1, 0, 0, 1, 1], dtype=float)
    out = bootstrap.compare(a, a.copy(), resamples=500, seed=3)
    assert out["diff"] == 0.0
    assert out["ci_low"] == 0.0 and out["ci_high"] == 0.0
    assert out["p"] == 1.0
    assert out["significant"] is False


def test_always_better_excludes_zero_with_small_p():
    a = np.ones(50)
    b = np.r_[np.zeros(25), np.ones(25)]
    out = bootstrap.compare(a, b, resamples=2000, seed=0)
    assert out["diff"] == pytest.approx(50.0)
    assert out["ci_low"] > 0
    assert out["p"] < 0.01
    # No resample has diff <= 0, so p sits at its floor 2 / (B + 1).
    assert out["p"] == pytest.approx(2 / 2001)
    assert out["significant"] is True


def test_point_difference_is_the_hand_computed_one():
    a = np.array([1, 1, 0, 1], dtype=float)  # 75 %
    b = np.array([0, 1, 0, 0], dtype=float)  # 25 %
    out = bootstrap.compare(a, b, resamples=200, seed=1)
    assert out["diff"] == pytest.approx(50.0)
    assert out["ci_low"] <= 50.0 <= out["ci_high"]


def test_seeded_and_reproducible():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 80).astype(float), rng.integers(0, 2, 80).astype(float)
    assert bootstrap.compare(a, b, seed=7) == bootstrap.compare(a, b, seed=7)
    assert bootstrap.compare(a, b, seed=7)["ci_low"] != bootstrap.compare(a, b, seed=8)["ci_low"]


def test_resample_counts_rows_are_resamples_of_n():
    counts = bootstrap.resample_counts(7, resamples=30, seed=0)
    assert counts.shape == (30, 7)
    assert (counts.sum(axis=1) == 7).all()
    assert (counts >= 0).all()


@pytest.mark.parametrize("a, b, match", [
    (np.ones(3), np.ones(4), "aligned"),
    (np.ones((2, 2)), np.ones((2, 2)), "aligned"),
    (np.ones(0), np.ones(0), "zero paired units"),
])
def test_compare_rejects_bad_vectors(a, b, match):
    with pytest.raises(ValueError, match=match):
        bootstrap.compare(a, b)


def _records(rows):
    return pd.DataFrame(rows, columns=["policy", "dataset", "item_id", "generator", "correct"])


def test_item_unit_averages_over_generators_and_drops_incomplete_items():
    rows = []
    # item i1: complete for both policies; A right on 1 of 2 generators, B on both.
    rows += [("A", "d", "i1", "g1", True), ("A", "d", "i1", "g2", False),
             ("B", "d", "i1", "g1", True), ("B", "d", "i1", "g2", True)]
    # item i2: B lacks generator g2 -> incomplete paired coverage, dropped.
    rows += [("A", "d", "i2", "g1", True), ("A", "d", "i2", "g2", True), ("B", "d", "i2", "g1", False)]
    # item i3: only one generator for both, but its dataset's items have two -> dropped.
    rows += [("A", "d", "i3", "g1", True), ("B", "d", "i3", "g1", True)]
    data = bootstrap.paired_matrix(_records(rows), ["A", "B"], unit="item")
    assert list(data.units["item_id"]) == ["i1"]
    assert data.values.tolist() == [[0.5], [1.0]]
    assert data.dropped == 2


def test_episode_unit_keeps_every_common_episode():
    rows = [("A", "d", "i1", "g1", True), ("A", "d", "i1", "g2", False), ("B", "d", "i1", "g1", False),
            ("B", "d", "i1", "g2", False), ("A", "d", "i2", "g1", True)]
    data = bootstrap.paired_matrix(_records(rows), ["A", "B"], unit="episode")
    assert data.values.shape == (2, 2)
    assert data.dropped == 1


def test_pairwise_is_antisymmetric_and_matches_compare():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(40):
        for g in ("g1", "g2"):
            for p, rate in (("A", 0.8), ("B", 0.6), ("C", 0.7)):
                rows.append((p, "d", f"i{i}", g, bool(rng.random() < rate)))
    records = _records(rows)
    table = bootstrap.pairwise(records, ["A", "B", "C"], resamples=400, seed=5)
    assert len(table) == 6
    ab = table[(table.a == "A") & (table.b == "B")].iloc[0]
    ba = table[(table.a == "B") & (table.b == "A")].iloc[0]
    assert ab["diff"] == pytest.approx(-ba["diff"])
    assert ab["ci_low"] == pytest.approx(-ba["ci_high"])
    data = bootstrap.paired_matrix(records, ["A", "B"])
    direct = bootstrap.compare(data.values[0], data.values[1], resamples=400, seed=5)
    assert ab["diff"] == pytest.approx(direct["diff"])
    assert ab["ci_low"] == pytest.approx(direct["ci_low"])
    assert ab["p"] == pytest.approx(direct["p"])
    vs = bootstrap.versus(records, "A", ["A", "B", "C"], resamples=400, seed=5)
    assert list(vs["b"]) == ["B", "C"]
    with pytest.raises(ValueError, match="reference policy 'Z' has no records"):
        bootstrap.versus(records, "Z", ["A", "B"])


@pytest.mark.parametrize("p, text", [(0.0004, "<.001"), (2 / 2001, "<.001"), (0.004, ".004"), (0.5, ".500"),
                                     (1.0, "1.000")])
def test_format_p(p, text):
    assert bootstrap.format_p(p) == text


def test_resample_counts_are_the_bincounted_draws_of_one_generator():
    # Independent: the (resamples x n) indices drawn at once, each row counted with np.bincount.
    idx = np.random.default_rng(9).integers(0, 13, size=(150, 13))
    expected = np.stack([np.bincount(row, minlength=13) for row in idx]).astype(float)
    assert np.array_equal(bootstrap.resample_counts(13, resamples=150, seed=9), expected)


def test_feed_blocks_gives_every_sink_every_block_in_order():
    seen: dict[str, list] = {"a": [], "b": []}
    sinks = [lambda start, counts, k=k: seen[k].append((start, counts.copy())) for k in seen]
    bootstrap.feed_blocks(11, sinks, resamples=150, seed=2)
    expected = bootstrap.resample_counts(11, resamples=150, seed=2)
    for k in seen:
        assert [s for s, _ in seen[k]] == [0, 64, 128]
        assert np.array_equal(np.vstack([c for _, c in seen[k]]), expected)
    means = bootstrap.resampled_means(np.arange(22.0).reshape(2, 11), resamples=150, seed=2)
    assert np.allclose(means, np.arange(22.0).reshape(2, 11) @ expected.T / 11)
