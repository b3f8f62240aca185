"""Problem features (the env option): their place in the observation, their values worked by hand, both envs in
lockstep, the featurizers' files, and the two leak checks: text features never see a held-out item, and no label,
correct flag or gold answer reaches a feature."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coba_env.compiled import Labels, compile_pool
from coba_env.env import CoBaEnv
from coba_env.featurizer_files import load_featurizer, save_featurizer
from coba_env.featurizers import fit_featurizer
from coba_env.problems import problems_of
from coba_env.splits import item_kfold
from tests.factory import Cand, Ep, build_pool

TEXTS = ["add two numbers quickly", "multiply the numbers carefully", "a geometry question about circles",
         "zzyzx appears here only", "another question about algebra", "zzyzx again in a problem",
         "numbers and circles together", "the last algebra question"]
SUBJECTS = ["algebra", "algebra", "geometry", None, "algebra", "geometry", None, "algebra"]


def text_pool():
    """8 items x 2 generators (one candidate each), with problem texts and subjects (two items lack one)."""
    eps = []
    for i in range(len(TEXTS)):
        for g, gen in enumerate(("G", "H")):
            eps.append(Ep([Cand("1", correct=(i + g) % 3 != 0, prompt_tokens=50 + 10 * i)], item_id=f"i{i}",
                          generator=gen))
    pool = build_pool(eps, models={"G": 2.0, "H": 20.0, "J1": 2.0, "J2": 4.0, "J3": 20.0})
    pool.items["problem"] = TEXTS
    pool.items["subject"] = SUBJECTS
    return compile_pool(pool)


def test_the_problem_features_start_the_observation_with_hand_worked_values():
    pool = text_pool()
    featurizer = fit_featurizer(problems_of(pool), "meta")
    names = featurizer.names
    assert names[:2] == ("dataset=d1", "dataset=unknown")
    assert names[2:5] == ("subject=algebra", "subject=geometry", "subject=unknown")
    assert names[5:] == ("log_prompt_tokens", "log_problem_chars")
    plain = CoBaEnv(pool, grouping="item")
    env = CoBaEnv(pool, grouping="item", problem_features=featurizer)
    assert env.feature_names == names + plain.feature_names
    assert env.lambda_index == len(names) + plain.lambda_index
    low, high = env.observation_space.low, env.observation_space.high
    assert np.all(np.isinf(low[:len(names)])) and np.all(np.isinf(high[:len(names)]))
    # Item i3: no subject -> the unknown bucket; its prompt tokens 80 and 23 characters, standardized by hand
    # over the 8 items (prompt tokens 50, 60, ..., 120).
    obs, _ = env.reset(options={"episode": 3})
    log_tokens = np.log1p(50.0 + 10 * np.arange(8))
    log_chars = np.log1p([len(t) for t in TEXTS])
    expected = [1, 0, 0, 0, 1, (log_tokens[3] - log_tokens.mean()) / log_tokens.std(),
                (log_chars[3] - log_chars.mean()) / log_chars.std()]
    assert obs[:len(names)] == pytest.approx(np.float32(expected), abs=1e-6)
    assert np.array_equal(obs[len(names):], plain.reset(options={"episode": 3})[0])
    step = env.step(0)[0]  # the prefix stays for the whole episode
    assert np.array_equal(step[:len(names)], obs[:len(names)])


@pytest.mark.parametrize("route", [False, True], ids=["pair", "item"])
def test_vector_env_equals_single_envs_with_problem_features(route):
    from tests.conftest import make_synthetic_pool
    from tests.test_vector_lockstep import GENERATORS, lockstep

    pool = compile_pool(make_synthetic_pool({"d1": 3, "d2": 2}, GENERATORS, n_candidates=14, seed=0))
    featurizer = fit_featurizer(problems_of(pool), "meta,text")
    assert lockstep(route, 14, n_envs=6, n_steps=80, p_sample=0.85, problem_features=featurizer) >= 6


def test_a_saved_featurizer_transforms_bit_for_bit(tmp_path: Path):
    pool = text_pool()
    featurizer = fit_featurizer(problems_of(pool), "meta,text", seed=3)
    save_featurizer(featurizer, tmp_path)
    loaded = load_featurizer(tmp_path)
    assert loaded.names == featurizer.names
    assert loaded.transform(problems_of(pool)).tobytes() == featurizer.transform(problems_of(pool)).tobytes()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(sources=["meta", "colour"]), r"field 'sources' is .*expected a list of distinct names"),
    (lambda d: d.update(names=["x"]), r"field 'names' is .*expected the 7 names its settings give"),
    (lambda d: d["scales"].update(log_prompt_tokens=[0.0, 0.0]), r"field 'scales' is .*\[mean, scale > 0\]"),
    (lambda d: d.update(embedding_dim=3), r"field 'embedding_dim' is 3; expected an integer > 0 with the "),
])
def test_a_damaged_featurizer_file_is_named(tmp_path: Path, edit, message):
    import json

    save_featurizer(fit_featurizer(problems_of(text_pool()), "meta"), tmp_path)
    data = json.loads((tmp_path / "featurizer.json").read_text())
    edit(data)
    (tmp_path / "featurizer.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_featurizer(tmp_path)


def test_text_features_never_see_a_held_out_item():
    """'zzyzx' occurs in two problems only (min_df 2 keeps it when both are in training): fitted on a fold's
    training items it is absent whenever they are held out; fitted on every item it is there (the check can fail)."""
    pool = text_pool()
    assert "zzyzx" in fit_featurizer(problems_of(pool), "text").text.vocabulary
    holders = {"i3", "i5"}
    checked = 0
    for split in item_kfold(pool, k=4, seed=0):
        train = pool.select(np.isin(pool.episode_ids, split.train_episode_ids))
        held_items = set(pool.select(np.isin(pool.episode_ids, split.eval_episode_ids)).item_id.tolist())
        vocabulary = fit_featurizer(problems_of(train), "text").text.vocabulary
        assert not held_items & set(problems_of(train)["item_id"])  # the fit saw training items only
        if holders & held_items:
            assert not any("zzyzx" in term for term in vocabulary), split.held_out
            checked += 1
    assert checked >= 1


def test_no_label_correct_flag_or_gold_answer_reaches_a_feature():
    """Permute every item's gold answer and every candidate's correct flag: the problem table has no such column,
    and every feature (meta, text) and every observation of a router's env stays bit for bit the same."""
    pool = text_pool()
    assert {"gold", "correct", "score", "graded_score"}.isdisjoint(pool.problems.columns)
    rng = np.random.default_rng(0)
    correct = pool.labels.correct.copy()
    rng.shuffle(correct)
    permuted = dataclasses.replace(pool, labels=Labels(correct=~correct, gold_cluster=pool.labels.gold_cluster[::-1]),
                                   problems=pool.problems.assign(gold=rng.permutation(8).astype(str)))
    a = fit_featurizer(problems_of(pool), "meta,text")
    b = fit_featurizer(problems_of(permuted), "meta,text")
    assert a.transform(problems_of(pool)).tobytes() == b.transform(problems_of(permuted)).tobytes()
    for e in range(8):
        first = CoBaEnv(pool, grouping="item", problem_features=a).reset(options={"episode": e})[0]
        second = CoBaEnv(permuted, grouping="item", problem_features=b).reset(options={"episode": e})[0]
        assert first.tobytes() == second.tobytes()


