"""Import Large Language Monkeys sample YAMLs (ScalingIntelligence/large_language_monkeys) into a Pool.

Each problem is one YAML file (``llmonk/generate/*.py`` writes ``<id>.yaml``) holding ``prompt`` (the
few-shot prompt sent), ``question``, ``samples`` (the sampled completions), ``gt_answer`` (the reference
solution: GSM8K's ending in ``#### n``, MATH's with a ``\\boxed{}``) and, once evaluated
(``llmonk/evaluate/*.py``), ``is_corrects`` (one bool per sample; ``is_correct`` is read too). ``SRC`` is
one such file or a directory of them (``*.yaml``, sorted by name). Every file becomes one episode:

* item_id = the file name without ``.yaml``; dataset = ``--dataset`` (default: the directory's name);
  gold = the answer extracted from ``gt_answer`` (``pools.grading.extract_answer``: box or ``#### n``);
* answers are extracted from the samples; the labels are ``is_corrects`` when present (the grader's
  agreement is recorded), else graded against the gold;
* prompt tokens from ``prompt`` and output tokens from each sample (``pools.tokens.estimate_tokens``),
  latency by rule, all flagged as estimated.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from pools.errors import PoolError
from pools.grading import extract_answer
from pools.importers.canonical_records import check_record
from pools.importers.import_format import DATASET, GENERATOR, GENERATOR_PARAMS_B, ImportFormat
from pools.importers.jsonl import build_pool
from pools.store import Pool
from pools.tokens import estimate_tokens


def _sample_files(src: Path) -> list[Path]:
    if src.is_dir():
        files = sorted(src.glob("*.yaml")) + sorted(src.glob("*.yml"))
        if not files:
            raise PoolError("no *.yaml sample files in this directory", file=str(src))
        return files
    if not src.is_file():
        raise PoolError("no such file or directory", file=str(src))
    return [src]


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise PoolError(f"malformed YAML{line}", file=str(path)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PoolError(f"cannot read ({exc})", file=str(path)) from exc
    if not isinstance(data, dict):
        raise PoolError(f"expected a mapping with 'samples', got {type(data).__name__}", file=str(path))
    return data


def _labels(data: dict[str, Any], n: int, where: str) -> list[bool] | None:
    name = "is_corrects" if "is_corrects" in data else "is_correct" if "is_correct" in data else None
    if name is None:
        return None
    labels = data[name]
    if not isinstance(labels, list) or len(labels) != n or not all(isinstance(v, bool) for v in labels):
        raise PoolError(f"expected a list of {n} true/false values (one per sample)", file=where, field=name)
    return labels


def import_llm_monkeys(
    src: str | os.PathLike[str],
    *,
    generator: str | None = None,
    generator_params_b: float | None = None,
    dataset: str | None = None,
) -> Pool:
    """Read Large Language Monkeys sample YAML(s) into a validated Pool, in memory; see the module doc."""
    path = Path(src)
    if generator is None or generator_params_b is None:
        raise PoolError("the samples do not name their model; pass --generator and --generator-params-b",
                        file=str(path))
    dataset = dataset or (path.name if path.is_dir() else path.parent.name) or "monkeys"
    records: list[tuple[str, dict[str, Any]]] = []
    for file in _sample_files(path):
        where = str(file)
        data = _load(file)
        samples = data.get("samples")
        if not isinstance(samples, list) or not samples or not all(isinstance(s, str) for s in samples):
            raise PoolError("expected a non-empty list of sample texts", file=where, field="samples")
        gt = data.get("gt_answer")
        if isinstance(gt, int | float) and not isinstance(gt, bool):
            gt = str(gt)
        if not isinstance(gt, str) or not gt.strip():
            raise PoolError(f"expected the reference answer as a string, got {gt!r}", file=where, field="gt_answer")
        gold = extract_answer(gt).answer or gt.strip()
        labels = _labels(data, len(samples), where)
        question = data.get("question") if isinstance(data.get("question"), str) else None
        prompt = data.get("prompt") if isinstance(data.get("prompt"), str) else question
        for k, text in enumerate(samples):
            rec = {
                "dataset": dataset, "item_id": file.stem, "problem": question or prompt or "", "gold": gold,
                "generator": generator, "generator_params_b": generator_params_b, "candidate": k, "text": text,
                "prompt_tokens": estimate_tokens(prompt), "tokens_estimated": True,
            }
            if labels is not None:
                rec["correct"] = labels[k]
            rec_where = f"{where}, sample {k}"
            check_record(rec, rec_where)
            records.append((rec_where, rec))
    provenance = {"importer": "llm-monkeys", "source": str(path), "lines": len(records),
                  "labels_from": "is_corrects where present, else graded against the gold"}
    return build_pool(records, source=str(path), provenance=provenance)


FORMAT = ImportFormat(
    "llm-monkeys", import_llm_monkeys, "Large Language Monkeys sample YAMLs: one file or a folder of them",
    options=(GENERATOR.for_format(required=True), GENERATOR_PARAMS_B.for_format(required=True),
             DATASET.for_format("default the directory's name")),
    folders=True)
