"""No fixed policy sees correctness labels: permuting them leaves every observation, mask and action as is."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from agents.registry import load_specs, make_policy
from agents.runner import make_env, replay
from coba_env import CompiledPool, compile_pool
from coba_env.compiled import Labels
from tests.factory import Cand, Ep, build_pool

FIXED = [name for name, spec in load_specs().items() if not make_policy(name).uses_labels
         and spec["group"] != "routing"]
#: Policies of coba/Route-v0 (label-free): the same check on the route env.
ROUTING = [name for name, spec in load_specs().items() if spec["group"] == "routing"]


def random_pool(seed: int = 7, episodes: int = 24, n: int = 16):
    """Episodes with 1-5 competing answers, no-answers, cap hits, V1/V3 everywhere, sparse V2, NaN scores."""
    rng = np.random.default_rng(seed)
    eps = []
    for e in range(episodes):
        k = int(rng.integers(1, 6))
        cands = []
        for i in range(n):
            cap = bool(rng.random() < 0.1)
            answer = None if cap and rng.random() < 0.7 else str(int(rng.integers(k)))
            scores = {"V1": None if rng.random() < 0.05 else round(float(rng.random()), 3),
                      "V3": round(float(rng.random()), 3)}
            if i < 2 and rng.random() < 0.5:
                scores["V2"] = None if rng.random() < 0.5 else round(float(rng.random()), 3)
            tokens = int(rng.integers(200, 4000))
            cands.append(Cand(answer, answer == "0", cap_hit=cap, output_tokens=tokens, scores=scores))
        eps.append(Ep(cands, item_id=f"i{e}", dataset="d1" if e < episodes // 2 else "d2"))
    return build_pool(eps)


def permuted_labels(compiled: CompiledPool, seed: int = 0) -> CompiledPool:
    """The same pool with each episode's correctness labels shuffled (and the gold clusters recomputed)."""
    rng = np.random.default_rng(seed)
    correct = compiled.labels.correct.copy()
    for row in correct:
        rng.shuffle(row)
    gold = np.full(compiled.n_episodes, -1, dtype=np.int32)
    has = correct.any(axis=1)
    gold[has] = compiled.cluster[has, correct[has].argmax(axis=1)]
    return dataclasses.replace(compiled, labels=Labels(correct=correct, gold_cluster=gold))


@pytest.fixture(scope="module")
def pools() -> list[tuple[CompiledPool, CompiledPool]]:
    """(original, label-permuted) pairs: a random hand-built pool and the tiny simulated pool."""
    from pools.default import resolve_pool

    out = []
    for pool in (random_pool(), resolve_pool("tiny")):
        compiled = compile_pool(pool)
        out.append((compiled, permuted_labels(compiled)))
    return out


def replays(name: str, pools: list[tuple[CompiledPool, CompiledPool]]):
    """For each applicable pool pair: (results on the original labels, results on the permuted labels)."""
    out = []
    for original, permuted in pools:
        policy = make_policy(name)
        if not policy.applicable(make_env(policy, original))[0]:
            continue
        out.append(tuple(replay(policy, make_env(policy, p), record=True) for p in (original, permuted)))
    return out


def test_the_permutation_changes_the_labels(pools):
    for original, permuted in pools:
        assert (original.labels.correct != permuted.labels.correct).any()
        assert (original.labels.correct.sum(axis=1) == permuted.labels.correct.sum(axis=1)).all()


@pytest.mark.parametrize("name", FIXED)
def test_observations_masks_and_actions_ignore_labels(name, pools):
    runs = replays(name, pools)
    assert runs, f"{name} ran on no pool"
    for before, after in runs:
        for a, b in zip(before, after, strict=True):
            assert a["action_ids"] == b["action_ids"]
            assert a["selected_candidate"] == b["selected_candidate"]
            assert a["costs"] == b["costs"]
            for key in ("observations", "masks"):
                assert all(np.array_equal(x, y) for x, y in zip(a[key], b[key], strict=True))


def test_accuracy_does_change_so_the_test_has_teeth(pools):
    changed = []
    for name in ("greedy", "bon4_majority", "coba_strong"):
        for before, after in replays(name, pools):
            changed.append(sum(r["correct"] for r in before) != sum(r["correct"] for r in after))
    assert any(changed)


def test_only_the_oracle_follows_the_labels(pools):
    original = pools[0][0]
    before, after = replays("pool_oracle", pools)[0]
    assert [r["action_ids"] for r in before] != [r["action_ids"] for r in after]
    # On the true labels (a correct candidate always has an answer) it is right exactly when the pool allows.
    assert [r["correct"] for r in before] == original.labels.correct.any(axis=1).tolist()


#: The oracle group's modules: the only policy code allowed to read ``labels``.
ORACLE_MODULES = ("oracle.py",)


def test_no_fixed_policy_module_mentions_labels():
    # The static half of the guarantee: only the oracles (agents/oracle.py, both groupings) may touch
    # ``labels``; every routing module, the stop gate and the plugin loader are checked like the replay policies.
    agents = Path(__file__).resolve().parents[1] / "agents"
    routing = sorted(p.name for p in agents.glob("routing*.py"))
    assert {"routing.py", "routing_base.py", "routing_ladder.py"} <= set(routing)  # the glob finds them
    deployable = [m for m in ("coba.py", "sampling.py", "adaptive.py", "evaluators.py", "registry.py", "runner.py",
                              "stop_gate.py", "plugins.py", *routing) if m not in ORACLE_MODULES]
    for module in deployable:
        assert not re.search(r"\.labels\b", (agents / module).read_text()), module
    for module in ORACLE_MODULES:
        assert "pool.labels" in (agents / module).read_text(), module


@pytest.mark.parametrize("name", ROUTING)
def test_route_env_observations_masks_and_actions_ignore_labels(name):
    from agents.runner import replay as replay_episodes
    from coba_env import CoBaEnv
    from pools.default import resolve_pool

    compiled = compile_pool(resolve_pool("tiny"))
    runs = []
    for pool in (compiled, permuted_labels(compiled)):
        policy = make_policy(name)
        env = CoBaEnv(pool, grouping="item", **policy.env_kwargs())
        assert policy.applicable(env)[0]
        runs.append(replay_episodes(policy, env, record=True))
    before, after = runs
    assert [r["correct"] for r in before] != [r["correct"] for r in after]  # the labels did change
    for a, b in zip(before, after, strict=True):
        assert a["action_ids"] == b["action_ids"] and a["selected_candidate"] == b["selected_candidate"]
        for key in ("observations", "masks"):
            assert all(np.array_equal(x, y) for x, y in zip(a[key], b[key], strict=True))
