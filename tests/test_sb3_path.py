"""The SB3 user's path: the documented quickstart script, SB3 zips in `coba bench`, masks through gymnasium's
wrappers, the legal-action wrapper for unmasked algorithms, shuffled training order by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import coba_env  # noqa: F401  (registers coba/Replay-v0)
from coba_cli.main import main as coba
from coba_env.wrappers import LegalActionWrapper, legal_fallback
from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "sb3_quickstart.py"


def test_learning_doc_shows_the_quickstart_script_verbatim():
    """The SB3 tutorial carries the script's exact text, so the documented code is the tested code."""
    doc = (REPO_ROOT / "docs" / "tutorials" / "train-an-sb3-agent.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:python|text)\n(.*?)```", doc, flags=re.S)
    assert SCRIPT.read_text(encoding="utf-8") in blocks


def test_quickstart_script_runs_as_written_and_its_model_benches(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--pool", "tiny", "--timesteps", "256", "--num-envs", "8",
                           "--lam", "0.2", "--out", str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "model.zip").is_file()
    results = json.loads((out / "bench" / "results.json").read_text())
    model = results["policies"]["model@0.2"]
    assert model["applicable"] and model["description"]["kind"] == "sb3"
    assert model["description"]["params"]["lam"] == 0.2
    # Every episode of the pool was replayed: as many as the reference policy of the same bench.
    assert model["pooled"]["n"] == results["policies"]["coba_strong"]["pooled"]["n"] > 0


@pytest.fixture(scope="module")
def cartpole_zip(tmp_path_factory):
    """A PPO model for CartPole (observation Box(4,), action Discrete(2)): spaces that do not fit the pool."""
    from stable_baselines3 import PPO

    path = tmp_path_factory.mktemp("zips") / "cartpole.zip"
    PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, seed=0, device="cpu").save(path)
    return path


@pytest.fixture(scope="module")
def dqn_zip(tmp_path_factory):
    """A DQN model trained a few steps on the wrapped env (an unmasked algorithm)."""
    from stable_baselines3 import DQN

    path = tmp_path_factory.mktemp("zips") / "dqn.zip"
    env = LegalActionWrapper(gym.make("coba/Replay-v0", pool="tiny", order="shuffle"))
    DQN("MlpPolicy", env, learning_starts=16, buffer_size=500, seed=0, device="cpu").learn(64).save(path)
    return path


@pytest.mark.parametrize("kind, message", [
    ("cartpole", r"observation space Box\(.*\(4,\).* does not fit the env's Box\(18,\) observations for its 2 "
                 r"actions \(coba/Replay-v0's with that many actions; the paper's pool: Box\(21,\) with "
                 r"Discrete\(5\); a coba/Route-v0 observation is longer than Box\(18,\)\)"),
    ("damaged", r"not a readable SB3 model"),
    ("bad_lambda", r"expected a finite lambda >= 0 after '@'"),
])
def test_bench_refuses_an_unfit_zip_in_one_line_exit_2(kind, message, cartpole_zip, tmp_path, capsys):
    if kind == "damaged":
        spec = tmp_path / "damaged.zip"
        spec.write_bytes(b"not a zip at all")
    elif kind == "bad_lambda":
        spec = f"{cartpole_zip}@-1"
    else:
        spec = cartpole_zip
    status = coba(["bench", "--pool", "tiny", "--policies", f"greedy,{spec}", "--out", str(tmp_path / "b"),
                   "--no-figures", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "b").exists()


def test_a_dqn_zip_benches_through_its_q_network(dqn_zip, tmp_path):
    from agents.learned import load_checkpoint
    from agents.runner import make_env, replay

    policy = load_checkpoint(f"{dqn_zip}@0.1")
    assert policy.name == "dqn@0.1"
    net = policy._net
    env = make_env(policy, "tiny")
    env.reset(seed=0)
    shown, _, _, _, info = env.step(0)  # one candidate revealed: several actions legal
    mask = info["action_mask"].astype(bool)
    assert mask.sum() >= 2
    obs = np.array(shown, dtype=np.float32)
    obs[19] = 0.1  # the lambda the policy writes into the observation (feature 19)
    import torch

    with torch.no_grad():
        q = net.q_net(torch.as_tensor(obs[None, :])).numpy()[0]
    assert policy.act(np.asarray(shown), info["action_mask"], None) == int(np.where(mask, q, -np.inf).argmax())
    records = replay(policy, env)
    assert len(records) > 0


def test_gym_make_env_trains_maskable_ppo_out_of_the_box():
    """MaskablePPO finds ``action_masks`` on a gymnasium.make env, and through a wrapper around it."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    env = gym.wrappers.TimeLimit(gym.make("coba/Replay-v0", pool="tiny", order="shuffle"), max_episode_steps=100)
    model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu")
    venv = model.get_env()
    assert is_masking_supported(venv)
    venv.reset()
    # A fresh episode: SAMPLE legal, nothing to verify, STOP illegal before the first candidate.
    assert get_action_masks(venv).tolist() == [[True, False, False, False, False]]
    model.learn(64)


@pytest.mark.parametrize("mask, expected", [
    ([True, False, False, False, False], 0),  # STOP illegal before any candidate: the first legal action
    ([True, True, False, True, True], 4),     # STOP legal: STOP
    ([False, False, True, False, False], 2),
])
def test_legal_fallback_rule(mask, expected):
    assert legal_fallback(np.array(mask)) == expected


def test_legal_action_wrapper_replaces_an_illegal_action_and_charges_the_penalty():
    plain = gym.make("coba/Replay-v0", pool="tiny", lam=0.1)
    with pytest.raises(ValueError):
        plain.reset(seed=0)
        plain.step(4)  # STOP before the first candidate crashes an unwrapped env
    reference = gym.make("coba/Replay-v0", pool="tiny", lam=0.1)
    reference.reset(seed=0)
    _, ref_reward, *_ = reference.step(0)  # the fallback: SAMPLE
    wrapped = LegalActionWrapper(gym.make("coba/Replay-v0", pool="tiny", lam=0.1), illegal_penalty=0.25)
    wrapped.reset(seed=0)
    _, reward, _, _, info = wrapped.step(4)
    assert info["illegal_action"] and info["requested_action"] == 4
    assert reward == pytest.approx(ref_reward - 0.25)
    _, _, terminated, _, info = wrapped.step(4)  # now legal: passes unchanged and ends the episode
    assert not info["illegal_action"] and terminated


@pytest.mark.parametrize("penalty", [-0.1, float("nan"), float("inf")])
def test_legal_action_wrapper_refuses_a_bad_penalty(penalty):
    with pytest.raises(ValueError, match="illegal_penalty must be a finite number >= 0"):
        LegalActionWrapper(gym.make("coba/Replay-v0", pool="tiny"), illegal_penalty=penalty)


def test_plain_ppo_trains_on_the_wrapped_env():
    from stable_baselines3 import PPO

    env = LegalActionWrapper(gym.make("coba/Replay-v0", pool="tiny", order="shuffle"))
    PPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, device="cpu").learn(128)
    with pytest.raises(ValueError):  # unwrapped, the same algorithm stops on its first illegal action
        PPO("MlpPolicy", gym.make("coba/Replay-v0", pool="tiny"), n_steps=64, batch_size=32, seed=0,
            device="cpu").learn(256)


def test_sb3_adapter_defaults_to_shuffled_order():
    from train.sb3_vec_env import CoBaSB3VecEnv

    assert CoBaSB3VecEnv(2, "tiny").venv.order == "shuffle"
    assert CoBaSB3VecEnv(2, "tiny", order="sequential").venv.order == "sequential"
