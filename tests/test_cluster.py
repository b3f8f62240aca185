"""Clustering answers within an episode and grading each cluster once; cluster ids worked out by hand."""

from __future__ import annotations

from collections import Counter

import pytest

from pools.grading import AnswerClusterer, answers_equivalent, cluster_answers, grade_episode, literal_key
from pools.grading.equivalence import numeric_value


@pytest.mark.parametrize(
    ("answers", "clusters"),
    [
        ([], []),
        ([None, None], [-1, -1]),
        (["5"], [0]),
        # same key after normalization
        (["5", "5.0", "005", "$5$", r"\boxed{5}"], [0, 0, 0, 0, 0]),
        # math-verify merges distinct keys: 1/2 = 0.5 = \frac{1}{2}
        ([r"\frac{1}{2}", "0.5", "1/2", "2", None, r"\dfrac12"], [0, 0, 0, 1, -1, 0]),
        # ids follow first appearance; None and empty strings are "no answer"
        ([None, "7", "", "3", "7", "3", "4"], [-1, 0, -1, 1, 0, 1, 2]),
        # near misses stay apart: open vs closed interval, swapped pair, sign
        (["(3,4]", "(3,4)", "(3, 4]", "(4,3)", "-(3,4]"], [0, 1, 0, 2, 3]),
        ([r"3\sqrt{13}", r"\sqrt{117}", r"-3\sqrt{13}", r"\sqrt{13}"], [0, 0, 1, 2]),
        # words are compared as words, not as products of letters ("east" is not "seat")
        ([r"\text{east}", "East", "seat"], [0, 0, 1]),
    ],
)
def test_cluster_answers(answers: list[str | None], clusters: list[int]) -> None:
    assert cluster_answers(answers) == clusters


def test_cluster_answers_calls_equivalence_once_per_new_key_and_cluster() -> None:
    calls: list[tuple[str, str]] = []

    def numeric_equal(a: str, b: str) -> bool:
        calls.append((a, b))
        return float(a) == float(b)

    answers = ["1", "2", "1", "2.5", "2", "3", "2.50", "1"]
    assert cluster_answers(answers, equivalent=numeric_equal) == [0, 1, 0, 2, 1, 3, 2, 0]
    # keys "1","2","2.5","3" (2.50 normalizes to 2.5): each new key is compared with the clusters so far,
    # and a repeated key costs nothing: 0 + 1 + 2 + 3 = 6 calls.
    assert calls == [("1", "2"), ("1", "2.5"), ("2", "2.5"), ("1", "3"), ("2", "3"), ("2.5", "3")]


def test_false_equations_are_never_compared_under_the_math_prefilter() -> None:
    calls: list[tuple[str, str]] = []

    def counted(a: str, b: str) -> bool:
        calls.append((a, b))
        return answers_equivalent(a, b)

    clusterer = AnswerClusterer(equivalent=counted, value=numeric_value)
    # 1+1=5 and 2+2=5 are false (each keys as itself); 3+2=5 is true and keys as 5, like "5" and "5.0";
    # "x+1" is no number. Only "x+1" against the one non-equation head ("3+2=5") needs a comparison.
    answers = ["1+1=5", "2+2=5", "3+2=5", "5", "1 + 1 = 5", "5.0", "x+1"]
    assert [clusterer.add(answer) for answer in answers] == [0, 1, 2, 2, 0, 2, 3]
    assert calls == [("3+2=5", "x+1")]


def test_a_new_key_joins_the_first_matching_cluster() -> None:
    answers = ["a", "b", "ab"]
    # "ab" matches both existing clusters under this relation; the first one wins.
    assert cluster_answers(answers, equivalent=lambda a, b: a in b or b in a) == [0, 1, 0]


def test_grade_episode_against_gold() -> None:
    answers = ["0.5", r"\frac{1}{2}", "2", None, "1/2", "-0.5"]
    clusters, correct = grade_episode(answers, r"\dfrac{1}{2}")
    assert clusters == [0, 0, 1, -1, 0, 2]
    assert correct == [True, True, False, False, True, False]


def test_grade_episode_grades_each_cluster_once_with_its_first_member() -> None:
    seen: list[str] = []

    def scorer(answer: str) -> bool:
        seen.append(answer)
        return answer.strip() == "12"

    answers = ["12", "13", " 12 ", None, "12", "13", "14", None]
    clusters, correct = grade_episode(answers, "ignored when a scorer is given", scorer=scorer)
    assert clusters == [0, 1, 0, -1, 0, 1, 2, -1]
    assert correct == [True, False, True, False, True, False, False, False]
    assert seen == ["12", "13", "14"]
    assert Counter(seen) == Counter({"12": 1, "13": 1, "14": 1})


def test_grade_episode_with_scorer_does_not_merge_math_equivalents() -> None:
    # A task scorer may tell "1 2 3" from "123" or a word from its anagram; clusters must not mix verdicts.
    answers = ["1 2 3", "123", "1  2 3", "tuobnrut", "turnbout"]
    clusters, correct = grade_episode(answers, "unused", scorer=lambda answer: answer == "tuobnrut")
    assert clusters == [0, 1, 0, 2, 3]
    assert correct == [False, False, False, True, False]


def test_grade_episode_all_missing() -> None:
    assert grade_episode([None, None, ""], "5") == ([-1, -1, -1], [False, False, False])


@pytest.mark.parametrize(("answer", "key"), [(None, None), ("  ", None), (" a  b\nc ", "a b c")])
def test_literal_key(answer: str | None, key: str | None) -> None:
    assert literal_key(answer) == key
