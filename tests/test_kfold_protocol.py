"""The K-fold routing protocol (``coba train ROUTER --kfold``, train/protocol_kfold.py) on a two-model pool whose
problem text says which model is needed: figures worked out by hand, every item held out once, settings chosen on
training items only, and its refusals one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coba_cli.main import main
from tests.conftest import write_jsonl

N_ITEMS = 60


def records(generators: tuple[str, ...] = ("small-1b", "large-70b")) -> list[dict]:
    """60 problems: 'sum' ones (even items) both models get right, 'integral' ones (odd) only the large model."""
    out = []
    for i in range(N_ITEMS):
        integral = i % 2 == 1
        problem = (f"Compute the definite integral of x^{i % 5 + 1} from 0 to {i % 3 + 1}." if integral
                   else f"What is the sum of {i} and {2 * i}?")
        for generator in generators:
            right = generator != "small-1b" or not integral
            out.append({"dataset": "toy", "item_id": f"q{i}", "problem": problem, "gold": str(i),
                        "generator": generator, "generator_params_b": 1 if generator == "small-1b" else 70,
                        "candidate": 0, "text": f"The answer is \\boxed{{{i if right else i + 1}}}.",
                        "prompt_tokens": 20, "output_tokens": 40 if generator == "small-1b" else 400,
                        "latency_s": 1.0, "finish_reason": "stop"})
    return out


def import_pool(tmp_path: Path, generators: tuple[str, ...] = ("small-1b", "large-70b")) -> Path:
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(write_jsonl(tmp_path / "p.jsonl", records(generators))), "--out",
                 str(dest)]) == 0
    return dest


def test_a_router_that_reads_the_text_routes_perfectly_and_its_figures_are_the_hand_worked_ones(tmp_path: Path):
    """Weak accuracy 0.5, strong 1.0. A router that sends the integrals first recovers the gap linearly up to a
    50% share, then all of it: PGR at shares 0, 0.1, .., 1 is 0, .2, .4, .6, .8, 1, 1, .., 1, so by the trapezoid
    rule APGR = 0.1 x (8 - 0.5) = 0.75, CPT(50%) = 0.25 and CPT(80%) = 0.40."""
    pool = import_pool(tmp_path)
    out = tmp_path / "kfold"
    assert main(["train", "knn_router", "--pool", str(pool), "--kfold", "--seeds", "0", "--out", str(out),
                 "--no-progress"]) == 0
    stats = pd.read_csv(out / "stats.csv").set_index(["router", "seed"])
    knn = stats.loc[("knn_router", "0")]
    assert knn["apgr"] == pytest.approx(0.75) and knn["cpt50"] == pytest.approx(0.25)
    assert knn["cpt80"] == pytest.approx(0.40)
    prior = stats.loc[("prior_router", "0")]
    assert knn["apgr_diff"] == pytest.approx(knn["apgr"] - prior["apgr"])  # paired with the prior router
    scores = pd.read_csv(out / "scores.csv")
    for router in ("knn_router", "prior_router"):  # every item scored once, by a router that never saw it
        mine = scores[scores["router"] == router]
        assert sorted(mine["item_id"]) == sorted(f"q{i}" for i in range(N_ITEMS))
    settings = pd.read_csv(out / "settings.csv")
    assert (settings["train_items"] == 48).all() and (settings["held_out_items"] == 12).all()
    assert len(settings) == 5 * 2  # five folds x (knn, prior)
    verdict = json.loads((out / "protocol.json").read_text())
    assert verdict["routers"]["knn_router"]["reached"] and verdict["items"] == N_ITEMS
    assert np.isclose(verdict["routers"]["knn_router"]["apgr"], 0.75)


@pytest.mark.parametrize("args, message", [
    (["mlp", "--kfold"], r"--kfold runs the K-fold routing protocol of a router kind \(not with --lodo\); mlp is "
                         r"not a router kind"),
    (["knn_router", "--kfold", "--problem-features", "meta"], r"--problem-features does not apply with --kfold"),
])
def test_bad_kfold_requests_are_one_line(tmp_path: Path, capsys, args, message):
    import re

    assert main(["train", *args, "--pool", "tiny", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_a_pool_of_three_models_is_refused_in_one_line(tmp_path: Path, capsys):
    pool = import_pool(tmp_path, ("small-1b", "large-70b", "mid-8b"))
    assert main(["train", "knn_router", "--pool", str(pool), "--kfold", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--kfold scores two-generator pools (APGR, CPT); the pool has 3" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
