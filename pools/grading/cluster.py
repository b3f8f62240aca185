"""Equivalence classes of answers within one episode, and grading each class once."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pools.grading.choices import match_in_context
from pools.grading.equations import is_arithmetic_equation
from pools.grading.equivalence import (
    answers_equivalent,
    answers_match_gold,
    normalize_answer,
    numeric_value,
    values_differ,
)

__all__ = ["NO_ANSWER", "AnswerClusterer", "cluster_answers", "grade_episode", "literal_key"]

#: Cluster id of a candidate without an answer.
NO_ANSWER = -1


def literal_key(answer: str | None) -> str | None:
    """The answer with outer whitespace stripped and inner runs of whitespace made one space."""
    if answer is None:
        return None
    text = re.sub(r"\s+", " ", answer).strip()
    return text or None


def _never_equivalent(a: str, b: str) -> bool:
    return False


class AnswerClusterer:
    """Cluster ids for answers added one by one (a live run reveals candidates one at a time).

    Ids are 0, 1, 2, ... in order of first appearance; -1 for no answer. Answers are grouped by ``key``
    (the normalized answer) first; a key seen for the first time is then compared, through ``equivalent``
    on raw answers, with the first answer of each existing cluster and joins the first cluster it matches,
    else opens a new one. With k distinct keys that is at most k * (k - 1) / 2 calls. An answer whose key
    is None (None, empty) gets -1.

    ``literal=True`` is the clustering of items graded by their own scorer (see ``grade_episode``): answers
    cluster only when equal up to whitespace (``literal_key``, no equivalence calls). ``equivalent`` and
    ``key``, when given, replace the chosen defaults (math equivalence and ``normalize_answer``).

    Speed: with math equivalence, each answer's number (``numeric_value``, None when it is not a plain
    number) is computed once, and a pair of numbers that ``values_differ`` is never sent to math-verify
    (it could not call them equal). ``value`` replaces that function; ``value=None`` with a custom
    ``equivalent`` (the default then) compares every pair. With that prefilter on ``normalize_answer`` keys,
    a key math equivalence matches only to itself (an equation of numbers that is not true,
    ``is_arithmetic_equation``) is never compared with another at all.
    """

    def __init__(
        self,
        *,
        literal: bool = False,
        equivalent: Callable[[str, str], bool] | None = None,
        key: Callable[[str | None], str | None] | None = None,
        value: Callable[[str], complex | None] | None | str = "auto",
    ) -> None:
        math_default = equivalent is None and not literal
        if equivalent is None:
            equivalent = _never_equivalent if literal else answers_equivalent
        if key is None:
            key = literal_key if literal else normalize_answer
        if value == "auto":
            value = numeric_value if math_default or equivalent is answers_equivalent else None
        self._equivalent = equivalent
        self._key = key
        self._value = value
        # Part of the math prefilter (numeric_value on normalize_answer keys): such a key equals no other.
        self._only_itself = is_arithmetic_equation if value is numeric_value and key is normalize_answer else None
        self._key_to_cluster: dict[str, int] = {}
        # (first raw answer, its number, matches only itself) per cluster
        self._heads: list[tuple[str, complex | None, bool]] = []

    @property
    def distinct_keys(self) -> int:
        """How many distinct answer keys have been seen."""
        return len(self._key_to_cluster)

    def add(self, answer: str | None) -> int:
        """The cluster id of the next answer (-1 when it has none)."""
        answer_key = self._key(answer)
        if answer_key is None or answer is None:
            return NO_ANSWER
        if answer_key not in self._key_to_cluster:
            only_itself = self._only_itself is not None and self._only_itself(answer_key)
            number = self._value(answer) if self._value is not None and not only_itself else None
            match = None if only_itself else next(
                (cid for cid, (head, head_number, head_only_itself) in enumerate(self._heads)
                 if not head_only_itself and not values_differ(number, head_number) and self._equivalent(head, answer)),
                None)
            if match is None:
                match = len(self._heads)
                self._heads.append((answer, number, only_itself))
            self._key_to_cluster[answer_key] = match
        return self._key_to_cluster[answer_key]


def cluster_answers(
    answers: Sequence[str | None],
    *,
    equivalent: Callable[[str, str], bool] = answers_equivalent,
    key: Callable[[str | None], str | None] = normalize_answer,
) -> list[int]:
    """Cluster id per answer, as ``AnswerClusterer`` gives them one by one (0, 1, ...; -1 for no answer)."""
    clusterer = AnswerClusterer(equivalent=equivalent, key=key)
    return [clusterer.add(answer) for answer in answers]


def grade_episode(
    answers: Sequence[str | None],
    gold: str,
    *,
    scorer: Callable[[str], bool] | None = None,
    problem: str | None = None,
) -> tuple[list[int], list[bool]]:
    """Cluster the answers and grade each cluster once (its first member); returns (clusters, correct).

    Without ``scorer``: math clustering (``AnswerClusterer`` defaults) and ``answers_match_gold`` against
    ``gold``. With ``scorer`` (e.g. a Reasoning Gym task's scoring): the scorer replaces the gold
    comparison, and answers cluster only when literally equal up to whitespace (``literal=True``), because
    math equivalence can merge answers such a scorer tells apart ("1 2 3" and "123", an anagram and its
    word) and every member of a cluster must share its verdict. No answer (None) is incorrect.
    ``problem``, when given, lets a multiple-choice letter match its option's value and a clock time asked for
    without a.m./p.m. match the gold's (``pools.grading.choices``).
    """
    clusterer = AnswerClusterer(literal=scorer is not None)
    clusters = [clusterer.add(answer) for answer in answers]
    verdict_by_cluster: dict[int, bool] = {}
    for answer, cluster in zip(answers, clusters, strict=True):
        if cluster == NO_ANSWER or cluster in verdict_by_cluster or answer is None:
            continue
        if scorer is not None:
            verdict_by_cluster[cluster] = bool(scorer(answer))
        else:
            verdict_by_cluster[cluster] = answers_match_gold(answer, gold) or match_in_context(
                answer, gold, problem, lambda a, g: answers_match_gold(a, g))
    correct = [verdict_by_cluster.get(cluster, False) for cluster in clusters]
    return clusters, correct
