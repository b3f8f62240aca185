"""The learned controllers (MLP, PPO) read problem features through the env option: trained from the command line
with ``--problem-features meta``, the checkpoint saves its featurizer, its observation starts with the features
the pool's items give, and the bench builds the env with them; without the saved featurizer the same checkpoint is
not applicable (so the features are really read, not dropped)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coba_cli.main import main

#: Each kind's smallest training run (seconds, not a useful controller).
SMALL = {"mlp": ["--rounds", "1", "--epochs", "2", "--episodes-per-round", "16"], "ppo": ["--timesteps", "256"]}


def expected_meta_names() -> list[str]:
    """The meta features the tiny pool's items give, worked out from its item table (not from the featurizer):
    one-hot of every category field with values, an unknown bucket each, then the two log lengths."""
    from pools.default import resolve_pool

    items = resolve_pool("tiny").items
    names: list[str] = []
    for field in ("dataset", "level", "subject", "task", "category"):
        if field in items and items[field].notna().any():
            values = sorted(str(v) for v in items[field].dropna().unique())
            names += [f"{field}={v}" for v in values] + [f"{field}=unknown"]
    return names + ["log_prompt_tokens", "log_problem_chars"]


@pytest.mark.parametrize("kind", ["mlp", "ppo"])
def test_a_controller_trained_with_problem_features_saves_and_reads_them(kind: str, tmp_path: Path, capsys):
    out = tmp_path / kind
    assert main(["train", kind, "--pool", "tiny", "--problem-features", "meta", "--out", str(out), "--no-progress",
                 *SMALL[kind]]) == 0
    assert (out / "featurizer.json").is_file() and (out / "featurizer.npz").is_file()
    names = expected_meta_names()
    observation = json.loads((out / "controller.json").read_text())["observation"]
    assert observation[:len(names)] == names
    from coba_env import CoBaEnv

    assert observation[len(names):] == list(CoBaEnv("tiny").feature_names)  # then the env's own, unchanged

    bench = tmp_path / "bench"
    assert main(["bench", "--pool", "tiny", "--policies", f"{out}@0.1", "--out", str(bench), "--no-figures",
                 "--no-progress", "--workers", "1"]) == 0
    row = next(iter(json.loads((bench / "results.json").read_text())["policies"].values()))
    assert row["applicable"], row

    bare = tmp_path / f"{kind}-bare"  # the same checkpoint without its featurizer: the observation no longer fits
    shutil.copytree(out, bare, ignore=shutil.ignore_patterns("featurizer.*", "tb"))
    bench2 = tmp_path / "bench2"
    capsys.readouterr()
    # the only requested policy cannot run: one line naming why, exit 2, nothing written (issue 39)
    assert main(["bench", "--pool", "tiny", "--policies", f"{bare}@0.1", "--out", str(bench2), "--no-figures",
                 "--no-progress", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert f"trained on {len(observation)} observation features; the env's {len(observation) - len(names)} differ" \
        in err, err
    assert not (bench2 / "results.json").exists()
