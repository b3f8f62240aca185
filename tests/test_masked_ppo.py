"""The lean masked PPO trainer (``train.masked_ppo``, the ``coba train ppo`` path): GAE on hand-worked cases and
against SB3's rollout buffer, the masked categorical (legal actions only, the softmax over the legal logits),
``FastTanh`` equals ``tanh``, the hand-written passes and actor-loss gradient equal autograd's, a run never
steps an illegal action, the old ``trainer="sb3"`` path still trains, and bad trainer settings fail with one
clear message. (Same seed -> same weights and "the checkpoint benches on both envs" run through the default trainer in tests/test_ppo.py and tests/test_train_both_envs.py.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.special
import torch
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from stable_baselines3.common.buffers import RolloutBuffer

from agents.learned_ppo import load
from coba_env.env import as_compiled
from train.fused_mlp import FastTanh, TanhMLP
from train.masked_ppo import PPOSettings, gae, learn, sample_actions
from train.ppo import train_ppo
from train.ppo_losses import actor_loss_grad, masked_log_probs
from train.sb3_vec_env import CoBaSB3VecEnv


@pytest.fixture(scope="module")
def tiny():
    """The `tiny` simulator pool, compiled once."""
    return as_compiled("tiny")


# ---------------------------------------------------------------------------------------------- GAE
def test_gae_on_two_hand_worked_three_step_columns():
    # column 0: gamma 1, lambda 0.5; the episode ends at t=2, so the value after the rollout (9.0) is not used.
    #   A2 = 1 - 0.7 = 0.3; A1 = (0.7 - 0.6) + 0.5 * 0.3 = 0.25; A0 = (0.6 - 0.5) + 0.5 * 0.25 = 0.225
    # column 1 (gamma 0.9, lambda 1): the episode ends at t=1, a new one runs at t=2 and bootstraps from 0.3.
    #   A2 = 0.9 * 0.3 - 0.1 = 0.17; A1 = 0 - 0.4 = -0.4 (ended); A0 = 1 + 0.9 * 0.4 - 0.2 + 0.9 * (-0.4) = 0.8
    cases = [([0, 0, 1], [0.5, 0.6, 0.7], [0, 0, 1], 9.0, 1.0, 0.5, [0.225, 0.25, 0.3]),
             ([1, 0, 0], [0.2, 0.4, 0.1], [0, 1, 0], 0.3, 0.9, 1.0, [0.8, -0.4, 0.17])]
    for rewards, values, dones, last, gamma, lam, expected in cases:
        got = gae(torch.tensor(rewards, dtype=torch.float32)[:, None], torch.tensor(values)[:, None],
                  torch.tensor(dones, dtype=torch.float32)[:, None], torch.tensor([last]), gamma, lam)
        np.testing.assert_allclose(got[:, 0].numpy(), expected, atol=1e-6)


def test_gae_equals_sb3s_rollout_buffer_on_random_rollouts():
    rng = np.random.default_rng(0)
    n_steps, n_envs, gamma, lam = 7, 5, 0.97, 0.9
    rewards, values = rng.normal(size=(n_steps, n_envs)), rng.normal(size=(n_steps, n_envs))
    dones = (rng.random((n_steps, n_envs)) < 0.3).astype(np.float32)
    last = rng.normal(size=n_envs)
    buffer = RolloutBuffer(n_steps, spaces.Box(-1, 1, (1,)), spaces.Discrete(2), n_envs=n_envs, gamma=gamma,
                           gae_lambda=lam)
    # SB3 stores "this step starts an episode": the step after a done; the first step's flag is unused by GAE.
    starts = np.vstack([np.zeros((1, n_envs)), dones[:-1]])
    for t in range(n_steps):
        buffer.add(np.zeros((n_envs, 1)), np.zeros((n_envs, 1)), rewards[t], starts[t],
                   torch.tensor(values[t]), torch.zeros(n_envs))
    buffer.compute_returns_and_advantage(torch.tensor(last), dones[-1])
    got = gae(*(torch.tensor(a, dtype=torch.float32) for a in (rewards, values, dones, last)), gamma, lam)
    np.testing.assert_allclose(got.numpy(), buffer.advantages, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------- masked actions
def _random_masks(rng: np.random.Generator, rows: int, actions: int) -> np.ndarray:
    """Random legal-action masks with at least one legal action per row."""
    masks = rng.random((rows, actions)) < 0.4
    masks[np.arange(rows), rng.integers(0, actions, rows)] = True
    return masks


def test_masked_log_probs_are_the_softmax_over_the_legal_logits():
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=3.0, size=(200, 6)).astype(np.float32)
    masks = _random_masks(rng, 200, 6)
    probs = masked_log_probs(torch.tensor(logits), torch.tensor(masks)).exp().numpy()
    expected = scipy.special.softmax(np.where(masks, logits, -np.inf), axis=1)
    np.testing.assert_allclose(probs, expected, atol=1e-6)
    assert probs[~masks].max() == 0.0


def test_sampled_actions_are_legal_and_follow_the_masked_probabilities():
    rng = np.random.default_rng(2)
    rows, n_actions = 20_000, 5
    logits = np.tile(np.array([2.0, 0.0, 1.0, -1.0, 3.0], dtype=np.float32), (rows, 1))
    masks = _random_masks(rng, rows, n_actions)
    masks[: rows // 2] = [True, True, True, True, False]  # the most likely action illegal: half the rows

    def net(obs):
        return torch.tensor(logits), torch.zeros(len(obs))

    action, logp, _ = sample_actions(net, torch.zeros((rows, 1)), torch.tensor(masks), torch.Generator().manual_seed(0))
    action = action.numpy()
    assert masks[np.arange(rows), action].all()  # never an illegal action
    expected = scipy.special.softmax([2.0, 0.0, 1.0, -1.0])  # the first half's legal actions
    observed = np.bincount(action[: rows // 2], minlength=n_actions)[:4] / (rows // 2)
    np.testing.assert_allclose(observed, expected, atol=0.015)  # ~4 standard errors at 10,000 draws
    np.testing.assert_allclose(logp.numpy()[: rows // 2], np.log(expected[action[: rows // 2]]), atol=1e-5)


@pytest.mark.parametrize("legal", [0, 3])
def test_a_uniform_draw_of_exactly_zero_never_picks_an_illegal_action(monkeypatch, legal):
    # torch.rand draws from [0, 1); a 0 on the only legal action made its Gumbel -inf and the argmax illegal
    # (seen once in a 75-fit protocol run: "action 1 is not allowed now (mask [1, 0, 0, 0, 0])").
    masks = torch.zeros((2, 5), dtype=torch.bool)
    masks[:, legal] = True

    def net(obs):
        return torch.zeros((2, 5)), torch.zeros(2)

    monkeypatch.setattr(torch, "rand", lambda shape, generator=None: torch.zeros(shape))
    action, logp, _ = sample_actions(net, torch.zeros((2, 1)), masks, torch.Generator().manual_seed(0))
    assert action.tolist() == [legal, legal]
    np.testing.assert_allclose(logp.numpy(), [0.0, 0.0], atol=1e-6)  # the only legal action: probability 1


def test_fast_tanh_has_tanhs_values_and_gradients():
    x = torch.linspace(-12, 12, 2001, dtype=torch.float32, requires_grad=True)
    (FastTanh()(x) * torch.arange(2001)).sum().backward()
    fast_grad = x.grad.clone()
    x.grad = None
    (torch.tanh(x) * torch.arange(2001)).sum().backward()
    np.testing.assert_allclose(FastTanh()(x).detach().numpy(), np.tanh(x.detach().numpy()), atol=1e-6)
    np.testing.assert_allclose(fast_grad.numpy(), x.grad.numpy(), atol=1e-6 * 2001)


def _tanh_net(rng_seed: int, sizes: tuple[int, ...]) -> tuple[torch.nn.Sequential, torch.nn.Linear]:
    torch.manual_seed(rng_seed)
    layers = []
    for a, b in zip(sizes[:-2], sizes[1:-1], strict=True):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers), torch.nn.Linear(sizes[-2], sizes[-1])


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_the_hand_written_pass_gives_autograds_output_and_gradients(dtype, tolerance):
    hidden, head = _tanh_net(0, (21, 32, 32, 5))
    x, upstream = torch.rand(300, 21) * 8 - 4, torch.randn(300, 5)  # tanh well into saturation too
    out = head(hidden(x))  # the reference: torch's own modules and autograd
    (out * upstream).sum().backward()
    params = [*hidden.parameters(), *head.parameters()]
    expected = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    net = TanhMLP(hidden, head, dtype)
    got_out = net.forward(x)
    net.backward(upstream)
    scale = float(out.detach().abs().max())
    np.testing.assert_allclose(got_out.numpy(), out.detach().numpy(), atol=tolerance * scale)
    for p, want in zip(params, expected, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), want.numpy(), atol=tolerance * float(want.abs().max()))


@pytest.mark.parametrize("ent_coef", [0.0, 0.05])
def test_the_actor_loss_gradient_by_hand_equals_autograds(ent_coef):
    rng = np.random.default_rng(3)
    rows, n_actions, clip = 400, 5, 0.2
    logits = torch.tensor(rng.normal(size=(rows, n_actions)), dtype=torch.float32, requires_grad=True)
    masks = torch.tensor(_random_masks(rng, rows, n_actions))
    actions = torch.tensor([rng.choice(np.flatnonzero(m)) for m in masks.numpy()])
    adv = torch.tensor(rng.normal(size=rows), dtype=torch.float32)
    # old log-probabilities off by up to +-0.5: ratios both inside and outside the clip range
    with torch.no_grad():
        old_logp = masked_log_probs(logits, masks).gather(1, actions[:, None]).squeeze(1)
    old_logp += torch.tensor(rng.uniform(-0.5, 0.5, rows), dtype=torch.float32)
    # the reference: MaskablePPO's losses written with torch ops, differentiated by autograd
    log_probs = masked_log_probs(logits, masks)
    ratio = (log_probs.gather(1, actions[:, None]).squeeze(1) - old_logp).exp()
    pg_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    entropy = -torch.where(masks, log_probs.exp() * log_probs, 0.0).sum(-1)
    (pg_loss - ent_coef * entropy.mean()).backward()
    (got_pg, got_entropy_loss, _, got_ratio), grad = actor_loss_grad(
        log_probs.detach(), masks, actions, old_logp, adv, clip, ent_coef)
    assert ((got_ratio - 1).abs() > clip).any() and ((got_ratio - 1).abs() < clip).any()
    np.testing.assert_allclose(float(got_pg), float(pg_loss.detach()), rtol=1e-6)
    np.testing.assert_allclose(float(got_entropy_loss), float(-entropy.detach().mean()), rtol=1e-6)
    np.testing.assert_allclose(grad.numpy(), logits.grad.numpy(), atol=1e-7)


class _CheckedVenv:
    """The vector env, failing on any action its last mask did not allow."""

    def __init__(self, venv):
        self.venv, self.steps = venv, 0

    def __getattr__(self, name):
        return getattr(self.venv, name)

    def reset(self, **kwargs):
        obs, info = self.venv.reset(**kwargs)
        self.mask = info["action_mask"].astype(bool)
        return obs, info

    def step(self, actions):
        assert self.mask[np.arange(len(actions)), actions].all(), "an illegal action was stepped"
        self.steps += len(actions)
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        self.mask = info["action_mask"].astype(bool)
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("grouping", ["pair", "item"])
def test_a_run_steps_only_legal_actions_on_both_envs(tiny, grouping):
    env = CoBaSB3VecEnv(32, tiny, grouping=grouping, lambda_range=(0.0, 0.5))
    model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu")  # untrained: every legal action is likely
    checked = _CheckedVenv(env.venv)
    figures = learn(model.policy, checked, PPOSettings(n_steps=16, batch_size=128), 1024, seed=0)
    assert checked.steps == figures["timesteps"] == 1024



@pytest.mark.parametrize("update", ["autograd", "hand"])
def test_two_threads_train_the_same_weights_as_one(tiny, update):
    """The critic's half of each step on a second thread: the same gradients, so bit-identical weights."""
    weights = []
    for threads in (1, 2):
        env = CoBaSB3VecEnv(32, tiny, grouping="pair", lambda_range=(0.0, 0.5))
        model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu")
        learn(model.policy, env.venv, PPOSettings(n_steps=16, batch_size=128, n_epochs=2, update=update), 1024,
              seed=0, threads=threads)
        weights.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert torch.equal(weights[0], weights[1])
    assert not torch.equal(weights[0], torch.cat([p.detach().flatten() for p in MaskablePPO(
        "MlpPolicy", CoBaSB3VecEnv(32, tiny, grouping="pair"), seed=0, device="cpu").policy.parameters()]))

