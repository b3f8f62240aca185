"""``coba bench --env route``: routing policies on route episodes, allocation by generator, the route front and,
on the real two-model routellm-gsm8k pool, CPT(50%), CPT(80%) and APGR with the reference routers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.registry import load_specs, make_policy
from agents.routing_base import is_route_policy
from agents.runner import replay
from coba_cli.main import main
from coba_env import compile_pool
from coba_env.route_env import RouteEnv
from eval.bench import select_policies
from eval.route_analysis import threshold_sweep
from eval.route_replay import replay_route_policy
from tests.conftest import make_synthetic_pool

# The routellm-gsm8k figures SOURCES.md computes from the source's own labels (one sample per model).
MIXTRAL, GPT4, EITHER = 0.6384, 0.8567, 0.9287


def three_generator_pool():
    """2 datasets (5 + 4 items) x 3 generators (1.5B, 7B, 72B) x 6 candidates, V1/V2/V3 scores."""
    return make_synthetic_pool({"d1": 5, "d2": 4}, {"s-1.5B": 1.5, "m-7B": 7.0, "l-72B": 72.0}, n_candidates=6,
                               seed=11)


def test_the_replay_bench_selection_leaves_every_route_policy_out():
    specs = load_specs()
    chosen = select_policies(None, specs)
    route = [n for n in specs if is_route_policy(make_policy(n))]
    assert len(route) == 8 and not set(route) & set(chosen)
    assert select_policies(None, specs, "route") == route
    assert "greedy" in chosen and "pool_oracle" in chosen


@pytest.fixture(scope="module")
def route_bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("route") / "bench"
    pool = three_generator_pool()
    from eval.bench import run_bench

    results = run_bench(pool, None, out_dir=out, progress=False, figures=False, quiet=True, env="route")
    return pool, results, out


def test_route_bench_runs_every_routing_policy_with_allocation_by_generator(route_bench):
    pool, results, out = route_bench
    compiled = compile_pool(pool)
    routing = results["routing"]
    assert routing["generators"] == ["s-1.5B", "m-7B", "l-72B"]
    assert results["meta"]["ran"] == [n for n in load_specs() if is_route_policy(make_policy(n))]
    for name, by_gen in routing["allocation_by_generator"].items():
        # Independently: replay the policy episode by episode and count each generator's samples and spend.
        policy = make_policy(name)
        records = replay(policy, RouteEnv(compiled, lam=0.0, **policy.env_kwargs()))
        samples = {g: sum(r["samples_by_generator"][g] for r in records) for g in routing["generators"]}
        spend = {g: sum(r["spend_by_generator"][g]["p_tokens"] for r in records) for g in routing["generators"]}
        for g in routing["generators"]:
            assert by_gen[g]["sample_share"] == pytest.approx(samples[g] / sum(samples.values()))
            assert by_gen[g]["cost_share"] == pytest.approx(spend[g] / sum(spend.values()))
            assert by_gen[g]["samples_per_item"] == pytest.approx(samples[g] / 9)
    assert routing["allocation_by_generator"]["route_cheapest_coba"]["s-1.5B"]["sample_share"] == 1.0
    assert routing["allocation_by_generator"]["route_largest_coba"]["l-72B"]["cost_share"] == 1.0
    # The route front holds deployable routing policies only (the oracles are upper bounds).
    assert routing["front"] and not {"route_pool_oracle", "route_cost_aware_oracle"} & set(routing["front"])
    assert routing["model_routing"] is None  # three generators: no weak/strong pair
    report = (out / "report.md").read_text()
    assert "## Routing between generators" in report and "Allocation by generator" in report
    assert (out / "tables" / "routing_allocation.csv").is_file()


def test_route_bench_records_equal_the_one_episode_replay(route_bench):
    pool, _, _ = route_bench
    compiled = compile_pool(pool)
    for name in ("route_cascade", "model_switch", "route_threshold_judge", "route_pool_oracle"):
        batched = replay_route_policy(make_policy(name), compiled, replay="batched").records
        single = replay_route_policy(make_policy(name), compiled, replay="single").records
        assert batched.drop(columns="actions").equals(single.drop(columns="actions"))
        assert batched["actions"].tolist() == single["actions"].tolist()


def test_pools_with_one_generator_have_no_routing_section(tmp_path):
    from eval.bench import run_bench

    pool = make_synthetic_pool({"d1": 3}, {"only-7B": 7.0}, n_candidates=4, seed=2)
    results = run_bench(pool, "greedy", out_dir=tmp_path / "replay", progress=False, figures=False, quiet=True)
    assert "routing" not in results
    results = run_bench(pool, None, out_dir=tmp_path / "route", progress=False, figures=False, quiet=True,
                        env="route")
    assert "routing" not in results
    assert "route_cascade" in results["meta"]["not_applicable"]


@pytest.fixture(scope="module")
def routellm_bench(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    src = shared_dir / "data" / "pools" / "routellm-gsm8k" / "gsm8k_responses.csv"
    root = tmp_path_factory.mktemp("routellm")
    assert main(["pools", "import", str(src), str(root / "pool"), "--format", "routellm"]) == 0  # one command
    return root


def test_routellm_route_bench_prints_cpt_and_apgr_with_a_random_router_at_one_half(routellm_bench, capsys):
    capsys.readouterr()
    code = main(["bench", "--env", "route", "--pool", str(routellm_bench / "pool"), "--out",
                 str(routellm_bench / "bench"), "--no-progress", "--cost", "usd"])  # GPT-4's size is unknown
    assert code == 0
    printed = capsys.readouterr().out
    assert "random router: CPT(50%)" in printed and "CPT(80%)" in printed and "APGR" in printed
    mr = json.loads((routellm_bench / "bench" / "results.json").read_text())["routing"]["model_routing"]
    assert mr["weak"] == "mistralai/Mixtral-8x7B-Instruct-v0.1" and mr["strong"] == "gpt-4-1106-preview"
    assert mr["weak_accuracy"] == pytest.approx(MIXTRAL, abs=5e-5)
    assert mr["strong_accuracy"] == pytest.approx(GPT4, abs=5e-5)
    assert mr["at_least_one_correct"] == pytest.approx(EITHER, abs=5e-5)
    assert mr["random_router"]["apgr"] == pytest.approx(0.50, abs=0.02)
    assert mr["random_router"]["cpt50"] == pytest.approx(0.50, abs=0.03)
    assert mr["oracle_router"]["apgr"] > 1.0  # the oracle beats the strong model alone with few strong calls
    # The pool oracle over generators is right whenever either model is.
    assert mr["policies"]["route_pool_oracle"]["accuracy"] == pytest.approx(EITHER, abs=5e-5)
    assert (routellm_bench / "bench" / "tables" / "model_routing.md").is_file()
    assert (routellm_bench / "bench" / "figures" / "model_routing.png").is_file()


def test_a_threshold_sweep_traces_the_judge_routers_curve():
    pool = make_synthetic_pool({"d1": 30}, {"weak-1.5B": 1.5, "strong-72B": 72.0}, n_candidates=3, seed=5)
    compiled = compile_pool(pool)
    points = threshold_sweep(make_policy("route_threshold_judge"), compiled)
    shares = points["strong_share"].to_numpy()
    assert shares[0] == 0.0 and shares[-1] == 1.0 and np.all(np.diff(shares) >= 0)  # a rising curve
    assert len(np.unique(shares)) >= 4  # the judge's scores spread the items over several thresholds
    # At share 0 every item keeps the weak model's first candidate: its accuracy is that candidate's label's.
    weak_first = compiled.labels.correct[compiled.generator == "weak-1.5B", 0]
    assert points["acc"].iloc[0] == pytest.approx(weak_first.mean())


def test_an_unknown_env_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--pool", "tiny", "--out", str(tmp_path / "b"), "--env", "routing"])
    assert exc.value.code == 2
    assert "invalid choice: 'routing'" in capsys.readouterr().err


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"env": "routing"}, "unknown bench env 'routing'; expected one of"),
    ({"env": "route", "ray_address": "127.0.0.1:1"}, "a route bench runs locally"),
])
def test_bad_route_bench_input_is_refused_before_any_work(kwargs, match, tmp_path):
    from eval.bench import BenchInputError, run_bench

    with pytest.raises(BenchInputError, match=match):
        run_bench("tiny", None, out_dir=tmp_path / "b", progress=False, quiet=True, **kwargs)
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
