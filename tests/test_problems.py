"""Problem loaders on the real shared files, and the Reasoning Gym subset config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pools.errors import PoolError
from pools.grading import reasoning_gym_scorer
from pools.problems import (
    DATASETS,
    REASONING_GYM,
    RGYM_HARD_CONFIG,
    default_problems_dir,
    load_dataset,
    load_jsonl_problems,
    load_problems,
    load_reasoning_gym,
    numeric_gold,
)


@pytest.fixture(scope="module")
def problems_dir(request: pytest.FixtureRequest) -> Path:
    shared = request.getfixturevalue("shared_dir")
    return shared / "data" / "problems"


@pytest.mark.parametrize("dataset, count", [("math500", 500), ("aime2024", 30), ("aime2025", 30), ("amc2023", 40)])
def test_counts_and_unique_ids(problems_dir: Path, dataset: str, count: int) -> None:
    problems = load_jsonl_problems(dataset, problems_dir)
    assert len(problems) == count
    assert len({p.item_id for p in problems}) == count
    assert all(p.dataset == dataset and p.problem and p.gold for p in problems)


def test_aime2024_gold_drops_zero_padding(problems_dir: Path) -> None:
    rows = [json.loads(line) for line in (problems_dir / "aime2024.jsonl").read_text().splitlines()]
    padded = [r for r in rows if r["answer"] == "025"]
    assert padded, "the file has an answer written 025"
    by_id = {p.item_id: p for p in load_jsonl_problems("aime2024", problems_dir)}
    assert by_id[str(padded[0]["id"])].gold == "25"
    assert all(not p.gold.startswith("0") or p.gold == "0" for p in by_id.values())
    assert all(p.gold.isdigit() and 0 <= int(p.gold) <= 999 for p in by_id.values())


def test_amc2023_float_gold_becomes_integer_text(problems_dir: Path) -> None:
    problems = load_jsonl_problems("amc2023", problems_dir)
    assert problems[0].gold == "27"
    assert "-1" in {p.gold for p in problems}
    assert all(not p.gold.endswith(".0") for p in problems)


def test_math500_keeps_fields(problems_dir: Path) -> None:
    first = load_jsonl_problems("math500", problems_dir)[0]
    assert first.item_id == "test/precalculus/807.json"
    assert first.gold == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert (first.level, first.subject) == ("2", "Precalculus")


def test_aime2025_ids(problems_dir: Path) -> None:
    ids = [p.item_id for p in load_jsonl_problems("aime2025", problems_dir)]
    assert ids[0] == "I-1" and ids[-1] == "II-15"


def test_load_problems_limit_per_dataset(problems_dir: Path) -> None:
    problems = load_problems(["aime2025", "amc2023"], problems_dir, limit=3)
    assert [p.dataset for p in problems] == ["aime2025"] * 3 + ["amc2023"] * 3


@pytest.mark.parametrize("value, gold", [("025", "25"), ("0", "0"), (27.0, "27"), (-1.0, "-1"), (5, "5"),
                                         ("3.5", "3.5"), (2.5, "2.5"), ("\\frac{1}{2}", "\\frac{1}{2}"),
                                         (" 070 ", "70")])
def test_numeric_gold(value: object, gold: str) -> None:
    assert numeric_gold(value) == gold


def test_missing_file_is_a_clear_pool_error(tmp_path: Path) -> None:
    with pytest.raises(PoolError, match=r"aime2024\.jsonl.*problem file not found.*--problems-dir"):
        load_jsonl_problems("aime2024", tmp_path)


def test_unknown_dataset() -> None:
    with pytest.raises(PoolError, match=r"unknown dataset 'gsm8k'; expected one of"):
        load_dataset("gsm8k")


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "amc2023.jsonl").write_text('{"id": 0, "problem": "p", "answer": 1.0}\n{oops\n')
    with pytest.raises(PoolError, match=r"amc2023\.jsonl, line 2: malformed JSON"):
        load_jsonl_problems("amc2023", tmp_path)


def test_missing_answer_names_field(tmp_path: Path) -> None:
    (tmp_path / "aime2025.jsonl").write_text('{"id": "I-1", "problem": "p"}\n')
    with pytest.raises(PoolError, match=r"line 1, field 'answer': missing required field"):
        load_jsonl_problems("aime2025", tmp_path)


def test_problems_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COBA_PROBLEMS_DIR", str(tmp_path))
    assert default_problems_dir() == tmp_path


def test_default_dir_is_shared_relative_to_repo(problems_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COBA_PROBLEMS_DIR", raising=False)
    assert default_problems_dir() == problems_dir.resolve()
    assert set(DATASETS) == {"math500", "aime2024", "aime2025", "amc2023"}


def test_reasoning_gym_small_config_is_seeded_and_graded(tmp_path: Path) -> None:
    config = tmp_path / "rg.yaml"
    config.write_text(yaml.safe_dump({"seed": 7, "size_per_task": 3,
                                      "tasks": {"chain_sum": {"min_terms": 3, "max_terms": 4},
                                                "gcd": {"max_value": 500}}}))
    first = load_reasoning_gym(config)
    again = load_reasoning_gym(config)
    assert [p.item_id for p in first] == [f"{t}-7-{i}" for t in ("chain_sum", "gcd") for i in range(3)]
    assert [(p.problem, p.gold) for p in first] == [(p.problem, p.gold) for p in again]
    for p in first:
        assert p.dataset == REASONING_GYM and p.task in ("chain_sum", "gcd") and isinstance(p.metadata, dict)
        scorer = reasoning_gym_scorer(p.task, p.to_record())
        assert scorer(p.gold) and not scorer(p.gold + "1")
    other_seed = load_reasoning_gym(config, seed=8)
    assert [p.problem for p in other_seed] != [p.problem for p in first]


def test_reasoning_gym_unknown_task_in_selection(tmp_path: Path) -> None:
    config = tmp_path / "rg.yaml"
    config.write_text("tasks:\n  gcd: {}\n")
    with pytest.raises(PoolError, match=r"task\(s\) \['lcm'\] not in the config"):
        load_reasoning_gym(config, tasks=["lcm"])


def test_default_hard_subset_config_builds_every_task() -> None:
    config = yaml.safe_load(RGYM_HARD_CONFIG.read_text())
    assert config["size_per_task"] * len(config["tasks"]) >= 400
    problems = load_reasoning_gym(size_per_task=1)
    assert [p.task for p in problems] == list(config["tasks"])
    for p in problems:
        assert reasoning_gym_scorer(p.task, p.to_record())(p.gold), p.item_id
