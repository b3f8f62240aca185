"""A pool with more generators is a data change only: the replay env, the route env, every applicable policy
and the bench run on 3 and 4 generators with no code change."""

from __future__ import annotations

import numpy as np
import pytest

from agents.registry import load_specs, make_policy
from agents.routing_base import is_route_policy
from agents.runner import make_env, replay
from coba_env import CoBaEnv, compile_pool
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
        env = CoBaEnv(compiled, grouping="item", **policy.env_kwargs()) if route else make_env(policy, compiled)
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
    env = CoBaEnv(compile_pool(pool_with(n_generators)), grouping="item")
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


#: Verifiers a pool may name: name -> (model, params_b, role); a pool with k verifiers names the first k.
VERIFIERS: dict[str, tuple[str, float, str]] = {
    "judge-s": ("Judge-1.5B", 1.5, "cheap_judge"),
    "prm": ("PRM-7B", 7.0, "process_judge"),
    "rm": ("RM-72B", 72.0, "reward_model"),
    "judge-l": ("Judge-8B", 8.0, "cheap_judge"),
    "verifier": ("Verifier-14B", 14.0, "strong_verifier"),
    "verifier-xl": ("Verifier-32B", 32.0, "strong_verifier"),
}


def pool_with_verifiers(n_generators: int, n_verifiers: int):
    """``pool_with(n_generators)`` whose verifiers are the first ``n_verifiers`` of ``VERIFIERS``."""
    gens = dict(list(GENERATORS.items())[:n_generators])
    return make_synthetic_pool({"d1": 4, "d2": 3}, gens, n_candidates=16, seed=10 * n_generators + n_verifiers,
                               verifiers=dict(list(VERIFIERS.items())[:n_verifiers]))


#: Which verifier serves each paper role with the first k verifiers (docs/POLICIES.md "Verifier roles": a cheap
#: judge, else a reward model, else a strong verifier serves V1; a strong verifier, else a reward model, V3).
SERVING = {0: {}, 1: {"V1": "judge-s"}, 5: {"V1": "judge-s", "V2": "prm", "V3": "verifier"},
           6: {"V1": "judge-s", "V2": "prm", "V3": "verifier"}}


@pytest.mark.parametrize("n_generators, n_verifiers", [(3, 5), (3, 6), (4, 5), (3, 0), (3, 1)])
def test_verifiers_are_data(n_generators, n_verifiers, tmp_path):
    """Any number of verifiers: the layouts, the observation and every applicable policy follow the pool."""
    compiled = compile_pool(pool_with_verifiers(n_generators, n_verifiers))
    names = list(VERIFIERS)[:n_verifiers]
    assert compiled.tiers == tuple(names)
    replay_env = make_env(make_policy("greedy"), compiled)
    assert replay_env.layout.names == ("SAMPLE", *[f"VERIFY_{v}" for v in names], "STOP")
    # docs/ENV.md: 11 features, one verified share per verifier, 7 more.
    assert replay_env.observation_space.shape == (11 + n_verifiers + 7,)
    assert replay_env.features.names[11:11 + n_verifiers] == tuple(f"{v}_verified_frac" for v in names)
    route_env = CoBaEnv(compiled, grouping="item")
    gens = list(GENERATORS)[:n_generators]
    assert route_env.layout.names == (*[f"SAMPLE_{g}" for g in gens], *[f"VERIFY_{v}" for v in names], "STOP")
    ran = set()
    for name in load_specs():
        policy = make_policy(name)
        route = is_route_policy(policy)
        env = CoBaEnv(compiled, grouping="item", **policy.env_kwargs()) if route else make_env(policy, compiled)
        ok, why = policy.applicable(env)
        if not ok:
            assert why, name
            continue
        records = replay(policy, env)
        ran.add(name)
        assert len(records) == (7 if route else 7 * n_generators)
        called = {env.actions[a].removeprefix("VERIFY_") for r in records for a in r["action_ids"]
                  if env.actions[a].startswith("VERIFY_")}
        assert called <= set(SERVING[n_verifiers].values()), (name, called)  # only role-serving verifiers
        if name == "greedy":
            assert [r["correct"] for r in records] == compiled.labels.correct[:, 0].tolist()
    assert {"greedy", "bon16_majority", "pool_oracle"} <= ran  # need no verifier
    if n_verifiers >= 5:  # every role served: every fixed policy runs
        assert ran == {n for n, spec in load_specs().items() if spec["group"] != "learned"}
    results = run_bench(pool_with_verifiers(n_generators, n_verifiers), "greedy,coba_balanced,bon4_majority",
                        out_dir=tmp_path, progress=False, figures=False, quiet=True)
    assert results["policies"]["greedy"]["per_generator"].keys() == set(gens)


