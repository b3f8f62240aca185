"""A pool with more generators is a data change only: the replay env, the route env, every applicable policy
and the bench run on 3 and 4 generators with no code change."""

from __future__ import annotations

import pytest

from agents.registry import load_specs, make_policy
from agents.routing_base import is_route_policy
from agents.runner import make_env, replay
from coba_env import compile_pool
from coba_env.route_env import RouteEnv
from eval.bench import run_bench
from tests.conftest import make_synthetic_pool

GENERATORS = {"tiny-1.5B": 1.5, "mid-7B": 7.0, "big-72B": 72.0, "huge-405B": 405.0}


def pool_with(n_generators: int):
    """2 datasets (4 + 3 items) x ``n_generators`` generators x 16 candidates, V1/V2/V3 scores."""
    gens = dict(list(GENERATORS.items())[:n_generators])
    return make_synthetic_pool({"d1": 4, "d2": 3}, gens, n_candidates=16, seed=n_generators)


@pytest.mark.parametrize("n_generators", [3, 4])
def test_replay_and_route_envs_and_every_applicable_policy_run(n_generators):
    compiled = compile_pool(pool_with(n_generators))
    assert compiled.n_episodes == 7 * n_generators
    ran = 0
    specs = {name: spec for name, spec in load_specs().items() if spec["group"] != "learned"}
    for name, spec in specs.items():
        policy = make_policy(name)
        route = is_route_policy(policy)
        env = RouteEnv(compiled, **policy.env_kwargs()) if route else make_env(policy, compiled)
        assert policy.applicable(env) == (True, "")  # every verifier role is served, N = 16
        records = replay(policy, env)
        ran += 1
        assert len(records) == (7 if route else 7 * n_generators)
        if name == "greedy":  # one candidate per episode: right exactly when the first candidate is
            assert [r["correct"] for r in records] == compiled.labels.correct[:, 0].tolist()
        if spec["kind"] == "route_coba":  # CoBa on the cheapest / largest generator only (by parameters)
            wanted = "tiny-1.5B" if spec["params"]["generator"] == "cheapest" else list(GENERATORS)[n_generators - 1]
            for r in records:
                assert set(g for g, k in r["samples_by_generator"].items() if k) == {wanted}
        if spec["kind"] in ("route_cascade", "model_switch"):  # escalates: more than one generator sampled
            assert len({g for r in records for g, k in r["samples_by_generator"].items() if k}) >= 2
        if spec["kind"] == "route_pool_oracle":  # right whenever any generator holds a correct candidate
            hit = compiled.labels.correct.any(axis=1).reshape(n_generators, 7).any(axis=0)
            assert [r["correct"] for r in records] == hit.tolist()
    assert ran == len(specs) >= 30


@pytest.mark.parametrize("n_generators", [3, 4])
def test_route_layout_grows_with_the_pool(n_generators):
    env = RouteEnv(compile_pool(pool_with(n_generators)))
    gens = list(GENERATORS)[:n_generators]
    assert env.layout.names == (*[f"SAMPLE_{g}" for g in gens], "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP")
    assert env.observation_space.shape == (n_generators * 7 + 21,)
    _, info = env.reset(seed=0)
    assert info["action_mask"].tolist() == [1] * n_generators + [0, 0, 0, 0]


@pytest.mark.parametrize("n_generators", [3, 4])
def test_the_bench_runs_on_many_generators(n_generators, tmp_path):
    results = run_bench(pool_with(n_generators), "greedy,coba_balanced,bon4_majority", out_dir=tmp_path,
                        progress=False, figures=False, quiet=True)
    gens = list(GENERATORS)[:n_generators]
    for name in ("greedy", "coba_balanced", "bon4_majority"):
        per_generator = results["policies"][name]["per_generator"]
        assert sorted(per_generator) == sorted(gens)
        assert all(row["n"] == 7 and 0 <= row["acc"] <= 100 for row in per_generator.values())
    text = (tmp_path / "report.md").read_text()
    assert all(g in text for g in gens)


@pytest.mark.parametrize("n_generators", [3, 4])
def test_the_route_bench_runs_every_routing_policy_on_many_generators(n_generators, tmp_path):
    results = run_bench(pool_with(n_generators), None, out_dir=tmp_path, progress=False, figures=False, quiet=True,
                        env="route")
    gens = list(GENERATORS)[:n_generators]
    assert results["routing"]["generators"] == gens
    assert results["meta"]["not_applicable"] == {} and len(results["meta"]["ran"]) == 8
    for by_gen in results["routing"]["allocation_by_generator"].values():
        assert sorted(by_gen) == sorted(gens)
        assert sum(v["sample_share"] for v in by_gen.values()) == pytest.approx(1.0)
    # The cascade climbs by size: a generator is sampled only on problems where every smaller one was too.
    cascade = results["routing"]["allocation_by_generator"]["route_cascade"]
    per_item = [cascade[g]["samples_per_item"] for g in gens]
    assert per_item == sorted(per_item, reverse=True) and per_item[0] == 2.0
