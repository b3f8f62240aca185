"""Many models from one outcome table (issue 36, scale of models): a synthetic 20-generator x 5,000-query wide table
imports with one command, inspects per generator, benches on the route env (every generator on the allocation and as a point of the route
front) and trains a routing controller that benches in turn.

Expected figures are computed here from the written table with pandas, never from the importer or the bench. The
30 x 100,000 measurement is a script (scripts/bench_outcome_tables.py, figures in docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from coba_cli.main import main
from coba_env import CoBaEnv, compile_pool
from pools.store import load_pool
from tests.outcome_table_factory import CATEGORIES, write_wide_outcome_table

N_GENERATORS, N_QUERIES = 20, 5000
MODELS = [f"m{k}" for k in range(N_GENERATORS)]
COLUMNS = "id=id,category=category,cost={model}|cost"


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pd.DataFrame]:
    """(the table, the pool imported from it with one command, the table as pandas reads it)."""
    folder = tmp_path_factory.mktemp("scale")
    src = write_wide_outcome_table(folder / "synthetic.csv", N_GENERATORS, N_QUERIES, seed=3)
    assert main(["pools", "import", str(src), "--format", "wide", "--columns", COLUMNS, "--out",
                 str(folder / "pool")]) == 0
    return src, folder / "pool", pd.read_csv(src)


def test_twenty_generators_import_with_their_outcomes_and_dollars(table):
    _, out, frame = table
    pool = load_pool(out)
    assert len(pool.items) == N_QUERIES and list(pool.models["name"]) == MODELS
    assert set(pool.items["subject"]) == set(CATEGORIES)
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    assert len(c) == N_GENERATORS * N_QUERIES
    accuracy = c.groupby("generator")["correct"].mean()
    dollars = c.groupby("generator")["cost_usd"].sum()
    for m in MODELS:
        assert accuracy[m] == pytest.approx(frame[m].mean(), abs=1e-12)
        assert dollars[m] == pytest.approx(frame[f"{m}|cost"].sum(), rel=1e-9)


def test_twenty_generators_inspect_per_generator(table, capsys):
    _, out, frame = table
    capsys.readouterr()
    assert main(["pools", "inspect", str(out), "--json"]) == 0
    groups = {g["generator"]: g for g in json.loads(capsys.readouterr().out)["groups"] if g["generator"] in MODELS}
    assert sorted(groups) == sorted(MODELS)
    for m in MODELS:
        assert groups[m]["episodes"] == N_QUERIES
        assert groups[m]["first_sample_accuracy"] == pytest.approx(frame[m].mean(), abs=1e-12)
        assert groups[m]["majority_at_n"] == pytest.approx(frame[m].mean(), abs=1e-12)  # N = 1: its own vote


def _route_observation_width(folder: Path, n_generators: int) -> int:
    """The route env's observation width on a 40-query table of ``n_generators`` models."""
    src = write_wide_outcome_table(folder / f"g{n_generators}.csv", n_generators, 40)
    assert main(["pools", "import", str(src), "--format", "wide", "--columns", COLUMNS, "--out",
                 str(folder / f"g{n_generators}")]) == 0
    return CoBaEnv(compile_pool(load_pool(folder / f"g{n_generators}")), grouping="item").observation_space.shape[0]


def test_the_route_env_grows_with_the_twenty_generators(table, tmp_path):
    _, out, _ = table
    env = CoBaEnv(compile_pool(load_pool(out)), grouping="item")
    assert env.layout.names == (*[f"SAMPLE_{m}" for m in MODELS], "STOP")  # no verifier in an outcome table
    _, info = env.reset(seed=0)
    assert info["action_mask"].tolist() == [1] * N_GENERATORS + [0]
    width = {g: _route_observation_width(tmp_path, g) for g in (2, 3)}
    step = width[3] - width[2]  # what one more generator adds
    assert step > 0 and env.observation_space.shape == (width[2] + (N_GENERATORS - 2) * step,)


def test_the_route_bench_shows_every_generator_and_the_pool_oracle(table, tmp_path):
    _, out, frame = table
    assert main(["bench", "--pool", str(out), "--env", "route", "--cost", "usd", "--out", str(tmp_path / "b"),
                 "--no-figures", "--no-progress"]) == 0
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    routing = results["routing"]
    assert routing["generators"] == MODELS
    assert all(sorted(a) == sorted(MODELS) for a in routing["allocation_by_generator"].values())
    episodes = pd.read_parquet(tmp_path / "b" / "episodes.parquet")
    for m in MODELS:  # "Always m" is right exactly where the table says m is
        mine = episodes[episodes["policy"] == f"always:{m}"].set_index("item_id")["correct"]
        assert mine.mean() == pytest.approx(frame[m].mean(), abs=1e-12)
    hit = frame[MODELS].any(axis=1).mean()
    oracle = episodes[episodes["policy"] == "route_pool_oracle"]["correct"]
    assert len(oracle) == N_QUERIES and oracle.mean() == pytest.approx(hit, abs=1e-12)
    front = routing["front"]
    assert front and set(front) <= {f"always:{m}" for m in MODELS}  # the answer-comparing routers say n/a
    assert "always:m0" in front  # the cheapest generator is always on the front


def test_a_routing_controller_trains_on_the_twenty_generators_and_benches(table, tmp_path):
    _, out, _ = table
    ckpt = tmp_path / "mlp"
    assert main(["train", "mlp", "--env", "route", "--pool", str(out), "--rounds", "0", "--epochs", "2",
                 "--episodes-per-round", "2", "--lambdas", "0.1,1", "--cost", "usd", "--out", str(ckpt),
                 "--no-progress"]) == 0
    config = json.loads((ckpt / "controller.json").read_text())
    assert config["env"] == "route" and config["actions"] == [*[f"SAMPLE_{m}" for m in MODELS], "STOP"]
    assert main(["bench", "--pool", str(out), "--env", "route", "--cost", "usd", "--policies", f"{ckpt}@0.1",
                 "--out", str(tmp_path / "b"), "--no-figures", "--no-progress"]) == 0
    episodes = pd.read_parquet(tmp_path / "b" / "episodes.parquet")
    assert len(episodes) == N_QUERIES
    assert set(episodes["generator"].str.split("+").explode()) == set(MODELS)
