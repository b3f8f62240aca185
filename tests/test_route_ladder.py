"""The generalized consistency cascade (``route_ladder``): the cascade at its default point, hand-worked episodes
for every setting, batched == single on the paper pool, refused parameters."""

from __future__ import annotations

import numpy as np
import pytest

from agents.configured import POLICY_CLASSES
from agents.registry import make_policy
from agents.routing_ladder import LadderCascadePolicy
from agents.runner import run_episode
from coba_env.compiled import as_compiled
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv
from eval.batched_replay import replay_batched
from eval.runner import run_policies
from tests.factory import Cand, Ep, build_pool
from tests.test_route_env import MODELS, assert_batched_equals_single, two_generator_pool


def route_env(pool, **kwargs):
    """The one-episode env over ``pool``'s items with all their generators (``coba/Route-v0``)."""
    return CoBaEnv(pool, grouping="item", **kwargs)


def route_venv(num_envs, pool, **kwargs):
    """The vector env over ``pool``'s items with all their generators."""
    return CoBaVectorEnv(num_envs, pool, grouping="item", **kwargs)


#: The training datasets of the outer fold with aime2025 held out (no test here replays aime2025).
TRAINING_SIDE = ["math500", "aime2024", "amc2023", "rgym_hard"]


def paper_problems(per_dataset: int) -> object:
    """The paper pool's first ``per_dataset`` problems of each training-side dataset, every generator of each."""
    paper = as_compiled("paper")
    keep = np.zeros(paper.n_episodes, dtype=bool)
    for d in TRAINING_SIDE:
        rows = np.flatnonzero(paper.dataset == d)
        items = list(dict.fromkeys(paper.item_id[rows].tolist()))[:per_dataset]
        keep |= (paper.dataset == d) & np.isin(paper.item_id, items)
    return paper.select(keep)


def three_sample_pool():
    """One problem, gold "5": small answers "1", "2", "1" (wrong; 100 p_tokens each, V1 0.2, 0.9, 0.9);
    big answers "5" three times (right; 2000 p_tokens each)."""
    small = [Cand(a, False, prompt_tokens=50, output_tokens=50, scores={"V1": s})
             for a, s in (("1", 0.2), ("2", 0.9), ("1", 0.9))]
    big = [Cand("5", True, prompt_tokens=100, output_tokens=100, scores={"V1": 0.8}) for _ in range(3)]
    return build_pool([Ep(small, generator="small", gold="5"), Ep(big, generator="big", gold="5")], models=MODELS)


def play(pool, **params):
    """One episode of the ladder with ``params``: (action names, final info)."""
    policy = LadderCascadePolicy(**params)
    env = route_env(pool, budget=1000.0, **policy.env_kwargs())
    assert policy.applicable(env) == (True, "")
    info = run_episode(env, policy, 0)
    return [env.layout.names[a] for a in info["action_ids"]], info


S, B, J = "SAMPLE_small", "SAMPLE_big", "VERIFY_V1"
# two_generator_pool: small "0.5" (right, V1 0.2), "7" (V1 0.9), 100 p_tokens each; big "\frac{1}{2}" (right),
# "7", 2000 each; a V1 call 110 p_tokens. 0.5 and \frac{1}{2} are one answer.
HAND_WORKED = [
    # the defaults are the cascade's: small disagrees -> big once; its answer (slot 2)
    ("two", {}, [S, S, B, "STOP"], 2, True, 2200.0),
    # small skipped: big once
    ("two", {"rung_k": [0]}, [B, "STOP"], 0, True, 2000.0),
    # judge 0.2 between the thresholds: on as the cascade, plus the call
    ("two", {"judge": True, "judge_accept": 0.9, "judge_escalate": 0.1}, [S, J, S, B, "STOP"], 2, True, 2310.0),
    # judge 0.2 >= 0.2: small's first answer accepted
    ("two", {"judge": True, "judge_accept": 0.2}, [S, J, "STOP"], 0, True, 210.0),
    # judge 0.2 < 0.3: small left after one sample
    ("two", {"judge": True, "judge_accept": 0.9, "judge_escalate": 0.3}, [S, J, B, "STOP"], 1, True, 2210.0),
    # big twice, majority: 0.5|1/2 (2) ties 7 (2): the first seen, slot 0
    ("two", {"final_k": 2, "answer": "majority"}, [S, S, B, B, "STOP"], 0, True, 4200.0),
    # k 3, 2 votes: the third sample makes "1" twice: accepted; last = slot 2, wrong
    ("three", {"rung_k": [3]}, [S, S, S, "STOP"], 2, False, 300.0),
    # k 3, 3 votes: small never reaches them; big once
    ("three", {"rung_k": [3], "votes": 3}, [S, S, S, B, "STOP"], 3, True, 2300.0),
    # ... and with early escalation it leaves small once 1 + 1 remaining < 3 votes
    ("three", {"rung_k": [3], "votes": 3, "early_escalate": True}, [S, S, B, "STOP"], 2, True, 2200.0),
    # big three times: last (slot 4) or majority ("5", first at slot 2)
    ("three", {"rung_k": [3], "votes": 3, "early_escalate": True, "final_k": 3}, [S, S, B, B, B, "STOP"], 4, True,
     6200.0),
    ("three", {"rung_k": [3], "votes": 3, "early_escalate": True, "final_k": 3, "answer": "majority"},
     [S, S, B, B, B, "STOP"], 2, True, 6200.0),
]


@pytest.mark.parametrize(("pool", "params", "actions", "selected", "correct", "p_tokens"), HAND_WORKED,
                         ids=[f"{c[0]}{c[1]}" for c in HAND_WORKED])
