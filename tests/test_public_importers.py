"""Importers of public pool formats (tot-game24, rg-eval, llm-monkeys) and unknown costs in canonical JSONL.

Each format is tested on a small hand-made file of the same shape as the public one, with expected values
worked out by hand; the real Tree-of-Thoughts pool (../shared/data) is checked against the figures its
source reports (SOURCES.md: first-sample 0.05, pass@100 0.49, mean per-sample accuracy 0.040).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from coba_cli.main import main
from pools.importers import import_pool
from pools.inspect import format_inspection, inspect_pool
from pools.store import load_pool
from tests.conftest import write_jsonl

# ---------------------------------------------------------------------------------------------------
# tot-game24
# ---------------------------------------------------------------------------------------------------

CSV = "Rank,Puzzles,AMT (s),Solved rate,1-sigma Mean (s),1-sigma STD (s)\n" \
      "1,1 1 4 6,4.4,99.20%,4.67,1.48\n2,4 5 6 10,4.4,99.60%,4.68,1.45\n3,12 12 1 1,4.45,99.20%,4.69,1.48\n"
# Three samples per puzzle with the same shape, so each gets the same estimated length (an even split).
TOT_LOG = [
    {"idx": 1, "ys": ["Steps:\n...\nAnswer: (10 - 6) * 5 + 4 = 24", "Steps:\n...\nAnswer: (10 - 6) * 5 + 3 = 23",
                      "Steps:\n...\nAnswer: (10 - 4) * 6 - 5 = 31"],
     "infos": [{"r": 1}, {"r": 0}, {"r": 0}],
     "usage_so_far": {"completion_tokens": 30, "prompt_tokens": 12, "cost": 0.1}},
    # The cumulative counts drop: the run was resumed, so this puzzle's usage is the counts themselves.
    {"idx": 2, "ys": ["Steps:\n...\nAnswer: (12 / 12) + 1 * 1 = 24", "Steps:\n...\nAnswer: 12 + 12 * (1 * 1) = 24",
                      "Steps:\n...\nAnswer: 12 + 12 * (1 / 1) = 24"],
     "infos": [{"r": 0}, {"r": 1}, {"r": 0}],  # the third is right: the source's r is wrong there
     "usage_so_far": {"completion_tokens": 9, "prompt_tokens": 12, "cost": 0.03}},
]


@pytest.fixture
def tot_files(tmp_path: Path) -> Path:
    (tmp_path / "24.csv").write_text(CSV, encoding="utf-8")
    log = tmp_path / "gpt-4_0.7_naive_cot_sample_3.json"
    log.write_text(json.dumps(TOT_LOG), encoding="utf-8")
    return log


def test_tot_import_labels_tokens_and_agreement(tot_files: Path) -> None:
    pool = import_pool(str(tot_files), "tot-game24", generator_params_b=100.0)
    c = pool.candidates
    assert pool.items["item_id"].tolist() == ["1", "2"]
    assert json.loads(pool.items["metadata"][0]) == {"numbers": [4, 5, 6, 10]}
    assert pool.models["name"].tolist() == ["gpt-4"]  # from the file name
    assert c["correct"].tolist() == [True, False, False, False, True, True]
    assert c["output_tokens"].tolist() == [10, 10, 10, 3, 3, 3]  # 30 and (restart) 9, split evenly
    assert c["prompt_tokens"].tolist() == [12] * 6  # 3 samples = 1 call: the prompt delta is the prompt
    assert c["tokens_estimated"].all()
    provenance = pool.manifest["provenance"]
    assert provenance["usage"]["runs"] == 2
    agreement = provenance["grader_agreement"]
    assert (agreement["compared"], agreement["agree"]) == (6, 5)
    assert provenance["labels"] == {"given": 0, "graded": 6, "unknown": 0}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda log: log[0].update(idx=7), r"puzzle 0, field 'idx'.*row index of 24.csv in \[0, 2\]"),
        (lambda log: log[1]["infos"].pop(), r"puzzle 1, field 'infos'.*list of 3 objects"),
        (lambda log: log[0]["usage_so_far"].update(completion_tokens=-1), r"usage_so_far.completion_tokens"),
        (lambda log: log[0].update(ys=[]), r"field 'ys'.*non-empty list"),
    ],
)
def test_tot_bad_input(tot_files: Path, tmp_path: Path, capsys, mutate, message: str) -> None:
    log = json.loads(tot_files.read_text(encoding="utf-8"))
    mutate(log)
    tot_files.write_text(json.dumps(log), encoding="utf-8")
    assert main(["pools", "import", str(tot_files), str(tmp_path / "p"), "--format", "tot-game24",
                 "--generator-params-b", "1"]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "p").exists()


def test_tot_needs_its_puzzles_file_and_a_size(tot_files: Path, tmp_path: Path, capsys) -> None:
    assert main(["pools", "import", str(tot_files), str(tmp_path / "p"), "--format", "tot-game24"]) == 2
    assert "--format tot-game24 needs --generator-params-b" in capsys.readouterr().err
    (tmp_path / "24.csv").unlink()
    assert main(["pools", "import", str(tot_files), str(tmp_path / "p"), "--format", "tot-game24",
                 "--generator-params-b", "1"]) == 2
    assert "24.csv: no such file" in capsys.readouterr().err


def test_real_tot_pool_matches_its_published_figures(shared_dir: Path, tmp_path: Path, capsys) -> None:
    src = shared_dir / "data" / "pools" / "tot-game24" / "gpt-4_0.7_naive_cot_sample_100_start900_end1000.json"
    dest = tmp_path / "tot"
    assert main(["pools", "import", str(src), str(dest), "--format", "tot-game24", "--generator-params-b",
                 "1800"]) == 0
    stats = inspect_pool(load_pool(dest))["overall"]
    assert stats["first_sample_accuracy"] == pytest.approx(0.05)
    assert stats["pass_at_n"] == pytest.approx(0.49)
    assert stats["mean_accuracy"] == pytest.approx(0.040, abs=5e-4)  # 403 of 10,000; published as 0.040
    assert stats["grader_agreement"] >= 0.99  # labels of the Game-of-24 check vs the log's own r
    capsys.readouterr()
    assert main(["pools", "inspect", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "0.050  0.040" in out and "0.490" in out
    assert "estimated: token counts of 10000/10000 candidates" in out


# ---------------------------------------------------------------------------------------------------
# rg-eval
# ---------------------------------------------------------------------------------------------------

RG_RESULTS = {
    "model": "test/model-1",
    "categories": [{"name": "arithmetic", "datasets": [
        {"dataset_name": "basic_arithmetic", "results": [
            {"question": "What is 2 + 3?", "expected_answer": "5", "completions": [
                {"model_answer": "5", "full_model_response": "<answer>5</answer>", "score": 1.0},
                {"model_answer": "ERROR", "full_model_response": "Error: timeout", "score": 0.0}]},
        ]},
        {"dataset_name": "puzzle24", "results": [
            # Reasoning Gym's default scorer (max_value 10, any numbers) scored these the wrong way round.
            {"question": "Make 24 using 12, 12, 1, 1.", "expected_answer": "12 + 12 * 1 * 1",
             "metadata": {"numbers": [12, 12, 1, 1]}, "completions": [
                 {"model_answer": "12 + 12 * 1 * 1", "full_model_response": "...", "score": 0.01},
                 {"model_answer": "10 + 10 + 2 + 2", "full_model_response": "...", "score": 1.0}]},
        ]},
    ]}],
}


def test_rg_eval_unknown_task_with_metadata_falls_back_to_math(tmp_path: Path) -> None:
    data = {"model": "m", "categories": [{"name": "c", "datasets": [{"dataset_name": "my_own_task", "results": [
        {"question": "1/2 as a decimal?", "expected_answer": "0.5", "metadata": {"x": 1}, "completions": [
            {"model_answer": "\\frac{1}{2}", "full_model_response": "...", "score": 1.0}]}]}]}]}
    src = tmp_path / "results.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    pool = import_pool(str(src), "rg-eval", generator_params_b=1.0)
    assert pool.items["task"].isna().all()  # no reasoning_gym scorer of that name: graded by math
    assert pool.manifest["provenance"]["grader_agreement"]["agree"] == 1


def test_rg_eval_import(tmp_path: Path) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(RG_RESULTS), encoding="utf-8")
    pool = import_pool(str(src), "rg-eval", generator_params_b=8.0)
    c = pool.candidates
    assert pool.models["name"].tolist() == ["test/model-1"]
    assert pool.items["dataset"].tolist() == ["basic_arithmetic", "puzzle24"]
    assert pool.items["task"].isna().tolist() == [True, False]  # no metadata: graded by math, not the task
    assert c["raw_answer"][0] == "5" and c["raw_answer"].isna()[1]  # "ERROR" is no answer
    assert c["cluster"].tolist()[:2] == [0, -1]
    assert c["correct"].tolist() == [True, False, False, True]  # the file's scores, >= 1
    disagreements = [(d["item_id"], d["candidate"]) for d in pool.manifest["provenance"]["grader_agreement"]
                     ["disagreements"]]
    assert disagreements == [("0", 0), ("0", 1)]  # the puzzle24 pair: the check and the file disagree
    assert c["tokens_estimated"].all()
    assert pool.manifest["provenance"]["estimated"]["prompt_tokens"] == 4


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("categories"), r"field 'categories': neither a run's results.json .* nor a per-task file"),
        (lambda d: d.update(categories={}), r"field 'categories': expected a list"),
        (lambda d: d["categories"][0]["datasets"][0]["results"][0]["completions"][0].update(score="1"),
         r"results\[0\], field 'completions\[0\].score': expected a number"),
        (lambda d: d["categories"][0]["datasets"][0]["results"][0].pop("expected_answer"),
         r"field 'expected_answer': expected a string"),
    ],
)
def test_rg_eval_bad_input(tmp_path: Path, capsys, mutate, message: str) -> None:
    data = json.loads(json.dumps(RG_RESULTS))
    mutate(data)
    src = tmp_path / "results.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    assert main(["pools", "import", str(src), str(tmp_path / "p"), "--format", "rg-eval",
                 "--generator-params-b", "8"]) == 2
    assert re.search(message, capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------------
# llm-monkeys
# ---------------------------------------------------------------------------------------------------


def _monkey_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "gsm8k_samples"
    folder.mkdir()
    yaml.safe_dump({"prompt": "Question: Janet has 16 eggs...\nAnswer:", "question": "Janet has 16 eggs...",
                    "samples": ["16 - 3 - 4 = 9, 9 * 2 = 18.\n#### 18", "She makes 9 * 2 = 18 dollars.\n#### 20",
                                "I am not sure."],
                    "gt_answer": "16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n#### 18", "is_corrects": [True, False, False]},
                   open(folder / "7.yaml", "w", encoding="utf-8"))
    yaml.safe_dump({"prompt": "Problem: halve 1\nSolution:", "question": "halve 1",
                    "samples": ["Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct.",
                                "Final Answer: The final answer is $0.5$. I hope it is correct.",
                                "Final Answer: The final answer is $2$. I hope it is correct."],
                    "gt_answer": "Half of 1 is $\\boxed{\\frac12}$."},
                   open(folder / "12.yaml", "w", encoding="utf-8"))
    return folder


def test_llm_monkeys_import(tmp_path: Path) -> None:
    pool = import_pool(str(_monkey_dir(tmp_path)), "llm-monkeys", generator="llama-8b", generator_params_b=8.0)
    assert pool.items["item_id"].tolist() == ["12", "7"]  # files sorted by name
    assert pool.items["dataset"].unique().tolist() == ["gsm8k_samples"]
    assert pool.items["gold"].tolist() == ["\\frac12", "18"]
    c = pool.candidates
    assert c["correct"].tolist() == [True, True, False, True, False, False]  # graded; then is_corrects
    assert c["cluster"].tolist() == [0, 0, 1, 0, 1, -1]
    agreement = pool.manifest["provenance"]["grader_agreement"]
    assert (agreement["compared"], agreement["agree"]) == (3, 3)


def test_llm_monkeys_bad_labels(tmp_path: Path, capsys) -> None:
    folder = _monkey_dir(tmp_path)
    data = yaml.safe_load(open(folder / "7.yaml", encoding="utf-8"))
    data["is_corrects"] = [True]
    yaml.safe_dump(data, open(folder / "7.yaml", "w", encoding="utf-8"))
    assert main(["pools", "import", str(folder), str(tmp_path / "p"), "--format", "llm-monkeys",
                 "--generator", "m", "--generator-params-b", "8"]) == 2
    assert re.search(r"7.yaml, field 'is_corrects': expected a list of 3", capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------------
# Unknown costs in canonical JSONL
# ---------------------------------------------------------------------------------------------------


def test_jsonl_without_token_counts_or_latencies_imports_with_estimates_flagged(tmp_path: Path, capsys) -> None:
    base = {"dataset": "d", "item_id": "1", "problem": "What is two plus two?", "gold": "4", "generator": "g",
            "generator_params_b": 7.0}
    records = [
        {**base, "candidate": 0, "text": "It is \\boxed{4}."},  # no cost field at all
        {**base, "candidate": 1, "text": "\\boxed{5}", "prompt_tokens": None, "output_tokens": None,
         "latency_s": None},  # explicit nulls
        {**base, "candidate": 2, "text": "\\boxed{4}", "prompt_tokens": 9, "output_tokens": 3, "latency_s": 0.5},
    ]
    src = write_jsonl(tmp_path / "nocost.jsonl", records)
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(src), str(dest)]) == 0
    pool = load_pool(dest)
    c = pool.candidates
    # "What is two plus two?": 5 letter runs * 1.3 + "?" = 7.5 -> 8 tokens (pools.tokens rule)
    assert c["prompt_tokens"].tolist() == [8, 8, 9]
    assert c["tokens_estimated"].tolist() == [True, True, False]
    assert c["latency_s"].tolist()[2] == 0.5
    estimated = pool.manifest["provenance"]["estimated"]
    assert (estimated["prompt_tokens"], estimated["output_tokens"], estimated["latency_s"]) == (2, 2, 2)
    text = format_inspection(inspect_pool(pool))
    assert "estimated: token counts of 2/3 candidates" in text
    assert "prompt_tokens 2, output_tokens 2, latency_s 2" in text


@pytest.mark.parametrize(
    ("task", "metadata", "message"),
    [("nonexistent", {}, r"task 'nonexistent' \(ValueError: Dataset 'nonexistent' not registered\)"),
     ("game24", {"n": 1}, r"task 'game24' \(KeyError: 'numbers'\)")],
)
def test_jsonl_task_without_a_usable_scorer_is_bad_input(tmp_path: Path, capsys, task: str, metadata: dict,
                                                          message: str) -> None:
    record = {"dataset": "d", "item_id": "1", "problem": "p", "gold": "5", "task": task, "metadata": metadata,
              "generator": "g", "generator_params_b": 1.0, "candidate": 0, "answer": "5"}
    src = write_jsonl(tmp_path / "bad.jsonl", [record])
    assert main(["pools", "import", str(src), str(tmp_path / "p")]) == 2
    assert re.search(r"bad.jsonl, line 1, field 'task': cannot build the scorer of " + message,
                     capsys.readouterr().err)
    assert not (tmp_path / "p").exists()
