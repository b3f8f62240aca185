"""PPO on the route env (issue 27, item 3; one controller, method and trainer for both envs since issue 34): the
protocol method, the route controller and its checkpoint."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from agents.learned import load_checkpoint
from agents.learned_ppo import PPOController, load
from agents.registry import make_policy
from agents.routing_base import is_route_policy
from agents.runner import replay
from coba_env.env import CoBaEnv, as_compiled
from coba_env.vector_env import CoBaVectorEnv
from eval.batched_replay import replay_batched
from eval.runner import run_policies
from tests.test_label_leak import permuted_labels
from tests.test_route_env import assert_batched_equals_single
from train.ppo_method import CASCADE_POINT, PPO_PROTOCOLS, PPOFitted, PPOMethod
from train.ppo_warm_start import strong_demonstrations, teacher_policy
from train.protocol import run_protocol
from train.protocol_arena import ROUTE
from train.sb3_vec_env import CoBaSB3VecEnv

#: The route env's selection rule under the protocol: the cascade's own.
SELECTION = PPO_PROTOCOLS["route"].env_kwargs["selection"]


def route_env(pool, **kwargs):
    """The env of item grouping (coba/Route-v0)."""
    return CoBaEnv(pool, grouping="item", **kwargs)


def route_ppo_method(**kwargs):
    """The PPO method on the route arena."""
    return PPOMethod("route", **kwargs)

#: A short fit: 2 rollouts of 64 sub-envs x 16 steps (enough to write a checkpoint and act).
SHORT = {"total_timesteps": 2048, "n_envs": 64}
BUDGET = 1_000_000.0


@pytest.fixture(scope="module")
def tiny():
    return as_compiled("tiny")  # 2 generators, 8 candidates each, 24 problems


@pytest.fixture(scope="module")
def fitted(tiny, tmp_path_factory) -> PPOFitted:
    out = tmp_path_factory.mktemp("route-ppo") / "fit"
    return route_ppo_method(**SHORT).fit(tiny, tiny.episode_ids, budget=BUDGET, seed=0, out_dir=out, progress=False)


@pytest.fixture(scope="module")
def small_paper():
    """The paper pool's first 5 problems of every dataset, every generator of each (3 generators)."""
    paper = as_compiled("paper")
    keep = np.zeros(paper.n_episodes, dtype=bool)
    for d in dict.fromkeys(paper.dataset.tolist()):
        items = list(dict.fromkeys(paper.item_id[paper.dataset == d].tolist()))[:5]
        keep |= (paper.dataset == d) & np.isin(paper.item_id, items)
    return paper.select(keep)


def test_partial_protocol_run_on_the_route_arena_writes_a_partial_verdict(small_paper, tmp_path):
    method = route_ppo_method(**SHORT)
    result = run_protocol(small_paper, method, seeds=(0,), held_out=["aime2025"], progress=False, out_dir=tmp_path,
                          pool_name="paper, first 5 problems per dataset", arena=ROUTE, resamples=200)
    v = result.verdict
    assert (v["env"], v["reference"], v["scope"], v["beats"]) == ("route", "route_cascade", "partial", False)
    assert "partial run" in v["text"] and "BEATS" not in (tmp_path / "verdict.md").read_text()
    assert json.loads((tmp_path / "protocol.json").read_text())["verdict"]["beats"] is False
    records = result.records
    assert set(records["policy"]) == {"route_cascade", "route_ppo"}
    assert set(records["dataset"]) == {"aime2025"}
    assert (records.groupby("policy").size() == 5).all()  # one record per held-out problem (route episode)
    # every grid point was validated against the cascade in the inner folds and exactly one was chosen
    assert len(result.inner) == len(method.grid()) and result.inner["chosen"].sum() == 1
    names = {f"route_ppo[{','.join(f'{k}={v:g}' for k, v in p.items())}]" for p in method.grid()}
    assert result.chosen["point"].iloc[0] in names
    # the held-out fold was never trained on: the inner and final checkpoints name the training datasets only
    configs = sorted(tmp_path.glob("seed0/aime2025/**/controller.json"))
    assert len(configs) == 5  # 4 inner fits and the refit
    for cfg in configs:
        assert "aime2025" not in json.loads(cfg.read_text())["train_datasets"]


def test_grid_is_the_stated_lambdas_then_the_cascade_fallback(fitted):
    method = route_ppo_method()
    # the grid stated in docs/LEARNING.md (route PPO paragraph), written out
    assert method.grid() == [{"lam": x} for x in (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)] + [{"cascade": 1}]
    assert method.fallback() == CASCADE_POINT and method.fallback() in method.grid()
    reference = fitted.policy(CASCADE_POINT)
    assert reference.name == "route_cascade" and type(reference) is type(make_policy("route_cascade"))


