"""The stop gate (issue 27): LTT by hand, the gate's outcome read off Strong's rows equals its replay, -inf is Strong."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.registry import make_policy
from agents.stop_gate import StopGate
from coba_env.env import as_compiled
from eval.runner import run_policies
from train.protocol import cost_unit
from train.stop_gate import (
    HarmModel,
    StopGateMethod,
    binomial_p_value,
    first_stop_outcomes,
    ltt_threshold,
    make_env,
    stop_rows,
)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k) summed term by term (independent of scipy)."""
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))


def test_first_stop_outcome_by_hand():
    """Episode 0 has rows scored (0.5, 0.1) with harms (1, 0); episode 1 one row (0.3, harm 1); episode 2 none."""
    scores = [np.array([0.5, 0.1]), np.array([0.3]), np.zeros(0)]
    harms = [np.array([1.0, 0.0]), np.array([1.0]), np.zeros(0)]
    out = first_stop_outcomes(scores, harms, np.array([0.05, 0.1, 0.3, 0.5]))
    assert out.tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 0], [1, 1, 0]]


def test_binomial_p_value_matches_the_sum():
    assert binomial_p_value(5, 1000, 0.01) == pytest.approx(_binom_cdf(5, 1000, 0.01))


def test_ltt_fixed_sequence_by_hand():
    """1000 episodes, one row each: 300 scored 0.1 (5 harmed), 300 scored 0.2 (10 harmed), 400 scored 0.3 (60
    harmed). alpha 0.05, delta 0.1: p(0.1) = P(Bin(1000, .05) <= 5) and p(0.2) = P(... <= 15) are tiny, p(0.3) =
    P(... <= 75) is about 1: the test stops before 0.3 and returns 0.2. With alpha 0.004 already p(0.1) =
    P(Bin(1000, .004) <= 5) > 0.1: the gate never fires."""
    scores = [np.array([0.1])] * 300 + [np.array([0.2])] * 300 + [np.array([0.3])] * 400
    harms = ([np.array([True])] * 5 + [np.array([False])] * 295 + [np.array([True])] * 10
             + [np.array([False])] * 290 + [np.array([True])] * 60 + [np.array([False])] * 340)
    grid = np.array([0.1, 0.2, 0.3])
    assert _binom_cdf(15, 1000, 0.05) < 0.1 < _binom_cdf(75, 1000, 0.05)
    assert ltt_threshold(scores, harms, 0.05, 0.1, grid) == 0.2
    assert _binom_cdf(5, 1000, 0.004) > 0.1
    assert ltt_threshold(scores, harms, 0.004, 0.1, grid) == -math.inf


class _Constant:
    """A harm model predicting ``value`` everywhere."""

    def __init__(self, value):
        self.value = value

    def predict_harm(self, x):
        return np.full(len(x), self.value)


class _FirstFeature:
    """A harm model reading feature 1 (so different states get different predictions)."""

    def predict_harm(self, x):
        return np.asarray(x)[:, 1]


def _small_paper(per_dataset=12):
    c = as_compiled("paper")
    keep = np.zeros(c.n_episodes, dtype=bool)
    for ds in dict.fromkeys(c.dataset.tolist()):
        keep[np.flatnonzero(c.dataset == ds)[:per_dataset]] = True
    return c.select(keep)


def _gate(model, threshold, pool):
    return StopGate(model, threshold=threshold, budget=cost_unit(pool), max_output_tokens=pool.max_output_tokens)


def test_threshold_minus_infinity_is_strong():
    pool = _small_paper()
    run = run_policies([_gate(_Constant(0.0), -math.inf, pool), make_policy("coba_strong")], pool, progress=False,
                       workers=1)
    gate, strong = (run.records[run.records["policy"] == n].reset_index(drop=True) for n in ("stop_gate", "coba_strong"))
    assert gate[["correct", "p_tokens", "actions"]].equals(strong[["correct", "p_tokens", "actions"]])


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7, math.inf])
def test_the_gate_outcome_read_off_strongs_rows_equals_its_replay_batched_and_single(threshold):
    """``stop_rows`` replays prefixes one episode at a time; the gate replays itself: both must agree on every
    episode's correctness and p_tokens, and the batched replay must equal the one-episode replay."""
    pool = _small_paper()
    env = make_env(pool)
    strong = run_policies(["coba_strong"], pool, progress=False, workers=1).records
    gate = _gate(_FirstFeature(), threshold, pool)
    batched = run_policies([gate], pool, progress=False, workers=1).records
    single = run_policies([gate], pool, progress=False, workers=1, replay="single").records
    assert batched[["correct", "p_tokens", "actions"]].equals(single[["correct", "p_tokens", "actions"]])
    fired = 0
    for e in range(pool.n_episodes):
        rows = stop_rows(env, e)
        scores = rows.x[:, 1] if len(rows.x) else np.zeros(0)  # feature 1 is not the budget: units agree
        hit = np.flatnonzero(scores <= threshold)
        expect_correct = float(strong["correct"].iloc[e]) + (rows.d_correct[hit[0]] if hit.size else 0.0)
        expect_cost = float(strong["p_tokens"].iloc[e]) + (rows.d_cost[hit[0]] if hit.size else 0.0)
        fired += bool(hit.size)
        assert float(batched["correct"].iloc[e]) == expect_correct
        assert float(batched["p_tokens"].iloc[e]) == pytest.approx(expect_cost)
    if threshold == math.inf:
        assert fired > 0


