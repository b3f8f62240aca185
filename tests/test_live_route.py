"""LiveEnv with several generators (the item grouping): live routing between generator endpoints (fake servers here; real llama.cpp servers in
tests/test_solve_route.py).

Each generator is its own server, so which endpoint a SAMPLE hit is read off the server that received the
request; token counts are recomputed from the fake server's replies (its tokenizer counts words), costs from
those tokens and the parameters the test declared, clusters by clustering the revealed answers as a whole list.
"""

from __future__ import annotations

import math
from contextlib import ExitStack

import pytest

from agents.registry import make_policy
from agents.runner import check_selection, run_episode
from coba_env.live import EndpointSource, Limits, LiveEnv
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from pools.grading import cluster_answers, extract_answer
from pools.problems import Problem
from tests.fake_openai_server import FakeOpenAIServer, count_tokens

PROBLEMS = [Problem("d", "p1", "What is 1+1?", "2"), Problem("d", "p2", "What is 3-1?", "2")]
#: Declared sizes (billions) of the two generators and the judge: a sample is charged tokens x its own size.
PARAMS = {"small": 0.5, "big": 7.0}
JUDGE_PARAMS = 1.5


@pytest.fixture
def servers():
    """Three fake servers: the small generator, the big generator, the V1 judge."""
    with ExitStack() as stack:
        yield {name: stack.enter_context(FakeOpenAIServer()) for name in ("small", "big", "judge")}


def route_source(servers, **kw) -> EndpointSource:
    gens = {name: Endpoint(servers[name].url, f"model-{name}", PARAMS[name]) for name in ("small", "big")}
    return EndpointSource(PROBLEMS, gens, {"V1": Endpoint(servers["judge"].url, "judge", JUDGE_PARAMS)},
                          settings=SamplingSettings(n=1, max_tokens=64), max_attempts=1, **kw)


def served_tokens(server: FakeOpenAIServer, k: int) -> int:
    """Prompt + reply tokens of the server's k-th request, by the fake tokenizer."""
    body, reply = server.requests[k], server.responses[k]
    prompt = "\n".join(m["content"] for m in body["messages"])
    return count_tokens(prompt) + count_tokens(reply["choices"][0]["message"]["content"])


