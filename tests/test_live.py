"""LiveEnv: replaying a pool through the live path equals CoBaEnv replay; hard budgets; endpoint sources.

The replay-equivalence tests compare two independent paths (CoBaEnv reading its compiled rows, LiveEnv
filling a blank row from a source call by call); budget tests use hand-made pools whose costs give the
expected stopping point by hand, and the fake server whose token counts are recomputable from its replies.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from agents.registry import make_policy
from agents.runner import make_env, run_episode
from coba_env import CoBaEnv, compile_pool
from coba_env.live import (
    EndpointSource,
    Limits,
    LiveEndpointError,
    LiveEnv,
    PoolReplaySource,
    replay_normalizers,
)
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from pools.default import resolve_pool
from pools.grading import AnswerClusterer, cluster_answers, extract_answer, literal_key
from pools.problems import Problem
from tests.factory import Cand, Ep, build_pool
from tests.fake_openai_server import FakeOpenAIServer, count_tokens

SAMPLE, V1, V2, V3, STOP = range(5)
REPLAY_POLICIES = ["coba_light", "coba_balanced", "coba_strong", "coba_balanced_literal", "bon2_majority",
                   "bon4_majority", "bon8_majority", "greedy", "k_stable_stop", "outcome_evaluator"]


@pytest.fixture(scope="module")
def tiny():
    return compile_pool(resolve_pool("tiny"))


def live_twin(compiled, policy, **kw) -> LiveEnv:
    return LiveEnv(PoolReplaySource(compiled), **replay_normalizers(compiled), **policy.env_kwargs(), **kw)


# -------------------------------------------------------------------------------------------------- (b)
@pytest.mark.parametrize("name", REPLAY_POLICIES)
def test_live_replay_of_a_cached_pool_equals_replay_env(tiny, name):
    policy = make_policy(name)
    replay_env, live_env = make_env(policy, tiny), live_twin(tiny, policy)
    assert isinstance(live_env, CoBaEnv)
    for e in range(tiny.n_episodes):
        a = run_episode(replay_env, policy, e, record=True)
        b = run_episode(live_env, policy, e, record=True)
        assert b["action_ids"] == a["action_ids"], (name, e)
        assert (b["selected_answer"], b["selected_candidate"], b["correct"]) == \
            (a["selected_answer"], a["selected_candidate"], a["correct"])
        assert b["return"] == a["return"] and b["costs"] == a["costs"]
        assert b["trace"].to_list() == a["trace"].to_list()
        np.testing.assert_array_equal(np.array(b["observations"]), np.array(a["observations"]))
        np.testing.assert_array_equal(np.array(b["masks"]), np.array(a["masks"]))
        assert b["live"]["stop_reason"].startswith(("policy", "done"))


def test_live_replay_matches_on_a_hand_made_pool_with_missing_answers_and_scores():
    pool = compile_pool(build_pool([
        Ep([Cand(None, cap_hit=True, scores={"V1": 0.9}), Cand("5", True, scores={"V1": None, "V3": 0.2}),
            Cand("6", scores={"V1": 0.8, "V2": 0.5, "V3": 0.9}), Cand("5", True, scores={"V1": 0.4})]),
        Ep([Cand("1", True, scores={"V1": 0.1, "V3": 0.3}), Cand("2", scores={"V1": 0.95, "V3": None}),
            Cand("2", scores={"V1": 0.9}), Cand("3", scores={"V1": 0.2, "V3": 0.7})], item_id="i1"),
    ]))
    for name in ("coba_balanced", "coba_strong_literal", "bon4_majority"):
        policy = make_policy(name)
        for e in range(pool.n_episodes):
            a = run_episode(make_env(policy, pool), policy, e)
            b = run_episode(live_twin(pool, policy), policy, e)
            assert (b["action_ids"], b["selected_answer"], b["correct"]) == \
                (a["action_ids"], a["selected_answer"], a["correct"])


# -------------------------------------------------------------------------------------------------- clustering
@pytest.mark.parametrize("answers", [
    ["\\frac{1}{2}", "0.5", None, "1/2", "2", " 2 ", "", "x^2", "x**2", "\\frac{1}{2}"],
    ["3", "4", "3", None, "5", "4.0", "three"],
])
@pytest.mark.parametrize("literal", [False, True])
def test_incremental_clusters_equal_clustering_the_whole_list(answers, literal):
    clusterer = AnswerClusterer(literal=literal)
    got = [clusterer.add(a) for a in answers]
    if literal:
        expected = cluster_answers(answers, equivalent=lambda a, b: False, key=literal_key)
    else:
        expected = cluster_answers(answers)
    assert got == expected


# -------------------------------------------------------------------------------------------------- budgets
class FirstLegal:
    """Takes the lowest-numbered legal action other than STOP; STOP only when nothing else is legal."""

    def act(self, obs, mask, evidence) -> int:
        legal = [a for a in range(4) if mask[a]]
        return legal[0] if legal else STOP


def budget_pool():
    # Each candidate: 100 prompt + 1000 output tokens, 10 s; each verification: 50 + 5 tokens, 1 s.
    return compile_pool(build_pool([Ep([Cand(str(k % 2), scores={"V1": 0.5, "V2": 0.5, "V3": 0.5})
                                        for k in range(4)])]))


def play(env, policy):
    obs, info = env.reset(options={"episode": 0})
    while True:
        obs, _, done, _, info = env.step(policy.act(obs, info["action_mask"], env.evidence))
        if done:
            return info


@pytest.mark.parametrize("limits, actions, reason", [
    # 2 samples = 2200 tokens; a third (1100) would pass 2300; one V1 (55) fits, a second would not.
    (Limits(tokens=2300), ["SAMPLE", "SAMPLE", "VERIFY_V1", "STOP"], "tokens"),
    (Limits(calls=3), ["SAMPLE", "SAMPLE", "SAMPLE", "STOP"], "calls"),
    # Simulated seconds: 10 + 10 + 1 = 21 <= 21.5; nothing else fits.
    (Limits(seconds=21.5), ["SAMPLE", "SAMPLE", "VERIFY_V1", "STOP"], "seconds"),
    (Limits(tokens=1000), ["STOP"], "tokens"),
])
def test_hard_budget_masks_every_call_that_could_exceed_it(limits, actions, reason):
    pool = budget_pool()
    env = LiveEnv(PoolReplaySource(pool), **replay_normalizers(pool), limits=limits)
    info = play(env, FirstLegal())
    assert info["actions"] == actions
    assert info["live"]["stop_reason"].startswith("budget") and f"({reason})" in info["live"]["stop_reason"]
    assert info["selected_answer"] == (None if actions == ["STOP"] else "0")


def test_a_call_over_budget_is_refused_with_a_clear_error():
    pool = budget_pool()
    env = LiveEnv(PoolReplaySource(pool), **replay_normalizers(pool), limits=Limits(calls=1))
    env.reset(options={"episode": 0})
    env.step(SAMPLE)
    with pytest.raises(ValueError, match=r"SAMPLE.*could exceed the hard calls budget"):
        env.step(SAMPLE)


@pytest.mark.parametrize("limits", [Limits(tokens=5000), Limits(calls=5), Limits(seconds=30.0),
                                    Limits(tokens=8000, calls=7, seconds=60.0)])
def test_random_policies_never_exceed_the_budget(tiny, limits):
    env = LiveEnv(PoolReplaySource(tiny), **replay_normalizers(tiny), limits=limits)
    env.action_space.seed(0)
    for e in range(tiny.n_episodes):
        env.reset(options={"episode": e})
        done = False
        while not done:
            _, _, done, _, info = env.step(env.action_space.sample())
        cost = info["costs"]
        assert limits.tokens is None or cost["tokens"] <= limits.tokens
        assert limits.calls is None or cost["calls"] <= limits.calls
        assert limits.seconds is None or cost["latency"] <= limits.seconds


@pytest.mark.parametrize("bad, match", [
    (dict(tokens=0), "tokens must be > 0"), (dict(calls=-1), "calls must be > 0"),
    (dict(seconds=0.0), "seconds must be > 0"),
])
def test_bad_limits_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        Limits(**bad)


# -------------------------------------------------------------------------------------------------- endpoints
PROBLEMS = [Problem("d", "p1", "What is 1+1?", "2"), Problem("d", "p2", "What is 3-1?", "2")]


def endpoint_source(url, problems=PROBLEMS, max_tokens=64, **kw):
    ep = lambda model, size: Endpoint(url, model, size)  # noqa: E731
    return EndpointSource(problems, ep("gen", 1.0), {"V1": ep("j1", 0.5), "V2": ep("j2", 0.5), "V3": ep("j3", 2.0)},
                          settings=SamplingSettings(n=1, max_tokens=max_tokens), max_attempts=2, backoff_s=0.01,
                          **kw)


def test_endpoint_source_trace_matches_what_the_server_sent():
    with FakeOpenAIServer() as srv:
        policy = make_policy("coba_strong")
        env = LiveEnv(endpoint_source(srv.url), n_max=8, budget=1000.0, max_output_tokens=64,
                      **policy.env_kwargs())
        for e in range(2):
            before = len(srv.requests)
            out = run_episode(env, policy, e)
            bodies, replies = srv.requests[before:], srv.responses[before:]
            assert len(bodies) == out["costs"]["calls"] == len(out["live"]["calls"]) == len(out["trace"]) - 1
            total = 0
            for step, body, reply in zip(out["trace"], bodies, replies, strict=False):
                text = reply["choices"][0]["message"]["content"]
                prompt = "\n".join(m["content"] for m in body["messages"])
                assert step["cost"]["tokens"] == count_tokens(prompt) + count_tokens(text)
                total += step["cost"]["tokens"]
                if step["action"] == "SAMPLE":
                    assert body["model"] == "gen" and step["evidence"]["answer"] == extract_answer(text).answer
                else:
                    assert body["model"] == {"VERIFY_V1": "j1", "VERIFY_V2": "j2", "VERIFY_V3": "j3"}[step["action"]]
            assert out["costs"]["tokens"] == total
            assert out["correct"] is None  # no label live
            answers = [s["evidence"]["answer"] for s in out["trace"] if s["action"] == "SAMPLE"]
            assert out["selected_answer"] in answers


def test_an_endpoint_source_takes_any_verifiers_by_role():
    """Judges named as a pool names its verifiers, with declared roles: one VERIFY action each (in the order
    given), the needs mapped by role as on a pool (docs/POLICIES.md "Verifier roles": the cheap judge serves V1,
    the reward model V3), and each call goes to that verifier's endpoint."""
    with FakeOpenAIServer() as srv:
        ep = lambda model, size: Endpoint(srv.url, model, size)  # noqa: E731
        source = EndpointSource(PROBLEMS, ep("gen", 1.0), {"rm": ep("rm-7b", 7.0), "judge-s": ep("js", 0.5)},
                                roles={"rm": "reward_model", "judge-s": "cheap_judge"},
                                settings=SamplingSettings(n=1, max_tokens=64), max_attempts=1)
        env = LiveEnv(source, n_max=4, budget=1000.0, max_output_tokens=64)
        assert env.actions == ["SAMPLE", "VERIFY_rm", "VERIFY_judge-s", "STOP"]
        assert env.roles.serving == (1, None, 0)
        env.reset(options={"episode": 0})
        for name in ("SAMPLE", "VERIFY_rm", "VERIFY_judge-s", "STOP"):
            _, _, done, _, info = env.step(env.layout.action_id(name))
        assert done and [b["model"] for b in srv.requests] == ["gen", "rm-7b", "js"]
        tiers = [s["evidence"]["tier"] for s in info["trace"] if s["action"].startswith("VERIFY")]
        assert tiers == ["rm", "judge-s"]
        assert info["trace"][1]["cost"]["p_tokens"] == pytest.approx(info["trace"][1]["cost"]["tokens"] * 7.0)


