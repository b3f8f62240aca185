"""``coba bench --env route``: routing policies on route episodes, allocation by generator, the route front and,
on the real two-model routellm-gsm8k pool, CPT(50%), CPT(80%) and APGR with the reference routers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.registry import load_specs, make_policy, select_policies
from agents.routing_base import is_route_policy
from agents.routing_single import SingleGeneratorRouter
from agents.runner import replay
from coba_cli.main import main
from coba_env import CoBaEnv, compile_pool
from eval.route_analysis import threshold_sweep
from eval.runner import replay_policy
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
    assert select_policies(None, specs, "item") == route
    assert select_policies(["main"], specs, "item") == route  # no main-table row runs on item-grouped episodes
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
    registered = [n for n in load_specs() if is_route_policy(make_policy(n))]
    # ... then every generator alone ("Always <g>", agents.routing_single.each_generator): a point of the front
    assert results["meta"]["ran"] == registered + [f"always:{g}" for g in routing["generators"]]
    for name, by_gen in routing["allocation_by_generator"].items():
        # Independently: replay the policy episode by episode and count each generator's samples and spend.
        alone = name.removeprefix("always:")
        policy = SingleGeneratorRouter(name=name, generator=alone) if alone != name else make_policy(name)
        records = replay(policy, CoBaEnv(compiled, grouping="item", lam=0.0, **policy.env_kwargs()))
        samples = {g: sum(r["samples_by_generator"][g] for r in records) for g in routing["generators"]}
        spend = {g: sum(r["spend_by_generator"][g]["p_tokens"] for r in records) for g in routing["generators"]}
        for g in routing["generators"]:
            assert by_gen[g]["sample_share"] == pytest.approx(samples[g] / sum(samples.values()))
            assert by_gen[g]["cost_share"] == pytest.approx(spend[g] / sum(spend.values()))
            assert by_gen[g]["samples_per_item"] == pytest.approx(samples[g] / 9)
    assert routing["allocation_by_generator"]["route_cheapest_coba"]["s-1.5B"]["sample_share"] == 1.0
    assert routing["allocation_by_generator"]["route_largest_coba"]["l-72B"]["cost_share"] == 1.0
    assert all(routing["allocation_by_generator"][f"always:{g}"][g]["sample_share"] == 1.0
               for g in routing["generators"])
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
        batched = replay_policy(make_policy(name), compiled, grouping="item", replay="batched").records
        single = replay_policy(make_policy(name), compiled, grouping="item", replay="single").records
        assert batched.drop(columns="actions").equals(single.drop(columns="actions"))
        assert batched["actions"].tolist() == single["actions"].tolist()


def test_a_replay_without_generator_columns_keeps_their_sums():
    """A bench's replay (generator_columns=False) leaves out the two columns per generator and keeps their sums
    (``GeneratorUse``), which the routing analyses read."""
    compiled = compile_pool(three_generator_pool())
    full = replay_policy(make_policy("route_cascade"), compiled, grouping="item")
    lean = replay_policy(make_policy("route_cascade"), compiled, grouping="item", generator_columns=False)
    gens = ["s-1.5B", "m-7B", "l-72B"]
    assert lean.records.equals(full.records.drop(columns=[f"{k}:{g}" for g in gens for k in ("samples", "gen_cost")]))
    use = lean.generator_use
    assert list(use.generators) == gens and use.episodes == 9
    drawn = {g: full.records[f"samples:{g}"] for g in gens}
    assert sum(drawn[g].sum() for g in gens[1:]) > 0  # the cascade escalates on some items
    for k, g in enumerate(gens):
        assert use.samples[k] == drawn[g].sum() and use.called[k] == (drawn[g] > 0).sum()
        assert use.cost[k] == pytest.approx(full.records[f"gen_cost:{g}"].sum(), rel=1e-12)
        assert use.called_share(g) == (drawn[g] > 0).mean()


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
    ({"env": "route", "unit": "problem"}, "unknown bootstrap unit 'problem'; expected 'item' or 'episode'"),
])
def test_bad_route_bench_input_is_refused_before_any_work(kwargs, match, tmp_path):
    from eval.bench import BenchInputError, run_bench

    with pytest.raises(BenchInputError, match=match):
        run_bench("tiny", None, out_dir=tmp_path / "b", progress=False, quiet=True, **kwargs)
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


PLAIN_POLICY = '''
from agents.base import Policy


class FirstThenStop(Policy):
    """Sample one candidate, stop: a replay-env policy (one generator per episode)."""

    def act(self, observation, action_mask, evidence):
        return self.sample_id if evidence.n_revealed < 1 else self.stop_id
'''


@pytest.mark.parametrize("policies", ["greedy", "greedy,bon4_majority,pool_oracle", "PLUGIN"])
def test_a_route_bench_with_no_route_policy_is_refused_up_front(policies, tmp_path, capsys):
    """Nothing selected runs on the route env: one line, exit 2, no output folder (not a KeyError in the report)."""
    if policies == "PLUGIN":
        (tmp_path / "plain_rule.py").write_text(PLAIN_POLICY)
        policies = f"{tmp_path / 'plain_rule.py'}:FirstThenStop"
    out = tmp_path / "bench"
    code = main(["bench", "--pool", "tiny", "--env", "route", "--policies", policies, "--out", str(out),
                 "--no-figures", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "--env route: none of the selected policies" in err and "runs on the route env" in err
    assert not out.exists()


def test_a_route_bench_where_no_route_policy_applies_exits_2_naming_why(tmp_path, capsys):
    """Route policies that all need a verifier, on a pool with none: one line naming each policy and why, exit 2,
    no output folder (a report with no result would pass for a finished bench)."""
    from eval.bench import BenchInputError, run_bench
    from tests.test_many_generators import pool_with_verifiers

    with pytest.raises(BenchInputError, match=r"^no requested policy can run on this pool \(route_cheapest_coba: .*; "
                                              r"route_largest_coba: .*\)$"):
        run_bench(pool_with_verifiers(2, 0), "route_cheapest_coba,route_largest_coba", out_dir=tmp_path / "b",
                  env="route", progress=False, figures=False, quiet=True)
    assert not (tmp_path / "b").exists()


def disjoint_two_generator_pool():
    """Two generators that never answer the same problem: small answers i0, i1; big answers i2, i3."""
    from tests.factory import Cand, Ep, build_pool

    def ep(item: str, gen: str, ok: bool) -> Ep:
        return Ep([Cand("1" if ok else "2", ok, scores={"V1": 0.6}), Cand("1", True, scores={"V1": 0.7})],
                  item_id=item, generator=gen)

    return build_pool([ep("i0", "small", True), ep("i1", "small", False), ep("i2", "big", True),
                       ep("i3", "big", True)], models={"small": 1.0, "big": 10.0, "J1": 2.0, "J2": 4.0, "J3": 20.0})


def test_a_two_generator_pool_with_no_shared_problem_has_no_model_routing_section(tmp_path, capsys):
    """No item has both generators: accuracies would be NaN; no model-routing section, one note instead."""
    out = tmp_path / "b"
    from eval.bench import run_bench

    results = run_bench(disjoint_two_generator_pool(), "route_cascade,model_switch,route_threshold_judge", out_dir=out,
                        env="route", progress=False, figures=False)
    routing = results["routing"]
    assert routing["generators"] == ["small", "big"] and routing["items"] == 4
    assert routing["model_routing"] is None
    note = "No model-routing section: no problem has candidates from both small and big"
    assert routing["note"].startswith(note)
    report = (out / "report.md").read_text()
    assert report.count(note) == 1 and "Model-routing metrics" not in report
    assert not (out / "tables" / "model_routing.md").exists()
    assert note in capsys.readouterr().out


def test_model_routing_is_none_when_no_problem_has_both_generators():
    """The accuracies over the (zero) shared problems would be NaN, which passed the no-gap guard."""
    from eval.route_analysis import model_routing, no_shared_items

    compiled = compile_pool(disjoint_two_generator_pool())
    run = replay_policy(make_policy("route_cascade"), compiled, grouping="item")
    assert len(run.records) == 4 and no_shared_items(compiled)
    assert model_routing(compiled, [run], {"route_cascade": "routing"}) is None
    assert not no_shared_items(compile_pool(three_generator_pool()))  # three generators: not a two-model pool


@pytest.mark.parametrize("name", ["route_pool_oracle", "route_cost_aware_oracle", "route_cascade"])
def test_batched_route_replay_equals_single_when_items_miss_a_generator(name):
    """Idle rows (placeholders after the last episode) must not SAMPLE generator 0 where it has no candidates."""
    compiled = compile_pool(disjoint_two_generator_pool())
    single = replay_policy(make_policy(name), compiled, grouping="item", replay="single").records
    batched = replay_policy(make_policy(name), compiled, grouping="item", replay="batched").records
    assert batched["actions"].tolist() == single["actions"].tolist()
    assert batched["correct"].tolist() == single["correct"].tolist()
    if name != "route_cascade":  # the oracles: every problem has a correct candidate (hand-built pool)
        assert single["correct"].tolist() == [True] * 4
