"""Real reasoning-gym-eval file shapes, `--dataset`, `--price`, `--labels` and `--generator-params-b` on import.

The files are hand-made copies of the public open-thought/reasoning-gym-eval shapes: a run's results.json keeps
the model and the sampling settings under ``metadata``; per-task zero-shot files
``<provider>_<model>_<YYYYMMDD_HHMMSS>/<category>/<task>.json`` have ``name``, ``category``, ``config``,
``completions_per_prompt`` and ``results`` but no model and no ``categories``. Expected values are worked out
by hand from the files below.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coba_cli.main import main
from eval.cost_notes import cost_estimates
from pools.importers import import_pool
from pools.prices import PRICES_KEY
from pools.store import load_pool
from pools.tokens import estimate_tokens
from tests.conftest import write_jsonl

LONG_TEXT = "word " * 100  # 100 letter runs: ceil(1.3 * 100) = 130 estimated tokens, past a 64-token cap


def _entry(question: str, gold: str, answers: list[tuple[str | None, str, float]]) -> dict:
    return {"question": question, "expected_answer": gold, "best_model_answer": answers[0][0],
            "best_score": max(a[2] for a in answers), "mean_score": 0.5,
            "completions": [{"model_answer": a, "full_model_response": t, "score": s} for a, t, s in answers]}


def results_json(model: str = "openai/o3-mini", max_tokens: int | None = 64) -> dict:
    """A run's results.json as the public repository has it: the model under metadata."""
    return {
        "metadata": {"timestamp": "2025-03-01T10:00:00", "model": model, "provider": "OpenAI", "git_hash": "abc",
                     "duration_seconds": 12.5, "max_tokens": max_tokens, "temperature": 0.6, "top_p": 0.95,
                     "partial": False},
        "categories": [{"name": "arithmetic", "datasets": [
            {"name": "gcd", "category": "arithmetic", "average_best_score": 1.0, "average_mean_score": 0.5,
             "total_examples": 2, "config": {"size": 2, "seed": 42}, "system_prompt": "...",
             "completions_per_prompt": 2, "results": [
                 _entry("GCD of 4 and 6?", "2", [("2", "<answer>2</answer>", 1.0), ("3", LONG_TEXT, 0.0)]),
                 _entry("GCD of 9 and 6?", "3", [("3", "<answer>3</answer>", 1.0), ("3", "<answer>3</answer>", 1.0)]),
             ]},
        ]}],
        "summary": {"total_datasets": 1, "total_examples": 2},
    }


def task_file(gold_offset: int = 0) -> dict:
    """A per-task zero-shot file: no model, no categories."""
    return {"name": "gcd", "category": "arithmetic", "average_best_score": 1.0, "average_mean_score": 1.0,
            "total_examples": 1, "config": {"size": 1, "seed": 45}, "system_prompt": "...",
            "completions_per_prompt": 1,
            "results": [_entry("GCD of 4 and 6?", "2", [(str(2 + gold_offset), "<answer>x</answer>", 1.0 - gold_offset)])]}


def test_results_json_reads_model_and_sampling_from_metadata(tmp_path: Path) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results_json()), encoding="utf-8")
    pool = import_pool(str(src), "rg-eval", generator_params_b=8.0)
    assert pool.models["name"].tolist() == ["openai/o3-mini"]  # metadata.model, no --generator needed
    assert pool.manifest["generation"] == {"max_tokens": 64, "temperature": 0.6, "top_p": 0.95,
                                           "max_output_tokens": 64}
    c = pool.candidates
    # The long response estimates 130 tokens, past the run's 64-token cap: the cap, and a cap hit.
    assert estimate_tokens(LONG_TEXT) == 130
    assert c["output_tokens"].tolist() == [estimate_tokens("<answer>2</answer>"), 64,
                                           estimate_tokens("<answer>3</answer>"), estimate_tokens("<answer>3</answer>")]
    assert c["cap_hit"].tolist() == [False, True, False, False]
    assert c["tokens_estimated"].all()
    assert pool.manifest["provenance"]["estimated"]["output_tokens"] == 4
    footnote = cost_estimates(pool).footnote  # what the bench prints under its tables
    assert "token counts of 4/4 candidates estimated from their text (pools/tokens.py), capped at the source's " \
           "max_tokens (the visible text only: an API model's hidden reasoning tokens are not in it)" in footnote
    assert "model sizes given on import (--generator-params-b 8), not by the source" in footnote  # no size in the file


def test_per_task_file_with_categories_null_takes_the_model_from_its_run_folder(tmp_path: Path) -> None:
    folder = tmp_path / "zero-shot" / "eval" / "anthropic_claude-3.5-sonnet_20250227_230002" / "arithmetic"
    folder.mkdir(parents=True)
    data = {**task_file(), "categories": None}
    (folder / "gcd.json").write_text(json.dumps(data), encoding="utf-8")
    pool = import_pool(str(folder / "gcd.json"), "rg-eval", generator_params_b=70.0)
    assert pool.models["name"].tolist() == ["anthropic/claude-3.5-sonnet"]
    assert pool.items["dataset"].tolist() == ["gcd"] and pool.manifest["n_candidates"] == 1


