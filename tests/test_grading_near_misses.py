"""Near misses of the issue-17 grading rules: headings that look like ``#### n``, words that are not units,
false equations, ratios that look like clock times, empty ``<answer>`` tags that are not the answer.

Every expected verdict is worked out by hand from the mathematics (noted where it needs a step), not
taken from the grader's output.
"""

from __future__ import annotations

import pytest

from pools.grading import answers_equivalent, answers_match_gold, cluster_answers, extract_answer


@pytest.mark.parametrize(
    ("text", "answer", "status"),
    [
        # markdown level-4 headings are not GSM8K's "#### n": the answer is the last number, 6
        ("#### Step 1: Find x\nWe have x = 3.\n#### Step 2: Double it\nSo 2x = 6.", "6", "last_expression"),
        ("#### 1. Setup\nWe need 4 + 5 = 9.\n#### 2. Answer\nThe total is 9.", "9", "last_expression"),
        ("#### 3 apples\nWe count 3 + 2 = 5.", "5", "last_expression"),  # "3 apples" is no lone number
        ("Janet has 3 + 4 = 7 eggs.\n#### 7", "7", "final_answer"),
        ("Cost is found.\n####  -12\n", "-12", "final_answer"),
        ("Cost is found.\n#### $1,234.50", "1,234.50", "final_answer"),
        # empty tags followed by more text are an echoed instruction: the text after them answers
        ("Reply in <answer></answer> tags. The answer is 6.", "6", "final_answer"),
        (r"<answer></answer> \boxed{5}", "5", "boxed"),
        ("Format: <answer></answer>. We get 3 + 4 = 7.", "7", "last_expression"),
        # an empty tag that ends the text is an explicit empty answer
        ("Work: 12. <answer></answer>", None, "none"),
        # a statement inside a tag gives its answer, not the sentence
        ("<answer>The answer is 5</answer>", "5", "answer_tag"),
        ("<answer>Final answer: 7</answer>", "7", "answer_tag"),
        ("<answer>No solution</answer>", "No solution", "answer_tag"),
        (r"<answer>\frac{5}{8}</answer>", r"\frac{5}{8}", "answer_tag"),
    ],
)
def test_extraction_near_misses(text: str, answer: str | None, status: str) -> None:
    found = extract_answer(text)
    assert (found.answer, found.status) == (answer, status)


# (a, b, equivalent?)
NEAR_MISS_PAIRS = [
    # a multiplier, an operation or a comparison word changes the answer; only units come off
    ("10 thousand", "10", False),
    ("1.5 million", "1.5", False),
    ("7 hundred", "7", False),
    ("3 dozen", "3", False),
    ("12 squared", "12", False),
    ("5 more", "5", False),
    ("12 cm", "12", True),
    ("7 euros", "7", True),
    ("7 euros", "8", False),
    (r"5 \text{ dollars}", "5", True),
    # a single letter in \mathrm is a symbol: 3+2i is complex, 2e is 2 times Euler's number
    (r"3+2\mathrm{i}", "3+2", False),
    (r"3+2\mathrm{i}", "3+2i", True),
    (r"2\mathrm{e}", "2", False),
    # equations: a true one states its final value; a false one matches only itself
    ("3=x", "5=x", False),  # x = 3 and x = 5
    ("1+1=5", "2+2=5", False),
    ("1+1=5", "1 + 1 = 5", True),  # the same equation, spaced differently
    ("1+1=5", "5", False),
    ("3+2=5", "5", True),
    (r"\frac{1}{2}+\frac{1}{2}=1", "1", True),
    ("2^3=8", "8", True),
    ("2^3=9", "9", False),  # 2^3 is 8
    ("6/(1-3/4)=24", "24", True),  # 1 - 3/4 = 1/4 and 6 / (1/4) = 24
    ("0.1+0.2=0.3", "0.3", True),  # exactly 3/10, not floating point's 0.30000000000000004
    ("22/7=3.14", "3.14", True),  # 22/7 = 3.142857..., 3.14 to two decimals
    ("22/7=3.15", "3.15", False),  # 3.142857... rounds to 3.14, not 3.15
    ("x^2=4", "x^2=9", False),
    # ratios are ratios unless a.m./p.m. or seconds make them times
    ("5:12", "10:24", True),
    ("1:20", "2:40", True),
    ("10:15", "2:3", True),  # 10/15 = 2/3
    ("10:15", "3:2", False),
    ("4:51 p.m.", "16:51", True),
    ("4:51 p.m.", "4:51", False),  # 4:51 read on a 24-hour clock is morning
    ("12:30 p.m.", "12:30", True),  # 12:30 p.m. is half past noon
    ("12:30 a.m.", "00:30", True),  # half past midnight
]


@pytest.mark.parametrize(("a", "b", "expected"), NEAR_MISS_PAIRS)
def test_near_miss_pairs(a: str, b: str, expected: bool) -> None:
    assert answers_equivalent(a, b) is expected
    assert answers_equivalent(b, a) is expected
    assert answers_match_gold(a, b) is expected


@pytest.mark.parametrize(
    ("answers", "clusters"),
    [
        (["1+1=5", "2+2=5", "3+2=5"], [0, 1, 2]),  # two false equations, then a true one worth 5
        (["2+2=4", "1+3=4", "4", "1+1=5", "1 + 1 = 5"], [0, 0, 0, 1, 1]),
        (["5:12", "10:24", "1:3"], [0, 0, 1]),
        (["10 thousand", "10", "10 cm"], [0, 1, 1]),
    ],
)
def test_near_miss_clusters(answers: list[str], clusters: list[int]) -> None:
    assert cluster_answers(answers) == clusters


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("(6 - 4) * 5 = 24", False), ("(6 - 4) * 12 = 24", True), ("(6 - 4) * 5 = 10", False)],
)
def test_a_false_equation_does_not_match_its_right_side(answer: str, expected: bool) -> None:
    # (6 - 4) * 5 is 10: "= 24" is false, so it does not state 24; "(6-4)*5 = 10" states 10, not 24.
    assert answers_match_gold(answer, "24") is expected