@pytest.mark.parametrize("judges, roles, match", [
    (("rm",), None, r"verifier\(s\) \['rm'\] have no role; expected roles=\{name: role\} with a role of "
                    r"\['cheap_judge', 'process_judge', 'strong_verifier', 'reward_model'\]"),
    (("SAMPLE_x",), {"SAMPLE_x": "cheap_judge"}, r"verifier name\(s\) \['SAMPLE_x'\] cannot name a VERIFY action"),
    (("V1",), {"V9": "cheap_judge"}, r"roles name verifier\(s\) \['V9'\] without a judge endpoint; the judges are "
                                     r"\['V1'\]"),
    (("rm",), {"rm": "oracle"}, r"unknown verifier role\(s\) \['oracle'\]"),
])
def test_bad_verifiers_of_an_endpoint_source_are_refused(judges, roles, match):
    ep = Endpoint("http://127.0.0.1:9", "m", 1.0)
    with pytest.raises(ValueError, match=match):
        EndpointSource(PROBLEMS, ep, dict.fromkeys(judges, ep), roles=roles)


@pytest.mark.parametrize("limits", [Limits(tokens=900), Limits(tokens=400, calls=6), Limits(calls=3)])
def test_endpoint_budgets_are_never_exceeded(limits):
    with FakeOpenAIServer() as srv:
        policy = make_policy("coba_strong")
        env = LiveEnv(endpoint_source(srv.url), n_max=8, budget=1000.0, max_output_tokens=64, limits=limits,
                      **policy.env_kwargs())
        for e in range(2):
            before = len(srv.requests)
            out = run_episode(env, policy, e)
            served = sum(count_tokens("\n".join(m["content"] for m in b["messages"]))
                         + count_tokens(r["choices"][0]["message"]["content"])
                         for b, r in zip(srv.requests[before:], srv.responses[before:], strict=True))
            assert limits.tokens is None or served <= limits.tokens
            assert limits.calls is None or len(srv.requests) - before <= limits.calls
            assert out["live"]["stop_reason"].startswith(("budget", "policy"))


