"""How good each verifier of a pool is (``pools.verifier_quality``): a case worked by hand, and ``coba pools
inspect`` on a pool whose verifiers have other names than the paper's V1, V2, V3 (the real reward-model pool's
figures are checked against the file's own labels in ``tests/test_qwen_pool.py``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from coba_cli.main import main
from pools.verifier_quality import expected_calibration_error, roc_auc, verifier_diagnostics
from tests.conftest import make_synthetic_pool
from tests.factory import Cand, Ep, build_pool


def hand_pool():
    """Two episodes of three candidates; V1 scores five of the six, V3 one."""
    return build_pool([
        Ep([Cand("1", True, scores={"V1": 0.9, "V3": 1.0}), Cand("2", False, scores={"V1": 0.9}),
            Cand("3", False, scores={"V1": 0.15})]),
        Ep([Cand("2", False, scores={"V1": 0.05}), Cand("1", True, scores={"V1": None}),
            Cand("3", False, scores={"V1": 0.55})], item_id="i1"),
    ])


def test_diagnostics_worked_by_hand():
    d = verifier_diagnostics(hand_pool())
    v1, v3 = d["V1"], d["V3"]
    assert v1["coverage"] == pytest.approx(5 / 6) and v1["scored"] == 5  # the NaN score is not a score
    # One correct (0.9) against four wrong (0.9 tie: 1/2; 0.15, 0.05, 0.55: 1 each): (0.5 + 3) / 4
    assert v1["auroc"] == pytest.approx(0.875)
    # Bins: [0.9, 0.9] -> bin 9 (1 of 2 correct: |0.5 - 0.9|), 0.15 -> 1, 0.05 -> 0, 0.55 -> 5 (all wrong):
    # (2 * 0.4 + 0.15 + 0.05 + 0.55) / 5
    assert v1["ece"] == pytest.approx(0.31)
    # Episode 0: a tie at 0.9 goes to the earlier candidate (correct); episode 1: 0.55 beats 0.05 (wrong)
    assert (v1["best_of_n_accuracy"], v1["best_of_n_episodes"]) == (0.5, 2)
    # V3 scored one correct candidate: no AUROC (one class), a score of exactly 1 sits in the last bin
    assert v3["coverage"] == pytest.approx(1 / 6) and v3["auroc"] is None and v3["ece"] == 0.0
    assert (v3["best_of_n_accuracy"], v3["best_of_n_episodes"]) == (1.0, 1)


@pytest.mark.parametrize(("scores", "labels", "expected"), [
    ([0.05, 0.95], [0, 1], 0.05),           # each bin off by 0.05
    ([0.3, 0.3, 0.3, 0.3], [1, 0, 0, 0], 0.05),  # one bin: |0.25 - 0.3|
    ([], [], None),
])
def test_expected_calibration_error_by_hand(scores, labels, expected):
    result = expected_calibration_error(scores, labels)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_inspect_reports_the_verifiers_of_a_pool_by_their_own_names(tmp_path, capsys):
    """No all-zero 'cov V1/V2/V3' columns for a pool whose verifiers are called otherwise; each one's figures."""
    from pools.store import save_pool

    pool = make_synthetic_pool({"math": 6}, {"gen-a": 7.0}, n_candidates=4,
                               verifiers={"judge_a": ("Qwen3-8B", 8.2, "cheap_judge"),
                                          "rm_big": ("Qwen3-14B", 14.0, "reward_model")})
    save_pool(pool, tmp_path / "pool")
    assert main(["pools", "inspect", str(tmp_path / "pool"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert set(stats["overall"]["score_coverage"]) == {"judge_a", "rm_big"}
    assert list(stats["verifiers"]) == ["judge_a", "rm_big"]
    assert stats["verifiers"]["rm_big"]["role"] == "reward_model"
    assert stats["verifiers"] == json.loads(json.dumps(verifier_diagnostics(pool)))
    assert main(["pools", "inspect", str(tmp_path / "pool")]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0]
    assert "cov judge_a" in header and "cov rm_big" in header and "cov V1" not in header
    assert any(line.split()[:2] == ["rm_big", "reward_model"] for line in text.splitlines())


@pytest.mark.parametrize("ties", ["none", "two decimals", "five levels", "one score"])
def test_roc_auc_equals_sklearn_to_the_last_bit(ties):
    # sklearn's roc_auc_score is the reference (roc_auc replaces it for speed): equal floats, not approximately.
    rng = np.random.default_rng(4)
    for _ in range(25):
        labels = (rng.random(400) < 0.3).astype(float)
        labels[:2] = [0.0, 1.0]
        raw = labels * 0.4 + rng.normal(size=400)
        scores = {"none": raw, "two decimals": raw.round(2), "five levels": np.floor(raw * 2).clip(-2, 2),
                  "one score": np.full(400, 0.5)}[ties]
        assert roc_auc(scores, labels) == roc_auc_score(labels, scores)
