"""hyperparams/ppo.yml: `python -m rl_zoo3.train --algo ppo --env coba/Replay-v0 --gym-packages coba_env -conf
hyperparams/ppo.yml` trains plain PPO (through LegalActionWrapper) and its zip benches.

rl_zoo3 is not a project dependency (it pulls optuna and huggingface_hub): this test needs it importable and
is skipped otherwise; install it (or put it on PYTHONPATH) to run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from coba_cli.main import main as coba
from tests.conftest import REPO_ROOT

pytest.importorskip("rl_zoo3", reason="rl_zoo3 is not installed (optional; see the module docstring)")


def test_rl_zoo_trains_plain_ppo_from_the_hyperparameter_file_and_the_zip_benches(tmp_path, capsys):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "coba/Replay-v0", "--gym-packages",
         "coba_env", "-conf", str(REPO_ROOT / "hyperparams" / "ppo.yml"), "-n", "1024", "--eval-freq", "-1",
         "--seed", "0", "-f", str(tmp_path / "logs"),
         "--env-kwargs", "pool:'tiny'", "order:'shuffle'", "lambda_range:(0.0,0.5)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    model = tmp_path / "logs" / "ppo" / "coba-Replay-v0_1" / "coba-Replay-v0.zip"
    assert model.is_file()
    status = coba(["bench", "--pool", "tiny", "--policies", f"greedy,{model}@0.1", "--out", str(tmp_path / "b"),
                   "--no-figures", "--no-progress", "--resamples", "50"])
    assert status == 0
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["policies"]["coba-Replay-v0@0.1"]["pooled"]["n"] == results["policies"]["greedy"]["pooled"]["n"]
