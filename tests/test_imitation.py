"""The MLP controller: trained by oracle imitation on the tiny pool it beats a random policy, reproduces with a
fixed seed, acts deterministically without labels, and loads through the registry."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agents.learned import load_checkpoint
from agents.registry import make_policy
from agents.runner import make_env, replay
from coba_env import compile_pool
from coba_env.env import CoBaEnv
from pools.default import resolve_pool
from tests.test_label_leak import permuted_labels
from train.imitation import MLPSettings, _epochs, train_mlp

FAST = {"dagger_rounds": 4, "epochs": 20, "episodes_per_round": None}  # train_mlp's default rounds


@pytest.fixture(scope="module")
def tiny():
    """The tiny simulated pool, compiled."""
    return compile_pool(resolve_pool("tiny"))


@pytest.fixture(scope="module")
def checkpoint(tiny, tmp_path_factory):
    """An MLP trained on the whole tiny pool (a few seconds)."""
    return train_mlp(tiny, tmp_path_factory.mktemp("mlp"), lambdas=(0.03, 0.1, 0.3), progress=False, **FAST)


def random_policy_mean_return(compiled, lam: float, rollouts: int = 30, seed: int = 0) -> float:
    """Mean return of a uniformly random legal policy, by Monte Carlo through the env's own action sampler."""
    env = CoBaEnv(compiled, lam=lam)
    env.reset(seed=seed)
    env.action_space.seed(seed)  # the masked sampler draws from the action space's own generator
    total = 0.0
    for e in range(env.n_episodes):
        for _ in range(rollouts):
            env.reset(options={"episode": e})
            done = False
            while not done:
                _, r, done, _, _ = env.step(env.action_space.sample())
                total += r
    return total / (env.n_episodes * rollouts)


@pytest.mark.parametrize("lam", [0.1, 0.3])
def test_trained_mlp_beats_a_random_policy(tiny, checkpoint, lam):
    """Mean return at lambda is clearly above the random legal policy's (independently estimated)."""
    policy = load_checkpoint(checkpoint, lam=lam)
    returns = [r["return"] for r in replay(policy, make_env(policy, tiny, lam=lam))]
    random_mean = random_policy_mean_return(tiny, lam)
    assert np.mean(returns) > random_mean + 0.05, (np.mean(returns), random_mean)


def test_higher_lambda_spends_less(tiny, checkpoint):
    """The lambda input matters: at a 30x higher cost weight the controller spends no more on average."""
    costs = {}
    for lam in (0.01, 0.3):
        policy = load_checkpoint(checkpoint, lam=lam)
        costs[lam] = np.mean([r["costs"]["p_tokens"] for r in replay(policy, make_env(policy, tiny, lam=lam))])
    assert costs[0.3] <= costs[0.01]


def test_fixed_seed_reproduces_and_another_seed_differs(tiny, tmp_path):
    """Same seed -> identical weights; a different seed -> different weights."""
    opts = {"dagger_rounds": 1, "epochs": 3, "episodes_per_round": 12, "lambdas": (0.1,), "progress": False}
    a = torch.load(train_mlp(tiny, tmp_path / "a", seed=3, **opts) / "model.pt", weights_only=True)
    b = torch.load(train_mlp(tiny, tmp_path / "b", seed=3, **opts) / "model.pt", weights_only=True)
    c = torch.load(train_mlp(tiny, tmp_path / "c", seed=4, **opts) / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_policy_is_deterministic_and_label_free(tiny, checkpoint):
    """Two replays give the same actions, and permuting the labels changes no action."""
    policy = load_checkpoint(checkpoint, lam=0.1)
    first = [r["action_ids"] for r in replay(policy, make_env(policy, tiny, lam=0.1))]
    again = [r["action_ids"] for r in replay(policy, make_env(policy, tiny, lam=0.1))]
    permuted = [r["action_ids"] for r in replay(policy, make_env(policy, permuted_labels(tiny), lam=0.1))]
    assert first == again == permuted


def test_checkpoint_loads_through_the_registry(tiny, checkpoint):
    """``make_policy(PATH@LAMBDA)`` builds the controller at that lambda; its group is 'learned'."""
    policy = make_policy(f"{checkpoint}@0.3")
    assert policy.lam == 0.3 and policy.group == "learned"
    config = json.loads((checkpoint / "controller.json").read_text())
    assert config["kind"] == "mlp" and make_policy(str(checkpoint)).lam == config["default_lambda"]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"loss": "mse"}, "unknown loss"),
    ({"lambdas": (-0.1,)}, "lambdas must be"),
    ({"lambdas": ()}, "lambdas must be"),
    ({"epochs": 0}, "epochs >= 1"),
    ({"round0_episodes": 0}, "need round0_episodes >= 1 or None, got 0"),
    ({"gradient_steps": 0}, "need gradient_steps >= 1 or None, got 0"),
    ({"states_per_episode": 0}, "need states_per_episode >= 1 or None, got 0"),
])
def test_bad_training_arguments_are_rejected(tiny, tmp_path, kwargs, match):
    """Bad arguments raise ValueError before any training."""
    with pytest.raises(ValueError, match=match):
        train_mlp(tiny, tmp_path, progress=False, **kwargs)


