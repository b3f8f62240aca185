"""Prompt-aware routers: predictors worked by hand, the decision rule, batched = single, the env's routing point
equals the one computed from the predictions, checkpoints, label permutation, the simple baselines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from agents.prompt_router import PromptRouter, load, save_router
from agents.router_predictors import PriorPredictor
from agents.simple_routers import AlwaysCheapest, AlwaysLargest, RandomRouter
from coba_env.compiled import Labels
from coba_env.featurizers import fit_featurizer
from coba_env.problems import problems_of
from eval.runner import run_policy
from tests.test_problem_features import text_pool
from train.router_fit import fit_knn, fit_mlp, fit_prior, fit_router_predictor
from train.router_training import fit_router


def test_knn_prediction_worked_by_hand():
    """Training rows (1,0), (-1,0), (0,1), (0,-1) standardize to themselves up to scale; the query (1,1) has cosine
    0.707 with rows 0 and 2 (outcomes 1, 1), so k=2 gives (0.707 + 0.707 + 0.5) / (0.707 + 0.707 + 1)."""
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    y = np.array([[1.0], [0.0], [1.0], [0.0]])
    p = fit_knn(x, y, {"k": 2}, seed=0).predict(np.array([[1.0, 1.0]]))
    w = np.sqrt(0.5)
    assert p[0, 0] == pytest.approx((2 * w + 0.5) / (2 * w + 1.0))


def test_prior_prediction_worked_by_hand():
    """Category A: outcomes 1, 1, 0; B: 0; overall 2/4. Shrunk by 5 items: A (2 + 2.5) / 8, B 2.5 / 6, unseen 0.5."""
    x = np.array([[1.0, 0.0, 7.0], [1.0, 0.0, 3.0], [1.0, 0.0, 1.0], [0.0, 1.0, 2.0]])
    y = np.array([[1.0], [1.0], [0.0], [0.0]])
    prior = fit_prior(x, y, {"pseudo_count": 5.0}, seed=0, group_columns=np.array([0, 1]))
    p = prior.predict(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 9.0], [0.0, 0.0, 1.0]]))
    assert p[:, 0] == pytest.approx([4.5 / 8, 2.5 / 6, 0.5])


@pytest.mark.parametrize("kind", ["knn", "mf", "logistic", "mlp"])
def test_every_predictor_learns_a_learnable_rule(kind):
    """Outcome 1 iff the first feature is positive (the data's own labels): each predictor ranks held-out rows
    nearly perfectly (AUC > 0.9), and its predictions are probabilities."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, 4))
    y = (x[:, :1] > 0).astype(float)
    predictor, setting, scores = fit_router_predictor(kind, x[:120], y[:120], seed=0)
    p = predictor.predict(x[120:])
    assert p.shape == (40, 1) and np.all((p >= 0) & (p <= 1))
    assert roc_auc_score(y[120:, 0], p[:, 0]) > 0.9, (kind, setting, scores)


def test_a_missing_outcome_is_left_out_of_the_loss():
    """Option 1 has outcomes on the first half only: the MLP still fits; a NaN never reaches the predictions."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3))
    y = np.stack([(x[:, 0] > 0), (x[:, 1] > 0)], axis=1).astype(float)
    y[20:, 1] = np.nan
    p = fit_mlp(x, y, {"hidden": 8, "weight_decay": 1e-4}, seed=0).predict(x)
    assert np.all(np.isfinite(p))


def fixed_router(pool, rates: list[list[float]], lam: float) -> PromptRouter:
    """A router whose predictor gives each subject its own success rates (a prior with hand-set rates)."""
    featurizer = fit_featurizer(problems_of(pool), "meta")
    columns = np.array([featurizer.names.index(n) for n in ("subject=algebra", "subject=geometry",
                                                            "subject=unknown")])
    predictor = PriorPredictor({"pseudo_count": 0.0}, {"group_columns": columns,
                                                       "group_keys": np.eye(3), "group_rates": np.array(rates),
                                                       "prior": np.array([0.5, 0.5])})
    config = {"kind": "prior_router", "options": [["G", 1], ["H", 1]], "option_cost": [1.0, 11.0], "budget": 10.0,
              "selection": "majority", "default_lambda": 0.0}
    return PromptRouter(featurizer, predictor, config, lam=lam)


@pytest.mark.parametrize("lam, expected", [
    # utilities P - lam * cost / B: algebra (0.6, 0.9), geometry (0.5, 0.5), unknown (0.2, 0.3); costs 0.1 and 1.1
    (0.0, ["H", "H", "G", "H", "H", "G", "H", "H"]),   # geometry ties: the first option (G)
    (0.2, ["H", "H", "G", "G", "H", "G", "G", "H"]),   # algebra 0.58 vs 0.68; unknown 0.18 vs 0.08
    (0.5, ["G", "G", "G", "G", "G", "G", "G", "G"]),   # algebra 0.55 vs 0.35
])
def test_the_router_takes_the_option_of_highest_success_minus_lambda_cost(lam, expected):
    pool = text_pool()
    router = fixed_router(pool, [[0.6, 0.9], [0.5, 0.5], [0.2, 0.3]], lam)
    for replay in ("single", "batched"):
        records = run_policy(router, pool, grouping="item", cost_model="tokens", replay=replay)
        chosen = ["G" if g > 0 else "H" for g in records["samples:G"]]
        assert chosen == expected, replay
        assert (records["samples:G"] + records["samples:H"] == 1).all()


def test_the_env_point_equals_the_point_computed_from_the_predictions():
    """A fitted router on the route env calls the strong generator exactly where its predicted gain clears
    lambda x cost gap / B, and its accuracy is the labels' of the generators it chose."""
    pool = text_pool()
    fitted = fit_router("logistic_router", pool, cost_model="tokens", seed=0)
    problems = problems_of(pool)
    p = fitted.predictor.predict(fitted.featurizer.transform(problems).astype(float))
    costs = np.array(fitted.config["option_cost"]) / fitted.config["budget"]
    for lam in (0.0, 0.01, 0.05, 1.0):
        records = run_policy(fitted.policy(lam), pool, grouping="item", cost_model="tokens")
        strong = (p - lam * costs).argmax(axis=1) == 1
        assert (records["samples:H"] > 0).tolist() == strong.tolist()
        correct = pool.labels.correct[:, 0].reshape(8, 2)  # episode 2i: G, 2i + 1: H (one candidate each)
        assert records["correct"].tolist() == np.where(strong, correct[:, 1], correct[:, 0]).tolist()


def test_a_router_checkpoint_round_trips_and_acts_the_same(tmp_path: Path):
    pool = text_pool()
    fitted = fit_router("knn_router", pool, cost_model="tokens", seed=0)
    save_router(tmp_path, fitted.config, fitted.predictor, fitted.featurizer)
    loaded = load(tmp_path, lam=0.05)
    a = run_policy(fitted.policy(0.05), pool, grouping="item", cost_model="tokens")
    b = run_policy(loaded, pool, grouping="item", cost_model="tokens")
    assert a["actions"].tolist() == b["actions"].tolist()
    assert loaded.name == "knn_router@0.05"


@pytest.mark.parametrize("edit, message", [
    (lambda c, a: c.update(options=[["G", 0]]), r"field 'options' is .*expected a list of \[generator, samples\]"),
    (lambda c, a: c.update(option_cost=[1.0]), r"field 'option_cost' is .*expected one cost >= 0 per option"),
    (lambda c, a: c.update(budget=-1), r"field 'budget' is -1; expected a finite number > 0"),
    (lambda c, a: c["predictor"].update(k=0), r"field 'predictor.k' is 0; expected an integer >= 1"),
    (lambda c, a: a.pop("train_x"), r"missing array\(s\) \['train_x'\] of a knn predictor"),
    (lambda c, a: a["prior"].__setitem__(0, np.nan), r"array 'prior' holds non-numbers or infinities"),
])
def test_a_damaged_router_checkpoint_is_named(tmp_path: Path, edit, message):
    pool = text_pool()
    fitted = fit_router("knn_router", pool, cost_model="tokens", seed=0)
    save_router(tmp_path, fitted.config, fitted.predictor, fitted.featurizer)
    config = json.loads((tmp_path / "controller.json").read_text())
    with np.load(tmp_path / "predictor.npz") as data:
        arrays = {k: data[k].copy() for k in data.files}
    edit(config, arrays)
    (tmp_path / "controller.json").write_text(json.dumps(config))
    np.savez(tmp_path / "predictor.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        load(tmp_path)


def test_a_router_never_reads_labels():
    """Permute every candidate's correct flag: a fitted router takes the same actions on every episode."""
    pool = text_pool()
    router = fit_router("logistic_router", pool, cost_model="tokens", seed=0).policy(0.01)
    flipped = dataclasses.replace(pool, labels=Labels(correct=~pool.labels.correct,
                                                      gold_cluster=pool.labels.gold_cluster))
    a = run_policy(router, pool, grouping="item", cost_model="tokens")
    b = run_policy(router, flipped, grouping="item", cost_model="tokens")
    assert a["actions"].tolist() == b["actions"].tolist()
    assert a["correct"].tolist() != b["correct"].tolist()  # the labels did change what is scored


def test_the_simple_baselines():
    pool = text_pool()  # G: 2B parameters, H: 20B
    cheap = run_policy(AlwaysCheapest(), pool, grouping="item", cost_model="tokens")
    large = run_policy(AlwaysLargest(), pool, grouping="item", cost_model="tokens")
    assert (cheap["samples:G"] == 1).all() and (large["samples:H"] == 1).all()
    for replay in ("single", "batched"):
        records = run_policy(RandomRouter(share=0.3, seed=4), pool, grouping="item", cost_model="tokens",
                             replay=replay)
        draws = np.random.default_rng(4).random(8) < 0.3
        assert (records["samples:H"] > 0).tolist() == draws.tolist(), replay
