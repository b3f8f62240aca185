"""The batched replay's shortcuts keep its results: the vectorized weighted vote, the replay without observations
(with R computed when read), and the records' text columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.base import Policy
from agents.registry import make_policy
from agents.sampling import BestOfN
from coba_env import compile_pool
from coba_env.rules.selection import SelectionRule, select_by_rule
from coba_env.vector_env import CoBaVectorEnv
from eval.batched_replay import distinct_rows
from eval.records import text_column
from tests.factory import Cand, Ep, build_pool

NAN = float("nan")


@pytest.mark.parametrize(("clusters", "n", "scores", "verified", "expected"), [
    ([0, 1, 1], 3, [0.9, 0.5, 0.5], [1, 1, 1], 1),  # answer 1: 0.5 + 0.5 = 1.0 beats 0.9; its earliest candidate
    ([1, 0], 2, [0.5, 0.5], [1, 1], 1),  # a tie goes to the smaller cluster id (0), at slot 1
    ([0, 1, 1], 3, [0.9, NAN, NAN], [1, 0, 0], 1),  # unverified candidates count missing = 0.5 each
    ([0, 1, 1], 2, [0.9, 0.5, 0.5], [1, 1, 1], 0),  # slot 2 is not revealed: 0.9 beats 0.5
    ([0, 0, 1], 3, [0.1, 0.2, 0.3], [1, 1, 1], 0),  # in floats 0.1 + 0.2 > 0.3: answer 0 wins
    ([-1, 2, -1], 3, [0.1, 0.2, 0.3], [1, 1, 1], 1),  # the only answered candidate
    ([-1, -1], 2, [0.1, 0.2], [1, 1], 0),  # nothing answered: the caller selects nothing (-1)
])
def test_weighted_vote_by_hand(clusters, n, scores, verified, expected):
    rule = SelectionRule(rule="weighted_vote", tier="V1", missing=0.5)
    cluster = np.array([clusters], dtype=np.int8)
    top = np.array([max(clusters)])
    got = select_by_rule(rule, cluster, np.array([n]), top, np.array([scores]), np.array([verified], dtype=bool))
    assert got.tolist() == [expected]


def test_weighted_vote_rows_at_once_equal_one_at_a_time():
    """Many rows in one call select what each row alone selects (and a NaN ``missing`` takes the row loop)."""
    rng = np.random.default_rng(0)
    cluster = rng.integers(-1, 3, size=(200, 6)).astype(np.int8)
    n = rng.integers(0, 7, size=200)
    scores = rng.choice([0.1, 0.2, 0.3, 0.5, NAN], size=(200, 6))
    verified = rng.random((200, 6)) < 0.7
    top = np.zeros(200, dtype=np.int64)
    for missing in (0.5, NAN):
        rule = SelectionRule(rule="weighted_vote", tier="V1", missing=missing)
        together = select_by_rule(rule, cluster, n, top, scores, verified)
        alone = [select_by_rule(rule, cluster[i:i + 1], n[i:i + 1], top[i:i + 1], scores[i:i + 1], verified[i:i + 1])[0]
                 for i in range(200)]
        assert together.tolist() == alone


class ObservingBestOfN(BestOfN):
    """A subclass with its own act_batch (which could read the observations) that declares nothing."""

    def act_batch(self, observations, action_masks, venv=None):
        return super().act_batch(observations, action_masks, venv)


@pytest.mark.parametrize(("policy", "observes"), [
    (make_policy("bon4_majority"), False), (make_policy("coba_light"), False),
    (ObservingBestOfN(name="x", n=2), True),
])
def test_observes_in_batch_is_declared_by_the_class_defining_act_batch(policy, observes):
    assert policy.observes_in_batch() is observes
    assert Policy.batch_reads_observations is True


@pytest.fixture(scope="module")
def small_pool():
    rng = np.random.default_rng(2)
    eps = []
    for e in range(12):
        cands = []
        for _ in range(6):
            answer = str(rng.integers(3)) if rng.random() > 0.2 else None
            cands.append(Cand(answer, answer == "0", output_tokens=int(rng.integers(100, 900)),
                              scores={"V1": float(rng.random()), "V3": float(rng.random())}))
        eps.append(Ep(cands, item_id=str(e), dataset="d"))
    return compile_pool(build_pool(eps))


@pytest.mark.parametrize("selection", ["fusion", "majority"])
def test_a_vector_env_without_observations_steps_the_same(small_pool, selection):
    """Random legal actions (VERIFY targets read R): rewards, masks, selections and R agree; observations are [B, 0]."""
    envs = [CoBaVectorEnv(5, small_pool, selection=selection, observe=o, lam=0.2) for o in (True, False)]
    (obs, info), (blank, info2) = [v.reset(seed=0) for v in envs]
    assert obs.shape == (5, envs[0].n_obs) and blank.shape == (5, 0)
    rng = np.random.default_rng(3)
    mask = info["action_mask"]
    for _ in range(60):
        assert np.array_equal(mask, info2["action_mask"])
        a = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        (_, r1, t1, _, i1), (o2, r2, t2, _, i2) = [v.step(a) for v in envs]
        assert o2.shape == (5, 0)
        assert np.array_equal(r1, r2) and np.array_equal(t1, t2)
        for key in ("selected_candidate", "correct", "final_costs"):
            assert np.array_equal(i1.get(key, 0), i2.get(key, 0))
        assert np.array_equal(envs[0].rank, envs[1].rank)
        mask, info2 = i1["action_mask"], i2


def test_text_column_is_each_values_str():
    values = np.array(["7", None, NAN, 3, "x y"], dtype=object)
    expected = pd.Series(["7", None, "nan", "3", "x y"], dtype="str")
    pd.testing.assert_series_equal(text_column(values), expected)
    pd.testing.assert_series_equal(text_column(np.array(["a", None], dtype=object)),
                                   pd.Series(["a", None], dtype="str"))


@pytest.mark.parametrize("width", [3, 8, 9, 30])
def test_distinct_rows_groups_equal_rows(width):
    rng = np.random.default_rng(width)
    lengths = rng.integers(0, width + 1, size=300)
    log = np.full((300, width), -1, dtype=np.int8)
    for i, k in enumerate(lengths):
        log[i, :k] = rng.integers(0, 2, size=k)
    uniq, inverse = distinct_rows(log)
    assert np.array_equal(uniq[inverse], log)
    assert len(uniq) == len(np.unique(log, axis=0))
