"""MLP training logs like PPO's: TensorBoard events and progress.csv under OUT/tb/mlp_<run>, one row per round."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from train.imitation import train_mlp

SCALARS = ["rollout/mean_return", "train/loss", "train/rows", "train/states", "train/expert_prob",
           "time/round_seconds"]
ROUNDS = 2  # dagger_rounds=1: rounds 0 and 1


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two MLP runs into one folder (the second must not overwrite the first's logs)."""
    out = tmp_path_factory.mktemp("mlp")
    opts = dict(lambdas=(0.1,), dagger_rounds=ROUNDS - 1, epochs=2, episodes_per_round=8, progress=False)
    train_mlp("tiny", out, **opts)
    train_mlp("tiny", out, **opts)
    return out


def test_mlp_training_writes_csv_with_one_row_per_round(runs):
    assert sorted(p.name for p in (runs / "tb").iterdir()) == ["mlp_1", "mlp_2"]
    frame = pd.read_csv(runs / "tb" / "mlp_1" / "progress.csv")
    assert set(SCALARS) <= set(frame.columns)
    assert len(frame) == ROUNDS
    # Round 0 rolls out the oracle alone (expert probability 1), round 1 mixes with beta = 0.5.
    assert frame["train/expert_prob"].tolist() == [1.0, 0.5]
    # The CSV carries the same figures as the checkpoint's own history.
    history = json.loads((runs / "controller.json").read_text())["history"]
    assert frame["train/loss"].tolist() == pytest.approx([h["loss"] for h in history])
    assert frame["train/rows"].tolist() == [h["rows"] for h in history]


def test_mlp_training_writes_tensorboard_events_with_the_scalars(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((runs / "tb" / "mlp_2").glob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert set(SCALARS) <= set(tags)
    assert [e.step for e in acc.Scalars("train/loss")] == list(range(ROUNDS))


def test_tensorboard_false_writes_no_logs(tmp_path):
    train_mlp("tiny", tmp_path, lambdas=(0.1,), dagger_rounds=0, epochs=1, episodes_per_round=4, progress=False,
              tensorboard=False)
    assert not (tmp_path / "tb").exists()
    assert (tmp_path / "controller.json").is_file()