@pytest.mark.parametrize(("content", "error", "match"), [
    (None, FileNotFoundError, "controller.json"),
    ("{not json", ValueError, "controller.json: not valid JSON"),
    ('{"kind": "tree"}', ValueError, "field 'kind' is 'tree'"),
    ('{"kind": "mlp"}', ValueError, "missing field 'hidden'"),
])
def test_bad_checkpoints_are_rejected(tmp_path, content, error, match):
    """A broken checkpoint directory names the file and the field."""
    if content is not None:
        (tmp_path / "controller.json").write_text(content)
    with pytest.raises(error, match=match):
        load_checkpoint(tmp_path)


def test_round_sizes_follow_the_settings(tiny, tmp_path):
    """round0_episodes sizes the oracle's round apart; drawn with replacement (dataset-balanced) a round may hold
    more episodes than the training set, without replacement it is capped."""
    n_eps = CoBaEnv(tiny).n_episodes
    balanced = json.loads((train_mlp(tiny, tmp_path / "b", progress=False, dagger_rounds=1, epochs=1,
                                     episodes_per_round=n_eps + 5, round0_episodes=3, balance_datasets=True,
                                     tensorboard=False) / "controller.json").read_text())
    assert (balanced["round0_episodes"], balanced["episodes_per_round"]) == (3, n_eps + 5)
    capped = json.loads((train_mlp(tiny, tmp_path / "c", progress=False, dagger_rounds=0, epochs=1,
                                   episodes_per_round=n_eps + 5, tensorboard=False) / "controller.json").read_text())
    assert (capped["round0_episodes"], capped["episodes_per_round"]) == (n_eps, n_eps)


@pytest.mark.parametrize(("rows", "steps", "batch", "epochs"), [
    (258, 1000, 256, 500),  # 2 minibatches per pass: 500 passes
    (44_401, 1000, 256, 6),  # 174 minibatches per pass: 6 passes are 1,044 steps, 5 only 870
    (100_000, 10, 256, 1),  # never less than one whole pass
])
def test_gradient_steps_size_a_round_by_whole_epochs(rows, steps, batch, epochs):
    """Whole passes until at least ``gradient_steps`` minibatch steps (counted by hand)."""
    assert _epochs(MLPSettings(gradient_steps=steps, batch_size=batch, epochs=20), rows) == epochs


def test_one_gradient_step_is_one_epoch_of_the_old_path(tiny, tmp_path):
    """gradient_steps=1 overrides ``epochs``: the weights equal the epochs=1 run's (the old path)."""
    opts = {"dagger_rounds": 1, "episodes_per_round": 12, "lambdas": (0.1,), "progress": False, "seed": 3,
            "tensorboard": False}
    a = torch.load(train_mlp(tiny, tmp_path / "a", epochs=1, **opts) / "model.pt", weights_only=True)
    b = torch.load(train_mlp(tiny, tmp_path / "b", epochs=5, gradient_steps=1, **opts) / "model.pt",
                   weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_states_per_episode_labels_that_many_states_of_each_learner_episode(tiny, tmp_path):
    """One state per episode in the learner's round: as many labelled states as episodes (12); round 0 (the
    oracle's) labels every state, as the run without the setting does."""
    opts = {"dagger_rounds": 1, "episodes_per_round": 12, "lambdas": (0.1,), "progress": False, "seed": 3,
            "epochs": 1, "tensorboard": False}
    one = json.loads((train_mlp(tiny, tmp_path / "a", states_per_episode=1, **opts) / "controller.json").read_text())
    every = json.loads((train_mlp(tiny, tmp_path / "b", **opts) / "controller.json").read_text())
    assert one["history"][1]["states"] == 12 < every["history"][1]["states"]
    assert one["history"][0]["states"] == every["history"][0]["states"]
