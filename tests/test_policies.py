"""Baselines and the registry: best-of-N against a direct pandas computation, each rule on hand-built
episodes, every registered policy on a mixed pool, not-applicable reporting, user YAML specs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from agents.adaptive import wilson_lower_bound
from agents.registry import (
    POLICY_CLASSES,
    default_bench_policies,
    list_policies,
    load_specs,
    make_policy,
)
from agents.routing_base import is_route_policy
from agents.runner import NotApplicable, make_env, replay, run_episode
from coba_env import CompiledPool, compile_pool
from pools.store import Pool
from tests.factory import Cand, Ep, build_pool

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
QWEN_POOL = SHARED / "data/pools/qwen25-math-rm8/math_cot_100.jsonl"
S, V1, V2, V3, STOP = "SAMPLE", "VERIFY_V1", "VERIFY_V2", "VERIFY_V3", "STOP"


# ---------------------------------------------------------------- best-of-N against pandas
def majority_by_pandas(pool: Pool, n: int) -> pd.DataFrame:
    """Per episode_id: the best-of-n majority pick computed straight from the candidates table."""
    cands = pool.candidates[pool.candidates["candidate"] < n]
    answered = cands[cands["cluster"] >= 0]
    votes = (answered.groupby(["episode_id", "cluster"])["candidate"].agg(["size", "min"]).reset_index()
             .sort_values(["episode_id", "size", "min"], ascending=[True, False, True])
             .drop_duplicates("episode_id"))
    picked = pd.Series(-1, index=pd.Index(sorted(pool.episodes["episode_id"]), name="episode_id"))
    picked[votes["episode_id"].to_numpy()] = votes["min"].to_numpy()
    correct = cands.set_index(["episode_id", "candidate"])["correct"].fillna(False).astype(bool)
    ok = [bool(c >= 0 and correct[(e, c)]) for e, c in picked.items()]
    return pd.DataFrame({"selected": picked, "correct": ok})


def majority_by_env(pool: CompiledPool, n: int, episode_ids: list[int] | None = None) -> pd.DataFrame:
    """Per episode_id: best-of-n replayed through CoBaEnv (on ``episode_ids`` only, if given)."""
    policy = make_policy(f"bon{n}_majority")
    results = replay(policy, make_env(policy, pool, episode_ids=episode_ids))
    assert all(r["actions"] == [S] * n + [STOP] for r in results)
    return pd.DataFrame({"selected": [r["selected_candidate"] for r in results],
                         "correct": [r["correct"] for r in results]},
                        index=pd.Index([r["episode_id"] for r in results], name="episode_id"))


def assert_bon_matches(pool: Pool, ns: tuple[int, ...] = (2, 4, 8, 16), every: int = 1) -> None:
    """Best-of-n through the env equals the pandas pick for each n <= N (on every ``every``-th episode);
    a larger n is reported not applicable."""
    compiled = compile_pool(pool)
    ids = sorted(pool.episodes["episode_id"].tolist())[::every]
    for n in ns:
        if n > pool.n_candidates:
            policy = make_policy(f"bon{n}_majority")
            ok, reason = policy.applicable(make_env(policy, compiled))
            assert not ok and f"N_max = {pool.n_candidates}" in reason
            continue
        expected, got = majority_by_pandas(pool, n).loc[ids], majority_by_env(compiled, n, ids)
        pd.testing.assert_frame_equal(got.sort_index(), expected.sort_index(), check_dtype=False,
                                      obj=f"N={n}")


@pytest.fixture(scope="module")
def tiny_pool() -> Pool:
    from pools.default import resolve_pool

    return resolve_pool("tiny")


@pytest.fixture(scope="module")
def qwen_pool() -> Pool:
    from pools.importers import import_qwen_lists

    return import_qwen_lists(QWEN_POOL, generator="Qwen2.5-Math-7B-Instruct", generator_params_b=7.6)


def test_best_of_n_matches_pandas_on_the_tiny_simulated_pool(tiny_pool):
    assert tiny_pool.n_candidates == 8  # so best-of-16 is reported not applicable there
    assert_bon_matches(tiny_pool)


def test_best_of_n_matches_pandas_on_the_paper_simulated_pool():
    from pools.default import resolve_pool

    pool = resolve_pool("paper")
    assert pool.n_candidates == 16
    assert_bon_matches(pool, every=3)  # 1,043 of the 3,129 episodes, every dataset and generator


def test_best_of_n_matches_pandas_on_the_imported_qwen_pool(qwen_pool):
    assert qwen_pool.n_candidates == 8 and qwen_pool.tiers == ["V3"]
    assert_bon_matches(qwen_pool)


def test_pandas_reference_on_a_hand_built_tie():
    # 8, 7, 7, 8: a 2-2 tie goes to the answer seen first (8, candidate 0); no answer never beats an answer.
    pool = build_pool([Ep([Cand("8"), Cand("7", True), Cand("7", True), Cand("8")]),
                       Ep([Cand(None), Cand(None), Cand("5", True), Cand(None)]),
                       Ep([Cand(None), Cand(None), Cand(None), Cand(None)])])
    expected = majority_by_pandas(pool, 4)
    assert expected["selected"].tolist() == [0, 2, -1]
    assert expected["correct"].tolist() == [False, True, False]
    assert_bon_matches(pool, (2, 4))


# ---------------------------------------------------------------- each baseline's rule by hand
def run(name: str, cands: list[Cand], n: int = 16, **overrides) -> dict:
    """Play policy ``name`` on a one-episode pool holding ``cands`` padded to ``n`` with filler."""
    cands = list(cands) + [Cand("999", scores={"V1": 0.5, "V3": 0.5}) for _ in range(n - len(cands))]
    policy = make_policy(name, **overrides)
    return run_episode(make_env(policy, build_pool([Ep(cands)]), lam=0.0), policy, 0)


def answers(*keys, v1=0.5, v3=0.5) -> list[Cand]:
    return [Cand(k, scores={"V1": v1, "V3": v3}) for k in keys]


def test_greedy_takes_the_first_candidate():
    info = run("greedy", answers("7", "8", "8"))
    assert info["actions"] == [S, STOP] and info["selected_candidate"] == 0


@pytest.mark.parametrize("keys, n_samples", [
    (("7", "7", "9"), 3),  # top answer 7 after samples 1, 2, 3
    (("7", "8", "9"), 3),  # ties go to the answer seen first: 7 tops all three, so three different answers stop
    (("7", "8", "8", "9", "9"), 5),  # tops 7, 7 (tie), 8, 8, 8 (8 and 9 tie, 8 seen first)
])
def test_k_stable_stop_follows_the_top_answer(keys, n_samples):
    info = run("k_stable_stop", answers(*keys))
    assert info["actions"] == [S] * n_samples + [STOP]


@pytest.mark.parametrize("keys, n_samples", [
    (("7", "7", "9"), 3),  # strict leader 7 after samples 1, 2, 3
    (("7", "8", "7", "7", "7"), 5),  # leaders 7, tie, 7, 7, 7: three in a row only at 5
    (("7", "8", "9", "9", "9", "9"), 6),  # leaders 7, tie, tie, 9, 9, 9
])
def test_k_stable_strict_waits_out_ties(keys, n_samples):
    info = run("k_stable_strict", answers(*keys))
    assert info["actions"] == [S] * n_samples + [STOP]


@pytest.mark.parametrize("cands, n_samples, selected", [
    (answers("7", "8", "7"), 3, 0),  # 7 reaches 2 agreeing samples
    ([*answers("7"), Cand(None, cap_hit=True), *answers("7")], 2, 0),  # cap hit with an answer in hand
    ([Cand(None, cap_hit=True), *answers("5", "5")], 3, 1),  # a cap hit with nothing in hand keeps sampling
])
def test_overthinking_stop(cands, n_samples, selected):
    info = run("overthinking_stop", cands)
    assert info["actions"] == [S] * n_samples + [STOP] and info["selected_candidate"] == selected


@pytest.mark.parametrize("keys, v1, total", [
    (("7", "7"), 0.9, 4),  # unanimous and confident: 0 signals
    (("7", "8"), 0.9, 8),  # disagreement only
    (("7", "7"), 0.3, 8),  # low judge confidence only
    (("7", "8"), 0.3, 16),  # both
])
def test_difficulty_adaptive_allocation(keys, v1, total):
    info = run("difficulty_adaptive", answers(*keys, v1=v1))
    assert info["actions"] == [S, S, V1, V1] + [S] * (total - 2) + [STOP]


def test_wilson_lower_bound_by_hand():
    assert wilson_lower_bound(2, 2, 1.0) == pytest.approx(2 / 3)  # (1 + 1/4 - 1/4) / 1.5
    assert wilson_lower_bound(2, 4, 1.0) == pytest.approx((0.625 - math.sqrt(0.078125)) / 1.25)
    assert wilson_lower_bound(3, 4, 1.0) == pytest.approx(0.5)
    assert wilson_lower_bound(0, 0, 1.0) == 0.0


@pytest.mark.parametrize("keys, n_samples", [
    (("7", "7"), 2),  # bound .667 >= .5 at the first check
    (("7", "8", "7", "9", "7", "7", "7", "7"), 8),  # 1/2 -> .21, 2/4 -> .28, 4/6 -> .46, 6/8 -> .58
])
def test_uncertainty_bandit(keys, n_samples):
    info = run("uncertainty_bandit", answers(*keys))
    assert info["actions"] == [S] * n_samples + [STOP]


def test_outcome_evaluator_picks_the_highest_v3_score():
    v3 = [("7", 0.4), ("7", 0.3), ("8", 0.9), ("9", 0.9), ("7", None), ("7", 0.2), ("7", 0.1), ("7", 0.5)]
    cands = [Cand(k, scores={"V3": s}) for k, s in v3]
    info = run("outcome_evaluator", cands)
    assert info["actions"] == [S] * 8 + [V3] * 8 + [STOP]
    assert info["selected_candidate"] == 2  # .9 twice: the earlier candidate


def test_process_outcome_evaluator_fuses_s2_and_s3_only():
    # R = (.15 s2 + .45 s3) / (.15 + .45) where V2 is usable, s3 alone otherwise:
    # c0 = (.135 + .225) / .6 = .60; c1 = .65 (no V2 row); c2 = .62 (V2 unparsed); the rest .1.
    cands = [Cand("7", scores={"V1": 0.99, "V2": 0.9, "V3": 0.5}), Cand("8", scores={"V3": 0.65}),
             Cand("9", scores={"V2": None, "V3": 0.62})] + [Cand("7", scores={"V3": 0.1}) for _ in range(5)]
    info = run("process_outcome_evaluator", cands)
    assert info["actions"] == [S] * 8 + [V2, V2] + [V3] * 8 + [STOP]
    assert info["selected_candidate"] == 1


def test_self_eval_weighted_votes_with_judge_scores():
    # "7": 3 x .2 + 2 x .1 = .8; "8": .9 + .8 = 1.7; "9": unparsed judge score counts .5, plus .3 = .8.
    scores = [("7", 0.2), ("8", 0.9), ("7", 0.2), ("9", None), ("7", 0.2), ("8", 0.8), ("9", 0.3),
              ("7", 0.1), ("7", 0.1), (None, 0.99)]
    info = run("self_eval_weighted", [Cand(k, scores={"V1": s}) for k, s in scores])
    # The last candidate has no answer: it can never be selected, so the env never spends a judge call on it.
    assert info["actions"] == [S] * 10 + [V1] * 9 + [STOP]
    assert info["selected_candidate"] == 1


@pytest.mark.parametrize("cands, n_samples, selected", [
    (answers("7", "8"), 1, 0),  # finished first try
    ([Cand(None, cap_hit=True), *answers("8")], 2, 1),  # "Wait": continue once
    ([Cand("7", cap_hit=True), *answers("8")], 2, 1),  # a capped answer is also continued
    ([Cand("7", cap_hit=True), Cand(None, cap_hit=True)], 2, 0),  # the continuation gave nothing: keep 7
])
def test_s1_budget_forcing(cands, n_samples, selected):
    info = run("s1_budget_forcing", cands)
    assert info["actions"] == [S] * n_samples + [STOP] and info["selected_candidate"] == selected


@pytest.mark.parametrize("correct_at, n_samples, correct", [(None, 1, False), (0, 1, True), (3, 4, True)])
def test_pool_oracle_reveals_up_to_the_first_correct_candidate(correct_at, n_samples, correct):
    cands = [Cand(str(i), correct=i == correct_at) for i in range(6)]
    info = run("pool_oracle", cands, n=6)
    assert info["actions"] == [S] * n_samples + [STOP] and info["correct"] is correct
    assert info["selected_candidate"] == n_samples - 1


# ---------------------------------------------------------------- every registered policy
def mixed_pool() -> Pool:
    """Four N = 16 episodes: agreement, disagreement with no-answers and cap hits, sparse V2, NaN scores."""
    def c(k, i, correct=False, cap=False):
        v2 = {"V2": (None if i % 3 else 0.6)} if i < 2 else {}
        return Cand(k, correct, cap_hit=cap, output_tokens=4000 if cap else 900 + 37 * i,
                    scores={"V1": None if i == 5 else (0.3 + 0.04 * i) % 1, "V3": (0.9 - 0.05 * i) % 1, **v2})
    mixed = [str(i % 5) if i % 4 else None for i in range(16)]  # every 4th has no answer and hit the cap
    eps = [
        Ep([c("7", i, True) for i in range(16)], item_id="easy"),
        Ep([c(k, i, k == "3", cap=k is None) for i, k in enumerate(mixed)], item_id="mixed"),
        Ep([c(None, i, cap=True) for i in range(3)] + [c("2", i, True) for i in range(3, 16)],
           item_id="late"),
        Ep([c(None, i, cap=True) for i in range(16)], item_id="empty"),
    ]
    return build_pool(eps)


#: Policies of the replay env (the routing group runs on coba/Route-v0: tests/test_route_env.py).
REPLAY_POLICIES = [name for name in load_specs() if not is_route_policy(make_policy(name))]


@pytest.mark.parametrize("name", REPLAY_POLICIES)
def test_every_registered_policy_yields_a_valid_selection(name):
    policy = make_policy(name)
    env = make_env(policy, mixed_pool())
    assert policy.applicable(env) == (True, "")
    for info in replay(policy, env):
        revealed = info["actions"].count(S)
        assert 1 <= revealed <= 16 and info["actions"][-1] == STOP and len(info["actions"]) <= env.max_steps
        sel = info["selected_candidate"]
        clusters = env.pool.cluster[info["episode"], :revealed].tolist()
        if sel >= 0:
            assert sel < revealed and clusters[sel] >= 0
        else:
            assert all(k < 0 for k in clusters)
    assert policy.describe()["name"] == name and "params" in policy.describe()


def test_policies_needing_a_missing_tier_are_reported_not_applicable():
    pool = build_pool([Ep([Cand("7", scores={"V1": 0.8}) for _ in range(16)])])  # V1 only: no V2, no V3
    # A cheap judge is no strong verifier (docs/POLICIES.md, "Verifier roles"): only the evaluators that
    # need one are refused; CoBa runs without routes.
    expected = {"outcome_evaluator", "process_outcome_evaluator"}
    skipped = {}
    for name in REPLAY_POLICIES:
        policy = make_policy(name)
        ok, reason = policy.applicable(make_env(policy, pool))
        if not ok:
            skipped[name] = reason
    assert set(skipped) == expected
    assert all("V3" in why for why in skipped.values())
    policy = make_policy("outcome_evaluator")
    with pytest.raises(NotApplicable, match=r"'outcome_evaluator' is not applicable: needs a strong verifier \(V3"):
        replay(policy, make_env(policy, pool))


def test_replay_refuses_an_env_with_another_selection_rule():
    policy = make_policy("bon4_majority")
    with pytest.raises(ValueError, match="needs selection"):
        replay(policy, make_env(make_policy("coba_light"), mixed_pool()))


# ---------------------------------------------------------------- registry
def test_names_match_the_paper_table_and_bench_keeps_table_order():
    targets = json.loads((SHARED / "reference/paper-targets.json").read_text())
    assert default_bench_policies() == list(targets["main_table"]["rows"])
    assert list_policies("coba") == ["coba_light", "coba_balanced", "coba_strong", "coba_light_literal",
                                     "coba_balanced_literal", "coba_strong_literal"]
    assert list_policies("oracle") == ["pool_oracle", "route_pool_oracle", "route_cost_aware_oracle"]
    assert set(list_policies()) == set(targets["main_table"]["rows"]) | {
        "bon2_majority", "self_consistency", "k_stable_strict", "uncertainty_bandit", "outcome_evaluator",
        "process_outcome_evaluator", "s1_budget_forcing", "coba_light_literal", "coba_balanced_literal",
        "coba_strong_literal", "route_cheapest_coba", "route_largest_coba", "route_cascade", "model_switch",
        "route_threshold_judge", "route_threshold_agreement", "route_pool_oracle", "route_cost_aware_oracle"}
    assert list_policies("routing") == ["route_cheapest_coba", "route_largest_coba", "route_cascade",
                                        "model_switch", "route_threshold_judge", "route_threshold_agreement"]
    assert [n for n in list_policies() if make_policy(n).uses_labels] == ["pool_oracle", "route_pool_oracle",
                                                                          "route_cost_aware_oracle"]


def test_unknown_names_raise_with_the_known_ones():
    known = r"unknown policy 'bon3_majority'; known policies: greedy, coba_light, difficulty_adaptive,"
    with pytest.raises(ValueError, match=known):
        make_policy("bon3_majority")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['nn'\] for policy kind 'best_of_n'"):
        make_policy("bon4_majority", nn=3)
    with pytest.raises(ValueError, match="unknown policy group 'fancy'"):
        list_policies("fancy")


def test_self_consistency_is_best_of_16():
    sc, bon16 = make_policy("self_consistency"), make_policy("bon16_majority")
    assert (sc.kind, sc.params, sc.selection) == (bon16.kind, bon16.params, bon16.selection)
    assert sc.name == "self_consistency" and sc.label == "Self-consistency"


def test_a_user_yaml_defines_a_new_coba_variant_without_code(tmp_path):
    user = tmp_path / "mine.yaml"
    user.write_text("policies:\n"
                    "  coba_n6_k3: {kind: coba, label: CoBa N6 K3, params: {n_max: 6, strong_routes: 3}}\n"
                    "  bon8_majority: {params: {n: 6}}\n")
    specs = load_specs(user)
    assert list(specs)[-1] == "coba_n6_k3" and "coba_n6_k3" not in default_bench_policies(specs=specs)
    assert make_policy("bon8_majority", specs=specs).n == 6  # a built-in entry's params merged over
    policy = make_policy("coba_n6_k3", specs=user)
    assert (policy.n_max, policy.strong_routes, policy.warmup_k) == (6, 3, 2)
    assert policy.requires_tiers == ("V1", "V3") and policy.label == "CoBa N6 K3"
    # Six disagreeing answers: expand to N_max = 6, then route 3 to V3.
    info = run_episode(make_env(policy, build_pool([Ep(answers(*"123456", "7", "8"))])), policy, 0)
    assert info["actions"].count(S) == 6 and info["actions"].count(V3) == 3 and info["actions"][-1] == STOP


@pytest.mark.parametrize("text, match", [
    ("p: {kind: nope}\n", r"unknown kind 'nope'"),
    ("p: {kind: coba, params: {n_max: 3}, extra: 1}\n", r"unknown key\(s\) \['extra'\]"),
    ("p: {kind: coba, group: baseline}\n", r"group 'baseline' does not match kind 'coba'"),
    ("- a\n- b\n", "expected a mapping of policy name"),
])
def test_bad_user_specs(tmp_path, text, match):
    user = tmp_path / "bad.yaml"
    user.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_specs(user)


def test_every_kind_is_used_by_a_builtin_policy():
    kinds = {"coba", "best_of_n", "k_stable", "overthinking", "s1_budget_forcing", "difficulty_adaptive",
             "uncertainty_bandit", "outcome_evaluator", "process_outcome_evaluator", "self_eval_weighted",
             "pool_oracle", "route_coba", "route_cascade", "model_switch", "route_threshold", "route_pool_oracle",
             "route_cost_aware_oracle"}
    assert {s["kind"] for s in load_specs().values()} == kinds and kinds <= set(POLICY_CLASSES)
