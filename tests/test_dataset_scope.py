"""`coba bench/sweep --datasets`: only those datasets are replayed; a checkpoint evaluated on datasets it was
trained on (or with unknown training datasets) gets one warning line on stderr; training draws datasets equally often by default."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from coba_cli.main import main as coba
from coba_env.env import as_compiled
from eval.dataset_scope import in_sample_warnings, training_datasets
from train.ppo import train_ppo

SMALL = dict(total_timesteps=256, n_envs=8, n_steps=32, batch_size=64, lambda_range=(0.0, 0.5), progress=False)


@pytest.fixture(scope="module")
def tiny_counts():
    """Episodes per dataset of the tiny pool, from the pool's own dataset column."""
    return pd.Series(as_compiled("tiny").dataset).value_counts().to_dict()


@pytest.fixture(scope="module")
def math_ckpt(tmp_path_factory):
    """A PPO checkpoint trained on math500 only, with the default episode order."""
    return train_ppo("tiny", tmp_path_factory.mktemp("ppo") / "run", datasets=["math500"], seed=0, **SMALL)


def test_ppo_checkpoint_records_its_datasets_and_balanced_order(math_ckpt):
    meta = json.loads((math_ckpt / "controller.json").read_text())
    assert meta["train_datasets"] == ["math500"]
    # The default: each dataset drawn equally often (sequential would block every sub-env by dataset).
    assert meta["order"] == "balanced"


def _bench(args, tmp_path, capsys):
    status = coba(["bench", "--pool", "tiny", "--out", str(tmp_path / "b"), "--no-figures", "--no-progress",
                   "--resamples", "50", *args])
    return status, capsys.readouterr().err


def test_bench_on_held_out_dataset_replays_only_it_and_does_not_warn(math_ckpt, tiny_counts, tmp_path, capsys):
    status, err = _bench(["--policies", f"greedy,{math_ckpt}@0.1", "--datasets", "aime2024"], tmp_path, capsys)
    assert status == 0
    assert "warning" not in err
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    for name in ("greedy", "ppo@0.1"):
        assert set(results["policies"][name]["per_dataset"]) == {"aime2024"}
        assert results["policies"][name]["pooled"]["n"] == tiny_counts["aime2024"]


def test_bench_on_training_dataset_warns_in_one_line(math_ckpt, tmp_path, capsys):
    status, err = _bench(["--policies", f"greedy,{math_ckpt}@0.1,{math_ckpt}@0.3"], tmp_path, capsys)
    assert status == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning")]
    assert warnings == ["warning: ppo is evaluated on datasets it was trained on: math500 "
                        "(in-sample; use --datasets to hold them out)"]


def test_old_checkpoint_without_the_field_is_reported_unknown(math_ckpt, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(math_ckpt, old)
    meta = json.loads((old / "controller.json").read_text())
    del meta["train_datasets"]
    (old / "controller.json").write_text(json.dumps(meta))
    status, err = _bench(["--policies", f"greedy,{old}@0.1", "--datasets", "aime2024"], tmp_path, capsys)
    assert status == 0
    assert [line for line in err.splitlines() if line.startswith("warning")] == [
        "warning: ppo: training datasets unknown (no 'train_datasets' in its checkpoint); results on aime2024 "
        "may be in-sample"]


@pytest.mark.parametrize("command", ["bench", "sweep"])
def test_unknown_dataset_exits_2_in_one_line(command, tmp_path, capsys):
    policies = "greedy" if command == "bench" else "coba"
    status = coba([command, "--pool", "tiny", "--policies", policies, "--datasets", "math500,nope",
                   "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1
    assert re.search(r"--datasets: unknown dataset\(s\) nope; the pool has math500, aime2024", err), err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["bench", "sweep"])
@pytest.mark.parametrize("value", [",", " , "])
def test_empty_dataset_list_is_refused_by_the_parser(command, value, capsys):
    with pytest.raises(SystemExit) as exc:
        coba([command, "--pool", "tiny", "--datasets", value])
    assert exc.value.code == 2
    assert re.search(r"--datasets: expected dataset names separated by commas", capsys.readouterr().err)


def test_sweep_datasets_restricts_episodes_and_warns(math_ckpt, tiny_counts, tmp_path, capsys):
    status = coba(["sweep", "--pool", "tiny", "--policies", f"coba,{math_ckpt}", "--lambdas", "0.1,0.3",
                   "--datasets", "math500", "--out", str(tmp_path / "s"), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 0
    episodes = pd.read_csv(tmp_path / "s" / "episodes.csv")
    assert set(episodes["dataset"]) == {"math500"}
    assert episodes.groupby("policy").size().eq(tiny_counts["math500"]).all()
    # The sweep names a checkpoint's points after its folder ("run"), once for both lambdas.
    assert [line for line in err.splitlines() if line.startswith("warning")] == [
        "warning: run is evaluated on datasets it was trained on: math500 (in-sample; use --datasets to hold "
        "them out)"]


def test_training_datasets_reads_either_field_and_ignores_non_learned_policies():
    mlp = SimpleNamespace(name="mlp@0.1", group="learned", config={"datasets": ["gsm8k"]})
    new = SimpleNamespace(name="ppo@0.1", group="learned", meta={"train_datasets": ["math500"]})
    coba_policy = SimpleNamespace(name="coba_strong", group="coba")
    assert training_datasets(mlp) == ["gsm8k"] and training_datasets(new) == ["math500"]
    assert training_datasets(coba_policy) is None
    assert in_sample_warnings([mlp, new, coba_policy], ["aime2024"]) == []
