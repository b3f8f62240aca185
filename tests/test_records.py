"""Episode records: one call-count column per verifier of the pool, named by the rule of docs/BENCH.md
("Episode records"), through the replay, the episode files, the allocation metrics and the tables."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from agents.registry import make_policy
from coba_env import compile_pool
from eval.bench import run_bench
from eval.records import RecordLayout, verifier_column
from eval.runner import run_policy
from tests.conftest import make_synthetic_pool

#: Verifiers whose names are not the paper's: "samples" and "actions" would give n_samples / n_actions, which the
#: record already has, so they take their action's name (n_VERIFY_samples, n_VERIFY_actions).
ODD_VERIFIERS = {"judge-s": ("J1", 2.0, "cheap_judge"), "samples": ("J2", 4.0, "process_judge"),
                 "RM-big": ("J3", 20.0, "reward_model"), "actions": ("J4", 30.0, "strong_verifier")}
ODD_COLUMNS = {"judge-s": "n_judge-s", "samples": "n_VERIFY_samples", "RM-big": "n_rm-big",
               "actions": "n_VERIFY_actions"}


def odd_pool():
    return make_synthetic_pool({"d1": 4, "d2": 3}, {"g-7B": 7.0, "h-14B": 14.0}, n_candidates=6, seed=3,
                               verifiers=ODD_VERIFIERS)


@pytest.mark.parametrize(("name", "taken", "column"), [
    ("V1", (), "n_v1"), ("V3", (), "n_v3"), ("judge-s", (), "n_judge-s"), ("RM.72b", (), "n_rm.72b"),
    ("samples", ("n_samples",), "n_VERIFY_samples"), ("Actions", ("n_actions",), "n_VERIFY_Actions"),
])
def test_the_verifier_column_rule(name, taken, column):
    assert verifier_column(name, taken) == column


def test_paper_verifiers_keep_the_columns_n_v1_n_v2_n_v3():
    compiled = compile_pool(make_synthetic_pool({"d1": 3}, {"g-7B": 7.0}, n_candidates=4, seed=1))
    assert RecordLayout.of(compiled).counts == {"V1": "n_v1", "V2": "n_v2", "V3": "n_v3"}
    assert RecordLayout.of(compiled).strong == "n_v3"


def test_each_verifier_gets_its_column_counting_its_calls():
    compiled = compile_pool(odd_pool())
    frame = run_policy(make_policy("coba_strong"), compiled)
    assert list(frame.columns) == ["policy", "episode_id", "dataset", "generator", "item_id", "actions", "n_actions",
                                   "n_samples", *ODD_COLUMNS.values(), "selected_candidate", "selected_answer",
                                   "correct", "tokens", "p_tokens", "calls", "latency", "reward", "oracle_available"]
    # Independently: count each verifier's code in the actions strings ("S S judge-s ... actions STOP").
    for _, row in frame.iterrows():
        codes = Counter(row["actions"].split())
        for name, column in ODD_COLUMNS.items():
            assert row[column] == codes[name]
    assert frame[list(ODD_COLUMNS.values())].to_numpy().sum() > 0  # CoBa calls verifiers on this pool


def test_a_bench_writes_the_verifier_columns_and_allocates_by_them(tmp_path):
    results = run_bench(odd_pool(), "coba_strong,greedy", out_dir=tmp_path, progress=False, figures=False,
                        quiet=True)
    episodes = pd.read_parquet(tmp_path / "episodes.parquet")
    assert [c for c in episodes.columns if c.startswith("n_")] == ["n_actions", "n_samples", *ODD_COLUMNS.values()]
    coba = episodes[episodes["policy"] == "coba_strong"]
    overall = results["policies"]["coba_strong"]["allocation"]["overall"]
    # Allocation: the mean over (dataset, generator) pairs of each column's per-pair mean.
    for name, column in ODD_COLUMNS.items():
        per_pair = coba.groupby(["dataset", "generator"])[column].mean()
        assert overall[column] == pytest.approx(per_pair.mean())
        assert f"share_{name}" in overall
    d1 = results["policies"]["coba_strong"]["allocation"]["d1"]
    # The strong verifier by role is "actions" (a strong verifier before a reward model): strong_calls counts it.
    d1_pairs = coba[coba["dataset"] == "d1"].groupby("generator")["n_VERIFY_actions"].mean()
    assert d1["strong_calls"] == pytest.approx(d1_pairs.mean())
    table = (tmp_path / "tables" / "allocation.md").read_text()
    assert "judge-s calls" in table and "actions calls" in table
    json.dumps(results)
