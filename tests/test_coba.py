"""CoBa routing (Algorithm 1): each branch on hand-built pools, exact action sequences and fusion by hand."""

from __future__ import annotations

import numpy as np
import pytest

from agents.coba import CoBaPolicy
from agents.registry import make_policy
from agents.runner import make_env, run_episode
from tests.factory import Cand, Ep, build_pool

S, V1, V2, V3, STOP = "SAMPLE", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP"
ABSENT = "absent"


def cand(answer, v1=0.5, v3=0.5, v2=ABSENT, correct=False):
    """A candidate with V1 and V3 scores and, unless ABSENT, a V2 row (None = a V2 call without a score)."""
    scores = {"V1": v1, "V3": v3}
    if v2 != ABSENT:
        scores["V2"] = v2
    return Cand(answer, correct, scores=scores)


def pad(cands, n=8):
    """Fill an episode up to N candidates with never-revealed filler."""
    return list(cands) + [cand("999") for _ in range(n - len(cands))]


def play(name, episodes, **env_kwargs):
    """Run policy ``name`` on episode 0 of a pool built from ``episodes``: (steps, info, final evidence)."""
    policy = make_policy(name)
    env = make_env(policy, build_pool(episodes), lam=0.0, **env_kwargs)
    info = run_episode(env, policy, 0)
    steps = [(r["action"], r["candidate"]) for r in info["trace"]]
    return steps, info, env.evidence


def fusion(f, s1=None, s2=None, s3=None):
    """Paper Eq. 3 by hand: .20 f + .30 s1 + .15 s2 + .45 s3 over the evidence present, renormalized."""
    terms = [(0.20, f), (0.30, s1), (0.15, s2), (0.45, s3)]
    present = [(w, x) for w, x in terms if x is not None]
    return sum(w * x for w, x in present) / sum(w for w, _ in present)


def test_early_stop_when_warmup_agrees_and_cheap_judge_is_confident():
    # Warm-up answers 7, 7 (share 1.0 >= 0.6) with V1 .9 and .8 (mean .85 >= 0.7): no extra sample.
    # Both warm-up candidates have a V2 row (one unparsed), so V2 runs twice; K = 4 but only 2 can be routed.
    # Routing order after V2: R(c0) = (.2 + .27 + .09)/.65 = .862 < R(c1) = (.2 + .24)/.50 = .88 -> c1 first.
    ep = Ep(pad([cand("7", v1=0.9, v2=0.6, v3=0.8, correct=True),
                 cand("7", v1=0.8, v2=None, v3=0.7, correct=True), cand("8", v1=0.99, v3=0.99)]))
    steps, info, ev = play("coba_strong_literal", [ep])
    assert steps == [(S, 0), (S, 1), (V1, 0), (V1, 1), (V2, 0), (V2, 1), (V3, 1), (V3, 0), (STOP, -1)]
    r0 = fusion(1.0, 0.9, 0.6, 0.8)  # (.2 + .27 + .09 + .36) / 1.10 = .83636
    r1 = fusion(1.0, 0.8, None, 0.7)  # unparsed V2 drops out: (.2 + .24 + .315) / .95 = .79474
    assert r0 == pytest.approx(0.83636, abs=1e-5) and r1 == pytest.approx(0.79474, abs=1e-5)
    assert ev.fusion(0) == pytest.approx(r0) and ev.fusion(1) == pytest.approx(r1)
    assert info["selected_candidate"] == 0 and info["selected_answer"] == "7" and info["correct"]


def test_expansion_to_n_max_then_top2_routing_by_fusion_rank():
    # Answers 7, 8, 9, 7: the top share never reaches 0.6 (.5, .33, .5), so Balanced samples up to N_max = 4.
    # Pre-V3 ranks (f, s1; no V2 anywhere): c0 (.5,.5) -> .50, c1 (.25,.95) -> .67, c2 (.25,.6) -> .46,
    # c3 (.5,.55) -> .53. The top 2 are c1, then c3.
    ep = Ep(pad([cand("7", v1=0.5, v3=0.2), cand("8", v1=0.95, v3=0.9, correct=True),
                 cand("9", v1=0.6, v3=0.3), cand("7", v1=0.55, v3=0.4)]))
    steps, info, ev = play("coba_balanced_literal", [ep])
    assert steps == [(S, 0), (S, 1), (V1, 0), (V1, 1), (S, 2), (V1, 2), (S, 3), (V1, 3), (V3, 1), (V3, 3),
                     (STOP, -1)]
    expected = [fusion(0.5, 0.5), fusion(0.25, 0.95, s3=0.9), fusion(0.25, 0.6), fusion(0.5, 0.55, s3=0.4)]
    assert expected == pytest.approx([0.50, 0.77895, 0.46, 0.46842], abs=1e-5)
    assert [ev.fusion(c) for c in range(4)] == pytest.approx(expected)
    # The strong verifier overturns the 2-vote majority answer 7.
    assert info["selected_candidate"] == 1 and info["selected_answer"] == "8" and info["correct"]


