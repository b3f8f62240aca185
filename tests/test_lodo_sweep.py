"""Frontier summaries, the LODO verdict and tables, and the ``coba train`` / ``coba sweep`` / ``coba bench`` CLI."""

from __future__ import annotations

import pandas as pd
import pytest

from coba_cli.main import main
from train import sweep
from train.lodo import action_mix, run_lodo, verdict

TRAIN_FAST = {"mlp": {"dagger_rounds": 1, "epochs": 5, "episodes_per_round": 12}}


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


def test_verdict_hand_worked():
    """A point within the CI at lower cost meets the target; one outside the CI or costlier does not."""
    macro = pd.DataFrame({"acc": [80.0, 79.0, 70.0, 79.0], "p_tokens": [100.0, 50.0, 10.0, 150.0]},
                         index=["coba_strong", "x@0.1", "x@1", "x@0"])
    tests = pd.DataFrame([{"held_out": "MACRO", "a": "x@0.1", "b": "coba_strong", "ci_high": 0.5},
                          {"held_out": "MACRO", "a": "x@1", "b": "coba_strong", "ci_high": -5.0},
                          {"held_out": "MACRO", "a": "x@0", "b": "coba_strong", "ci_high": 0.5},
                          {"held_out": "ALL", "a": "x@1", "b": "coba_strong", "ci_high": 3.0}])
    v = verdict(macro, tests, ["x@0.1", "x@1", "x@0"])
    assert v["met"]
    assert v["points"].set_index("policy")["not_dominated"].to_dict() == {"x@0.1": True, "x@1": False, "x@0": False}


def test_macro_bootstrap_hand_worked():
    """Two datasets of different size: the macro difference weighs them equally (unlike the pooled one), and
    identical policies get a zero-width CI."""
    from train.lodo import macro_pairwise

    rows = []
    for ds, n, a_ok, b_ok in (("big", 8, [1] * 8, [1] * 8), ("small", 2, [1, 1], [0, 0])):
        for i in range(n):
            for pol, ok in (("a", a_ok[i]), ("b", b_ok[i]), ("c", a_ok[i])):
                rows.append({"policy": pol, "dataset": ds, "item_id": f"{ds}{i}", "generator": "g",
                             "correct": bool(ok)})
    table = macro_pairwise(pd.DataFrame(rows), ["a", "b", "c"], seed=0, resamples=200).set_index(["a", "b"])
    assert table.loc[("a", "b"), "diff"] == pytest.approx(50.0)  # (0 + 100) / 2; pooled would be 20
    assert table.loc[("a", "b"), "ci_low"] == pytest.approx(50.0) and table.loc[("a", "b"), "ci_high"] == 50.0
    assert table.loc[("a", "c"), "diff"] == 0.0 and not table.loc[("a", "c"), "significant"]


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


@pytest.fixture(scope="module")
def lodo_out(tmp_path_factory):
    """Leave-one-dataset-out on the tiny pool (two datasets), with a fast MLP and few sweep points."""
    out = tmp_path_factory.mktemp("lodo")
    result = run_lodo("tiny", out, kinds=["mlp"], lambdas=(0.1, 0.3), eval_lambdas=(0.1, 1.0), progress=False,
                      anchors=("greedy", "coba_light", "coba_strong"), families=("best_of_n",), resamples=200,
                      train_options=TRAIN_FAST)
    return out, result


def test_lodo_evaluates_every_episode_once_per_policy_by_a_controller_that_never_saw_its_dataset(lodo_out):
    """Each held-out fold's checkpoint was trained only on the other dataset; every episode appears once."""
    import json

    out, result = lodo_out
    assert result["splits"] == ["math500", "aime2024"]
    records = pd.read_csv(out / "episodes.csv")
    counts = records.groupby("policy")["episode_id"].agg(["count", "nunique"])
    assert (counts["count"] == 48).all() and (counts["nunique"] == 48).all()
    for held in result["splits"]:
        cfg = json.loads((out / "checkpoints" / "mlp" / held / "controller.json").read_text())
        assert cfg["datasets"] == sorted({"math500", "aime2024"} - {held})
    assert {"mlp@0.1", "mlp@1", "coba_strong", "bon4"} <= set(records["policy"])
    for stem in ("macro", "per_dataset", "bootstrap", "action_mix", "frontier", "verdict"):
        assert (out / f"{stem}.md").is_file()
    boot = pd.read_csv(out / "bootstrap.csv")
    assert set(boot["held_out"]) == {"MACRO", "ALL", "math500", "aime2024"}
    assert set(boot["a"]) == {"mlp@0.1", "mlp@1"} and set(boot["b"]) == {"greedy", "coba_light", "coba_strong"}


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
    (["train", "mlp", "--pool", "tiny", "--lodo", "--held-out", "gsm8k"], "unknown dataset"),
    (["train", "mlp", "--pool", "tiny", "--held-out", "math500"], "need --lodo"),
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
