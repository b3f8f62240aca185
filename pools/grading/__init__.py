"""Answer grading: extraction from solution texts, normalization, equivalence, clustering, scoring.

Everything here runs when a pool is built, never inside the environment's ``step()``.
"""

from pools.grading.audit import repetition_score
from pools.grading.cluster import NO_ANSWER, AnswerClusterer, cluster_answers, grade_episode, literal_key
from pools.grading.equivalence import answers_equivalent, answers_match_gold, normalize_answer
from pools.grading.extract import Extraction, extract_answer
from pools.grading.reasoning_gym_grader import (
    item_scorer,
    make_reasoning_gym_items,
    reasoning_gym_scorer,
    uses_task_scorer,
)

__all__ = [
    "NO_ANSWER",
    "AnswerClusterer",
    "Extraction",
    "answers_equivalent",
    "answers_match_gold",
    "cluster_answers",
    "extract_answer",
    "grade_episode",
    "item_scorer",
    "literal_key",
    "make_reasoning_gym_items",
    "normalize_answer",
    "reasoning_gym_scorer",
    "repetition_score",
    "uses_task_scorer",
]