# ---------------------------------------------------------------------------------------------- trainers
def test_the_default_trainer_is_wave_6s_lean_setting(tiny, tmp_path):
    # Issue 37's wave 6 (docs/PERFORMANCE.md): the hand-written update, 5 epochs, a 64x64 actor and critic.
    out = train_ppo(tiny, tmp_path / "lean", total_timesteps=512, n_envs=32, progress=False, tensorboard=False,
                    warm_start=False)
    config = json.loads((out / "controller.json").read_text())
    assert config["training"]["trainer"] == "lean"
    assert (config["ppo"]["update"], config["ppo"]["n_epochs"]) == ("hand", 5)
    model = MaskablePPO.load(out / "model.zip", device="cpu")
    hidden = [m.out_features for net in (model.policy.mlp_extractor.policy_net, model.policy.mlp_extractor.value_net)
              for m in net if isinstance(m, torch.nn.Linear)]
    assert hidden == [64, 64, 64, 64]


def test_the_sb3_trainer_still_trains_a_loadable_checkpoint(tiny, tmp_path):
    out = train_ppo(tiny, tmp_path / "sb3", total_timesteps=512, n_envs=32, progress=False, tensorboard=False,
                    warm_start=False, trainer="sb3")
    config = json.loads((out / "controller.json").read_text())
    assert config["training"]["trainer"] == "sb3" and config["ppo"]["n_epochs"] == 10
    assert load(out, lam=0.1).name


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(trainer="fast"), r"unknown trainer 'fast'; expected one of \['lean', 'sb3'\]"),
    (dict(target_kl=0.01), r"the lean PPO trainer does not take \['target_kl'\]"),
    (dict(update="jit"), r"update must be one of \['autograd', 'hand'\], got 'jit'"),
    (dict(update="hand", matmul_dtype="float16"),
     r"matmul_dtype must be one of \['float32', 'bfloat16'\], got 'float16'"),
    (dict(update="autograd", matmul_dtype="bfloat16"), r"matmul_dtype other than float32 needs update='hand'"),
    (dict(trainer="sb3", matmul_dtype="bfloat16"),
     r"\['matmul_dtype'\] are lean-trainer settings; the sb3 trainer does not take them"),
])
def test_bad_trainer_settings_fail_with_one_message(tiny, tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_ppo(tiny, tmp_path / "bad", total_timesteps=512, n_envs=32, progress=False, warm_start=False,
                  **kwargs)


# ---------------------------------------------------------------------------------------------- warm start
@pytest.mark.parametrize(("grouping", "teacher"), [("pair", "coba_strong"), ("item", "route_cascade")])
def test_batched_demonstrations_equal_the_one_episode_replay(tiny, grouping, teacher):
    # At one fixed lambda both collect the same states: the teacher is deterministic, so only the order differs
    # (rows of 7 envs finish episodes out of order; both then list each episode's states in step order).
    from coba_env.env import CoBaEnv
    from coba_env.vector_env import CoBaVectorEnv
    from train.ppo_warm_start import batched_demonstrations, strong_demonstrations, teacher_policy

    kwargs = dict(grouping=grouping, lambda_range=(0.2, 0.2))
    single = strong_demonstrations(CoBaEnv(tiny, **kwargs), teacher=teacher_policy(teacher), passes=2)
    batched = batched_demonstrations(CoBaVectorEnv(7, tiny, order="sequential", **kwargs),
                                     teacher=teacher_policy(teacher), passes=2)
    assert batched.episodes == single.episodes == 2 * (24 if grouping == "item" else 48)

    def rows(d):  # the returns to 1e-6: the batched form sums them in another order
        return sorted(map(tuple, np.column_stack([d.observations, d.masks, d.actions, d.returns.round(6)]).tolist()))

    assert rows(batched) == rows(single)
