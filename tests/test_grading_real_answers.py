"""Grading of answers as real pools write them (issue 17): plain text, unicode, equations, tags, empties.

Every verdict below is written by hand from the mathematics, not from the grader's output. The pairs are
the ones quoted from the gpt-4o-mini MATH, Llama AIME/AMC and Game-of-24 pools.
"""

from __future__ import annotations

import pandas as pd
import pytest

from pools.grading import (
    answers_equivalent,
    answers_match_gold,
    cluster_answers,
    extract_answer,
    grade_episode,
)
from pools.grading.game24 import is_game24_solution
from pools.grading.reasoning_gym_grader import item_scorer
from pools.importers import import_jsonl
from pools.inspect import majority_accuracy
from pools.tokens import apportion
from tests.conftest import write_jsonl

# (model's answer, gold answer, equivalent?)
QUOTED_PAIRS = [
    ("6√3", r"6 \sqrt{3}", True),
    ("-√7/4", r"-\frac{\sqrt{7}}{4}", True),
    ("(-∞, 3) ∪ (3, ∞)", r"(-\infty,3)\cup(3,\infty)", True),
    ("7 - 2pi", r"7 - 2 \pi", True),
    ("x ∈ ℝ", r"(-\infty,\infty)", True),
    ("all real numbers", r"(-\infty,\infty)", True),
    ("(11, -36, -3)", r"\begin{pmatrix} 11 \\ -36 \\ -3 \end{pmatrix}", True),
    ("[11, -36, -3]", r"\begin{pmatrix} 11 \\ -36 \\ -3 \end{pmatrix}", True),
    ("2", r"2 \text{ euros}", True),
    ("$15,000", r"\$15,\!000", True),
    ("2469/20000", r"\dfrac{2469}{20,\!000}", True),
    ("-1/13 - 5/13 i", r"-\frac{1}{13} - \frac{5}{13}i", True),
    ("k = 0 or k = 4", "0,4", True),
    ("x = 0 or x = 4", "0, 4", True),
    ("16:51:06", r"4\!:\!51\!:\!06 \text{ p.m.}", True),
    # 936/5525 = (13 * 72) / (13 * 425) = 72/425: the source labelled this answer wrong; it is right.
    ("936/5525", r"\frac{72}{425}", True),
    ("sqrt(3)/2", r"\frac{\sqrt{3}}{2}", True),
    ("pi/2", r"\frac{\pi}{2}", True),
    # a 2x2 matrix is LaTeX, not prose: math-verify still compares its entries
    (r"\begin{pmatrix} \frac12 & 1 \\ 3 & 4 \end{pmatrix}", r"\begin{pmatrix} 0.5 & 1 \\ 3 & 4 \end{pmatrix}", True),
    (r"\begin{pmatrix} 1 & 1 \\ 3 & 4 \end{pmatrix}", r"\begin{pmatrix} 0.5 & 1 \\ 3 & 4 \end{pmatrix}", False),
    # sentences are compared as text, case aside
    ("No solution", "no solution", True),
    ("There is no solution", "There are no solutions", False),
    # near misses stay apart
    ("6√2", r"6 \sqrt{3}", False),
    ("(-∞, 3) ∪ (4, ∞)", r"(-\infty,3)\cup(3,\infty)", False),
    ("7 - 2pi", r"7 + 2 \pi", False),
    ("(11, -36, 3)", r"\begin{pmatrix} 11 \\ -36 \\ -3 \end{pmatrix}", False),
    ("3", r"2 \text{ euros}", False),
    ("$15,001", r"\$15,\!000", False),
    ("-1/13 + 5/13 i", r"-\frac{1}{13} - \frac{5}{13}i", False),
    ("k = 0 or k = 3", "0,4", False),
    ("4:51:06", r"4\!:\!51\!:\!06 \text{ p.m.}", False),  # 4:51 in the morning is not 4:51 p.m.
    ("937/5525", r"\frac{72}{425}", False),
]


@pytest.mark.parametrize(("answer", "gold", "expected"), QUOTED_PAIRS)
def test_quoted_answer_pairs(answer: str, gold: str, expected: bool) -> None:
    assert answers_match_gold(answer, gold) is expected
    assert answers_equivalent(answer, gold) is expected
    assert answers_equivalent(gold, answer) is expected


@pytest.mark.parametrize(("a", "b"), [("18+3=21", "12+3=15"), ("1+1=3", "2+2=5"), ("9-5=4", "3-5=-2")])
def test_two_different_equations_are_never_one_cluster(a: str, b: str) -> None:
    assert answers_equivalent(a, b) is False
    assert cluster_answers([a, b]) == [0, 1]


def test_equations_are_compared_by_their_final_value() -> None:
    # Against gold 4, only 9-5=4 states the answer 4 (3-5=-2 is a true equation, but of -2).
    clusters, correct = grade_episode(["9-5=4", "3-5=-2", "1+1=3"], "4")
    assert clusters == [0, 1, 2]
    assert correct == [True, False, False]
    assert answers_equivalent("(6 - 4) * 12 = 24", "24") is True
    assert answers_equivalent("2 + 2 = 4", "1 + 3 = 4") is True  # the same final value
    assert answers_equivalent("x^2+y^2=1", "x^2+y^2=4") is False  # not arithmetic: math-verify decides


