"""The user's path on both envs (issue 34): ``coba train KIND --env ENV --pool tiny`` without --lodo, then
``coba bench --env ENV --policies main,<checkpoint>``; ``--datasets`` holds the other datasets out and the
checkpoint lists the datasets it saw; an SB3 model trained on ``coba/Route-v0`` benches on the route env."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import coba_env  # noqa: F401  (registers coba/Replay-v0 and coba/Route-v0)
from coba_cli.main import main as coba
from coba_env.env import as_compiled

#: Short runs: the smallest settings that still write a checkpoint.
QUICK = {"mlp": ["--rounds", "1", "--epochs", "2", "--episodes-per-round", "6"], "ppo": ["--timesteps", "512"]}


def _bench(tmp_path, env: str, spec: str, capsys) -> dict:
    """``coba bench --env ENV --pool tiny --policies main,SPEC``: its results' policies."""
    out = tmp_path / f"bench-{env}"
    assert coba(["bench", "--env", env, "--pool", "tiny", "--policies", f"main,{spec}", "--out", str(out),
                 "--no-figures", "--no-progress"]) == 0, capsys.readouterr().err
    return json.loads((out / "results.json").read_text())["policies"]


@pytest.mark.parametrize("kind", ["mlp", "ppo"])
@pytest.mark.parametrize(("env", "datasets", "episodes"), [("route", "math500", 24), ("replay", "aime2024", 48)])
def test_train_on_tiny_then_bench_the_checkpoint(kind, env, datasets, episodes, tmp_path, capsys):
    ckpt = tmp_path / f"{kind}-{env}"
    assert coba(["train", kind, "--env", env, "--pool", "tiny", "--datasets", datasets, *QUICK[kind],
                 "--out", str(ckpt), "--no-progress"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"coba bench --pool tiny --policies main,{ckpt} --env {env}" in printed
    config = json.loads((ckpt / "controller.json").read_text())
    assert config["train_datasets"] == [datasets]  # the other dataset was held out
    assert config.get("env", "replay") == env
    if kind == "ppo":  # `coba train ppo` trains with the lean trainer (train/masked_ppo.py)
        assert config["training"]["trainer"] == "lean"
    results = _bench(tmp_path, env, f"{ckpt}@0.1", capsys)
    ran = {name: p for name, p in results.items() if p["group"] == "learned"}
    assert len(ran) == 1, results.keys()
    (policy,) = ran.values()
    # every episode of the env: 24 problems (route) or 48 (problem, generator) pairs (replay)
    assert policy["applicable"] and policy["pooled"]["n"] == episodes


def test_a_route_checkpoint_is_not_applicable_on_the_replay_bench(tmp_path, capsys):
    ckpt = tmp_path / "route-mlp"
    assert coba(["train", "mlp", "--env", "route", "--pool", "tiny", *QUICK["mlp"], "--out", str(ckpt),
                 "--no-progress"]) == 0
    capsys.readouterr()
    results = _bench(tmp_path, "replay", f"{ckpt}@0.1", capsys)
    mine = results["mlp@0.1"]
    assert not mine["applicable"]
    assert mine["not_applicable"] == "trained on coba/Route-v0 (route env); the env is coba/Replay-v0"


@pytest.fixture(scope="module")
def route_zip(tmp_path_factory):
    """A MaskablePPO model trained a few steps on gym.make("coba/Route-v0", pool="tiny"), saved by SB3 itself."""
    from sb3_contrib import MaskablePPO

    env = gym.make("coba/Route-v0", pool="tiny")
    assert env.observation_space.shape == (35,) and env.action_space.n == 6  # 2 generators, 3 verifiers
    path = tmp_path_factory.mktemp("zips") / "route_model.zip"
    MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu").learn(64).save(path)
    return path


def test_an_sb3_model_trained_on_route_v0_benches_on_the_route_env(route_zip, tmp_path, capsys):
    results = _bench(tmp_path, "route", f"{route_zip}@0.1", capsys)
    mine = results["route_model@0.1"]
    assert mine["applicable"] and mine["pooled"]["n"] == as_compiled("tiny").n_episodes // 2
    # on the replay env the same model is not applicable, naming both shapes
    replay = _bench(tmp_path, "replay", f"{route_zip}@0.1", capsys)["route_model@0.1"]
    assert replay["not_applicable"] == "the env has observation (21,) and 5 actions, the model expects (35,) and 6"


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "mlp", "--pool", "tiny", "--datasets", "math500,gsm8k"],
     r"--datasets: unknown dataset\(s\) \['gsm8k'\]; the pool has \['math500', 'aime2024'\]"),
    (["train", "mlp", "--lodo", "--datasets", "math500"], r"--datasets does not apply with --lodo"),
    (["train", "ppo", "--pool", "tiny", "--rounds", "2"], r"--rounds applies to mlp only"),
])
def test_bad_train_input_is_one_line_exit_2(argv, message, tmp_path, capsys):
    import re

    assert coba([*argv, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()