def test_per_task_file_takes_model_and_sampling_from_the_run_summary(tmp_path: Path) -> None:
    run = tmp_path / "run_without_date"
    (run / "arithmetic").mkdir(parents=True)
    (run / "arithmetic" / "gcd.json").write_text(json.dumps(task_file()), encoding="utf-8")
    (run / "summary.json").write_text(json.dumps({"model": "meta-llama/llama-3.3-70b-instruct", "max_tokens": 2048,
                                                  "temperature": 0.0, "top_p": 1.0}), encoding="utf-8")
    pool = import_pool(str(run), "rg-eval", generator_params_b=70.0)  # the folder: summary.json is no results file
    assert pool.models["name"].tolist() == ["meta-llama/llama-3.3-70b-instruct"]
    assert pool.manifest["generation"]["max_output_tokens"] == 2048


def test_one_command_imports_five_per_task_files_of_five_models_as_one_pool(tmp_path: Path, capsys) -> None:
    root = tmp_path / "zero-shot" / "eval"
    models = ["openai_o3-mini", "anthropic_claude-3.5-sonnet", "deepseek_deepseek-r1", "google_gemini-2.0-flash",
              "meta-llama_llama-3.3-70b-instruct"]
    for k, model in enumerate(models):
        folder = root / f"{model}_2025030{k + 1}_120000" / "arithmetic"
        folder.mkdir(parents=True)
        (folder / "gcd.json").write_text(json.dumps(task_file(gold_offset=k % 2)), encoding="utf-8")
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(root), str(dest), "--format", "rg-eval", "--generator-params-b", "70"]) == 0
    pool = load_pool(dest)
    assert sorted(pool.models["name"]) == sorted(m.replace("_", "/", 1) for m in models)
    assert len(pool.episodes) == 5 and len(pool.items) == 1  # one item, one episode per model
    # Models 2 and 4 (k = 1, 3) answered 3 for gold 2 (score 0): the labels say so.
    by_generator = dict(zip(pool.episodes["generator"], pool.candidates.sort_values("episode_id")["correct"],
                            strict=True))
    assert [by_generator[m.replace("_", "/", 1)] for m in models] == [True, False, True, False, True]
    assert "5 episodes x 1 candidates" in capsys.readouterr().out


def test_several_files_on_the_command_line_make_one_pool(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(results_json("openai/o3-mini")), encoding="utf-8")
    b.write_text(json.dumps(results_json("openai/gpt-4o")), encoding="utf-8")
    dest = tmp_path / "pool"
    assert main(["pools", "import", str(a), str(b), str(dest), "--format", "rg-eval", "--generator-params-b", "8"]) == 0
    assert sorted(load_pool(dest).models["name"]) == ["openai/gpt-4o", "openai/o3-mini"]


def test_dataset_renames_for_every_format(tmp_path: Path) -> None:
    src = tmp_path / "results.json"
    data = results_json()
    data["categories"][0]["datasets"][0]["name"] = "hf://datasets/someone/gcd/test.parquet"
    src.write_text(json.dumps(data), encoding="utf-8")
    pool = import_pool(str(src), "rg-eval", generator_params_b=8.0, dataset="gcd-hard")
    assert pool.items["dataset"].unique().tolist() == ["gcd-hard"]
    lines = [{"dataset": "whatever", "item_id": "1", "problem": "1+1?", "gold": "2", "generator": "g",
              "generator_params_b": 1.0, "candidate": 0, "text": "\\boxed{2}", "prompt_tokens": 3, "output_tokens": 4}]
    jsonl = import_pool(str(write_jsonl(tmp_path / "c.jsonl", lines)), "jsonl", dataset="math")
    assert jsonl.items["dataset"].tolist() == ["math"] and jsonl.episodes["dataset"].tolist() == ["math"]


@pytest.mark.parametrize(("args", "message"), [
    (["--generator-params-b", "0"], r"--generator-params-b 0: expected .* a number > 0"),
    (["--generator-params-b", "-3"], r"--generator-params-b -3: expected .* a number > 0"),
    (["--generator-params-b", "8", "--price", "openai/o3-mini=abc"], r"--price: expected MODEL=IN\[,OUT\] with numbers"),
    (["--generator-params-b", "8", "--price", "nobody=1,2"], r"--price nobody=\.\.\.: no such model in the pool"),
    (["--generator-params-b", "8", "--price", "m=1", "--price", "m=2"], r"--price names m twice"),
    (["--generator-params-b", "8", "--price", "openai/o3-mini=1e308"], r"numbers in 0\.\.10000 dollars per million"),
    (["--generator-params-b", "8", "--price", "openai/o3-mini=1,10001"], r"got '10001' in"),
    (["--generator-params-b", "8", "--price", "openai/o3-mini=inf"], r"numbers in 0\.\.10000"),
    (["--generator-params-b", "8", "--generator", "x"], None),  # fine: one model in the file
])
def test_import_option_errors_are_one_line(tmp_path: Path, capsys, args: list[str], message: str | None) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results_json()), encoding="utf-8")
    code = main(["pools", "import", str(src), str(tmp_path / "p"), "--format", "rg-eval", *args])
    err = capsys.readouterr().err
    if message is None:
        assert code == 0
        return
    assert code == 2 and re.search(message, err) and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p").exists()


