"""Frontier summaries, the action mix, and the ``coba train`` / ``coba sweep`` / ``coba bench`` CLI."""

from __future__ import annotations

import pandas as pd
import pytest

from coba_cli.main import main
from train import sweep
from train.lodo import action_mix


def _points(rows):
    return pd.DataFrame([{"policy": p, "family": f, "param": "", "acc": a, "cost": c} for p, f, c, a in rows])


def test_frontier_summary_hand_worked():
    """Dominance and the fronts compared over their common cost range, worked by hand on a log10 cost axis."""
    pts = _points([("a1", "A", 10.0, 50.0), ("a2", "A", 100.0, 80.0), ("b1", "B", 10.0, 40.0),
                   ("b2", "B", 100.0, 90.0), ("b3", "B", 1000.0, 85.0)])
    summary = sweep.frontier_summary(pts)
    # Both fronts cover cost 10 to 100 (b3 is dominated by b2): over log-cost [1, 2] A reaches 50, B 40.
    assert summary["common_range"] == (10.0, 100.0)
    assert summary["families"]["A"]["mean_acc"] == pytest.approx(50.0)
    assert summary["families"]["B"]["mean_acc"] == pytest.approx(40.0)
    assert summary["comparisons"] == [{"a": "A", "b": "B", "lo": 10.0, "hi": 100.0, "a_acc": pytest.approx(50.0),
                                       "b_acc": pytest.approx(40.0), "diff": pytest.approx(10.0)}]
    assert summary["families"]["B"]["front"] == ["b1", "b2"]
    assert summary["dominated_by"]["b1"] == ["a1"]
    assert summary["dominates"]["b2"] == ["a2", "b3"]
    assert summary["global_front"] == ["a1", "b2"]


def test_action_mix_counts_match_the_action_strings():
    """Per-dataset mean action counts equal those recounted from the compact action strings."""
    records = pd.DataFrame({"policy": ["p"] * 3, "dataset": ["d", "d", "e"],
                            "actions": ["S STOP", "S S V1 V3 STOP", "S V1 STOP"],
                            "n_samples": [1, 2, 1], "n_v1": [0, 1, 1], "n_v2": [0, 0, 0], "n_v3": [0, 1, 0],
                            "correct": [True, False, True], "p_tokens": [1.0, 3.0, 2.0]})
    mix = action_mix(records, ["p"]).set_index("dataset")
    assert mix.loc["d", "samples"] == pytest.approx(1.5) and mix.loc["d", "v3"] == pytest.approx(0.5)
    assert mix.loc["d", "greedy_stop_share"] == pytest.approx(0.5) and mix.loc["e", "greedy_stop_share"] == 0.0
    assert mix.loc["d", "acc"] == pytest.approx(50.0)


def test_train_cli_and_bench_evaluates_the_checkpoint(tmp_path, capsys):
    """``coba train mlp`` writes a checkpoint that ``coba bench --policies greedy,PATH@LAMBDA`` evaluates."""
    ckpt = tmp_path / "ckpt"
    assert main(["train", "mlp", "--pool", "tiny", "--rounds", "0", "--epochs", "3", "--episodes-per-round", "10",
                 "--lambdas", "0.1", "--out", str(ckpt), "--no-progress"]) == 0
    assert (ckpt / "controller.json").is_file()
    bench = tmp_path / "bench"
    assert main(["bench", "--pool", "tiny", "--policies", f"greedy,{ckpt}@0.1", "--out", str(bench),
                 "--no-figures", "--no-progress", "--resamples", "50"]) == 0
    import json

    results = json.loads((bench / "results.json").read_text())
    assert "mlp@0.1" in json.dumps(results) and "greedy" in json.dumps(results)


@pytest.mark.parametrize(("argv", "match"), [
    (["train", "mlp", "--pool", "tiny", "--lambdas", "-1"], "lambdas"),
    (["train", "mlp", "--pool", "tiny", "--timesteps", "5"], "ppo only"),
    (["train", "ppo", "--pool", "tiny", "--epochs", "5"], "mlp only"),
    (["train", "mlp", "--pool", "tiny", "--lodo"], "at least 3 datasets"),
    (["train", "rollout", "--pool", "tiny", "--lodo", "--held-out", "gsm8k"], "at least 3 datasets"),
    (["train", "mlp", "--pool", "tiny", "--held-out", "math500"], "need --lodo"),
    (["train", "mlp", "--pool", "tiny", "--seeds", "0,1"], "need --lodo"),
    (["train", "rollout", "--pool", "tiny"], "add --lodo"),
    (["train", "rollout", "--pool", "tiny", "--lodo", "--epochs", "3"], "mlp only"),
    (["train", "mlp", "--pool", "tiny", "--lodo", "--lambdas", "0.1"], "grid, stated in advance"),
    (["train", "mlp", "--pool", "tiny", "--lodo", "--seeds", "1,1"], "distinct seeds"),
    (["train", "mlp", "--pool", "paper", "--lodo", "--rounds", "1"], "--rounds: --lodo runs the protocol's settings"),
    (["train", "mlp", "--pool", "paper", "--lodo", "--epochs", "2", "--loss", "ce"], "--epochs, --loss: --lodo"),
    (["train", "ppo", "--pool", "paper", "--lodo", "--timesteps", "64"], "--timesteps: --lodo runs"),
    (["train", "mlp", "--pool", "paper", "--lodo", "--seed", "4"], "the protocol's seeds are --seeds"),
    (["train", "mlp", "--pool", "/nonexistent/pool"], "no such pool"),
    (["sweep", "--pool", "tiny", "--policies", "nosuchpolicy"], "unknown sweep policy"),
    (["sweep", "--pool", "tiny", "--lambdas", "x"], "lambdas"),
])
def test_bad_cli_input_exits_2(argv, match, capsys):
    """Usage errors exit 2 with a message naming the problem."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse type errors exit directly
        code = exc.code
    assert code == 2
    assert match in capsys.readouterr().err


def test_sweep_cli_writes_the_frontier(tmp_path, capsys):
    """``coba sweep`` on best-of-n writes every point; on tiny (N = 8) best-of-16 is not applicable."""
    assert main(["sweep", "--pool", "tiny", "--policies", "best_of_n,coba_strong", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    table = pd.read_csv(tmp_path / "frontier.csv")
    assert set(table["policy"]) == {"bon1", "bon2", "bon4", "bon8", "coba_strong"}
    # bon1 is the cheapest point: it is on the global front (nothing costs less).
    assert table.loc[table["cost"].idxmin(), "policy"] == "bon1"