def test_time_budget_cuts_a_slow_call_and_stops():
    with FakeOpenAIServer(delay_s=0.4) as srv:
        policy = make_policy("coba_balanced")
        env = LiveEnv(endpoint_source(srv.url), n_max=8, budget=1000.0, max_output_tokens=64,
                      limits=Limits(seconds=1.0), **policy.env_kwargs())
        start = time.monotonic()
        out = run_episode(env, policy, 0)
        elapsed = time.monotonic() - start
        assert out["live"]["stop_reason"].startswith("budget") and "time budget" in out["live"]["stop_reason"]
        assert out["live"]["spent"]["seconds"] <= 1.0 + 0.05
        assert elapsed < 1.5  # the abandoned call did not hold the episode past its budget
        assert out["costs"]["calls"] == 2  # two 0.4 s samples completed; the third was cut at 1.0 s
        assert out["live"]["calls"][-1]["abandoned"]


@pytest.mark.parametrize("setup, match", [
    ("unreachable", r"generator endpoint http://127\.0\.0\.1:9 \(model gen\) is not usable: .*cannot connect"),
    ("reject_model", r"generator endpoint .*\(model gen\).*HTTP 404"),
    ("judge_down", r"judge \(V1\) endpoint .*\(model j1\).*HTTP 500"),
])
def test_bad_or_unreachable_endpoints_give_clear_errors(setup, match):
    with FakeOpenAIServer() as srv:
        policy = make_policy("coba_light")
        url = "http://127.0.0.1:9" if setup == "unreachable" else srv.url
        source = endpoint_source(url)
        env = LiveEnv(source, n_max=4, budget=100.0, max_output_tokens=64, **policy.env_kwargs())
        if setup == "reject_model":
            srv.reject_model = "gen"
        if setup == "judge_down":
            srv.fail_after = 2  # the two samples succeed, the V1 call fails for good
        with pytest.raises(LiveEndpointError, match=match):
            if setup == "unreachable":
                source.check_endpoints(timeout_s=2)
            run_episode(env, policy, 0)


def test_token_bound_holds_for_every_call_made():
    with FakeOpenAIServer() as srv:
        policy = make_policy("coba_strong")
        env = LiveEnv(endpoint_source(srv.url), n_max=8, budget=1000.0, max_output_tokens=64,
                      **policy.env_kwargs())
        out = run_episode(env, policy, 0)
        for call in out["live"]["calls"]:
            assert call["tokens"] <= call["token_bound"] < math.inf
