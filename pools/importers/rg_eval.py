"""Import reasoning-gym-eval results (open-thought/reasoning-gym-eval) into a Pool: one file, several, or folders.

Two file shapes, as the public repository holds them:

* ``results.json`` of a whole run: ``{"metadata": {"model", "provider", "max_tokens", "temperature", "top_p",
  ...}, "categories": [{"name": ..., "datasets": [{"name" (or "dataset_name"): ..., "results": [entry,
  ...]}, ...]}, ...]}`` (older files keep the model in a top-level ``"model"``);
* per-task files ``<provider>_<model>_<YYYYMMDD_HHMMSS>/<category>/<task>.json``: ``{"name", "category",
  "config", "completions_per_prompt", "results": [entry, ...]}`` with no model field: the model is the
  run's ``summary.json`` ``"model"`` when it is there, else the run folder's name (``anthropic_claude-3.5-
  sonnet_20250227_230002`` -> ``anthropic/claude-3.5-sonnet``); the sampling settings come from that
  ``summary.json`` when it has them.

A folder is searched for ``*.json`` files (``summary.json`` and checkpoint files aside); all files become
one pool with one generator per model. Each entry holds ``question``, ``expected_answer``, optional
``metadata`` and ``completions``, a list of ``{"model_answer", "full_model_response", "score"}`` (an entry
without ``completions`` but with those three fields is one completion; an entry the eval marked with an
``error`` and no completion, every call for it having failed, is skipped and listed in the provenance's
``skipped_failed_entries``). Every other entry becomes one episode of canonical records for ``build_pool``:

* dataset = ``--dataset`` when given, else the dataset's name; the item's Reasoning Gym ``task`` is always
  the dataset's name; item_id = the entry's position in its dataset's results (``<task>:<position>`` when
  ``--dataset`` gathers several tasks under one name); gold = ``expected_answer``;
* the answer is ``model_answer`` as given (``null``, blank or ``"ERROR"`` is no answer); the text is
  ``full_model_response``; the label is ``score >= 1`` (Reasoning Gym gives partial credit, e.g. 0.01 for
  a wrong format; only a full score is correct);
* with ``metadata`` (and a dataset name the installed reasoning_gym knows) the project's grader is the
  task's own scorer and its agreement with the labels is recorded; otherwise (e.g. the eval ran without
  ``--save-metadata``) the math grader runs, for agreement only;
* nothing about costs is in the files: prompt tokens from the question, output tokens from the text
  (``pools.tokens.estimate_tokens``), capped at the run's ``max_tokens`` when the file gives it (a capped
  estimate sets ``cap_hit``), latency by rule, all flagged as estimated. The sampling settings go to the
  manifest's ``generation`` (per model when they differ).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pools.errors import PoolError
from pools.importers.canonical_records import check_record
from pools.importers.import_format import DATASET, GENERATOR, GENERATOR_PARAMS_B, ImportFormat
from pools.importers.jsonl import build_pool
from pools.importers.tot_game24 import load_json_file
from pools.store import Pool
from pools.tokens import estimate_tokens

#: What the eval script writes as the answer when the API call failed.
ERROR_ANSWER = "ERROR"
#: Sampling settings the eval records (results.json ``metadata``, a run's ``summary.json``).
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p")
#: Files in a run folder that hold no results.
_NOT_RESULTS = re.compile(r"^(?:summary|partial_summary|checkpoint.*|.*_summary)\.json$")
#: A run folder: ``<provider>_<model>_<YYYYMMDD>_<HHMMSS>``.
_RUN_FOLDER = re.compile(r"^(?P<model>.+)_\d{8}_\d{6}$")


def _list(obj: dict[str, Any], name: str, where: str) -> list[Any]:
    value = obj.get(name)
    if not isinstance(value, list):
        raise PoolError(f"expected a list, got {json.dumps(value)[:40]}", file=where, field=name)
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


def result_files(src: str | os.PathLike[str]) -> list[str]:
    """``src`` itself when it is a file, else every results ``*.json`` under the folder ``src`` (sorted)."""
    path = Path(src)
    if path.is_file():
        return [str(path)]
    if not path.is_dir():
        raise PoolError("no such file or folder; expected a reasoning-gym-eval results file or a folder of them",
                        file=str(src))
    files = sorted(str(p) for p in path.rglob("*.json") if p.is_file() and not _NOT_RESULTS.match(p.name))
    if not files:
        raise PoolError("holds no .json results file; expected results.json or <run>/<category>/<task>.json files",
                        file=str(src))
    return files


def model_from_run_folder(name: str) -> str | None:
    """``anthropic_claude-3.5-sonnet_20250227_230002`` -> ``anthropic/claude-3.5-sonnet``; None if not a run folder."""
    match = _RUN_FOLDER.match(name)
    if match is None:
        return None
    provider, sep, model = match.group("model").partition("_")
    return f"{provider}/{model}" if sep and model else match.group("model")


def _run_summary(path: Path) -> dict[str, Any]:
    """The ``summary.json`` of the run a per-task file belongs to (``<run>/<category>/<task>.json``), or {}."""
    summary = path.parent.parent / "summary.json"
    if not summary.is_file():
        return {}
    data = load_json_file(str(summary))
    return data if isinstance(data, dict) else {}


def _sampling(source: dict[str, Any], where: str) -> dict[str, float]:
    out = {}
    for key in SAMPLING_KEYS:
        value = source.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PoolError(f"expected a number >= 0 or null, got {value!r}", file=where, field=key)
        out[key] = int(value) if key == "max_tokens" else float(value)
    if out.get("max_tokens") == 0:
        raise PoolError("is 0; expected the run's output token cap (an integer >= 1) or null", file=where,
                        field="max_tokens")
    return out


def read_result_file(path: str) -> tuple[str | None, dict[str, float], list[tuple[str, str, list[Any]]]]:
    """(model or None, sampling settings, [(dataset name, where, entries)]) of one results file, either shape."""
    data = load_json_file(path)
    if not isinstance(data, dict):
        raise PoolError(f"expected a JSON object, got {type(data).__name__}", file=path)
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    if data.get("categories") is not None:  # a run's results.json
        model = metadata.get("model", data.get("model"))
        datasets = []
        for c, category in enumerate(_list(data, "categories", path)):
            cwhere = f"{path}, categories[{c}]"
            if not isinstance(category, dict):
                raise PoolError("expected an object", file=cwhere)
            for d, dataset in enumerate(_list(category, "datasets", cwhere)):
                dwhere = f"{cwhere}.datasets[{d}]"
                if not isinstance(dataset, dict):
                    raise PoolError("expected an object", file=dwhere)
                datasets.append((_dataset_name(dataset, dwhere), dwhere, _list(dataset, "results", dwhere)))
        return _model_name(model, path), _sampling(metadata, f"{path}, metadata"), datasets
    if "results" not in data:
        raise PoolError("neither a run's results.json ('categories' is missing or null) nor a per-task file (no "
                        "'results'); expected one of the reasoning-gym-eval shapes", file=path, field="categories")
    summary = _run_summary(Path(path))
    model = data.get("model", metadata.get("model", summary.get("model")))
    if model is None:
        model = model_from_run_folder(Path(path).parent.parent.name) or model_from_run_folder(Path(path).parent.name)
    sampling = _sampling(summary, str(Path(path).parent.parent / "summary.json")) if summary else {}
    return _model_name(model, path), sampling, [(_dataset_name(data, path), path, _list(data, "results", path))]


def _dataset_name(obj: dict[str, Any], where: str) -> str:
    name = obj.get("dataset_name", obj.get("name"))
    if not isinstance(name, str) or not name:
        raise PoolError("expected the dataset's name", file=where, field="name")
    return name


def _model_name(model: Any, where: str) -> str | None:
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise PoolError(f"expected the model's name, got {model!r}", file=where, field="model")
    return model


def import_rg_eval(
    src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    generator: str | None = None,
    generator_params_b: float | None = None,
    dataset: str | None = None,
) -> Pool:
    """Read reasoning-gym-eval results (a file, a folder, or a list of them) into one validated Pool; see the module doc."""
    sources = [str(s) for s in ([src] if isinstance(src, str | os.PathLike) else src)]
    if generator_params_b is None or not generator_params_b > 0:
        raise PoolError("the files do not say the generators' size; pass --generator-params-b (> 0)", file=sources[0])
    files = list(dict.fromkeys(f for s in sources for f in result_files(s)))
    runs = [(path, *read_result_file(path)) for path in files]
    models = list(dict.fromkeys(model for _, model, _, _ in runs if model is not None))
    if generator is not None and len(models) > 1:
        raise PoolError(f"--generator names one model but the files hold {len(models)} ({', '.join(models)}); "
                        "expected files of one model, or no --generator", file=sources[0])
    tasks = {name for _, _, _, datasets in runs for name, _, _ in datasets}
    records: list[tuple[str, dict[str, Any]]] = []
    generation: dict[str, dict[str, float]] = {}
    skipped: list[str] = []
    for path, model, sampling, datasets in runs:
        name = generator or model
        if name is None:
            raise PoolError("no model name in the file (metadata.model, model, the run's summary.json or a "
                            "<provider>_<model>_<date>_<time> folder); pass --generator", file=path, field="model")
        if generation.setdefault(name, sampling) != sampling:
            raise PoolError(f"sampling settings {sampling} differ from {generation[name]} of another file of "
                            f"model {name!r}; expected one run per model", file=path)
        for task, where, entries in datasets:
            for i, entry in enumerate(entries):
                if _failed_entry(entry):  # the eval's own record of an entry whose every API call failed
                    skipped.append(f"{where}.results[{i}]")
                    continue
                item_id = f"{task}:{i}" if dataset is not None and len(tasks) > 1 else str(i)
                records.extend(_entry_records(entry, f"{where}.results[{i}]", dataset or task, task, item_id, name,
                                              generator_params_b, sampling.get("max_tokens")))
    provenance = {"importer": "rg-eval", "source": sources[0] if len(sources) == 1 else sources,
                  "files": len(files), "lines": len(records), "skipped_failed_entries": skipped,
                  "labels_from": "completions[].score >= 1 (Reasoning Gym's own scorer at eval time)",
                  # API models may reason in tokens the response text does not show: no estimate can count them.
                  "hidden_reasoning_uncounted": True}
    return build_pool(records, source=sources[0], provenance=provenance, generation=_generation(generation))


def _generation(per_model: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The manifest's ``generation``: the settings shared by every model, and each model's own when they differ."""
    settings = list(per_model.values())
    if not settings or not any(settings):
        return {}
    out: dict[str, Any] = {}
    if all(s == settings[0] for s in settings):
        out = dict(settings[0])
    else:
        out["per_model"] = per_model
    caps = [s["max_tokens"] for s in settings if "max_tokens" in s]
    if caps:
        out["max_output_tokens"] = max(caps)  # the env's length normalizer (coba_env.compiled)
    return out