@pytest.mark.parametrize(
    ("text", "answer", "status"),
    [
        (r"Reasoning... <answer>\frac{5}{8}</answer>", r"\frac{5}{8}", "answer_tag"),
        (r"<answer>2\sqrt{3}</answer>", r"2\sqrt{3}", "answer_tag"),
        ("<answer>draft</answer> then <answer>$\\boxed{7}$</answer>", "7", "answer_tag"),
        ("The sum is 12 and more. <answer>  </answer>", None, "none"),  # an empty tag is no answer
        ("We get 3, then 4.\nFinal answer: \\frac{5}{8}", r"\frac{5}{8}", "final_answer"),
        ("Janet sells 16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars.\n#### 18", "18", "final_answer"),
        ("", None, "none"),
        ("   \n ", None, "none"),
    ],
)
def test_extraction_of_tags_final_answer_and_hashes(text: str, answer: str | None, status: str) -> None:
    found = extract_answer(text)
    assert (found.answer, found.status) == (answer, status)


def test_answer_tag_is_not_reduced_to_its_last_number() -> None:
    found = extract_answer(r"<answer>\frac{5}{8}</answer>")
    assert answers_match_gold(found.answer, "0.625") is True
    assert answers_match_gold(found.answer, "8") is False


def test_empty_answers_are_no_answer_in_clustering_and_both_majority_votes(tmp_path) -> None:
    # One episode: "" twice, blanks once, then the gold "5" once: no empty vote may win either majority.
    answers = ["", "", "  ", "5"]
    assert cluster_answers(answers) == [-1, -1, -1, 0]
    records = [{"dataset": "d", "item_id": "1", "problem": "p", "gold": "5", "generator": "g",
                "generator_params_b": 1.0, "candidate": k, "answer": a, "prompt_tokens": 3, "output_tokens": 4}
               for k, a in enumerate(answers)]
    pool = import_jsonl(write_jsonl(tmp_path / "empty.jsonl", records))
    assert pool.candidates["raw_answer"].isna().tolist() == [True, True, True, False]
    assert pool.candidates["cluster"].tolist() == [-1, -1, -1, 0]
    assert pool.candidates["correct"].tolist() == [False, False, False, True]
    assert majority_accuracy(pool, 4, key="cluster") == 1.0
    assert majority_accuracy(pool, 4, key="raw_answer") == 1.0
    # A pool from elsewhere that stores "" as the raw answer: "" still casts no exact-string vote.
    pool.candidates["raw_answer"] = pd.array(answers, dtype="str")
    assert majority_accuracy(pool, 4, key="raw_answer") == 1.0


# ---------------------------------------------------------------------------------------------------
# Game of 24
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "numbers", "expected"),
    [
        ("(10 - 6) * 5 + 4 = 24", [4, 5, 6, 10], True),
        ("4 * (10 - 6) + 5 + 3", [4, 5, 6, 10], False),  # 3 is not the puzzle's, 24 nonetheless
        ("(6 - 4) * 12 = 24", [4, 5, 6, 10], False),
        ("(10 - 4) * (6 - 5) = 6", [4, 5, 6, 10], False),  # the puzzle's numbers, but worth 6
        ("6 / (1 - 3/4)", [1, 3, 4, 6], True),  # needs exact fractions
        (r"\frac{10}{5} \times (6 + 6)", [5, 6, 6, 10], True),
        ("5 * 5 - 1", [1, 5, 5, 10], False),  # 10 unused
        ("None", [4, 5, 6, 10], False),
        ("", [4, 5, 6, 10], False),
    ],
)
def test_game24_check(answer: str, numbers: list[int], expected: bool) -> None:
    assert is_game24_solution(answer, numbers) is expected


def test_puzzle24_scorer_is_configured_per_item_and_checks_the_numbers() -> None:
    # 12 + 12 * 1 * 1 = 24 uses the puzzle's numbers; reasoning-gym's default max_value=10 would reject 12.
    meta = {"numbers": [12, 12, 1, 1]}
    score = item_scorer("puzzle24", "Make 24 using 12, 12, 1, 1.", "12 + 12 * 1 * 1", meta)
    assert score("12 + 12 * 1 * 1") is True
    assert score("10 + 10 + 2 + 2") is False  # worth 24, in range, but not this puzzle's numbers
    game = item_scorer("game24", "Input: 12 12 1 1", "24", meta)
    assert game("12 + 12 * 1 * 1 = 24") is True


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [(10, [1.0, 1.0], [5, 5]), (10, [1.0, 2.0, 2.0], [2, 4, 4]), (7, [1.0, 1.0, 1.0], [3, 2, 2]),
     (5, [0.0, 0.0], [3, 2]), (0, [3.0, 1.0], [0, 0])],
)
def test_apportion_splits_a_total_by_weight(total: int, weights: list[float], expected: list[int]) -> None:
    assert apportion(total, weights) == expected
