"""The real Qwen2.5-Math RM@8 pool: import it and reproduce the figures computed from the file's own labels.

Reference figures (../shared/data/SOURCES.md): first-sample accuracy 0.90, majority@8 0.93 (exact-string vote
on ``pred``, ties to the earliest), pass@8 0.96. The project's grader must agree with the file's ``score``
labels on at least 97% of the 800 candidates.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from coba_cli.main import main
from pools.export import export_jsonl
from pools.importers import import_jsonl, import_qwen_lists
from pools.inspect import episode_outcomes, inspect_pool, majority_accuracy
from pools.store import load_pool


@pytest.fixture(scope="module")
def qwen_file(shared_dir: Path) -> Path:
    path = shared_dir / "data" / "pools" / "qwen25-math-rm8" / "math_cot_100.jsonl"
    if not path.exists():
        pytest.fail(f"missing {path}: the Qwen2.5-Math RM@8 pool should be in the shared data folder")
    return path


@pytest.fixture(scope="module")
def qwen_pool(qwen_file: Path):
    return import_qwen_lists(qwen_file, generator="Qwen2.5-Math-7B-Instruct", generator_params_b=7.6)


def test_reference_figures_from_the_files_labels(qwen_pool):
    assert len(qwen_pool.episodes) == 100 and qwen_pool.n_candidates == 8
    assert majority_accuracy(qwen_pool, 8, key="raw_answer") == pytest.approx(0.93)
    outcomes = episode_outcomes(qwen_pool, 8)
    assert outcomes["pass_at_n"].mean() == pytest.approx(0.96)
    assert outcomes["first_sample"].mean() == pytest.approx(0.90)
    assert qwen_pool.candidates["correct"].astype(float).mean() == pytest.approx(0.91, abs=0.005)


def test_reference_figures_match_a_direct_computation(qwen_file, qwen_pool):
    """The same figures straight from the file, so the test also pins how they are defined."""
    rows = [json.loads(line) for line in qwen_file.read_text().splitlines() if line.strip()]
    majority = []
    for row in rows:
        votes: dict[str, int] = {}
        for pred in row["pred"]:
            votes[pred] = votes.get(pred, 0) + 1
        winner = max(votes, key=lambda p: (votes[p], -row["pred"].index(p)))  # ties: first appearance
        majority.append(row["score"][row["pred"].index(winner)])
    assert np.mean(majority) == pytest.approx(majority_accuracy(qwen_pool, 8, key="raw_answer"))
    assert np.mean([any(r["score"]) for r in rows]) == pytest.approx(0.96)
    assert np.mean([r["score"][0] for r in rows]) == pytest.approx(0.90)


def test_grader_agrees_with_the_files_labels(qwen_pool):
    agreement = qwen_pool.manifest["provenance"]["grader_agreement"]
    print(f"\ngrader agreement: {agreement['agree']}/{agreement['compared']} = {agreement['rate']:.4f}")
    for d in agreement["disagreements"]:
        print(f"  item {d['item_id']} candidate {d['candidate']}: pred {d['answer']!r} gold {d['gold']!r} "
              f"file says {d['label']}, grader says {d['grader']}")
    assert agreement["compared"] == 800
    assert agreement["rate"] >= 0.97
    assert len(agreement["disagreements"]) == agreement["compared"] - agreement["agree"]


def test_reward_scores_are_mapped_into_unit_interval(qwen_file, qwen_pool):
    transform = qwen_pool.manifest["provenance"]["score_transform"]
    assert transform["transform"] == "sigmoid" and transform["tier"] == "V3"
    low, high = transform["raw_range"]
    assert low < 0 and high > 1  # the raw reward-model scores are logits
    v = qwen_pool.verifications
    assert qwen_pool.tiers == ["V3"] and len(v) == 800
    assert v["score"].between(0, 1).all()
    first = json.loads(qwen_file.read_text().splitlines()[0])["pred_score"][0][0]
    score = v.query("episode_id == 0 and candidate == 0")["score"].iloc[0]
    assert math.log(score / (1 - score)) == pytest.approx(first)  # the recorded inverse recovers the raw value


def test_raw_answers_labels_and_estimates(qwen_file, qwen_pool):
    rows = [json.loads(line) for line in qwen_file.read_text().splitlines() if line.strip()]
    c = qwen_pool.candidates
    assert c["raw_answer"].tolist() == [p for r in rows for p in r["pred"]]
    assert c["correct"].astype(bool).tolist() == [s for r in rows for s in r["score"]]
    assert (c["extraction_status"] == "given").all()
    assert c["tokens_estimated"].all() and (c["output_tokens"] > 0).all()
    assert qwen_pool.items["level"].str.startswith("Level ").all()


def test_cli_import_inspect_and_round_trip(qwen_file, tmp_path, capsys):
    dest = tmp_path / "qwen"
    args = ["pools", "import", str(qwen_file), str(dest), "--format", "qwen-lists", "--generator",
            "Qwen2.5-Math-7B-Instruct", "--generator-params-b", "7.6", "--rm-tier", "V3"]
    assert main(args) == 0
    assert "grader agrees with the source's correctness labels on" in capsys.readouterr().out
    assert main(["pools", "validate", str(dest)]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {dest}: 100 episodes x 8 candidates")
    assert main(["pools", "inspect", str(dest), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    overall = stats["overall"]
    assert overall["majority_at_n_exact"] == pytest.approx(0.93)
    assert overall["pass_at_n"] == pytest.approx(0.96)
    assert overall["first_sample_accuracy"] == pytest.approx(0.90)
    assert overall["score_coverage"] == {"V3": 1.0}  # the pool's own verifier only: no all-zero V1 / V2
    assert overall["grader_agreement"] >= 0.97
    assert main(["pools", "inspect", str(dest)]) == 0
    text = capsys.readouterr().out
    assert "maj@8 exact" in text and "0.930" in text and "0.960" in text
    assert "tiers: V3 (reward_model)" in text and stats["verifier_roles"] == {"V3": "reward_model"}
    # the imported pool survives export -> import -> export unchanged
    first = export_jsonl(load_pool(dest), tmp_path / "a.jsonl")
    second = export_jsonl(import_jsonl(first), tmp_path / "b.jsonl")
    assert first.read_bytes() == second.read_bytes()
    assert inspect_pool(import_jsonl(first))["overall"]["majority_at_n_exact"] == pytest.approx(0.93)


def test_the_reward_model_serves_coba_light_balanced_and_strong(qwen_pool):
    """docs/POLICIES.md 'Verifier roles': the one reward model serves the cheap-judge and strong roles, so it
    scores every revealed candidate with an answer and nothing else; no variant is refused."""
    from agents.registry import make_policy
    from agents.runner import make_env, replay
    from coba_env.compiled import compile_pool

    assert qwen_pool.manifest["verifier_roles"] == {"V3": "reward_model"}
    compiled = compile_pool(qwen_pool)
    for name in ("coba_light", "coba_balanced", "coba_strong"):
        policy = make_policy(name)
        runs = replay(policy, make_env(policy, compiled))
        for i, info in enumerate(runs):
            n = info["actions"].count("SAMPLE")
            assert set(info["actions"]) <= {"SAMPLE", "VERIFY_V3", "STOP"}
            assert info["actions"].count("VERIFY_V3") == int((compiled.cluster[i, :n] >= 0).sum())
        assert sum(r["actions"].count("SAMPLE") for r in runs) >= 2 * len(runs)


@pytest.mark.parametrize("role, code, expected", [
    ("V3=strong_verifier", 0, {"V3": "strong_verifier"}),
    ("V3=judge", 2, "--verifier-role 'V3=judge': expected TIER=ROLE"),
    ("V3=", 2, "expected TIER=ROLE"),
    ("V5=reward_model", 2, "names verifier 'V5', which has no calls"),
])
def test_cli_verifier_role(qwen_file, tmp_path, capsys, role, code, expected):
    dest = tmp_path / "qwen"
    args = ["pools", "import", str(qwen_file), str(dest), "--format", "qwen-lists", "--generator", "G",
            "--generator-params-b", "7.6", "--verifier-role", role]
    assert main(args) == code
    if code == 0:
        assert load_pool(dest).manifest["verifier_roles"] == expected
    else:
        assert expected in capsys.readouterr().err and not dest.exists()


def test_inspect_prints_the_reward_models_auroc_and_best_of_8_from_the_files_own_labels(qwen_file, tmp_path,
                                                                                        capsys):
    """``coba pools inspect`` on the imported pool: the reward model's AUROC equals sklearn's roc_auc_score over the
    file's ``score`` labels and raw ``pred_score`` logits (the import's sigmoid is monotone), and its best-of-8
    accuracy the file's pick@8 (the highest ``pred_score`` per problem, ties to the earliest; SOURCES.md: 0.94)."""
    from sklearn.metrics import roc_auc_score

    rows = [json.loads(line) for line in qwen_file.read_text().splitlines() if line.strip()]
    labels = [bool(c) for r in rows for c in r["score"]]
    logits = [float(s[0]) for r in rows for s in r["pred_score"]]
    picks = [r["score"][int(np.argmax([s[0] for s in r["pred_score"]]))] for r in rows]
    expected_auroc, expected_pick = roc_auc_score(labels, logits), float(np.mean(picks))
    assert expected_pick == pytest.approx(0.94)

    dest = tmp_path / "qwen"
    assert main(["pools", "import", str(qwen_file), str(dest), "--format", "qwen-lists", "--generator",
                 "Qwen2.5-Math-7B-Instruct", "--generator-params-b", "7.6"]) == 0
    capsys.readouterr()
    assert main(["pools", "inspect", str(dest), "--json"]) == 0
    rm = json.loads(capsys.readouterr().out)["verifiers"]["V3"]
    assert rm["role"] == "reward_model" and rm["coverage"] == 1.0 and rm["best_of_n_episodes"] == 100
    assert rm["auroc"] == pytest.approx(expected_auroc, abs=1e-12)
    assert rm["best_of_n_accuracy"] == pytest.approx(expected_pick, abs=1e-12)
    assert main(["pools", "inspect", str(dest)]) == 0
    text = capsys.readouterr().out
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("V3 "))
    assert row[:2] == ["V3", "reward_model"] and row[-1] == "Qwen2.5-Math-RM-72B"  # SOURCES.md's reward model
    assert float(row[3]) == pytest.approx(expected_auroc, abs=5e-4)  # AUROC, printed with 3 decimals
    assert float(row[5]) == pytest.approx(expected_pick, abs=5e-4)   # pick@8
    assert "ECE: expected calibration error, 10 equal-width score bins" in text