def _failed_entry(entry: Any) -> bool:
    """An entry the eval script wrote after every call for it failed: an ``error`` and no completion."""
    return isinstance(entry, dict) and bool(entry.get("error")) and entry.get("completions") == []


def _is_reasoning_gym_task(name: str) -> bool:
    """Whether ``name`` is a dataset registered in the installed reasoning_gym (its scorer can be built)."""
    from reasoning_gym.factory import DATASETS  # imported here: reasoning_gym is slow to import

    return name in DATASETS


def _entry_records(entry: Any, where: str, dataset: str, task: str, item_id: str, generator: str, params_b: float,
                   max_tokens: int | None) -> list[tuple[str, dict[str, Any]]]:
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
        text = completion.get("full_model_response")
        rec = {
            "dataset": dataset, "item_id": item_id, "problem": entry["question"], "gold": entry["expected_answer"],
            "task": task if metadata is not None and _is_reasoning_gym_task(task) else None,
            "metadata": metadata, "generator": generator,
            "generator_params_b": params_b, "candidate": k, "text": text,
            "answer": answer, "extraction_status": "given" if answer and answer.strip() else "none",
            "correct": float(completion["score"]) >= 1.0,
        }
        if max_tokens is not None and text is not None:  # an estimate past the run's cap is the cap, hit
            estimate = estimate_tokens(text)
            rec.update(output_tokens=min(estimate, max_tokens), tokens_estimated=True,
                       cap_hit=estimate >= max_tokens)
        rec_where = f"{where}, completion {k}"
        check_record(rec, rec_where)
        out.append((rec_where, rec))
    return out


FORMAT = ImportFormat(
    "rg-eval", import_rg_eval, "reasoning-gym-eval results: files or folders, several into one pool",
    options=(GENERATOR.for_format("default the file's 'model'"),
             GENERATOR_PARAMS_B.for_format("every model of the files", required=True),
             DATASET.for_format("default each task's name")),
    several_sources=True, folders=True)