def test_named_verifiers_travel_through_jsonl(tmp_path):
    """Export writes each verifier's role with its scores; import gives back the same verifiers, roles and order."""
    import json

    from coba_cli.main import main
    from pools.export import export_jsonl
    from pools.store import load_pool

    pool = pool_with_verifiers(3, 5)
    src = export_jsonl(pool, tmp_path / "pool.jsonl")
    first = json.loads(src.read_text().splitlines()[0])
    assert {name: entry["role"] for name, entry in first["scores"].items()} == \
        {name: VERIFIERS[name][2] for name in first["scores"]}
    assert main(["pools", "import", str(src), str(tmp_path / "back")]) == 0
    back = load_pool(tmp_path / "back")
    assert back.tiers == list(VERIFIERS)[:5]
    assert back.manifest["verifier_roles"] == {name: VERIFIERS[name][2] for name in list(VERIFIERS)[:5]}
    assert compile_pool(back).tiers == tuple(VERIFIERS)[:5]


def test_a_learned_controller_refuses_a_layout_it_was_not_trained_on():
    """An MLP checkpoint without a stored layout was trained on the paper's (SAMPLE, VERIFY_V1..V3, STOP; 21
    features): it runs on a pool with the paper's verifiers and names the mismatch on any other."""
    from agents.learned_mlp import MLPController, build_network

    config = {"budget": 1.0, "cost_model": "p_tokens", "max_output_tokens": 1.0, "n_max": 16,
              "feature_mean": [0.0] * 26, "feature_scale": [1.0] * 26}
    mlp = MLPController(build_network((4,), 21, 5), config)
    paper = make_env(mlp, compile_pool(pool_with(3)))
    assert mlp.applicable(paper) == (True, "")
    five = make_env(mlp, compile_pool(pool_with_verifiers(3, 5)))
    ok, why = mlp.applicable(five)
    assert not ok and why.startswith("trained on the actions ['SAMPLE', 'VERIFY_V1', 'VERIFY_V2', 'VERIFY_V3', "
                                     "'STOP']; the env has ['SAMPLE', 'VERIFY_judge-s'")


@pytest.mark.parametrize("grouping", ["pair", "item"])
def test_a_live_replay_takes_any_verifiers_by_role(grouping):
    """Five named verifiers with declared roles: the live path (blank rows filled call by call) shows a policy the
    same layout, role map, observations, masks, rewards and final info as replay, with either grouping."""
    from coba_env.live import LiveEnv, PoolReplaySource, replay_normalizers

    compiled = compile_pool(pool_with_verifiers(3, 5))
    replay = CoBaEnv(compiled, grouping=grouping)
    live = LiveEnv(PoolReplaySource(compiled if grouping == "pair" else replay.route), **replay_normalizers(compiled))
    assert live.actions == replay.actions and live.actions[-6:-1] == [f"VERIFY_{v}" for v in VERIFIERS][:5]
    assert live.roles.serving == replay.roles.serving
    rng = np.random.default_rng(0)
    for e in range(replay.n_episodes):
        obs_r, info_r = replay.reset(options={"episode": e})
        obs_l, info_l = live.reset(options={"episode": e})
        done = False
        while not done:
            assert obs_l.tobytes() == obs_r.tobytes()
            assert np.array_equal(info_l["action_mask"], info_r["action_mask"])
            a = int(rng.choice(np.flatnonzero(info_r["action_mask"])))
            obs_r, reward_r, done, _, info_r = replay.step(a)
            obs_l, reward_l, done_l, _, info_l = live.step(a)
            assert (reward_l, done_l) == (reward_r, done)
        for key in ("actions", "selected_answer", "correct", "costs"):
            assert info_l[key] == info_r[key], key
        assert info_l["trace"].to_list() == info_r["trace"].to_list()
