"""Policies from the user's code: ``--policies FILE.py:Class``, ``module:Class``, YAML ``kind:`` references,
comma lists mixing names and YAML files, and installed plugins found through the ``coba_env.policies`` entry
points. Bad references exit 2 with one line naming the file and the error.

The reference policy is "sample two candidates, stop, majority": the registry's ``bon2_majority`` is the same
rule written independently, so the plugin's figures must equal that row's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coba_cli.main import main

REPO = Path(__file__).resolve().parents[1]

TWO_THEN_STOP = textwrap.dedent('''
    from agents.base import Policy


    class TwoThenStop(Policy):
        """Sample two candidates, then stop; the majority answer wins."""

        selection = "majority"

        def act(self, observation, action_mask, evidence):
            return self.sample_id if evidence.n_revealed < 2 and action_mask[self.sample_id] else self.stop_id
''')

CONFIGURED_RULE = textwrap.dedent('''
    from typing import Any, ClassVar

    from agents.configured import ConfiguredPolicy


    class FirstN(ConfiguredPolicy):
        """Sample the first n candidates, then stop; majority."""

        defaults: ClassVar[dict[str, Any]] = {"n": 2}

        def configure(self):
            self.selection = "majority"

        def act(self, observation, action_mask, evidence):
            return self.sample_id if evidence.n_revealed < self.n and action_mask[self.sample_id] else self.stop_id
''')

BENCH = ["bench", "--pool", "tiny", "--no-figures", "--no-progress", "--resamples", "50"]


def _macro(out: Path, name: str) -> dict:
    return json.loads((out / "results.json").read_text())["policies"][name]["macro"]


def _same_figures(a: dict, b: dict) -> None:
    for key in ("acc", "calls", "p_tokens", "total_tokens"):
        assert a[key] == pytest.approx(b[key]), key


def test_bench_runs_a_policy_class_from_a_file(tmp_path, capsys):
    rule = tmp_path / "my_rule.py"
    rule.write_text(TWO_THEN_STOP)
    out = tmp_path / "bench"
    assert main([*BENCH, "--policies", f"bon2_majority,{rule}:TwoThenStop", "--out", str(out)]) == 0
    policies = json.loads((out / "results.json").read_text())["policies"]
    assert list(policies) == ["bon2_majority", "TwoThenStop"]  # a policy without a name shows its class name
    assert policies["TwoThenStop"]["label"] == "TwoThenStop"
    _same_figures(_macro(out, "TwoThenStop"), _macro(out, "bon2_majority"))
    assert _macro(out, "TwoThenStop")["calls"] == 2.0  # two samples, no verifier, on every episode


def test_yaml_kind_names_a_file_beside_it_or_a_module(tmp_path, monkeypatch):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "first_n.py").write_text(CONFIGURED_RULE)
    (tmp_path / "user_mod_first_n.py").write_text(CONFIGURED_RULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "rules" / "mine.yaml"
    spec.write_text("policies:\n"
                    "  first4_file: {kind: first_n.py:FirstN, label: First four, params: {n: 4}}\n"
                    "  first4_module: {kind: 'user_mod_first_n:FirstN', params: {n: 4}}\n")
    monkeypatch.chdir(REPO)  # the file is found beside the YAML file, not in the working directory
    out = tmp_path / "bench"
    assert main([*BENCH, "--policies", f"bon4_majority,{spec}", "--out", str(out)]) == 0
    policies = json.loads((out / "results.json").read_text())["policies"]
    assert list(policies) == ["bon4_majority", "first4_file", "first4_module"]
    assert policies["first4_file"]["label"] == "First four"
    _same_figures(_macro(out, "first4_file"), _macro(out, "bon4_majority"))
    _same_figures(_macro(out, "first4_module"), _macro(out, "bon4_majority"))


def test_main_and_a_yaml_file_in_one_comma_list(tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text("policies:\n  bon3: {kind: best_of_n, params: {n: 3}}\n")
    out = tmp_path / "bench"
    assert main([*BENCH, "--policies", f"main,{spec}", "--out", str(out)]) == 0
    names = list(json.loads((out / "results.json").read_text())["policies"])
    from agents.registry import default_bench_policies

    assert names == [*default_bench_policies(), "bon3"]


def _write_plugin(site: Path, package: str = "dummy_coba_plugin", code: str = TWO_THEN_STOP) -> None:
    """A tiny installed distribution: a package and its dist-info declaring one coba_env.policies entry point."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(code)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[coba_env.policies]\ntwo_then_stop = {package}:TwoThenStop\n")


