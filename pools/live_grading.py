"""Answer clustering of a growing set of candidates (live routing), and evaluator-side gold grading.

A live run reveals candidates one at a time, so the cluster of each new answer must be known at once.
``AnswerClusterer.add`` gives every answer exactly the cluster id that ``pools.grading.grade_episode`` (and so
a pool built from the same texts) would give it in the whole list: ids 0, 1, ... in order of first
appearance, -1 for no answer; math equivalence for math problems, literal equality up to whitespace for
Reasoning Gym items (those carrying ``task`` and ``metadata``), whose own scorers may tell apart answers
that math equivalence merges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pools.grading import (
    NO_ANSWER,
    answers_equivalent,
    answers_match_gold,
    literal_key,
    normalize_answer,
    reasoning_gym_scorer,
)

__all__ = ["AnswerClusterer", "grade_answer", "uses_task_scorer"]


def uses_task_scorer(task: str | None, metadata: Any) -> bool:
    """Whether an item is graded by its Reasoning Gym task's scorer (then answers cluster literally)."""
    return bool(task) and metadata is not None


class AnswerClusterer:
    """Cluster ids for answers added one by one, identical to ``cluster_answers`` over the full list.

    Same rule as ``pools.grading.cluster_answers``: an answer joins the cluster of its key (normalized
    answer) when that key was seen; a new key is compared with the first answer of each cluster, in cluster
    order, and joins the first it is equivalent to, else opens a new cluster.
    """

    def __init__(self, *, literal: bool = False) -> None:
        self.literal = literal
        self._key: Callable[[str | None], str | None] = literal_key if literal else normalize_answer
        self._equivalent: Callable[[str, str], bool] = (lambda a, b: False) if literal else answers_equivalent
        self._key_to_cluster: dict[str, int] = {}
        self.heads: list[str] = []  # first raw answer of each cluster, in cluster-id order

    @property
    def n_clusters(self) -> int:
        """Distinct answers seen so far."""
        return len(self.heads)

    def add(self, answer: str | None) -> int:
        """The cluster id of the next answer (-1 when it has none)."""
        key = self._key(answer)
        if key is None or answer is None:
            return NO_ANSWER
        if key not in self._key_to_cluster:
            match = next((cid for cid, head in enumerate(self.heads) if self._equivalent(head, answer)), None)
            if match is None:
                match = len(self.heads)
                self.heads.append(answer)
            self._key_to_cluster[key] = match
        return self._key_to_cluster[key]


def grade_answer(answer: str | None, *, gold: str | None, problem: str = "", task: str | None = None,
                 metadata: Any = None) -> bool | None:
    """Evaluator side only: whether ``answer`` is correct (None when no gold answer is known).

    Reasoning Gym items use their task's scorer, others math-verify against ``gold`` (as pools are graded).
    """
    if uses_task_scorer(task, metadata):
        scorer = reasoning_gym_scorer(task, {"problem": problem, "gold": gold or "", "metadata": metadata})
        return bool(answer is not None and scorer(answer))
    if gold is None or gold == "":
        return None
    return bool(answer is not None and answers_match_gold(answer, gold))