def test_hand_worked_ladder_episode(pool, params, actions, selected, correct, p_tokens):
    names, info = play(two_generator_pool() if pool == "two" else three_sample_pool(), **params)
    assert names == actions
    assert info["selected_candidate"] == selected and info["correct"] is correct
    assert info["costs"]["p_tokens"] == p_tokens


def test_the_default_point_replays_as_the_registered_cascade():
    """On the paper pool's route episodes the ladder's defaults take route_cascade's every decision."""
    pool = paper_problems(60)
    run = run_policies([LadderCascadePolicy(name="ladder"), make_policy("route_cascade")], pool, grouping="item",
                       progress=False)
    mine, ref = (run.records[run.records["policy"] == n].reset_index(drop=True) for n in ("ladder", "route_cascade"))
    cols = ["item_id", "actions", "selected_candidate", "correct", "p_tokens"]
    assert len(ref) == 60 + 30 + 40 + 60 and mine[cols].equals(ref[cols])


BATCH_CASES = [
    {},
    {"rung_k": [3, 1], "final_k": 2, "early_escalate": True, "judge": True, "judge_accept": 0.8,
     "judge_escalate": 0.3, "answer": "majority"},
    {"rung_k": [0, 3], "votes": 3, "final_k": 3, "judge": True, "judge_accept": 0.9, "judge_escalate": 0.1},
    {"rung_k": [1, 0], "judge": True, "judge_accept": 0.7, "judge_escalate": 0.2},
    {"rung_k": [4, 4], "votes": 3, "early_escalate": True},
]


@pytest.mark.parametrize("params", BATCH_CASES, ids=[str(p) for p in BATCH_CASES])
def test_batched_equals_single_on_paper_route_episodes(params):
    pool = paper_problems(40)
    policy = LadderCascadePolicy(**params)
    env = route_env(pool, **policy.env_kwargs())
    assert policy.applicable(env) == (True, "")
    single = [run_episode(env, policy, i) for i in range(env.n_episodes)]
    venv = route_venv(97, pool, **policy.env_kwargs())  # rows refill mid-run: 97 does not divide 150
    batched = replay_batched(LadderCascadePolicy(**params), venv)
    assert_batched_equals_single(single, batched, env.layout.names)
    if params.get("judge"):  # the judge was called somewhere
        assert any(env.layout.names[a] == "VERIFY_V1" for r in single for a in r["action_ids"])


@pytest.mark.parametrize(("params", "match"), [
    ({"k": -1}, r"k must be an integer >= 0"),
    ({"k": 1.5}, r"expected an integer"),
    ({"rung_k": [2, -1]}, r"rung_k must be a list of integers >= 0"),
    ({"rung_k": "22"}, r"rung_k must be a list of integers >= 0"),
    ({"rung_k": [2, True]}, r"rung_k must be a list of integers >= 0"),
    ({"votes": 1}, r"votes must be >= 2"),
    ({"final_k": 0}, r"final_k must be >= 1"),
    ({"judge_accept": 1.5}, r"judge_escalate <= judge_accept <= 1"),
    ({"judge_accept": 0.3, "judge_escalate": 0.5}, r"judge_escalate <= judge_accept"),
    ({"judge_escalate": -0.1}, r"0 <= judge_escalate"),
    ({"answer": "fusion"}, r"answer must be one of \['last', 'majority'\]"),
    ({"judge_accept": float("nan")}, r"expected a finite number"),
    ({"rungs": [2]}, r"unknown parameter\(s\) \['rungs'\]"),
])
def test_bad_ladder_parameters_are_refused(params, match):
    with pytest.raises(ValueError, match=match):
        POLICY_CLASSES["route_ladder"](**params)


def test_rung_k_must_match_the_pools_ladder():
    policy = LadderCascadePolicy(rung_k=[2, 2])
    ok, why = policy.applicable(route_env(two_generator_pool()))
    assert not ok and why == "rung_k has 2 entries; the pool's ladder has 1 rungs below its largest generator"


def test_the_judge_needs_a_cheap_judge():
    small = [Cand("1", True, prompt_tokens=50, output_tokens=50)] * 2
    big = [Cand("1", True, prompt_tokens=100, output_tokens=100)] * 2
    pool = build_pool([Ep(small, generator="small"), Ep(big, generator="big")], models=MODELS)
    ok, why = LadderCascadePolicy(judge=True).applicable(route_env(pool))
    assert not ok and "V1" in why
    assert LadderCascadePolicy().applicable(route_env(pool)) == (True, "")


@pytest.mark.parametrize("params", [{}, {"rung_k": [3], "votes": 3, "early_escalate": True, "final_k": 2,
                                         "judge": True, "judge_accept": 0.8, "judge_escalate": 0.3,
                                         "answer": "majority"}])
def test_actions_ignore_labels(params):
    """Permuted correctness labels (tests/test_label_leak.py) change the outcome, never an action or a choice."""
    from agents.runner import replay
    from coba_env import compile_pool
    from pools.default import resolve_pool
    from tests.test_label_leak import permuted_labels

    compiled = compile_pool(resolve_pool("tiny"))
    runs = []
    for pool in (compiled, permuted_labels(compiled)):
        policy = LadderCascadePolicy(**params)
        env = route_env(pool, **policy.env_kwargs())
        assert policy.applicable(env) == (True, "")
        runs.append(replay(policy, env, record=True))
    before, after = runs
    assert [r["correct"] for r in before] != [r["correct"] for r in after]  # the labels did change
    for a, b in zip(before, after, strict=True):
        assert a["action_ids"] == b["action_ids"] and a["selected_candidate"] == b["selected_candidate"]
