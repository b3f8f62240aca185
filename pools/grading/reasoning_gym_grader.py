"""Reasoning Gym items and their grading by each task's own ``score_answer``.

``reasoning_gym.create_dataset(task, seed=..., size=..., **config)`` builds a procedural dataset whose
entries are ``{"question", "answer", "metadata"}`` dicts; ``dataset.score_answer(answer, entry)`` returns a
reward in [0, 1]. Many tasks give partial credit to wrong answers (e.g. 0.01 for a badly formatted one,
or len(gold) / len(answer) when the gold is a substring of the answer), so only a full score counts as
correct here: ``score >= threshold`` with ``threshold = 1.0`` by default.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pools.grading.game24 import game24_scorer

__all__ = ["item_scorer", "make_reasoning_gym_items", "reasoning_gym_scorer", "uses_task_scorer"]

logger = logging.getLogger(__name__)

#: Tasks whose items are Game-of-24 puzzles (``metadata["numbers"]``): "game24" is graded by the check alone.
GAME24_TASKS: tuple[str, ...] = ("game24", "puzzle24")

#: A float tolerance on the threshold, so a score computed as 0.9999999999 still counts as 1.0.
_SCORE_EPSILON = 1e-9


def _create_dataset(task: str, **kwargs: Any) -> Any:
    # Imported here: reasoning_gym takes about a second to import and most pools never need it.
    import reasoning_gym

    return reasoning_gym.create_dataset(task, **kwargs)


def _jsonable(value: Any) -> Any:
    """A JSON-serializable copy of ``value`` (tuples become lists, sets sorted lists, others strings)."""
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(item) for item in value), key=repr)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _task_config(task: str, tasks: Sequence[str], config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per-task keyword arguments: ``{task: {...}}`` when every key of ``config`` names a task, else ``config``."""
    if not config:
        return {}
    if all(key in tasks for key in config):
        return dict(config.get(task) or {})
    return dict(config)


def make_reasoning_gym_items(
    tasks: Sequence[str],
    size: int,
    seed: int,
    config: dict | None = None,
) -> list[dict]:
    """``size`` items per task as dicts with item_id, problem, gold, task and JSON-ready metadata.

    ``config`` holds extra keyword arguments for ``reasoning_gym.create_dataset``: either one dict used for
    every task, or ``{task_name: {...}}`` when every key is one of ``tasks``. ``size`` and ``seed`` here
    win over any in ``config``. The same arguments always rebuild the same items; item ids are
    ``"{task}-{seed}-{index}"``.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    items: list[dict] = []
    for task in tasks:
        kwargs = {**_task_config(task, tasks, config), "size": max(size, 1), "seed": seed}
        dataset = _create_dataset(task, **kwargs)
        for index in range(size):
            entry = dataset[index]
            answer = entry.get("answer")
            items.append(
                {
                    "item_id": f"{task}-{seed}-{index}",
                    "problem": str(entry["question"]),
                    "gold": "" if answer is None else str(answer),
                    "task": task,
                    "metadata": _jsonable(entry.get("metadata") or {}),
                }
            )
    return items


@functools.lru_cache(maxsize=256)
def _scoring_dataset(task: str, config_json: str, overrides_json: str = "{}") -> Any:
    """A dataset instance of ``task`` to call ``score_answer`` on (scoring does not depend on its items).

    ``overrides`` are set on the dataset's config after it is built: a scorer reads them at call time, and
    setting them late skips the config's generation limits (puzzle24 refuses ``max_value > 10`` at build
    time, yet its scorer must accept the 11-13 of a puzzle that has them).
    """
    kwargs = {**json.loads(config_json), "size": 1, "seed": 0}
    dataset = _create_dataset(task, **kwargs)
    for name, value in json.loads(overrides_json).items():
        setattr(dataset.config, name, value)
    return dataset


def _puzzle24_config(metadata: Mapping[str, Any]) -> dict[str, Any]:
    numbers = [int(n) for n in metadata.get("numbers") or []]
    return {"min_value": min(numbers), "max_value": max(numbers)} if numbers else {}


#: Task -> function of an item's metadata giving the scorer's config for that item.
SCORER_CONFIG_FROM_METADATA: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "puzzle24": _puzzle24_config,
}


def _as_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A Reasoning Gym entry from either an entry or an item dict (gold/problem, metadata maybe as JSON)."""
    metadata = entry.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    answer = entry["answer"] if "answer" in entry else entry.get("gold")
    question = entry["question"] if "question" in entry else entry.get("problem", "")
    return {"question": question, "answer": answer, "metadata": metadata}


def reasoning_gym_scorer(
    task: str,
    entry: dict,
    *,
    config: dict | None = None,
    threshold: float = 1.0,
) -> Callable[[str], bool]:
    """A function answer -> correct for one item, using the task's own ``score_answer`` (score >= threshold).

    ``entry`` is a Reasoning Gym entry (question, answer, metadata) or an item from
    ``make_reasoning_gym_items`` (problem, gold, metadata; metadata may be a JSON string). ``config`` is
    the task's dataset config when its scoring depends on it (rare). A scorer that raises counts as wrong.
    """
    full_entry = _as_entry(entry)
    overrides = SCORER_CONFIG_FROM_METADATA.get(task, lambda metadata: {})(full_entry["metadata"])
    dataset = _scoring_dataset(task, json.dumps(config or {}, sort_keys=True), json.dumps(overrides, sort_keys=True))

    def score(answer: str) -> bool:
        if answer is None:
            return False
        try:
            # A fresh copy per call: a scorer that edits its entry must not change the next verdict.
            value = dataset.score_answer(answer, copy.deepcopy(full_entry))
        except Exception:  # a task scorer failing on odd input means the answer did not score
            logger.debug("reasoning-gym %s scorer raised on %r", task, answer, exc_info=True)
            return False
        return value is not None and float(value) >= threshold - _SCORE_EPSILON

    return score


def uses_task_scorer(task: str | None, metadata: Any) -> bool:
    """Whether an item is graded by its task's scorer (task and metadata set), not by math against gold."""
    return bool(task) and metadata is not None


def item_scorer(task: str | None, problem: str, gold: str, metadata: Any) -> Callable[[str], bool] | None:
    """The task's scorer of an item (``uses_task_scorer``), else None (math-verify against gold).

    ``game24`` items (``metadata["numbers"]``) use the Game-of-24 check; Reasoning Gym's ``puzzle24`` uses
    its own scorer configured from the item's numbers and the Game-of-24 check on top (its scorer ignores
    which numbers the puzzle gave); any other task its Reasoning Gym scorer.
    """
    if not uses_task_scorer(task, metadata):
        return None
    meta = json.loads(metadata) if isinstance(metadata, str) else metadata
    if task in GAME24_TASKS:
        puzzle = game24_scorer(meta["numbers"])
        if task == "game24":
            return puzzle
        task_score = reasoning_gym_scorer(task, {"question": problem, "answer": gold, "metadata": meta})
        return lambda answer: puzzle(answer) and task_score(answer)
    return reasoning_gym_scorer(task, {"question": problem, "answer": gold, "metadata": meta})
