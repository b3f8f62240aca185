"""Answer extraction from solution texts, and the repetition audit; expected values written by hand."""

from __future__ import annotations

import dataclasses

import pytest

from pools.grading import Extraction, extract_answer, repetition_score


@pytest.mark.parametrize(
    ("text", "answer", "status", "incomplete"),
    [
        # boxed: nested braces, last box wins, \fbox, escaped set braces, no-brace form
        (r"So $x = \boxed{\frac{a}{b}}$.", r"\frac{a}{b}", "boxed", False),
        (r"Hence \boxed{\frac{\sqrt{3}}{2}} is the value.", r"\frac{\sqrt{3}}{2}", "boxed", False),
        (r"First \boxed{3}, but wait: actually \boxed{\frac{1}{2}}.", r"\frac{1}{2}", "boxed", False),
        (r"\fbox{9}", "9", "boxed", False),
        (r"The solutions are \boxed{\{1, 2\}}.", r"\{1, 2\}", "boxed", False),
        (r"The answer is $\boxed 5$.", "5", "boxed", False),
        (r"\boxed{ (3, 4] }", "(3, 4]", "boxed", False),
        # a box over the final-answer statement
        (r"The final answer is 4, i.e. \boxed{4}.", "4", "boxed", False),
        # truncated at the token cap: an earlier complete box still counts, flagged
        (r"We get \boxed{5}. Checking again, \boxed{\frac{3}{", "5", "boxed", True),
        # truncated with no complete box: fall back to what precedes the open box
        (r"The answer is 12. Writing it out: \boxed{\frac{3}{", "12", "final_answer", True),
        (r"Adding, 3 + 4 = 7. So the answer is $\boxed{\frac{1}{", "7", "last_expression", True),
        (r"Thus \boxed{\frac{1}{", None, "none", True),
        # final-answer statements
        (r"The final answer is $\frac{1}{2}$. I hope it is correct.", r"\frac{1}{2}", "final_answer", False),
        ("Final Answer: The final answer is 42. I hope it is correct.", "42", "final_answer", False),
        ("So the answer is 7.", "7", "final_answer", False),
        ("The answer is 3.14, approximately.", "3.14", "final_answer", False),
        ("Some work.\n**Answer:** 12", "12", "final_answer", False),
        ("Answer: (3, 4]", "(3, 4]", "final_answer", False),
        (r"the final answer is \(\frac{7}{2}\)", r"\frac{7}{2}", "final_answer", False),
        ("The answer is 5. Wait, no. The answer is 6.", "6", "final_answer", False),
        # fallback: last math segment or number, whichever ends later; right side of "="
        ("We compute 3 + 4 = 7, so there are 7 apples left.", "7", "last_expression", False),
        ("Therefore $x = 3.5$", "3.5", "last_expression", False),
        (r"So we get $\frac{2}{3}$ in the end", r"\frac{2}{3}", "last_expression", False),
        ("There are 1,000 ways.", "1,000", "last_expression", False),
        ("It moved -4 units", "-4", "last_expression", False),
        # nothing
        ("No numbers here at all.", None, "none", False),
        (r"An empty box $\boxed{}$ says nothing.", None, "none", False),
        ("", None, "none", False),
        ("   \n ", None, "none", False),
        (None, None, "none", False),
    ],
)
def test_extract_answer(text: str | None, answer: str | None, status: str, incomplete: bool) -> None:
    assert extract_answer(text) == Extraction(answer=answer, status=status, incomplete_boxed=incomplete)


def test_extraction_is_frozen() -> None:
    extraction = extract_answer(r"\boxed{1}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        extraction.answer = "2"  # type: ignore[misc]


def test_long_solution_takes_the_last_box() -> None:
    steps = "".join(f"Step {i}: we find $a_{{{i}}} = {i * i}$.\n" for i in range(200))
    text = steps + r"Intermediate \boxed{12}. After checking, the result is $\boxed{\dfrac{17}{50}}$."
    assert extract_answer(text) == Extraction(r"\dfrac{17}{50}", "boxed", False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, 0.0),
        ("", 0.0),
        ("too short to judge", 0.0),
        # 40 distinct words, no repeated 10-gram
        (" ".join(f"word{i}" for i in range(40)), 0.0),
        # one word 100 times: 91 windows, 1 distinct -> 90/91
        ("again " * 100, 90 / 91),
    ],
)
def test_repetition_score_hand_worked(text: str | None, expected: float) -> None:
    assert repetition_score(text) == pytest.approx(expected)


def test_repetition_score_flags_a_latex_loop_and_spares_prose() -> None:
    prose = (
        "Let the width be w. Then the length is 2w + 3, and the perimeter 2(w + 2w + 3) = 6w + 6 equals 42, "
        "so w = 6 and the length is 15. The area is therefore 6 times 15, which is 90 square units. "
        "We double-check: 2(6 + 15) = 42, as required, and both sides are positive."
    )
    loop = prose + r" \frac{1}{2} + \frac{1}{2} = " * 80
    assert repetition_score(prose) < 0.05
    assert repetition_score(loop) > 0.9
    assert 0.0 <= repetition_score(loop) <= 1.0
