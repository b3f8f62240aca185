"""Batched policies: replaying through ``CoBaVectorEnv`` gives the one-episode replay's records, record for record.

Expected values come from the one-episode replay (``replay="single"``: ``CoBaEnv`` and each policy's scalar
``act``), an independent code path from the batched one (``CoBaVectorEnv`` and ``act_batch``).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pandas as pd
import pytest

from agents.base import Policy
from agents.registry import list_policies, make_policy
from agents.routing_base import is_route_policy
from coba_env.compiled import CompiledPool, as_compiled, compile_pool
from eval import runner
from eval.runner import replay_policy, run_policies
from pools.default import resolve_pool
from pools.prices import PRICES_KEY

POOLS = ("tiny", "paper", "tiny-priced")
#: The priced test pool: the tiny pool with $(1 + k) per million prompt tokens and $(2 + k) per million output
#: tokens for its k-th model, so every record carries a non-zero usd cost.
PRICED = "tiny-priced"
POLICIES = [n for n in list_policies() if not is_route_policy(make_policy(n))]  # route: tests/test_routing_policies.py


@cache
def compiled(spec: str) -> CompiledPool:
    """The simulated pool ``spec``, compiled once per test session (``PRICED``: the tiny pool with prices)."""
    if spec != PRICED:
        return as_compiled(spec)
    pool = resolve_pool("tiny")
    names = pool.models["name"].astype(str).tolist()
    pool = dataclasses.replace(pool, manifest={**pool.manifest, PRICES_KEY: {
        m: {"input": 1.0 + k, "output": 2.0 + k} for k, m in enumerate(names)}})
    priced = compile_pool(pool)
    assert priced.usd_priced
    return priced


def policy_for(spec: str, name: str) -> Policy:
    """Policy ``name``; on a pool with fewer candidates than its ``n`` (tiny: N = 8), ``n`` is capped to fit."""
    policy = make_policy(name)
    n_cand = compiled(spec).n_candidates
    if getattr(policy, "params", {}).get("n", 0) > n_cand:
        policy = make_policy(name, n=n_cand)
    return policy


@cache
def single_records(spec: str, name: str) -> pd.DataFrame:
    """The one-episode replay's records of policy ``name`` on pool ``spec`` (the reference)."""
    run = replay_policy(policy_for(spec, name), compiled(spec), replay="single")
    assert run.applicable, run.not_applicable
    return run.records


def batched_run(spec: str, name: str, monkeypatch: pytest.MonkeyPatch, **kwargs) -> pd.DataFrame:
    """The batched replay's records, failing unless the batched path really ran."""
    calls = []
    real = runner.replay_batched

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(runner, "replay_batched", counted)
    run = replay_policy(policy_for(spec, name), compiled(spec), replay="batched", **kwargs)
    assert calls, f"{name} did not replay batched"
    return run.records


def test_every_registered_policy_has_a_batched_form():
    assert POLICIES and all(make_policy(n).batched for n in POLICIES)


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("spec", POOLS)
def test_batched_replay_equals_one_episode_replay(spec, name, monkeypatch):
    expected = single_records(spec, name)
    got = batched_run(spec, name, monkeypatch)
    assert len(got) == compiled(spec).n_episodes
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    if spec == PRICED:  # every policy samples at least once, and every call of this pool costs dollars
        assert (got["usd"] > 0).all()


@pytest.mark.parametrize("name", ["coba_strong", "k_stable_strict", "difficulty_adaptive", "pool_oracle",
                                  "s1_budget_forcing", "uncertainty_bandit"])
def test_batch_smaller_than_the_pool_refills_rows_and_gives_the_same_records(name, monkeypatch):
    # 61 rows over 3,129 episodes: rows take new episodes mid-run and idle rows play placeholders at the end.
    got = batched_run("paper", name, monkeypatch, batch=61)
    pd.testing.assert_frame_equal(got, single_records("paper", name), check_exact=True)