def test_harm_model_ranks_a_separable_case():
    x = np.array([[0.0], [0.1], [0.2], [0.8], [0.9], [1.0]])
    harm = np.array([False, False, False, True, True, True])
    model = HarmModel().fit(x, harm, np.ones(6))
    p = model.predict_harm(x)
    assert p[:3].max() < 0.5 < p[3:].min()
    assert HarmModel().fit(x, np.zeros(6, dtype=bool), np.ones(6)).predict_harm(x).tolist() == [0.0] * 6


def test_method_fit_reads_only_training_episodes_and_gives_a_threshold_per_alpha(tmp_path):
    pool = _small_paper()
    method = StopGateMethod()
    train = pool.episode_ids[pool.dataset != "aime2025"]
    fitted = method.fit(pool, train, budget=cost_unit(pool), seed=0, out_dir=tmp_path, progress=False)
    ds_of = dict(zip(pool.episode_ids.tolist(), pool.dataset.tolist(), strict=True))
    assert {ds_of[k] for k in method._rows} == set(pool.dataset.tolist()) - {"aime2025"}
    assert set(fitted.thresholds) == set(method.alphas)
    assert fitted.policy({"alpha": 0.0}).threshold == -math.inf
    # the thresholds grow with the loss level
    t = [fitted.thresholds[a] for a in sorted(method.alphas)]
    assert t == sorted(t)


@pytest.mark.parametrize("kind", ["stop_gate", "coba_search"])
def test_the_new_kinds_need_lodo(tmp_path, capsys, kind):
    from coba_cli.main import main

    assert main(["train", kind, "--pool", "tiny", "--out", str(tmp_path / "o")]) == 2
    assert f"{kind} trains under the protocol only: add --lodo" in capsys.readouterr().err


def test_stop_gate_protocol_cli_partial_run(tmp_path, capsys):
    """``coba train stop_gate --lodo`` on a saved 5-dataset pool (4 episodes each), one seed, one fold."""
    from coba_cli.main import main
    from tests.test_protocol import save_small_paper_pool

    save_small_paper_pool(tmp_path / "pool")
    out = tmp_path / "run"
    assert main(["train", "stop_gate", "--pool", str(tmp_path / "pool"), "--lodo", "--seeds", "0", "--held-out",
                 "amc2023", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "partial run, no verdict" in printed and "BEATS" not in printed
    verdict = (out / "verdict.md").read_text()
    assert f"Pool: {tmp_path / 'pool'}" in verdict and "Held-out folds: amc2023" in verdict


@pytest.mark.parametrize(("kind", "extra", "message"), [
    ("stop_gate", ("--timesteps", "5"), "--timesteps applies to ppo only"),
    ("coba_search", ("--rounds", "2"), "--rounds applies to mlp only"),
    ("coba_search", ("--rounds", "2", "--epochs", "3"), "--rounds, --epochs apply to mlp only"),
    ("coba_search", ("--lambdas", "0.1"), "--lambdas does not apply with --lodo"),
    ("stop_gate", ("--seed", "1"), "--seed does not apply with --lodo"),
    ("stop_gate", ("--held-out", "nope"), r"--held-out: unknown dataset\(s\) \['nope'\]"),
])
def test_the_new_kinds_refuse_settings_the_protocol_fixes(tmp_path, capsys, kind, extra, message):
    import re

    from coba_cli.main import main

    assert main(["train", kind, "--pool", "paper", "--lodo", *extra, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_the_gate_reads_no_label():
    """A fixed harm model: permuting every episode's correctness labels leaves every action as is."""
    from tests.test_label_leak import permuted_labels

    pool = _small_paper()
    gate = _gate(_FirstFeature(), 0.6, pool)
    runs = [run_policies([gate], p, progress=False, workers=1).records for p in (pool, permuted_labels(pool))]
    assert runs[0]["actions"].tolist() == runs[1]["actions"].tolist()
    assert runs[0]["correct"].tolist() != runs[1]["correct"].tolist()  # the labels did change


@pytest.mark.parametrize("n_verifiers", [2, 5])
def test_the_gate_fits_and_runs_on_a_pool_with_other_verifiers(tmp_path, n_verifiers):
    """Verifiers are data: the gate's design follows the env's layout (its action count and the index of
    budget_used), so it fits on a pool with 2 or 5 verifiers and runs there (the old design read the paper
    layout's columns: an IndexError with 5 verifiers, budget_used left raw with 2)."""
    from coba_env import compile_pool
    from coba_env.env import CoBaEnv
    from tests.test_many_generators import pool_with_verifiers

    pool = compile_pool(pool_with_verifiers(1, n_verifiers))
    method = StopGateMethod()
    fitted = method.fit(pool, pool.episode_ids, budget=cost_unit(pool), seed=0, out_dir=tmp_path, progress=False)
    env = CoBaEnv(pool)
    names = env.layout.names
    assert fitted.actions == tuple(names) and len(names) == n_verifiers + 2
    rows = [r for r in method.rows(pool, np.arange(pool.n_episodes)) if len(r.d_correct)]
    x, _ = method._design(rows, 2.0)
    assert x.shape[1] == rows[0].x.shape[1] + len(names)  # the state's features, then Strong's action one-hot
    stacked = np.vstack([r.x for r in rows])
    budget_used = env.features.budget
    np.testing.assert_allclose(x[:, budget_used], stacked[:, budget_used] / 2.0)  # budget_used in units of B
    others = [k for k in range(stacked.shape[1]) if k != budget_used]
    np.testing.assert_array_equal(x[:, others], stacked[:, others])
    gate = fitted.policy({"alpha": max(method.alphas)})
    assert gate.applicable(CoBaEnv(as_compiled("tiny")))[1].startswith("fit on the actions")
