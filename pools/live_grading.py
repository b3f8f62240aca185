"""Evaluator-side gold grading of one answer (a live run's selected answer).

Graded as a pool build grades it (``pools.importers.jsonl``): Reasoning Gym items (those carrying ``task``
and ``metadata``) by their task's own scorer, others by math-verify against the gold answer. Live answer
clustering is ``pools.grading.AnswerClusterer``.
"""

from __future__ import annotations

from typing import Any

from pools.grading import answers_match_gold, item_scorer

__all__ = ["grade_answer"]


def grade_answer(answer: str | None, *, gold: str | None, problem: str = "", task: str | None = None,
                 metadata: Any = None) -> bool | None:
    """Evaluator side only: whether ``answer`` is correct (None when no gold answer is known).

    Reasoning Gym items use their task's scorer, others math-verify against ``gold`` (as pools are graded).
    """
    scorer = item_scorer(task, problem, gold or "", metadata)
    if scorer is not None:
        return bool(answer is not None and scorer(answer))
    if gold is None or gold == "":
        return None
    return bool(answer is not None and answers_match_gold(answer, gold))