def test_records_do_not_depend_on_how_episode_ids_are_split():
    pool = compiled("paper")
    names = ["coba_balanced", "bon4_majority", "overthinking_stop"]
    whole = run_policies(names, pool, progress=False, workers=1).records
    ids = pool.episode_ids[::-1].copy()  # any order: records come in episode-id order
    halves = [run_policies(names, pool, progress=False, workers=1, episode_ids=part).records
              for part in (ids[: len(ids) // 2], ids[len(ids) // 2:])]
    joined = pd.concat(halves, ignore_index=True)
    order = joined.groupby("policy", sort=False).ngroup() * 10**9 + joined["episode_id"]
    joined = joined.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)
    pd.testing.assert_frame_equal(joined, whole, check_exact=True)


def test_an_episode_subset_replays_as_in_the_whole_pool():
    pool = compiled("paper")
    pick = pool.episode_ids[[5, 17, 400, 3000]]
    part = run_policies(["coba_strong"], pool, progress=False, episode_ids=pick).records
    whole = single_records("paper", "coba_strong")
    expected = whole[whole["episode_id"].isin(pick)].reset_index(drop=True)
    pd.testing.assert_frame_equal(part, expected, check_exact=True)


SAMPLE, STOP = 0, 4  # the paper layout's ids (docs/ENV.md)


class ObservationOnly(Policy):
    """A policy without a batched form: its act reads only the observation and mask."""

    name = "obs_only"

    def act(self, observation, action_mask, evidence):
        revealed = observation[0] * 8  # revealed_frac * N_max (the tiny pool: N_max = 8)
        return SAMPLE if revealed < 2.5 and action_mask[SAMPLE] else STOP


def test_a_policy_without_batched_form_replays_one_episode_at_a_time():
    pool = compiled("tiny")
    policy = ObservationOnly()
    assert not policy.batched
    records = run_policies([policy], pool, progress=False).records
    assert pool.n_candidates == 8 and (records["n_samples"] == 3).all()
    obs = np.zeros((2, 21), dtype=np.float32)
    masks = np.ones((2, 5), dtype=np.int8)
    obs[1, 0] = 3 / 8
    assert policy.act_batch(obs, masks).tolist() == [SAMPLE, STOP]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"replay": "fast"}, "unknown replay mode 'fast'"),
    ({"episode_ids": np.array([10**12])}, "episode id 1000000000000 is not in the pool"),
])
def test_bad_replay_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_policies(["greedy"], compiled("tiny"), progress=False, **kwargs)


@pytest.mark.parametrize("lam", [0.03, 0.3])
def test_a_trained_mlp_acts_batched_as_one_episode_at_a_time(tmp_path, lam, monkeypatch):
    from agents.learned import load_checkpoint
    from train.imitation import train_mlp

    pool = compiled("tiny")
    path = train_mlp(pool, tmp_path / "mlp", lambdas=(0.03, 0.3), progress=False, dagger_rounds=2, epochs=10,
                     episodes_per_round=None)
    expected = replay_policy(load_checkpoint(f"{path}@{lam}"), pool, replay="single").records
    calls = []
    real = runner.replay_batched
    monkeypatch.setattr(runner, "replay_batched", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = replay_policy(load_checkpoint(f"{path}@{lam}"), pool, replay="batched", batch=13).records
    assert calls and len(got) == pool.n_episodes
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


@cache
def _relabelled(spec: str) -> CompiledPool:
    """``spec``'s pool with every correctness label flipped and the gold clusters permuted (caches rebuilt)."""
    import dataclasses

    from coba_env.compiled import Labels

    pool = compiled(spec)
    gold = np.random.default_rng(0).permutation(pool.labels.gold_cluster)
    return dataclasses.replace(pool, labels=Labels(correct=~pool.labels.correct, gold_cluster=gold),
                               _episode_rows=None, _episode_meta=None, _vector_tables=None, _cost_table=None,
                               _record_columns=None)


LABEL_FREE = [n for n in POLICIES if not make_policy(n).uses_labels]
LABEL_USING = [n for n in POLICIES if make_policy(n).uses_labels]
SAME_WITHOUT_LABELS = ["actions", "selected_candidate", "selected_answer", "tokens", "p_tokens", "calls", "latency"]


@pytest.mark.parametrize("name", LABEL_FREE)
def test_no_label_free_policy_acts_on_the_labels_in_the_batch(name):
    """The batched form gets the whole vector env; a policy that does not declare ``uses_labels`` must act the
    same when every label is flipped: same actions, selections and costs (only ``correct`` may change)."""
    policy = policy_for("tiny", name)
    same = SAME_WITHOUT_LABELS
    true = replay_policy(policy, compiled("tiny"), replay="batched").records
    flipped = replay_policy(policy_for("tiny", name), _relabelled("tiny"), replay="batched").records
    assert not true["correct"].equals(flipped["correct"])  # the relabelling did reach the records
    pd.testing.assert_frame_equal(true[same], flipped[same])


@pytest.mark.parametrize("name", LABEL_USING)
def test_the_label_reading_oracle_does_act_differently_on_flipped_labels(name):
    """The check above can fail: the evaluator-side oracle, which reads labels, selects differently."""
    true = replay_policy(policy_for("tiny", name), compiled("tiny"), replay="batched").records
    flipped = replay_policy(policy_for("tiny", name), _relabelled("tiny"), replay="batched").records
    assert not true[SAME_WITHOUT_LABELS].equals(flipped[SAME_WITHOUT_LABELS])


def test_episode_ids_find_their_rows_in_a_pool_whose_ids_are_not_sorted():
    """A pool selected with a reversed index array: the ids are found (rows in pool order), and a missing one
    is named."""
    pool = compiled("tiny").select(np.arange(compiled("tiny").n_episodes)[::-1])
    wanted = pool.episode_ids[[5, 2, 9]]
    assert runner.episode_indices(pool, wanted).tolist() == [2, 5, 9]
    with pytest.raises(ValueError, match="episode id 999999 is not in the pool"):
        runner.episode_indices(pool, np.array([999999]))


def test_two_policies_of_one_name_are_refused():
    with pytest.raises(ValueError, match=r"policy names must be unique; repeated: \['greedy'\]"):
        run_policies(["greedy", "coba_light", "greedy"], compiled("tiny"), progress=False)