def test_embeddings_are_features_as_they_are():
    pool = text_pool()
    vectors = np.arange(8 * 3, dtype=np.float32).reshape(8, 3) / 7
    table = pool.problems.assign(embedding=list(vectors))
    featurizer = fit_featurizer(table, "embeddings")
    assert featurizer.names == ("embedding_0", "embedding_1", "embedding_2")
    assert np.array_equal(featurizer.transform(table), vectors)
    with pytest.raises(ValueError, match=r"embeddings: the pool has no embeddings table"):
        fit_featurizer(pool.problems, "embeddings")


@pytest.mark.parametrize("spec, message", [
    ("meta,colour", r"problem features 'meta,colour': expected distinct names from \['meta', 'text', 'embeddings'\]"),
    ("meta,meta", r"expected distinct names"),
    ("", r"expected distinct names"),
])
def test_bad_sources_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        fit_featurizer(problems_of(text_pool()), spec)


def test_a_non_featurizer_option_is_refused():
    with pytest.raises(ValueError, match=r"problem_features must be a fitted featurizer .* got str"):
        CoBaEnv(text_pool(), problem_features="meta")


def test_non_finite_features_are_refused():
    class Broken:
        names, meanings = ("x",), ("broken",)

        def transform(self, problems: pd.DataFrame) -> np.ndarray:
            return np.full((len(problems), 1), math.nan)

    with pytest.raises(ValueError, match=r"feature 'x' of item d1/i0 is nan; expected a finite number"):
        CoBaEnv(text_pool(), problem_features=Broken())
