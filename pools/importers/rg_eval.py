"""Import reasoning-gym-eval ``results.json`` files (open-thought/reasoning-gym-eval) into a Pool.

Shape: ``{"model": ..., "categories": [{"name": ..., "datasets": [{"dataset_name" (or "name"): ...,
"results": [entry, ...]}, ...]}, ...]}``; each entry holds ``question``, ``expected_answer``, optional
``metadata``, and ``completions``: a list of ``{"model_answer", "full_model_response", "score"}`` (an entry
without ``completions`` but with those three fields itself is one completion). Every entry becomes one
episode of canonical records for ``build_pool``:

* dataset = the dataset's name, which is also the item's Reasoning Gym ``task``; item_id = the entry's
  position in that dataset's results; gold = ``expected_answer``;
* the answer is ``model_answer`` as given (``null``, blank or ``"ERROR"`` is no answer); the text is
  ``full_model_response``; the label is ``score >= 1`` (Reasoning Gym gives partial credit, e.g. 0.01 for
  a wrong format; only a full score is correct);
* with ``metadata`` (and a dataset name the installed reasoning_gym knows) the project's grader is the
  task's own scorer and its agreement with the labels is recorded; otherwise (e.g. the eval ran without
  ``--save-metadata``) the math grader runs, for agreement only;
* nothing about costs is in the file: prompt tokens from the question, output tokens from the text
  (``pools.tokens.estimate_tokens``), latency by rule, all flagged as estimated.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from pools.errors import PoolError
from pools.importers.canonical_records import check_record
from pools.importers.jsonl import build_pool
from pools.importers.tot_game24 import load_json_file
from pools.store import Pool

#: What the eval script writes as the answer when the API call failed.
ERROR_ANSWER = "ERROR"


def _list(obj: dict[str, Any], name: str, where: str) -> list[Any]:
    value = obj.get(name)
    if not isinstance(value, list):
        raise PoolError(f"expected a list, got {type(value).__name__}", file=where, field=name)
    return value


def _completions(entry: dict[str, Any], where: str) -> list[dict[str, Any]]:
    completions = entry["completions"] if "completions" in entry else [entry]
    if not isinstance(completions, list) or not completions:
        raise PoolError("expected a non-empty list of completions", file=where, field="completions")
    for k, completion in enumerate(completions):
        if not isinstance(completion, dict):
            raise PoolError(f"expected an object, got {type(completion).__name__}", file=where,
                            field=f"completions[{k}]")
        score = completion.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise PoolError(f"expected a number, got {score!r}", file=where, field=f"completions[{k}].score")
        for name in ("model_answer", "full_model_response"):
            if completion.get(name) is not None and not isinstance(completion[name], str):
                raise PoolError(f"expected a string or null, got {completion[name]!r}", file=where,
                                field=f"completions[{k}].{name}")
    return completions


def import_rg_eval(
    src: str | os.PathLike[str],
    *,
    generator: str | None = None,
    generator_params_b: float | None = None,
) -> Pool:
    """Read a reasoning-gym-eval ``results.json`` into a validated Pool, in memory; see the module doc."""
    src = str(src)
    if generator_params_b is None:
        raise PoolError("the file does not say the generator's size; pass --generator-params-b", file=src)
    data = load_json_file(src)
    if not isinstance(data, dict):
        raise PoolError(f"expected a JSON object with 'categories', got {type(data).__name__}", file=src)
    generator = generator or data.get("model")
    if not isinstance(generator, str) or not generator:
        raise PoolError("no model name in the file (top-level 'model'); pass --generator", file=src, field="model")
    records: list[tuple[str, dict[str, Any]]] = []
    for c, category in enumerate(_list(data, "categories", src)):
        cwhere = f"{src}, categories[{c}]"
        if not isinstance(category, dict):
            raise PoolError("expected an object", file=cwhere)
        for d, dataset in enumerate(_list(category, "datasets", cwhere)):
            dwhere = f"{cwhere}.datasets[{d}]"
            if not isinstance(dataset, dict):
                raise PoolError("expected an object", file=dwhere)
            name = dataset.get("dataset_name", dataset.get("name"))
            if not isinstance(name, str) or not name:
                raise PoolError("expected the dataset's name", file=dwhere, field="dataset_name")
            for i, entry in enumerate(_list(dataset, "results", dwhere)):
                where = f"{dwhere}.results[{i}]"
                records.extend(_entry_records(entry, where, name, i, generator, generator_params_b))
    provenance = {"importer": "rg-eval", "source": src, "lines": len(records),
                  "labels_from": "completions[].score >= 1 (Reasoning Gym's own scorer at eval time)"}
    return build_pool(records, source=src, provenance=provenance)


def _is_reasoning_gym_task(name: str) -> bool:
    """Whether ``name`` is a dataset registered in the installed reasoning_gym (its scorer can be built)."""
    from reasoning_gym.factory import DATASETS  # imported here: reasoning_gym is slow to import

    return name in DATASETS


def _entry_records(entry: Any, where: str, dataset: str, index: int, generator: str,
                   params_b: float) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(entry, dict):
        raise PoolError(f"expected an object, got {type(entry).__name__}", file=where)
    for name in ("question", "expected_answer"):
        if not isinstance(entry.get(name), str):
            raise PoolError(f"expected a string, got {entry.get(name)!r}", file=where, field=name)
    metadata = entry.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise PoolError(f"expected an object or null, got {json.dumps(metadata)[:40]}", file=where, field="metadata")
    out = []
    for k, completion in enumerate(_completions(entry, where)):
        answer = completion.get("model_answer")
        if answer is not None and answer.strip() == ERROR_ANSWER:
            answer = None
        rec = {
            "dataset": dataset, "item_id": str(index), "problem": entry["question"], "gold": entry["expected_answer"],
            "task": dataset if metadata is not None and _is_reasoning_gym_task(dataset) else None,
            "metadata": metadata, "generator": generator,
            "generator_params_b": params_b, "candidate": k, "text": completion.get("full_model_response"),
            "answer": answer, "extraction_status": "given" if answer and answer.strip() else "none",
            "correct": float(completion["score"]) >= 1.0,
        }
        rec_where = f"{where}, completion {k}"
        check_record(rec, rec_where)
        out.append((rec_where, rec))
    return out