def test_an_installed_plugin_policy_is_found_by_name(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _write_plugin(site)
    monkeypatch.syspath_prepend(str(site))
    from agents.plugins import entry_point_refs
    from agents.registry import make_policy, select_policies

    assert entry_point_refs()["two_then_stop"] == "dummy_coba_plugin:TwoThenStop"
    assert "dummy_coba_plugin" not in sys.modules  # read from the metadata: not imported until named
    assert select_policies(["two_then_stop"], {}, None) == ["two_then_stop"]
    policy = make_policy("two_then_stop")
    assert (type(policy).__name__, policy.name) == ("TwoThenStop", "two_then_stop")


def test_coba_bench_runs_an_installed_plugin_by_name(tmp_path):
    site = tmp_path / "site"
    _write_plugin(site)
    out = tmp_path / "bench"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-m", "coba_cli.main", *BENCH, "--policies", "two_then_stop,bon2_majority",
                           "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _same_figures(_macro(out, "two_then_stop"), _macro(out, "bon2_majority"))


def test_a_broken_plugin_touches_only_a_command_that_names_it(tmp_path, monkeypatch, recwarn):
    site = tmp_path / "site"
    _write_plugin(site, "dummy_coba_plugin_broken", "raise ImportError('half installed')\n")
    monkeypatch.syspath_prepend(str(site))
    from agents.plugins import PluginError
    from agents.registry import list_policies, make_policy

    names = list_policies()
    assert "two_then_stop" not in names and "coba_strong" in names and not recwarn.list
    with pytest.raises(PluginError, match=r"^policy 'dummy_coba_plugin_broken:TwoThenStop': .*error while importing "
                                          r"'dummy_coba_plugin_broken': ImportError: half installed$"):
        make_policy("two_then_stop")


@pytest.mark.parametrize("files, policies, message", [
    ({}, "nope.py:X", r"policy 'nope\.py:X': nope\.py: no such file"),
    ({"r.py": TWO_THEN_STOP}, "r.py:Nope", r"policy 'r\.py:Nope': r\.py has no class 'Nope'; Policy classes "
                                           r"defined there: TwoThenStop"),
    ({"r.py": "class Plain:\n    pass\n"}, "r.py:Plain", r"r\.py: Plain is not a Policy .*got class Plain"),
    ({"r.py": "from agents.base import Policy\nclass Half(Policy):\n    pass\n"}, "r.py:Half",
     r"r\.py: Half does not implement act"),
    ({"r.py": "import math\n\nx = math.sqrt(-1)\n"}, "r.py:X",
     r"policy 'r\.py:X': r\.py, line 3: error while importing it: ValueError: math domain error"),
    ({"r.py": "def broken(:\n"}, "r.py:X", r"policy 'r\.py:X': r\.py.*error while importing it: SyntaxError"),
    ({}, "no_such_module_xyz:Cls", r"no module named 'no_such_module_xyz'"),
    ({}, "json:JSONDecoder", r"module 'json': JSONDecoder is not a Policy"),
    ({"r.py": TWO_THEN_STOP}, "r.py", r"policy 'r\.py': a Python file; name the class in it as r\.py:ClassName"),
    ({"m.zip": "PK"}, "m.zip:X", r"code is never imported from a \.zip"),
    ({"s.yaml": "policies:\n  x: {kind: gone.py:X}\n"}, "s.yaml", r"s\.yaml: policy 'x': .*gone\.py: no such file"),
])
def test_bad_policy_references_exit_2_with_one_line(tmp_path, monkeypatch, capsys, files, policies, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main([*BENCH, "--policies", policies, "--out", str(tmp_path / "bench")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "bench").exists()  # refused before any work


def test_register_is_importable_from_the_registry():
    from agents import configured, registry

    assert registry.register is configured.register


def test_a_checkpoint_without_lambda_states_the_lambda_it_runs_at(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    assert main(["train", "mlp", "--pool", "tiny", "--rounds", "0", "--epochs", "2", "--episodes-per-round", "10",
                 "--lambdas", "0.05,0.3", "--out", str(ckpt), "--no-progress"]) == 0
    stored = json.loads((ckpt / "controller.json").read_text())["default_lambda"]
    capsys.readouterr()
    out = tmp_path / "bench"
    assert main([*BENCH, "--policies", f"greedy,{ckpt}", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"note: checkpoint {ckpt} runs at lambda {stored:g} (its training default); give {ckpt}@LAMBDA" in err
    assert f"mlp@{stored:g}" in json.loads((out / "results.json").read_text())["policies"]
    # With @LAMBDA nothing needs saying.
    assert main([*BENCH, "--policies", f"{ckpt}@0.3", "--out", str(tmp_path / "bench2")]) == 0
    assert "note: checkpoint" not in capsys.readouterr().err


def test_sweep_takes_a_policy_class_from_a_file_as_one_point(tmp_path):
    from train.sweep import run_sweep

    rule = tmp_path / "my_rule.py"
    rule.write_text(TWO_THEN_STOP)
    table, _ = run_sweep("tiny", ["bon2_majority", f"{rule}:TwoThenStop"], out_dir=tmp_path / "sweep",
                         progress=False)
    rows = table.set_index("policy")
    assert set(rows.index) == {"bon2_majority", "TwoThenStop"}
    numeric = [c for c in rows.columns if rows[c].dtype.kind == "f"]
    assert numeric
    for column in numeric:
        assert rows.loc["TwoThenStop", column] == pytest.approx(rows.loc["bon2_majority", column]), column
