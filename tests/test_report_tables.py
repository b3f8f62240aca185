"""Report tables that must be consistent, and the CLI help / messages a researcher relies on.

Expected values are computed here from the episode records (pandas) or read from the trainer's signature.
"""

from __future__ import annotations

import inspect
import json
import re
import sys

import pandas as pd
import pytest

from coba_cli.main import main
from eval.bench import run_bench
from tests.test_bench import small_pool


@pytest.fixture(scope="module")
def no_coba_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("no-coba")
    results = run_bench(small_pool(), "greedy,bon4_majority,self_eval_weighted,pool_oracle", out_dir=out,
                        progress=False, figures=False, workers=1, resamples=100, quiet=True)
    return out, results


def test_oracle_gap_table_is_pooled_throughout(no_coba_run):
    out, _ = no_coba_run
    table = pd.read_csv(out / "tables" / "oracle_gap.csv").set_index("policy")
    eps = pd.read_parquet(out / "episodes.parquet")
    pooled = eps.groupby("policy")["correct"].mean() * 100
    for name, row in table.iterrows():
        assert row["acc"] == pytest.approx(pooled[name])  # the pooled accuracy, not the macro one
        assert row["acc"] + row["allocation_errors_rate"] + row["generation_errors_rate"] == pytest.approx(100.0)
    assert "Acc. (pooled) %" in (out / "tables" / "oracle_gap.md").read_text()


def test_no_ablation_table_without_a_coba_variant(no_coba_run):
    out, results = no_coba_run
    assert not (out / "tables" / "ablation.md").exists()
    assert "ablation" not in results["files"]["tables"]
    text = (out / "report.md").read_text()
    section = text[text.index("## Routing-strength ablation"):text.index("## Cost among high-accuracy methods")]
    assert "No CoBa variant ran" in section and "|" not in section


def test_literal_rows_are_explained(tmp_path):
    run_bench(small_pool(), "greedy,coba_strong,coba_strong_literal", out_dir=tmp_path, progress=False,
              figures=False, workers=1, resamples=50, quiet=True)
    text = (tmp_path / "report.md").read_text()
    assert "Rows marked **(literal)** (`coba_strong_literal`)" in text


def test_report_progress_names_each_stage(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # the bars show only on a terminal
    run_bench(small_pool(), "greedy,coba_strong", out_dir=tmp_path, progress=True, figures=True, workers=1,
              resamples=50, quiet=True)
    err = capsys.readouterr().err
    for stage in ("coba bench", "table main", "figure frontier", "figure per_dataset_frontiers", "episode records",
                  "report.md, report.html, results.json"):
        assert stage in err, stage


def test_no_progress_bars_when_stderr_is_not_a_terminal(tmp_path, capsys):
    run_bench(small_pool(), "greedy,coba_strong", out_dir=tmp_path, progress=True, figures=False, workers=1,
              resamples=50, quiet=True)
    assert capsys.readouterr().err == ""


#: Every command's --cost default (issue 39 item 5): p_tokens unless the pool leaves a model unsized.
COST_DEFAULT = ("p_tokens, parameter-weighted tokens; on a pool that gives a model no size, the first measure the pool "
                "supports, said in one line")


@pytest.mark.parametrize("argv, flag, default", [
    (["train", "--help"], "--timesteps", None),
    (["train", "--help"], "--cost", COST_DEFAULT),
    (["sweep", "--help"], "--cost", COST_DEFAULT),
])
def test_help_shows_defaults(capsys, argv, flag, default):
    with pytest.raises(SystemExit):
        main(argv)
    text = " ".join(capsys.readouterr().out.split())
    if default is None:  # the trainer's own default, read from its signature
        from train.ppo import train_ppo

        default = str(inspect.signature(train_ppo).parameters["total_timesteps"].default)
    part = text[text.rindex(flag + " "):]  # the options list, after the usage line
    assert f"(default: {default})" in part[:400], part[:400]


def test_training_prints_an_evaluate_command_with_the_pool(tmp_path, capsys):
    out = tmp_path / "ckpt"
    code = main(["train", "mlp", "--pool", "tiny", "--rounds", "0", "--epochs", "2", "--episodes-per-round", "8",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert f"coba bench --pool tiny --policies main,{out}" in printed
    assert json.loads((out / "controller.json").read_text())["kind"] == "mlp"


@pytest.mark.parametrize("asked, n_envs, runs", [
    (4096, 1024, 4096),  # 4 steps on each of 1024 envs: exactly what was asked
    (5000, 1024, 5120),  # 5 steps x 1024: rounds up to a whole rollout, and says so
])
def test_ppo_runs_the_timesteps_it_says(tmp_path, capsys, asked, n_envs, runs):
    from train.ppo import train_ppo

    path = train_ppo("tiny", tmp_path / "ppo", total_timesteps=asked, n_envs=n_envs, tensorboard=False,
                     progress=True)
    meta = json.loads((path / "controller.json").read_text())
    assert meta["timesteps"] == runs == meta["timesteps_planned"]
    err = capsys.readouterr().err
    if runs != asked:
        assert f"{asked} timesteps asked" in err and f"so it runs {runs}" in err
    else:
        assert "timesteps asked" not in err
    # The bar counts to the steps run, never past them.
    shown = [(int(n), int(total)) for n, total in re.findall(r"([0-9]+)/([0-9]+) \[", err)]
    assert shown and all(total == runs and n <= runs for n, total in shown) and shown[-1][0] == runs