def test_price_goes_to_the_manifest(tmp_path: Path) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results_json()), encoding="utf-8")
    assert main(["pools", "import", str(src), str(tmp_path / "p"), "--format", "rg-eval", "--generator-params-b", "8",
                 "--price", "openai/o3-mini=1.1,4.4"]) == 0
    assert load_pool(tmp_path / "p").manifest[PRICES_KEY] == {"openai/o3-mini": {"input": 1.1, "output": 4.4}}


def test_labels_grader_replaces_wrong_source_labels_and_the_import_lists_them(tmp_path: Path, capsys) -> None:
    # The source labels a blank answer correct and an answer identical to the gold wrong (both seen in real pools).
    lines = [{"dataset": "math", "item_id": "1", "problem": "1+1?", "gold": "2", "generator": "g",
              "generator_params_b": 1.0, "candidate": k, "answer": answer, "correct": label, "prompt_tokens": 3,
              "output_tokens": 4, "extraction_status": "given"}
             for k, (answer, label) in enumerate([("2", False), (None, True), ("3", False)])]
    src = write_jsonl(tmp_path / "c.jsonl", lines)
    assert main(["pools", "import", str(src), str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "on 1/3 candidates" in out and "labels used: source" in out
    assert "candidate 0: answer '2', gold '2'; source says wrong, grader says correct" in out
    assert "candidate 1: answer None, gold '2'; source says correct, grader says wrong" in out
    assert load_pool(tmp_path / "s").candidates["correct"].tolist() == [False, True, False]
    assert main(["pools", "import", str(src), str(tmp_path / "g"), "--labels", "grader"]) == 0
    assert load_pool(tmp_path / "g").candidates["correct"].tolist() == [True, False, False]


def test_an_entry_whose_every_call_failed_is_skipped_and_listed(tmp_path: Path) -> None:
    data = results_json()
    data["categories"][0]["datasets"][0]["results"].append(
        {"question": "GCD of 8 and 12?", "expected_answer": "4", "best_model_answer": None, "best_score": 0.0,
         "mean_score": 0.0, "error": "All completion attempts failed", "completions": []})
    src = tmp_path / "results.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    pool = import_pool(str(src), "rg-eval", generator_params_b=8.0)
    assert len(pool.items) == 2  # the third entry has no completion to replay
    assert pool.manifest["provenance"]["skipped_failed_entries"] == [
        f"{src}, categories[0].datasets[0].results[2]"]


def test_dataset_renaming_a_source_of_several_datasets_is_refused(tmp_path: Path, capsys) -> None:
    lines = [{"dataset": name, "item_id": "1", "problem": "1+1?", "gold": "2", "generator": "g",
              "generator_params_b": 1.0, "candidate": 0, "text": "\\boxed{2}", "prompt_tokens": 3, "output_tokens": 4}
             for name in ("a", "b")]
    code = main(["pools", "import", str(write_jsonl(tmp_path / "c.jsonl", lines)), str(tmp_path / "p"), "--dataset", "x"])
    err = capsys.readouterr().err
    assert code == 2 and "--dataset renames the source's one dataset, but it holds 2 (a, b)" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "p").exists()


@pytest.mark.parametrize(("prices", "message"), [
    ({"nobody": {"input": 1, "output": 1}}, r"prices model 'nobody', which is not a model of the pool"),
    ({"openai/o3-mini": {"input": -1, "output": 1}}, r"input price -1; expected a number in 0..10000"),
    ({"openai/o3-mini": {"input": 1, "output": 1e308}}, r"output price 1e\+308; expected a number in 0\.\.10000"),
    ({"openai/o3-mini": {"input": 10000.5, "output": 1}}, r"input price 10000.5; expected a number in 0\.\.10000"),
    ({"openai/o3-mini": {"input": 1}}, r"expected \{\"input\": <number>, \"output\": <number>\}"),
    ([1, 2], r"expected an object of model"),
])
def test_bad_prices_in_a_manifest_fail_validation(tmp_path: Path, capsys, prices, message: str) -> None:
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results_json()), encoding="utf-8")
    assert main(["pools", "import", str(src), str(tmp_path / "p"), "--format", "rg-eval", "--generator-params-b", "8"]) == 0
    manifest = tmp_path / "p" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), PRICES_KEY: prices}), encoding="utf-8")
    capsys.readouterr()
    assert main(["pools", "validate", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "prices_usd_per_million_tokens" in err