def test_expansion_stops_as_soon_as_the_answer_is_stable():
    # Warm-up 7, 8 (share .5): sample; 7, 8, 7 gives share .667 >= .6 and mean V1 of "7" = (.8 + .7)/2 = .75.
    ep = Ep(pad([cand("7", v1=0.8, v3=0.9), cand("8", v1=0.9, v3=0.1), cand("7", v1=0.7, v3=0.8)]))
    steps, info, _ = play("coba_strong_literal", [ep])
    # Routing order: R(c0) = (.2*2/3 + .3*.8)/.5 = .747, R(c1) = (.2/3 + .27)/.5 = .673,
    # R(c2) = (.2*2/3 + .21)/.5 = .687, so V3 goes to c0, c2, c1 (K = 4, only 3 candidates).
    # Final: R(c0) = (.3733 + .405)/.95 = .819 beats c2 (.740) and c1 (.402).
    assert steps == [(S, 0), (S, 1), (V1, 0), (V1, 1), (S, 2), (V1, 2), (V3, 0), (V3, 2), (V3, 1), (STOP, -1)]
    assert info["selected_candidate"] == 0


def test_agreeing_warmup_with_low_cheap_score_still_expands():
    # 7, 7 agree but the mean V1 score is .55 < .7: sample; a third 7 keeps the mean at (.5+.6+.9)/3 = .667;
    # the fourth (V1 .95) lifts it to .7375 -> stable at n = 4 (before Strong's N_max = 8).
    ep = Ep(pad([cand("7", v1=0.5), cand("7", v1=0.6), cand("7", v1=0.9), cand("7", v1=0.95)]))
    steps, _, _ = play("coba_strong_literal", [ep])
    assert [a for a, _ in steps] == [S, S, V1, V1, S, V1, S, V1, V3, V3, V3, V3, STOP]


def test_v2_only_on_warmup_candidates_and_fusion_renormalizes_missing_v2():
    # Every candidate has a V2 row, but V2 belongs to the warm-up phase only (paper Appendix A).
    ep = Ep([cand("3", v1=0.4, v2=0.2, v3=0.3), cand("4", v1=0.6, v2=0.9, v3=0.95),
             cand("3", v1=0.3, v2=0.8, v3=0.2), cand("5", v1=0.9, v2=0.7, v3=0.1)])
    steps, info, ev = play("coba_balanced_literal", [ep])
    # Warm-up V2 target order: after V1, R(c0) = (.1 + .12)/.5 = .44 < R(c1) = (.1 + .18)/.5 = .56: c1 first.
    assert steps[:6] == [(S, 0), (S, 1), (V1, 0), (V1, 1), (V2, 1), (V2, 0)]
    assert [a for a, _ in steps].count(V2) == 2
    # At n = 3 the top answer "3" holds 2/3 >= .6 but its mean V1 is (.4 + .3) / 2 = .35 < .7: sample again.
    # Final f: "3" = 2/4, "4" = 1/4, "5" = 1/4. Pre-V3 ranks: c0 (.5,.4,.2) = .25/.65 = .385, c1 (.25,.6,.9)
    # = .365/.65 = .562, c2 (.5,.3) = .19/.5 = .38, c3 (.25,.9) = .32/.5 = .64 -> V3 on c3, then c1.
    assert steps[6:] == [(S, 2), (V1, 2), (S, 3), (V1, 3), (V3, 3), (V3, 1), (STOP, -1)]
    expected = [fusion(0.5, 0.4, 0.2), fusion(0.25, 0.6, 0.9, 0.95), fusion(0.5, 0.3),
                fusion(0.25, 0.9, s3=0.1)]
    assert expected == pytest.approx([0.25 / 0.65, 0.7925 / 1.1, 0.38, 0.365 / 0.95])
    assert [ev.fusion(c) for c in range(4)] == pytest.approx(expected)
    # c1 (.720, V2 and V3 present) beats c0 (.385, V2 but no V3), c3 (.384) and c2 (.38, V1 only).
    assert info["selected_candidate"] == 1 and info["selected_answer"] == "4"


