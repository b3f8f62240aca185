"""Outcome tables: the wide and long importers on hand-made tables worked out by hand, RouterArena's two real files
(expected figures computed here from the files with the json module), merging, prices and the unpriced-model rule.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coba_cli.main import main
from coba_env import compile_pool
from pools.errors import PoolError
from pools.importers import import_pool
from pools.inspect import episode_outcomes
from pools.merge import merge_pools
from pools.store import load_pool
from tests.factory import Cand, Ep, build_pool

# ---------------------------------------------------------------- a RouterBench-shaped wide table, by hand
ROUTERBENCH = pd.DataFrame({
    "sample_id": ["mmlu.a.1", "mmlu.a.2", "gsm.b.1"],
    "prompt": ["Which? A. x B. y", "Pick one. A. 1 B. 2", "What is 3 + 4?"],
    "eval_name": ["mmlu-a", "mmlu-a", "gsm8k"],
    "oracle_model_to_route_to": ["small", "big", "small"],
    "small": [1.0, 0.0, 0.6],
    "small|model_response": ["The answer is A.", "B", "3 + 4 = \\boxed{7}"],
    "small|total_cost": [1e-5, 2e-5, 3e-5],
    "big": [1.0, 1.0, None],  # big has no outcome on the third query
    "big|model_response": ["A", "A", None],
    "big|total_cost": [1e-3, 2e-3, None],
})
COLUMNS = "id=sample_id,category=eval_name,response={model}|model_response,cost={model}|total_cost"


@pytest.fixture
def routerbench(tmp_path: Path) -> Path:
    path = tmp_path / "routerbench.parquet"
    ROUTERBENCH.to_parquet(path)
    return path


def test_a_wide_table_by_pattern_imports_as_worked_out_by_hand(routerbench):
    pool = import_pool(str(routerbench), "wide", columns=COLUMNS, models="small,big", correct_threshold=0.5)
    assert pool.items["item_id"].tolist() == ["mmlu.a.1", "mmlu.a.2", "gsm.b.1"]
    assert pool.items["subject"].tolist() == ["mmlu-a", "mmlu-a", "gsm8k"]
    assert set(pool.items["dataset"]) == {"routerbench"}  # one file: its name
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    assert list(zip(c["item_id"], c["generator"], strict=True)) == [
        ("mmlu.a.1", "small"), ("mmlu.a.1", "big"), ("mmlu.a.2", "small"), ("mmlu.a.2", "big"), ("gsm.b.1", "small")]
    assert c["graded_score"].tolist() == [1.0, 1.0, 0.0, 1.0, 0.6]
    assert c["correct"].tolist() == [True, True, False, True, True]  # 0.6 >= the threshold 0.5
    assert c["cost_usd"].tolist() == [1e-5, 1e-3, 2e-5, 2e-3, 3e-5]
    assert c["raw_answer"].tolist()[-1] == "7" and c["text"].tolist()[1] == "A"
    compiled = compile_pool(pool)
    assert compiled.usd_priced  # every call's dollars recorded: both models price themselves
    assert compiled.gen_cost[:, 0, -1].tolist() == [1e-5, 1e-3, 2e-5, 2e-3, 3e-5]


def test_without_models_every_score_column_is_a_model_and_other_text_is_refused(routerbench):
    with pytest.raises(PoolError, match=r"column 'oracle_model_to_route_to': is 'small'; expected True, False or a "
                                        r"score in \[0, 1\]"):
        import_pool(str(routerbench), "wide", columns=COLUMNS)


# ---------------------------------------------------------------- an LLMRouterBench-shaped long table, by hand
RECORDS = [
    {"prompt": "2 + 2?", "model": "a", "score": 1, "cost": 0.001, "prompt_tokens": 12, "completion_tokens": 30,
     "prediction": "It is \\boxed{4}.", "ground_truth": "4"},
    {"prompt": "2 + 2?", "model": "b", "score": 0.25, "cost": 0.0001, "prompt_tokens": 12, "completion_tokens": 5,
     "prediction": "\\boxed{5}", "ground_truth": "4"},
    {"prompt": "Capital of France?", "model": "a", "score": 0, "prediction": "Lyon", "ground_truth": "Paris"},
]


def test_a_long_table_with_the_default_fields_imports_as_worked_out_by_hand(tmp_path):
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    pool = import_pool(str(src), "long")
    assert pool.items["item_id"].tolist() == ["0", "1"]  # keyed by the prompt text, in order of appearance
    assert pool.items["gold"].tolist() == ["4", "Paris"]
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    assert c["generator"].tolist() == ["a", "b", "a"]
    assert c["correct"].tolist() == [True, False, False] and c["graded_score"].tolist() == [1.0, 0.25, 0.0]
    assert c["prompt_tokens"].tolist()[:2] == [12, 12] and c["output_tokens"].tolist()[:2] == [30, 5]
    assert c["tokens_estimated"].tolist() == [False, False, True]  # the third record gave no counts
    assert c["raw_answer"].tolist()[:2] == ["4", "5"]  # extracted from the responses
    assert c["extraction_status"].tolist()[2] == "outcome"  # "Lyon" holds no answer the extractor finds
    assert math.isnan(c["cost_usd"].iloc[2])


# ---------------------------------------------------------------- RouterArena's two real files
@pytest.fixture(scope="module")
def arena(shared_dir: Path) -> tuple[Path, dict[str, list[dict]]]:
    folder = shared_dir / "data" / "pools" / "routerarena"
    records = {}
    for path in sorted(folder.glob("*.jsonl")):
        records[path.stem] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return folder, records


def test_routerarena_imports_with_one_command(arena, tmp_path):
    folder, records = arena
    assert main(["pools", "import", str(folder), "--format", "routerarena", "--out", str(tmp_path / "p")]) == 0
    pool = load_pool(tmp_path / "p")
    c = pool.candidates.merge(pool.episodes, on="episode_id")
    for model, rows in records.items():
        mine = c[c["generator"] == model]
        assert len(rows) == 809 and len(mine) == 809
        by_id = {r["global_index"]: r for r in rows}
        assert mine["prompt_tokens"].tolist() == [by_id[i]["token_usage"]["input_tokens"] for i in mine["item_id"]]
        assert mine["output_tokens"].tolist() == [by_id[i]["token_usage"]["output_tokens"] for i in mine["item_id"]]
        assert not mine["tokens_estimated"].any()  # the provider's counts
        dollars = sum(r["evaluation_result"]["inference_cost"] for r in rows)
        assert mine["cost_usd"].sum() == pytest.approx(dollars, rel=1e-12)
        scores = [min(max(r["evaluation_result"]["score"], 0.0), 1.0) for r in rows]  # the one -0.033 clipped
        assert mine["graded_score"].mean() == pytest.approx(np.mean(scores), abs=1e-12)
    means = c.groupby("generator")["graded_score"].mean().round(4).to_dict()
    assert means == {"claude-3-haiku-20240307": 0.5234, "gemini-2.0-flash-001": 0.6901}  # SOURCES.md
    assert pool.items["subject"].nunique() == 78
    assert len(pool.manifest["provenance"]["scores_clipped"]) == 1


def test_merging_the_single_file_pools_equals_importing_both_files(arena, tmp_path):
    folder, _ = arena
    files = sorted(str(p) for p in folder.glob("*.jsonl"))
    both = import_pool(files, "routerarena")
    merged, report = merge_pools([import_pool(f, "routerarena") for f in files], sources=files)
    for table in ("items", "models", "episodes", "candidates", "verifications"):
        pd.testing.assert_frame_equal(merged.table(table), both.table(table), check_dtype=False, obj=table)
    assert merged.manifest["prices_usd_per_million_tokens"] == both.manifest["prices_usd_per_million_tokens"]
    assert report.joins[0]["matched"] == 809 and report.joins[0]["rule"] == "id"


# ---------------------------------------------------------------- merge refusals and text matching
def _pool(generator: str, gold: str = "1", item_id: str = "i0", problem: str | None = None, tier_role=None):
    pool = build_pool([Ep([Cand("1", True, scores={"V3": 0.5})], item_id=item_id, gold=gold, generator=generator)],
                      models={generator: 7.0, "J3": 20.0})
    if problem is not None:
        pool.items["problem"] = problem
    if tier_role:
        pool.manifest["verifier_roles"] = {"V3": tier_role}
    return pool


@pytest.mark.parametrize(("second", "message"), [
    (_pool("B", gold="2"), r"b, table items, field 'gold': item \(dataset 'd1', item_id 'i0'\) has gold '2' here but "
                           r"'1' in a"),
    (_pool("A"), r"b: generator 'A' is also a generator of a; expected each generator in one pool"),
    (_pool("B", tier_role="reward_model"), r"b, field 'verifier_roles': verifier 'V3' is a reward_model here but a "
                                           r"strong_verifier in a"),
])
def test_a_merge_of_clashing_pools_is_refused_in_one_line(second, message):
    with pytest.raises(PoolError, match=message):
        merge_pools([_pool("A"), second], sources=["a", "b"])


def test_pools_of_different_n_merge_into_episodes_of_different_sizes():
    """Refused before ("holds 2 candidates per episode, a 1; expected one N"): the merge's N is the most, and each
    episode keeps its own candidates."""
    two = build_pool([Ep([Cand("1", True), Cand("2")], generator="B")], models={"B": 3.0})
    merged, _ = merge_pools([_pool("A"), two], sources=["a", "b"])
    assert merged.n_candidates == 2
    sizes = merged.candidates.merge(merged.episodes, on="episode_id").groupby("generator").size()
    assert sizes.to_dict() == {"A": 1, "B": 2}


def test_items_with_other_ids_match_by_normalized_text():
    other = _pool("B", item_id="x9", problem=" problem\n i0 ")  # the same text as i0's once normalized
    merged, report = merge_pools([_pool("A"), other], sources=["a", "b"])
    assert report.joins[0] == {"source": "b", "rule": "text", "matched": 1, "ambiguous": 0, "only_here": 0,
                               "only_before": 0}
    assert merged.episodes["item_id"].tolist() == ["i0", "i0"] and len(merged.items) == 1


# ---------------------------------------------------------------- prices: the shipped list, --price, unpriced
def test_prices_shipped_given_and_the_unpriced_rule(tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text("prompt,gemini-2.0-flash-001,my-model\nA?,True,False\nB?,False,True\n", encoding="utf-8")
    assert main(["pools", "import", str(src), "--format", "wide", "--out", str(tmp_path / "p")]) == 0
    pool = load_pool(tmp_path / "p")
    assert pool.manifest["prices_usd_per_million_tokens"] == {"gemini-2.0-flash-001": {"input": 0.1, "output": 0.4}}
    assert pool.manifest["provenance"]["unpriced"] == ["my-model"]
    capsys.readouterr()
    code = main(["bench", "--pool", str(tmp_path / "p"), "--env", "route", "--cost", "usd", "--out",
                 str(tmp_path / "b"), "--no-figures", "--no-progress"])
    assert code == 2
    assert "it has none for my-model" in capsys.readouterr().err
    assert main(["pools", "import", str(src), "--format", "wide", "--out", str(tmp_path / "q"), "--price",
                 "my-model=1,2", "--price", "gemini-2.0-flash-001=3"]) == 0
    priced = load_pool(tmp_path / "q").manifest
    assert priced["prices_usd_per_million_tokens"] == {"gemini-2.0-flash-001": {"input": 3.0, "output": 3.0},
                                                       "my-model": {"input": 1.0, "output": 2.0}}
    assert priced["provenance"]["prices"] == {"gemini-2.0-flash-001": "--price", "my-model": "--price"}


def test_inspect_counts_an_outcome_only_candidate_as_its_own_vote(tmp_path):
    src = tmp_path / "t.csv"  # by hand: a is right on 1 of 3 queries, b on 2 of 3; one candidate per episode
    src.write_text("prompt,a,b\nA?,True,True\nB?,False,True\nC?,False,False\n", encoding="utf-8")
    pool = import_pool(str(src), "wide")
    outcomes = episode_outcomes(pool).join(pool.episodes.set_index("episode_id")["generator"])
    for column in ("first_sample", "majority", "majority_exact", "pass_at_n"):
        assert outcomes.groupby("generator")[column].mean().to_dict() == {"a": 1 / 3, "b": 2 / 3}, column