def test_the_env_uses_the_cascades_selection_rule():
    assert make_policy(ROUTE.reference).env_kwargs()["selection"] == SELECTION


def test_cli_builds_the_route_method_with_its_stated_settings():
    from coba_cli.train_cmd import protocol_method

    method = protocol_method("ppo", "route")
    assert isinstance(method, PPOMethod) and method.name == "route_ppo" and method.arena is ROUTE
    assert method.total_timesteps == 81_920 and method.grid() == route_ppo_method().grid()


def test_the_controller_is_a_route_policy_carrying_its_env_settings(tiny, fitted):
    policy = fitted.policy({"lam": 0.2})
    assert isinstance(policy, PPOController) and is_route_policy(policy)
    meta = json.loads((fitted.path / "controller.json").read_text())
    assert meta["env"] == "route" and meta["teacher"] == "route_cascade"
    assert policy.env_kwargs()["budget"] == BUDGET
    assert policy.env_kwargs()["n_max"] == tiny.n_candidates == 8  # N_max per generator: the pool's N
    assert policy.env_kwargs()["selection"]["rule"] == "last"
    env = route_env(tiny, **policy.env_kwargs())
    assert meta["actions"] == list(env.layout.names) == ["SAMPLE_Qwen3-14B", "SAMPLE_Qwen3-8B", "VERIFY_V1",
                                                         "VERIFY_V2", "VERIFY_V3", "STOP"]
    assert meta["observation"] == list(env.feature_names)
    assert policy.applicable(env) == (True, "")
    loaded = load_checkpoint(f"{fitted.path}@0.3")  # the generic loader dispatches on controller.json's env
    assert isinstance(loaded, PPOController) and loaded.lam == 0.3 and loaded.name == "route_ppo@0.3"
    assert loaded.describe()["kind"] == "route_ppo" and loaded.label == "Route PPO (lambda=0.3)"


def test_a_fixed_lambda_is_written_at_the_route_observations_lambda_feature(tiny, fitted):
    env = route_env(tiny, lam=0.05)
    obs, _ = env.reset(seed=0, options={"episode": 3})
    at = env.lambda_index
    assert obs[at] == np.float32(0.05) and at == len(obs) - 2  # the pooled table's lambda, second from the end
    fixed, free = fitted.policy({"lam": 0.4}), PPOController(fitted.policy({"lam": 0}).model,
                                                               fitted.policy({"lam": 0}).meta)
    edited = obs.copy()
    edited[at] = 0.4
    assert np.array_equal(fixed.logits(obs[None]), free.logits(edited[None]))
    assert not np.array_equal(free.logits(obs[None]), free.logits(edited[None]))  # lambda reaches the network


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_batched_form_equals_the_single_form(tiny, fitted, lam):
    policy = fitted.policy({"lam": lam})
    single = replay(policy, route_env(tiny, **policy.env_kwargs()), record=True)
    venv = CoBaVectorEnv(5, tiny, grouping="item", **policy.env_kwargs())  # 5 does not divide 24: rows refill
    assert policy.supports_batch(venv)
    assert_batched_equals_single(single, replay_batched(policy, venv), venv.layout.names)


def test_actions_ignore_correctness_labels(tiny, fitted):
    policy = fitted.policy({"lam": 0.1})
    runs = [replay(policy, route_env(pool, **policy.env_kwargs()), record=True)
            for pool in (tiny, permuted_labels(tiny))]
    assert [r["correct"] for r in runs[0]] != [r["correct"] for r in runs[1]]  # the labels did change
    assert [r["action_ids"] for r in runs[0]] == [r["action_ids"] for r in runs[1]]


def test_warm_start_demonstrations_replay_the_cascade_exactly(tiny):
    env = route_env(tiny, selection=SELECTION, lambda_range=(0.0, 0.5))
    demos = strong_demonstrations(env, teacher=teacher_policy(ROUTE.reference), passes=1)
    bench = run_policies(["route_cascade"], tiny, grouping="item", workers=1, progress=False).records  # an independent replay
    code = {name: i for i, name in enumerate(env.layout.names)}
    expected = [code[a] for actions in bench["actions"] for a in actions.split()]
    assert demos.actions.tolist() == expected
    assert demos.episodes == 24


def test_balanced_order_draws_each_dataset_equally_often_on_the_route_env():
    from tests.conftest import make_synthetic_pool

    pool = make_synthetic_pool({"d1": 30, "d2": 6}, {"gA": 1.5, "gB": 7.0}, n_candidates=4, seed=1)
    venv = CoBaSB3VecEnv(8, pool, grouping="item", order="balanced").venv
    venv.reset(seed=0)
    drawn = venv.pool.dataset[venv._next_episodes(6000)]
    assert abs(np.mean(drawn == "d2") - 0.5) < 0.03  # 1/K per dataset, where its share of problems is 1/6
    assert venv.order == "balanced"