@pytest.mark.parametrize("v1", [(0.4, 0.6), (0.9, 0.95)])
def test_light_never_expands_nor_routes(v1):
    ep = Ep(pad([cand("7", v1=v1[0], v3=0.99), cand("8", v1=v1[1], v3=0.0)]))
    steps, info, _ = play("coba_light_literal", [ep])
    assert steps == [(S, 0), (S, 1), (V1, 0), (V1, 1), (STOP, -1)]
    # Fusion on f = .5 each and s1 alone: the higher V1 score wins (R = (.1 + .3 s1) / .5).
    assert info["selected_candidate"] == 1


def test_light_calls_v2_on_its_warmup_when_present():
    ep = Ep(pad([cand("7", v1=0.9, v2=0.5), cand("7", v1=0.9, v2=None)]))
    steps, _, _ = play("coba_light_literal", [ep])
    assert [a for a, _ in steps] == [S, S, V1, V1, V2, V2, STOP]


def test_spent_budget_ends_expansion_and_routing():
    # Generation costs (100 + 1000 tokens) x 10 B = 11,000 p-tokens per sample; a judge call is 55 x 2 = 110.
    # max_cost = 22,220 is spent after the warm-up and its two V1 calls: only STOP remains legal.
    ep = Ep(pad([cand("7", v1=0.1), cand("8", v1=0.2)]))
    steps, _, _ = play("coba_strong_literal", [ep], cost_model="p_tokens", max_cost=22_220)
    assert [a for a, _ in steps] == [S, S, V1, V1, STOP]


def test_requires_tiers_and_parameters():
    assert make_policy("coba_light").requires_tiers == ("V1",)
    assert make_policy("coba_balanced").requires_tiers == ("V1", "V3")
    strong = make_policy("coba_strong")
    params = (strong.warmup_k, strong.n_max, strong.strong_routes, strong.share_min, strong.s1_min)
    assert params == (2, 8, 4, 0.6, 0.7)
    assert strong.describe()["params"]["n_max"] == 8
    assert strong.selection["weights"] == {"f": 0.20, "V1": 0.30, "V2": 0.15, "V3": 0.45}
    with pytest.raises(ValueError, match="unknown parameter"):
        CoBaPolicy(n_maxx=3)


def test_without_v3_every_variant_runs_and_routes_nothing():
    """A cheap judge is no strong verifier (docs/POLICIES.md, 'Verifier roles'): no V3 route, still CoBa."""
    pool = build_pool([Ep([Cand("7", scores={"V1": 0.9}), Cand("7", scores={"V1": 0.8})])])
    for name in ("coba_light", "coba_balanced", "coba_strong_literal"):
        policy = make_policy(name)
        env = make_env(policy, pool)
        assert policy.applicable(env) == (True, "")
        # share 2/2 and mean V1 .85 >= .7: stable after the warm-up; no strong verifier to route to
        assert run_episode(env, policy, 0)["actions"] == [S, S, V1, V1, STOP]


def test_skip_unanimous_routes_saves_v3_only_when_one_answer_is_left():
    unanimous = Ep(pad([cand("7", v1=0.9, v3=0.1), cand("7", v1=0.8, v3=0.9)]))
    split = Ep(pad([cand("7", v1=0.9), cand("8", v1=0.9), cand("7", v1=0.9)]))
    for ep, routes in ((unanimous, 0), (split, 3)):
        policy = make_policy("coba_strong", skip_unanimous_routes=True)
        literal = make_policy("coba_strong_literal")
        pool = build_pool([ep])
        info = run_episode(make_env(policy, pool), policy, 0)
        base = run_episode(make_env(literal, pool), literal, 0)
        assert info["actions"].count(V3) == routes
        assert [a for a in info["actions"] if a != V3] == [a for a in base["actions"] if a != V3]
        assert info["selected_answer"] == base["selected_answer"]


def test_unanimous_skip_selects_the_same_answers_as_literal_algorithm_on_the_paper_pool():
    """The registry's CoBa variants skip V3 routes when one answer is left; answers must not change."""
    from coba_env import compile_pool
    from eval.runner import run_policy
    from pools.default import resolve_pool

    compiled = compile_pool(resolve_pool("paper"))
    for variant in ("coba_balanced", "coba_strong"):
        fast = run_policy(make_policy(variant), compiled)
        literal = run_policy(make_policy(f"{variant}_literal"), compiled)
        # Same answer cluster (the written form of the answer may differ between candidates of one cluster).
        rows = np.arange(compiled.n_episodes)
        fast_cluster = compiled.cluster[rows, fast["selected_candidate"].to_numpy()]
        literal_cluster = compiled.cluster[rows, literal["selected_candidate"].to_numpy()]
        assert (fast_cluster == literal_cluster).all()
        assert (fast["correct"] == literal["correct"]).all()
        assert fast["n_samples"].equals(literal["n_samples"])
        assert fast["calls"].sum() < literal["calls"].sum()