def test_each_sample_hits_its_generator_and_is_charged_at_its_size(servers):
    env = LiveEnv(route_source(servers), n_max=4, budget=1000.0, max_output_tokens=64)
    assert env.actions == ["SAMPLE_small", "SAMPLE_big", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP"]
    env.reset(options={"episode": 0})
    plan = ["SAMPLE_small", "SAMPLE_big", "SAMPLE_big", "SAMPLE_small", "SAMPLE_big", "VERIFY_V1", "STOP"]
    for name in plan:
        _, _, done, _, info = env.step(env.layout.action_id(name))
    assert done
    # Which endpoint each SAMPLE hit: the servers' own request logs.
    assert len(servers["small"].requests) == 2 and len(servers["big"].requests) == 3
    assert len(servers["judge"].requests) == 1
    assert {b["model"] for b in servers["small"].requests} == {"model-small"}
    assert {b["model"] for b in servers["big"].requests} == {"model-big"}
    trace = info["trace"].to_list()
    assert [s["action"] for s in trace] == plan
    samples = [s for s in trace if s["action"].startswith("SAMPLE")]
    assert [s["evidence"]["generator"] for s in samples] == ["small", "big", "big", "small", "big"]
    # Costs: the server's tokens x the declared size of the generator that served the call.
    seen = {"small": 0, "big": 0}
    for step in samples:
        g = step["evidence"]["generator"]
        tokens = served_tokens(servers[g], seen[g])
        seen[g] += 1
        assert step["cost"]["tokens"] == tokens
        assert step["cost"]["p_tokens"] == pytest.approx(tokens * PARAMS[g])
        reply = servers[g].responses[seen[g] - 1]["choices"][0]["message"]["content"]
        assert step["evidence"]["answer"] == extract_answer(reply).answer
    verify = trace[-2]
    assert verify["cost"]["p_tokens"] == pytest.approx(served_tokens(servers["judge"], 0) * JUDGE_PARAMS)
    assert info["samples_by_generator"] == {"small": 2, "big": 3}
    for g in PARAMS:
        mine = [s for s in samples if s["evidence"]["generator"] == g]
        assert info["spend_by_generator"][g]["p_tokens"] == pytest.approx(sum(s["cost"]["p_tokens"] for s in mine))
        assert info["spend_by_generator"][g]["calls"] == len(mine)
    assert info["costs"]["p_tokens"] == pytest.approx(sum(s["cost"]["p_tokens"] for s in trace))
    # Clusters across generators: the same ids as clustering the five answers as one list.
    answers = [s["evidence"]["answer"] for s in samples]
    assert [s["evidence"]["cluster"] for s in samples] == cluster_answers(answers)
    assert info["selected_answer"] in answers
    assert info["selected_generator"] == samples[info["selected_candidate"]]["evidence"]["generator"]
    assert info["correct"] is None  # no label live
    calls = info["live"]["calls"]
    assert [c.get("generator") for c in calls[:5]] == ["small", "big", "big", "small", "big"]


@pytest.mark.parametrize("name, chosen", [("route_cheapest_coba", "small"), ("route_largest_coba", "big")])
def test_a_routing_policy_samples_only_the_generator_it_chooses(servers, name, chosen):
    policy = make_policy(name)
    env = LiveEnv(route_source(servers), n_max=4, budget=1000.0, max_output_tokens=64, **policy.env_kwargs())
    assert policy.applicable(env) == (True, "")
    check_selection(policy, env)
    outs = [run_episode(env, policy, e) for e in range(2)]
    other = "big" if chosen == "small" else "small"
    n_samples = sum(o["samples_by_generator"][chosen] for o in outs)
    assert n_samples >= 4  # CoBa warms up with two samples per problem
    assert len(servers[chosen].requests) == n_samples and not servers[other].requests
    assert all(o["samples_by_generator"][other] == 0 for o in outs)
    assert len(servers["judge"].requests) == sum(o["actions"].count("VERIFY_V1") for o in outs)
    for out in outs:
        assert all(a in (f"SAMPLE_{chosen}", "VERIFY_V1", "STOP") for a in out["actions"])
        assert out["selected_generator"] in (chosen, None)


@pytest.mark.parametrize("limits", [Limits(calls=3), Limits(tokens=300), Limits(tokens=500, calls=5)])
def test_random_routing_never_exceeds_the_hard_budgets(servers, limits):
    env = LiveEnv(route_source(servers), n_max=4, budget=1000.0, max_output_tokens=64, limits=limits)
    env.action_space.seed(0)
    for e in range(2):
        before = {k: len(s.requests) for k, s in servers.items()}
        env.reset(options={"episode": e})
        done = False
        while not done:
            _, _, done, _, info = env.step(env.action_space.sample())
        made = {k: list(range(before[k], len(s.requests))) for k, s in servers.items()}
        served = sum(served_tokens(servers[k], i) for k, ids in made.items() for i in ids)
        assert limits.calls is None or sum(map(len, made.values())) <= limits.calls
        assert limits.tokens is None or served <= limits.tokens
        assert info["costs"]["tokens"] == served
        assert info["live"]["stop_reason"].startswith(("budget", "policy"))


def test_token_bounds_hold_for_every_routed_call(servers):
    env = LiveEnv(route_source(servers), n_max=3, budget=1000.0, max_output_tokens=64)
    env.reset(options={"episode": 1})
    for name in ["SAMPLE_big", "SAMPLE_small", "SAMPLE_big", "VERIFY_V1", "VERIFY_V1", "STOP"]:
        _, _, done, _, info = env.step(env.layout.action_id(name))
    for call in info["live"]["calls"]:
        assert call["tokens"] <= call["token_bound"] < math.inf


@pytest.mark.parametrize("generators, actions", [
    (("small",), ["SAMPLE", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP"]),
    (("small", "big"), ["SAMPLE_small", "SAMPLE_big", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP"]),
])
def test_a_live_env_takes_the_layout_its_source_has(servers, generators, actions):
    """One generator: the pair grouping's layout; several: one SAMPLE per generator (the item grouping)."""
    endpoints = {name: Endpoint(servers[name].url, f"model-{name}", PARAMS[name]) for name in generators}
    source = EndpointSource(PROBLEMS, endpoints if len(endpoints) > 1 else endpoints["small"], {})
    env = LiveEnv(source, n_max=2, budget=10.0, max_output_tokens=64)
    assert env.actions == actions
    assert env.config.grouping == ("item" if len(generators) > 1 else "pair")
    assert not any(s.requests for s in servers.values())


class NamedSource(EndpointSource):
    """An endpoint source whose generators carry the names a test gives (EndpointSource itself keys them)."""

    def __init__(self, servers, names: tuple[str, ...]) -> None:
        super().__init__(PROBLEMS, {"a": Endpoint(servers["small"].url, "m", 1.0),
                                    "b": Endpoint(servers["big"].url, "m", 1.0)}, {})
        self.generator_names = names


@pytest.mark.parametrize("setup, match", [
    ("repeated", r"routing needs generators with distinct non-empty names, got \['a', 'a'\]"),
    ("unnamed", r"several generators need non-empty names"),
])
def test_a_live_env_refuses_generators_it_cannot_name(servers, setup, match):
    with pytest.raises(ValueError, match=match):
        if setup == "repeated":
            LiveEnv(NamedSource(servers, ("a", "a")), n_max=2, budget=10.0, max_output_tokens=64)
        else:
            EndpointSource(PROBLEMS, {"": Endpoint(servers["small"].url, "m", 1.0),
                                      "b": Endpoint(servers["big"].url, "m", 1.0)}, {})
    assert not any(s.requests for s in servers.values())


# -------------------------------------------------------------------------------------------------- replay twin
@pytest.fixture(scope="module")
def tiny_route():
    from coba_env import compile_pool
    from coba_env.route_pool import compile_route_pool
    from pools.default import resolve_pool

    compiled = compile_pool(resolve_pool("tiny"))
    return compiled, compile_route_pool(compiled)


def _same_outcome(info_l: dict, info_r: dict) -> None:
    for key in ("actions", "selected_answer", "correct", "samples_by_generator", "selected_generator"):
        assert info_l[key] == info_r[key], key
    assert info_l["costs"] == pytest.approx(info_r["costs"])
    assert info_l["trace"].to_list() == info_r["trace"].to_list()


@pytest.mark.parametrize("name", ["route_cheapest_coba", "route_largest_coba"])
def test_a_routing_policy_live_over_a_cached_pool_equals_route_env_replay(tiny_route, name):
    """Two paths: CoBaEnv (item grouping) reads its compiled rows; LiveEnv fills blank rows call by call."""
    from coba_env import CoBaEnv
    from coba_env.live import PoolReplaySource, replay_normalizers

    compiled, route = tiny_route
    replay_policy, live_policy = make_policy(name), make_policy(name)
    replay = CoBaEnv(compiled, grouping="item", **replay_policy.env_kwargs())
    live = LiveEnv(PoolReplaySource(route), **replay_normalizers(compiled), **live_policy.env_kwargs())
    assert live.actions == replay.actions and live.budget == replay.budget
    assert live_policy.applicable(live) == (True, "")
    for e in range(route.pool.n_episodes):
        _same_outcome(run_episode(live, live_policy, e), run_episode(replay, replay_policy, e))


def test_random_routing_live_over_a_cached_pool_sees_what_route_env_replay_sees(tiny_route):
    import numpy as np

    from coba_env import CoBaEnv
    from coba_env.live import PoolReplaySource, replay_normalizers

    compiled, route = tiny_route
    replay = CoBaEnv(compiled, grouping="item")
    live = LiveEnv(PoolReplaySource(route), **replay_normalizers(compiled))
    rng = np.random.default_rng(0)
    for e in range(route.pool.n_episodes):
        obs_r, info_r = replay.reset(options={"episode": e})
        obs_l, info_l = live.reset(options={"episode": e})
        done = False
        while not done:
            np.testing.assert_array_equal(obs_l, obs_r)
            np.testing.assert_array_equal(info_l["action_mask"], info_r["action_mask"])
            a = int(rng.choice(np.flatnonzero(info_r["action_mask"])))
            obs_r, rew_r, done, _, info_r = replay.step(a)
            obs_l, rew_l, done_l, _, info_l = live.step(a)
            assert rew_l == pytest.approx(rew_r) and done_l == done
        _same_outcome(info_l, info_r)


def test_the_time_budget_cuts_a_slow_routed_call_and_stops():
    with ExitStack() as stack:
        slow = {name: stack.enter_context(FakeOpenAIServer(delay_s=0.4)) for name in ("small", "big", "judge")}
        env = LiveEnv(route_source(slow), n_max=4, budget=1000.0, max_output_tokens=64,
                           limits=Limits(seconds=1.0))
        env.reset(options={"episode": 0})
        turn, done = 0, False
        while not done:  # alternate the generators while they are allowed
            name = ("SAMPLE_small", "SAMPLE_big")[turn % 2]
            a = env.layout.action_id(name)
            if not env.action_masks()[a]:
                a = env.layout.stop_action
            _, _, done, _, info = env.step(a)
            turn += 1
        live = info["live"]
        assert live["stop_reason"].startswith("budget") and "time budget" in live["stop_reason"]
        assert live["spent"]["seconds"] <= 1.0 + 0.05
        assert info["samples_by_generator"] == {"small": 1, "big": 1}  # two 0.4 s calls; the third is cut
        assert live["calls"][-1]["action"] == "SAMPLE_small" and live["calls"][-1]["abandoned"]
        assert len(slow["big"].requests) == 1 and not slow["judge"].requests
