"""The kinds of chat-model MATH answers the grader used to get wrong (issue 28), each from hand-made examples.

Every expected verdict is worked out by hand: the two sides denote the same mathematical answer (True) or
differ by one visible detail (False, so a rule that matched everything would fail). Each True case failed on
the grader before these rules.
"""

from __future__ import annotations

import pytest

from pools.grading import answers_match_gold, grade_episode

KINDS = {
    "words in \\text{} after the gold": [
        (r"12\text{ apples.}", "12", True),
        (r"12\text{ apples.}", "13", False),
        (r"3\text{ red marbles}", "3", True),
        (r"10\text{ thousand}", "10", False),  # a multiplier word changes the quantity: kept
    ],
    "matrix rows separated by \\ or nested lists": [
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{pmatrix}1&2\ 3&4\end{pmatrix}", True),
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", "[[1, 2], [3, 4]]", True),
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", "[[1, 2], [4, 3]]", False),
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{pmatrix}1&2\ 4&3\end{pmatrix}", False),
    ],
    "plain-text functions": [
        (r"\sin(x)\cos(y)", "sin(x)cos(y)", True),
        (r"\ln\frac{a}{b}", "ln(a/b)", True),
        (r"\ln\frac{a}{b}", "ln(b/a)", False),
        (r"\sin(x)\cos(y)", "sin(y)cos(x)", False),
    ],
    "coefficient split from its variable": [
        (r"\frac{5t}{2}", r"\frac{5}{2} t", True),
        (r"1+\frac{5i}{2}", r"1+\frac{5}{2}i", True),
        (r"\frac{5t}{2}", r"\frac{5}{2}", False),  # the variable counts (math-verify alone read both as 5/2)
        (r"\frac{5t}{2}", r"\frac{3}{2} t", False),
    ],
    "set-builder vs interval union": [
        (r"(-\infty,2)\cup(2,\infty)", "x ∈ ℝ, x ≠ 2", True),
        (r"(-\infty,-3)\cup(-3,2)\cup(2,\infty)", r"x \neq 2, x \neq -3", True),
        (r"(-\infty,2)\cup(2,\infty)", "all real numbers except 2", True),
        (r"(-\infty,2)\cup(2,\infty)", "x ∈ ℝ, x ≠ 3", False),
    ],
    "a label before the answer": [
        ("12", r"\text{Area} = 12", True),
        ("12", "area = 12", True),
        ("12", r"\text{Area} = 13", False),
    ],
}
CASES = [pytest.param(gold, answer, expected, id=f"{kind}: {answer}") for kind, rows in KINDS.items()
         for gold, answer, expected in rows]


@pytest.mark.parametrize(("gold", "answer", "expected"), CASES)
def test_chat_answer_kinds(gold: str, answer: str, expected: bool) -> None:
    assert answers_match_gold(answer, gold) is expected


CLOCK_PROBLEM = (r'It is currently $3\!:\!00\!:\!00 \text{ p.m.}$ What time will it be in $6666$ seconds? (Enter '
                 'the time in the form "HH:MM:SS", without "am" or "pm".)')


def test_clock_time_asked_without_am_pm_matches_a_pm_gold() -> None:
    # 3:00:00 p.m. + 6666 s (1 h 51 min 6 s) = 4:51:06 p.m., MATH's gold; the problem asks for it without "pm".
    gold = r"4\!:\!51\!:\!06 \text{ p.m.}"
    answers = ["4:51:06", "16:51:06", "4:51:07", "5:51:06"]
    _, correct = grade_episode(answers, gold, problem=CLOCK_PROBLEM)
    assert correct == [True, True, False, False]
    _, without_problem = grade_episode(["4:51:06"], gold)  # no problem asking for that form: 4:51 a.m. stays wrong
    assert without_problem == [False]


AMC = (r"What is $2+3$? $\textbf{(A) }4\qquad\textbf{(B) }5\qquad\textbf{(C) }6\qquad\textbf{(D) }7\qquad"
       r"\textbf{(E) }8$")
LINES = "Which of these is prime?\nA. 4\nB. 6\nC. 7\nD. 9"


@pytest.mark.parametrize(("problem", "gold", "answers", "expected"), [
    (AMC, "B", ["5", "(B)", "6", "C"], [True, True, False, False]),
    (AMC, r"\textbf{(B) }5", ["5", "B", "(A) 4", "D"], [True, True, False, False]),
    (AMC, "5", ["B", r"\text{(B)}", "A"], [True, True, False]),
    (LINES, "7", ["C", "(C)", "D"], [True, True, False]),
    (LINES, "C", ["7", "9"], [True, False]),
])
def test_multiple_choice_letter_vs_option_value(problem: str, gold: str, answers: list[str],
                                                expected: list[bool]) -> None:
    assert grade_episode(answers, gold, problem=problem)[1] == expected


def test_a_letter_without_options_in_the_problem_is_not_a_value() -> None:
    assert grade_episode(["B"], "5", problem="What is 2+3?")[1] == [False]
