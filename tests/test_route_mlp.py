"""The MLP controller on the route env (issue 27, item 3; one controller and method for both envs since issue 34):
the protocol method, the route policy, its checkpoint."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agents.learned_mlp import MLPController, load
from agents.registry import make_policy
from agents.routing_base import is_route_policy
from coba_env.env import CoBaEnv, as_compiled
from eval.runner import replay_policy
from train.cost_aware_oracle import CostAwareOracle
from train.protocol import cost_unit, run_protocol
from train.protocol_arena import ROUTE
from train.protocol_mlp import CachedOracle, MLPMethod, OracleCache


def route_env(pool, **kwargs):
    """The env of item grouping (coba/Route-v0)."""
    return CoBaEnv(pool, grouping="item", **kwargs)


def route_mlp_method(**kwargs):
    """The MLP method on the route arena."""
    return MLPMethod("route", **kwargs)


#: Small settings for tests (the protocol's own are ``ROUTE_MLP_SETTINGS``).
QUICK = {"dagger_rounds": 1, "episodes_per_round": 4, "epochs": 2, "balance_datasets": True, "tensorboard": False}


@pytest.fixture(scope="module")
def small_paper():
    """The paper pool's first 3 problems of every dataset, every generator of each."""
    paper = as_compiled("paper")
    keep = np.zeros(paper.n_episodes, dtype=bool)
    for d in dict.fromkeys(paper.dataset.tolist()):
        rows = np.flatnonzero(paper.dataset == d)
        items = list(dict.fromkeys(paper.item_id[rows].tolist()))[:3]
        keep |= (paper.dataset == d) & np.isin(paper.item_id, items)
    return paper.select(keep)


@pytest.fixture(scope="module")
def fitted(small_paper, tmp_path_factory):
    """One fit on the small pool's datasets but aime2025, at the paper pool's cost unit."""
    method = route_mlp_method(lambdas=(0.2, 1.0), settings=QUICK)
    train_ids = small_paper.episode_ids[small_paper.dataset != "aime2025"]
    budget = cost_unit(as_compiled("paper"))
    out = tmp_path_factory.mktemp("route_mlp")
    return method.fit(small_paper, train_ids, budget=budget, seed=0, out_dir=out, progress=False), budget


def test_partial_protocol_run_on_the_route_arena_writes_a_partial_verdict(small_paper, tmp_path):
    method = route_mlp_method(lambdas=(0.2, 1.0), settings=QUICK)
    result = run_protocol(small_paper, method, seeds=(0,), held_out=["aime2025"], progress=False, out_dir=tmp_path,
                          pool_name="paper, 3 problems per dataset", arena=ROUTE)
    records = result.records
    assert set(records["policy"]) == {"route_cascade", "route_mlp"}
    # one record per held-out problem (3 aime2025 problems), for each of the two policies
    assert len(records) == 6 and set(records["dataset"]) == {"aime2025"}
    # every grid point (2 lambdas and the fallback) was validated in each of the 4 inner folds' stack
    assert result.inner["policy"].tolist() == ["route_mlp[lam=0.2]", "route_mlp[lam=1]", "route_mlp[lam=inf]"]
    v = result.verdict
    assert (v["env"], v["reference"], v["scope"], v["beats"]) == ("route", "route_cascade", "partial", False)
    written = json.loads((tmp_path / "protocol.json").read_text())
    assert written["verdict"]["beats"] is False and written["verdict"]["scope"] == "partial"
    assert [c["point"] for c in written["chosen"]] == [result.chosen["point"].iloc[0]]
    assert "partial" in (tmp_path / "verdict.md").read_text()