@pytest.mark.parametrize("make_env, match", [
    (lambda tiny: CoBaEnv(tiny), r"trained on coba/Route-v0 \(route env\); the env is coba/Replay-v0"),
    (lambda tiny: route_env(tiny, n_max=4), r"trained with N_max = 8 per generator, the env has 4"),
    (lambda tiny: route_env(tiny, cost_model="tokens"), r"trained with cost model 'p_tokens'"),
    (lambda tiny: route_env(__import__("tests.conftest", fromlist=["x"]).make_synthetic_pool(
        {"d1": 3}, {"gA": 1.5, "gB": 7.0}, n_candidates=8)), r"trained on the actions \['SAMPLE_Qwen3-14B', "
     r"'SAMPLE_Qwen3-8B', .*\]; the env has \['SAMPLE_gA', 'SAMPLE_gB'"),
], ids=["replay-env", "n_max", "cost-model", "other-generators"])
def test_the_checkpoint_is_refused_on_another_layout(tiny, fitted, make_env, match):
    ok, why = fitted.policy({"lam": 0.1}).applicable(make_env(tiny))
    assert not ok
    assert __import__("re").search(match, why), why


@pytest.mark.parametrize("edit, match", [
    ({"env": "routes"}, r"field 'env' is 'routes'; expected one of \['replay', 'route'\]"),
    ({"n_max_per_generator": None}, r"field 'n_max_per_generator' is None; expected an integer >= 1"),
    ({"n_max_per_generator": 0}, r"field 'n_max_per_generator' is 0; expected an integer >= 1"),
    ({"observation": ["x"] * 21}, r"observation space Box\(shape=\(35,\)\) does not fit the env's Box\(21,\)"),
], ids=["env", "no-n-max", "zero-n-max", "observation"])
def test_load_refuses_a_bad_route_checkpoint(fitted, tmp_path, edit, match):
    copy = tmp_path / "ckpt"
    shutil.copytree(fitted.path, copy)
    meta = json.loads((copy / "controller.json").read_text())
    meta.update(edit)
    (copy / "controller.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=match):
        load(copy)


def test_a_replay_checkpoint_is_not_applicable_on_the_route_env(tiny, tmp_path):
    from train.ppo import train_ppo

    path = train_ppo(tiny, tmp_path / "replay", total_timesteps=1024, n_envs=64, progress=False, tensorboard=False,
                     warm_start=False)
    policy = PPOFitted(path).policy({"lam": 0.1})
    assert not is_route_policy(policy) and policy.name == "ppo@0.1"
    assert policy.applicable(route_env(tiny, **policy.env_kwargs())) == \
        (False, "trained on coba/Replay-v0 (replay env); the env is coba/Route-v0")


@pytest.mark.parametrize("kwargs, match", [
    ({"lambdas": []}, r"lambdas must be finite numbers in the training range \[0, 0.5\]"),
    ({"lambdas": [0.1, 0.6]}, r"lambdas must be finite numbers in the training range"),
    ({"lambdas": [float("nan")]}, r"lambdas must be finite numbers in the training range"),
    ({"lambdas": [-0.1]}, r"lambdas must be finite numbers in the training range"),
    ({"lambdas": [0.1, 0.1]}, r"lambdas must be distinct"),
    ({"total_timesteps": 0}, r"total_timesteps must be an integer >= 1, got 0"),
    ({"total_timesteps": 1.5}, r"total_timesteps must be an integer >= 1, got 1.5"),
    ({"n_envs": True}, r"n_envs must be an integer >= 1, got True"),
], ids=["empty", "above-range", "nan", "negative", "repeated", "zero-steps", "float-steps", "bool-envs"])
def test_method_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        route_ppo_method(**kwargs)


@pytest.mark.parametrize("point", [{"tau": 0.1}, {"lam": 0.1, "cascade": 1.0}, {"cascade": 0.0}], ids=str)
def test_policy_rejects_a_foreign_point(fitted, point):
    with pytest.raises(ValueError, match=r"a PPO operating point is \{'lam': value\} or \{'cascade': 1.0\}"):
        fitted.policy(point)


def test_fit_rejects_an_empty_training_set(tiny, tmp_path):
    with pytest.raises(ValueError, match="PPOMethod.fit: no training episodes"):
        route_ppo_method(**SHORT).fit(tiny, np.array([], dtype=np.int64), budget=BUDGET, seed=0, out_dir=tmp_path,
                                    progress=False)
