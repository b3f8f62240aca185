"""Model files never run code (issue 25): a crafted SB3 zip or MLP weights file whose pickle payload would
create a file is loaded by every command that loads a policy, and the file is never created.

The payload is in every serialized entry of the zip's ``data`` (policy class, keyword arguments, spaces,
schedule) and, in a second variant, in ``policy.pth`` itself. SB3's own ``load`` unpickles the ``data``
entries (before this issue, ``bench``, ``sweep`` and ``solve`` ran the payload); ``agents/sb3_zip.py`` never
unpickles.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from tests.conftest import small_jsonl_records, write_jsonl
from tests.hostile_harness import run_coba
from tests.test_hostile_edges import BENCH, _one_error_line


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory) -> Path:
    """A small imported pool (6 episodes, N = 3, tiers V1-V3)."""
    from coba_cli.main import main

    root = tmp_path_factory.mktemp("model-files")
    write_jsonl(root / "ok.jsonl", small_jsonl_records())
    assert main(["pools", "import", str(root / "ok.jsonl"), str(root / "pool")]) == 0
    return root / "pool"


# ------------------------------------------------------------------------------------ model files never run code
class _TouchOnUnpickle:
    """Unpickling this calls ``os.system("touch PATH")``: what a crafted model file would do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _crafted_zip(path: Path, witness: Path, *, weights_payload: bool) -> Path:
    """An SB3-shaped zip for Box(21,) / Discrete(5) whose every serialized entry (and, with ``weights_payload``,
    its policy.pth) would create ``witness`` when unpickled; the readable fields are what SB3 writes."""
    import torch
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy

    evil = base64.b64encode(pickle.dumps(_TouchOnUnpickle(witness))).decode()
    data = {
        "policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": evil,
                         "__module__": "stable_baselines3.common.policies"},
        "policy_kwargs": {":type:": "<class 'dict'>", ":serialized:": evil, "net_arch": [8]},
        "observation_space": {":type:": "<class 'gymnasium.spaces.box.Box'>", ":serialized:": evil, "_shape": [21],
                              "dtype": "float32"},
        "action_space": {":type:": "<class 'gymnasium.spaces.discrete.Discrete'>", ":serialized:": evil, "n": "5",
                         "_shape": []},
        "lr_schedule": {":type:": "<class 'function'>", ":serialized:": evil},
    }

    import numpy as np

    buffer = io.BytesIO()
    if weights_payload:
        torch.save({"weights": _TouchOnUnpickle(witness)}, buffer)
    else:
        net = ActorCriticPolicy(spaces.Box(-np.inf, np.inf, (21,), np.float32), spaces.Discrete(5), lambda _: 0.0,
                                net_arch=[8])
        torch.save(net.state_dict(), buffer)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps(data))
        archive.writestr("policy.pth", buffer.getvalue())
        archive.writestr("pytorch_variables.pth", buffer.getvalue())
    return path


def _ppo_checkpoint_with(zip_path: Path, folder: Path) -> Path:
    """A `coba train ppo`-shaped checkpoint folder whose model.zip is ``zip_path``."""
    from coba_env.rules.features import FEATURE_NAMES

    folder.mkdir()
    (folder / "model.zip").write_bytes(zip_path.read_bytes())
    (folder / "controller.json").write_text(json.dumps({
        "kind": "ppo", "format_version": 1, "cost_model": "p_tokens", "budget": 100.0, "n_max": 3,
        "observation": list(FEATURE_NAMES), "model": "model.zip"}))
    return folder


@pytest.mark.parametrize("weights_payload", [False, True], ids=["payload-in-data", "payload-in-weights"])
@pytest.mark.parametrize("command", ["bench", "sweep", "solve", "bench-ppo-checkpoint", "solve-ppo-checkpoint"])
def test_a_crafted_model_zip_never_runs_its_code(command, weights_payload, pool_dir, tmp_path, capsys):
    """The witness file a pickle payload would create is never created, whichever command loads the zip."""
    witness = tmp_path / "PWNED"
    model = _crafted_zip(tmp_path / "model.zip", witness, weights_payload=weights_payload)
    spec = str(_ppo_checkpoint_with(model, tmp_path / "ck")) if command.endswith("ppo-checkpoint") else str(model)
    argv = {"bench": [*BENCH[:2], spec, *BENCH[3:], "--pool", str(pool_dir), "--out", str(tmp_path / "b")],
            "sweep": ["sweep", "--pool", str(pool_dir), "--policies", spec, "--lambdas", "0.1", "--no-progress",
                      "--out", str(tmp_path / "s")],
            "solve": ["solve", "--policy", spec, "--generator", "http://127.0.0.1:9,gen-1.5B", "1+1?"]}
    argv["bench-ppo-checkpoint"], argv["solve-ppo-checkpoint"] = argv["bench"], argv["solve"]
    code, _, err = run_coba(argv[command], capsys)
    assert not witness.exists(), "the model file ran code"
    assert "Traceback" not in err
    if weights_payload:
        assert code == 2 and "policy.pth is not a readable weights file" in _one_error_line(err), err


def test_a_crafted_mlp_weights_file_never_runs_its_code(tmp_path, pool_dir, capsys):
    import shutil

    import torch

    from tests.test_hostile_cli import _save_mlp

    _save_mlp(tmp_path / "ck", n_max=3)
    witness = tmp_path / "PWNED"
    torch.save({"0.weight": _TouchOnUnpickle(witness)}, tmp_path / "ck" / "model.pt")
    code, _, err = run_coba([*BENCH[:2], str(tmp_path / "ck"), *BENCH[3:], "--pool", str(pool_dir), "--out",
                             str(tmp_path / "b")], capsys)
    assert not witness.exists() and code == 2 and "not a readable MLP weights file" in _one_error_line(err)
    shutil.rmtree(tmp_path / "ck")


def test_a_zip_with_a_foreign_policy_class_is_refused(tmp_path):
    from agents.sb3_zip import read_sb3_model

    model = _crafted_zip(tmp_path / "m.zip", tmp_path / "PWNED", weights_payload=False)
    with zipfile.ZipFile(model) as archive:
        data = json.loads(archive.read("data"))
        weights = archive.read("policy.pth")
    data["policy_class"]["__module__"] = "evil.policies"
    with zipfile.ZipFile(model, "w") as archive:
        archive.writestr("data", json.dumps(data))
        archive.writestr("policy.pth", weights)
    with pytest.raises(ValueError, match=r"the policy class comes from 'evil\.policies'.*never runs code"):
        read_sb3_model(model, n_features=21, n_actions=5)
    assert not (tmp_path / "PWNED").exists()