def test_fit_writes_a_route_checkpoint_that_is_a_route_policy(fitted, small_paper):
    fit, budget = fitted
    config = json.loads((fit.path / "controller.json").read_text())
    env = route_env(small_paper, budget=budget)
    assert config["env"] == "route" and config["n_max_per_generator"] == 16
    assert config["actions"] == list(env.layout.names) and config["observation"] == list(env.feature_names)
    # trained on the training datasets only (aime2025 held out)
    assert config["train_datasets"] == ["aime2024", "amc2023", "math500", "rgym_hard"]
    policy = fit.policy({"lam": 0.2})
    assert is_route_policy(policy) and isinstance(policy, MLPController)
    assert policy.lam == 0.2
    assert policy.env_kwargs() == {"budget": budget, "n_max": 16}
    assert policy.applicable(env) == (True, "")
    # the generic loader (coba bench --policies DIR@LAM) dispatches on controller.json's env
    from agents.learned import load_checkpoint

    loaded = load_checkpoint(f"{fit.path}@0.35")
    assert isinstance(loaded, MLPController) and is_route_policy(loaded) and loaded.lam == 0.35
    assert loaded.describe()["kind"] == "route_mlp" and loaded.label == "Learned route MLP (lambda=0.35)"


def test_fallback_point_is_the_reference_cascade(fitted, small_paper):
    fit, _ = fitted
    mine = replay_policy(fit.policy({"lam": math.inf}), small_paper, grouping="item").records
    ref = replay_policy(make_policy(ROUTE.reference), small_paper, grouping="item").records
    assert mine["actions"].tolist() == ref["actions"].tolist()


@pytest.mark.parametrize("lam", [0.0, 0.2, 1.0, 5.0])
def test_batched_replay_equals_single(fitted, small_paper, lam):
    fit, _ = fitted
    policy = fit.policy({"lam": lam})
    batched = replay_policy(policy, small_paper, grouping="item", replay="batched").records
    single = replay_policy(policy, small_paper, grouping="item", replay="single").records
    for column in ("actions", "selected_candidate", "correct", "p_tokens"):
        assert batched[column].tolist() == single[column].tolist(), column


def test_actions_do_not_depend_on_the_labels(fitted, small_paper):
    """Flipping every correctness label leaves the controller's actions unchanged (labels never reach it)."""
    fit, _ = fitted
    policy = fit.policy({"lam": 0.2})
    flipped = small_paper.select(np.ones(small_paper.n_episodes, dtype=bool))
    flipped.labels.correct[:] = ~flipped.labels.correct
    a = replay_policy(policy, small_paper, grouping="item").records
    b = replay_policy(policy, flipped, grouping="item").records
    assert a["actions"].tolist() == b["actions"].tolist()
    assert (a["correct"] != b["correct"]).any()


def test_checkpoint_is_refused_on_a_different_layout_or_env(fitted, small_paper):
    fit, budget = fitted
    policy = load(fit.path, lam=0.5)
    two = route_env(small_paper, budget=budget, generators=list(route_env(small_paper).layout.generators[:2]))
    ok, why = policy.applicable(two)
    assert not ok and "trained on the actions" in why
    assert policy.applicable(route_env(small_paper, budget=budget, n_max=8))[1] == \
        "trained with N_max = 16 per generator, the env has 8"
    assert "trained with budget B" in policy.applicable(route_env(small_paper, budget=budget / 2))[1]
    assert policy.applicable(CoBaEnv(small_paper, budget=budget))[1] == \
        "trained on coba/Route-v0 (route env); the env is coba/Replay-v0"


def test_a_checkpoint_without_its_env_field_is_a_replay_controller(fitted, small_paper, tmp_path):
    """controller.json's env names the env (absent: the replay env, as every checkpoint before the route env)."""
    fit, budget = fitted
    config = json.loads((fit.path / "controller.json").read_text())
    del config["env"]
    (tmp_path / "controller.json").write_text(json.dumps(config))
    (tmp_path / "model.pt").write_bytes((fit.path / "model.pt").read_bytes())
    policy = load(tmp_path)
    assert not is_route_policy(policy) and policy.env_kwargs() == {}  # as a replay MLP it is no route policy
    assert policy.applicable(route_env(small_paper, budget=budget))[1] == \
        "trained on coba/Replay-v0 (replay env); the env is coba/Route-v0"


