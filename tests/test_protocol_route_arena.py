"""The learning protocol on the route env (issue 27, item 3): the route arena replays route episodes beside the
consistency cascade, and its verdict names the env, the reference and the 0.8 cost bound."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from agents.base import Policy
from agents.registry import make_policy
from coba_env.env import as_compiled
from eval.runner import run_policies
from train.protocol import run_protocol
from train.protocol_arena import REPLAY, ROUTE, arena_named
from train.protocol_stats import Coverage, verdict


@dataclass
class _Fixed:
    """A fitted 'method' whose every point is the route cascade with k samples (no learning)."""

    def policy(self, point: dict[str, float]) -> Policy:
        return make_policy("route_cascade", k=int(point["k"]))


class CascadeK:
    """A protocol method without learning: the cascade's k is its grid (to test the route arena's plumbing)."""

    name = "cascade_k"

    def grid(self) -> list[dict[str, float]]:
        return [{"k": 2.0}, {"k": 3.0}]

    def fit(self, compiled, train_ids, *, budget, seed, out_dir: Path, progress) -> _Fixed:
        return _Fixed()


@pytest.fixture(scope="module")
def small_paper():
    paper = as_compiled("paper")
    keep = np.zeros(paper.n_episodes, dtype=bool)
    for d in dict.fromkeys(paper.dataset.tolist()):  # the first 6 problems of every dataset, all their generators
        rows = np.flatnonzero(paper.dataset == d)
        items = list(dict.fromkeys(paper.item_id[rows].tolist()))[:6]
        keep |= (paper.dataset == d) & np.isin(paper.item_id, items)
    return paper.select(keep)


def test_route_arena_replays_route_episodes_beside_the_cascade(small_paper, tmp_path):
    result = run_protocol(small_paper, CascadeK(), seeds=(0,), held_out=["aime2025", "amc2023"], progress=False,
                          out_dir=tmp_path, pool_name="paper, 6 problems per dataset", arena=ROUTE)
    records = result.records
    assert set(records["policy"]) == {"route_cascade", "cascade_k"}
    assert sorted(set(records["dataset"])) == ["aime2025", "amc2023"]
    # one record per problem (route episode), not per (problem, generator)
    assert len(records[records["policy"] == "route_cascade"]) == 12
    # the reference's records are the route bench's own on those problems (an independent replay)
    bench = run_policies(["route_cascade"], small_paper, grouping="item", workers=1, progress=False).records
    bench = bench[bench["dataset"].isin(["aime2025", "amc2023"])].set_index(["dataset", "item_id"]).sort_index()
    ref = records[records["policy"] == "route_cascade"].set_index(["dataset", "item_id"]).sort_index()
    assert ref["correct"].tolist() == bench["correct"].tolist()
    assert ref["p_tokens"].tolist() == bench["p_tokens"].tolist()
    v = result.verdict
    assert (v["env"], v["reference"], v["scope"], v["beats"]) == ("route", "route_cascade", "partial", False)
    assert "< 0.8" in v["rule"]
    text = (tmp_path / "verdict.md").read_text()
    assert "Env: route; reference: route_cascade" in text


def test_route_cost_bound_is_0_8():
    """A seed-mean cost ratio CI high end of 0.85 passes the replay env's bound (0.9) and fails the route's."""
    import pandas as pd

    stats = pd.DataFrame([
        {"seed": "mean", "scope": "ALL", "diff": 0.1, "ci_low": -0.2, "ci_high": 0.4, "cost_ratio": 0.8,
         "ratio_low": 0.75, "ratio_high": 0.85},
        {"seed": "mean", "scope": "MACRO", "diff": 0.1, "ci_low": -0.2, "ci_high": 0.4, "cost_ratio": 0.8,
         "ratio_low": 0.75, "ratio_high": 0.85}])
    full = dict(pool="p", seeds=(0, 1, 2), folds=("a", "b", "c"), all_folds=("a", "b", "c"))
    on_replay = verdict(stats, "m", Coverage(**full), ratio_high_max=REPLAY.ratio_high_max)
    on_route = verdict(stats, "m", Coverage(**full, env="route", reference="route_cascade"),
                       ratio_high_max=ROUTE.ratio_high_max)
    assert on_replay["beats"] is True
    assert on_route["beats"] is False
    assert on_route["checks"]["cost_ratio_ci_high<0.8"] is False


@pytest.mark.parametrize("env", ["Route", "cascade", ""])
def test_unknown_arena(env):
    with pytest.raises(ValueError, match="unknown protocol env"):
        arena_named(env)


@pytest.mark.parametrize("argv, message", [
    (["train", "route_search", "--lodo"], r"route_search has no protocol method on the replay env; there: mlp, ppo"),
    (["train", "rollout", "--lodo", "--env", "route"], r"rollout has no protocol method on the route env"),
    (["train", "route_search", "--env", "route"], r"route_search trains under the protocol only: add --lodo"),
])
def test_bad_env_kind_pairs_exit_2_before_any_work(argv, message, tmp_path, capsys):
    from coba_cli.main import main

    out = tmp_path / "out"
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert __import__("re").search(message, err), err
    assert not out.exists()


@pytest.mark.parametrize("cut, message", [
    ("one generator", r"--env route routes between 2 or more generators; the pool has \['Qwen3-8B'\]"),
    ("a dataset without Qwen3-14B", r"--env route needs every generator in every dataset; dataset 'aime2024' has no "
                                    r"candidates of \['Qwen3-14B'\]"),
])
def test_route_arena_refuses_a_pool_it_cannot_route_before_any_fit(small_paper, cut, message, tmp_path):
    gen, ds = small_paper.generator, small_paper.dataset
    keep = (gen == "Qwen3-8B") if cut == "one generator" else ~((ds == "aime2024") & (gen == "Qwen3-14B"))
    pool = small_paper.select(keep)

    class Unfit(CascadeK):
        def fit(self, *args, **kwargs):
            raise AssertionError("no fit may start")

    with pytest.raises(ValueError, match=message):
        run_protocol(pool, Unfit(), seeds=(0,), progress=False, out_dir=tmp_path / "out", arena=ROUTE)
    assert not (tmp_path / "out").exists()
    REPLAY.check(pool)  # the replay env runs on any pool