@pytest.mark.parametrize("change, message", [
    ({"n_max_per_generator": 0}, r"field 'n_max_per_generator' is 0; expected an integer >= 1"),
    ({"n_max_per_generator": 2.5}, r"field 'n_max_per_generator' is 2.5"),
    ({"budget": -1.0}, r"field 'budget' is -1.0; expected a finite number > 0"),
    ({"env": "routes"}, r"field 'env' is 'routes'; expected one of \['replay', 'route'\]"),
])
def test_bad_controller_config(fitted, change, message, tmp_path):
    fit, _ = fitted
    config = {**json.loads((fit.path / "controller.json").read_text()), **change}
    network = load(fit.path)
    with pytest.raises(ValueError, match=f"^controller config: {message}"):
        MLPController(_network_of(network, config), config)
    (tmp_path / "controller.json").write_text(json.dumps(config))  # loaded from a file, the message names it
    (tmp_path / "model.pt").write_bytes((fit.path / "model.pt").read_bytes())
    with pytest.raises(ValueError, match=f"controller.json: {message}"):
        load(tmp_path)


def _network_of(controller, config):
    from agents.learned_mlp import build_network

    return build_network(tuple(config["hidden"]), len(controller.features), len(controller.actions))


@pytest.mark.parametrize("kwargs, message", [
    ({"lambdas": ()}, r"lambdas must be finite numbers >= 0, got \[\]"),
    ({"lambdas": (0.1, -0.2)}, r"lambdas must be finite numbers >= 0"),
    ({"lambdas": (math.inf,)}, r"lambdas must be finite numbers >= 0"),
    ({"n_max": 0}, r"n_max must be an integer >= 1 .* got 0"),
    ({"n_max": True}, r"n_max must be an integer >= 1 .* got True"),
    ({"settings": {"dagger_round": 2}}, r"settings: unknown training option\(s\) \['dagger_round'\]"),
])
def test_bad_method_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        route_mlp_method(**kwargs)


def test_method_is_built_without_arguments_and_states_its_grid():
    method = route_mlp_method()
    # the grid stated in docs/LEARNING.md (route MLP paragraph), written out
    assert method.grid() == [{"lam": v} for v in (0.1, 0.2, 0.35, 0.6, 1.0, 2.0)] + [{"lam": math.inf}]
    assert method.fallback() == {"lam": math.inf}


def test_cached_oracle_answers_as_the_oracle(small_paper):
    """Answers through the cache equal a fresh oracle's, also from a second env holding the problems in
    another order (the cache is keyed by problem, not by env index)."""
    budget = cost_unit(as_compiled("paper"))
    env = route_env(small_paper, budget=budget)
    cache = OracleCache()
    cached = CachedOracle(CostAwareOracle.for_env(env), env, cache)
    fresh = CostAwareOracle.for_env(env)
    for e in range(0, env.n_episodes, 5):
        assert cached.plan(e, 0.3).actions == fresh.plan(e, 0.3).actions
        assert np.array_equal(cached.action_values(e, [0.1, 1.0]), fresh.action_values(e, [0.1, 1.0]))
    later = small_paper.select(small_paper.dataset != "aime2024")  # other problems first: other env indices
    env2 = route_env(later, budget=budget)
    cached2 = CachedOracle(CostAwareOracle.for_env(env2), env2, cache)
    fresh2 = CostAwareOracle.for_env(env2)
    for e in range(0, env2.n_episodes, 4):
        assert np.array_equal(cached2.action_values(e, [0.1, 1.0]), fresh2.action_values(e, [0.1, 1.0]))
        # a state one action in (as a learner's rollout reaches): planned from the first env's searches
        first = fresh2.plan(e, 0.3).actions[0]
        if first != env2.layout.stop_action:
            assert cached2.plan(e, 0.6, [first]).actions == fresh2.plan(e, 0.6, [first]).actions
    # the searches are kept per problem, whichever env asked (a problem solved by its first STOP needs none)
    assert cache.searches and set(cache.searches) <= {key[:6] for key in cache.values}
