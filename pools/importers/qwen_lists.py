"""Import the Qwen2.5-Math evaluation harness's per-problem lists (one line per problem) into a Pool.

Each line holds one problem and parallel per-candidate lists: ``code`` (or ``response``) with the solution
texts, ``pred`` with the harness's extracted answers, ``score`` with its correctness verdicts and
``pred_score`` with one reward-model score per candidate (each a one-element list). Every line becomes N
canonical records for ``build_pool``:

* ``pred`` is kept as the raw answer (extraction_status "given"); ``score`` is the correctness label, and
  the project's own grader runs too so the manifest reports how often the two agree;
* ``pred_score`` becomes the chosen tier's score, declared a ``reward_model`` in the manifest's
  ``verifier_roles`` (policies map the roles they need onto it, ``coba_env.rules.roles``). Reward-model scores are unbounded logits, so by default
  (``score_transform="auto"``) they are mapped to [0, 1] with the logistic sigmoid whenever any falls
  outside [0, 1]; the transform, its inverse and the raw range go into the manifest's provenance;
* token counts are estimated from text (``pools.tokens``) and flagged; latencies are estimated.
"""

from __future__ import annotations

import math
import os
from typing import Any

from pools.errors import PoolError
from pools.importers.canonical_records import check_record, read_json_lines
from pools.importers.import_format import DATASET, GENERATOR, GENERATOR_PARAMS_B, ImportFormat, ImportOption
from pools.importers.jsonl import build_pool
from pools.importers.score_transform import SCORE_TRANSFORM, SCORE_TRANSFORMS, chosen_transform, sigmoid
from pools.schema import TIERS
from pools.store import Pool
from pools.tokens import estimate_tokens

DEFAULT_RM_MODEL = "Qwen2.5-Math-RM-72B"
DEFAULT_RM_PARAMS_B = 72.0


def _list_field(obj: dict[str, Any], name: str, where: str, n: int | None) -> list[Any]:
    value = obj.get(name)
    if not isinstance(value, list):
        raise PoolError(f"expected a list with one entry per candidate, got {type(value).__name__}",
                        file=where, field=name)
    if n is not None and len(value) != n:
        raise PoolError(f"has {len(value)} entries; expected {n} (one per solution text)", file=where, field=name)
    return value


def _rm_score(value: Any, where: str, k: int) -> float | None:
    """The reward-model score of candidate k: a number, or a one-element list holding one (or null)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PoolError(f"expected a number or a one-element list of a number, got {value!r}", file=where,
                        field=f"pred_score[{k}]")
    return float(value)


def _read_problems(src: str) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(where, problem line, solution texts) per line, with the per-candidate lists checked."""
    problems = []
    for lineno, obj in read_json_lines(src):
        where = f"{src}, line {lineno}"
        if not isinstance(obj, dict):
            raise PoolError(f"expected a JSON object per line, got {type(obj).__name__}", file=where)
        for name in ("idx", "question", "gt", "pred", "score", "pred_score"):
            if name not in obj:
                raise PoolError("missing required field", file=where, field=name)
        texts_field = "code" if "code" in obj else "response" if "response" in obj else None
        if texts_field is None:
            raise PoolError("missing the solution texts; expected a list field 'code' or 'response'", file=where,
                            field="code")
        texts = _list_field(obj, texts_field, where, None)
        for name in ("pred", "score", "pred_score"):
            _list_field(obj, name, where, len(texts))
        problems.append((where, obj, texts))
    return problems


def import_qwen_lists(
    src: str | os.PathLike[str],
    *,
    generator: str,
    generator_params_b: float,
    dataset: str = "math",
    rm_tier: str = "V3",
    rm_model: str = DEFAULT_RM_MODEL,
    rm_params_b: float = DEFAULT_RM_PARAMS_B,
    score_transform: str = "auto",
    rm_role: str = "reward_model",
) -> Pool:
    """Read a Qwen2.5-Math eval-harness file (per-problem lists) into a validated Pool, in memory."""
    src = str(src)
    if rm_tier not in TIERS:
        raise PoolError(f"unknown reward-model tier {rm_tier!r}; expected one of {list(TIERS)}", file=src)
    if score_transform not in SCORE_TRANSFORMS:
        raise PoolError(f"unknown score transform {score_transform!r}; expected one of {list(SCORE_TRANSFORMS)}",
                        file=src)
    problems = _read_problems(src)
    raw_scores = [[_rm_score(v, where, k) for k, v in enumerate(obj["pred_score"])] for where, obj, _ in problems]
    present = [s for row in raw_scores for s in row if s is not None]
    raw_range = [min(present), max(present)] if present else None
    score_transform = chosen_transform(score_transform, present)
    transform = sigmoid if score_transform == "sigmoid" else float

    records = []
    for (where, obj, texts), scores in zip(problems, raw_scores, strict=True):
        system = obj.get("system") if isinstance(obj.get("system"), str) else None
        level = obj.get("level")
        for k, text in enumerate(texts):
            score = scores[k]
            rec = {
                "dataset": dataset, "item_id": str(obj["idx"]), "problem": obj["question"], "gold": str(obj["gt"]),
                "level": level, "generator": generator, "generator_params_b": generator_params_b,
                "candidate": k, "text": text, "answer": obj["pred"][k],
                "extraction_status": "none" if obj["pred"][k] is None else "given",
                "correct": obj["score"][k],
                "prompt_tokens": estimate_tokens(system) + estimate_tokens(obj["question"]),
                "tokens_estimated": True,
                "scores": {rm_tier: {"score": None if score is None else transform(score), "model": rm_model,
                                     "params_b": rm_params_b}},
            }
            rec_where = f"{where}, candidate {k}"
            check_record(rec, rec_where)
            records.append((rec_where, rec))
    provenance = {
        "importer": "qwen-lists", "source": src, "lines": len(problems),
        "labels_from": "the file's `score` lists; `pred` kept as the raw answer",
        "score_transform": {
            "tier": rm_tier, "model": rm_model, "transform": score_transform,
            "inverse": "raw = ln(score / (1 - score))" if score_transform == "sigmoid" else "raw = score",
            "raw_range": raw_range,
        },
    }
    return build_pool(records, source=src, provenance=provenance, verifier_roles={rm_tier: rm_role})


FORMAT = ImportFormat(
    "qwen-lists", import_qwen_lists, "the Qwen2.5-Math eval harness's per-problem lists, with reward-model scores",
    options=(GENERATOR.for_format(required=True), GENERATOR_PARAMS_B.for_format(required=True), DATASET,
             ImportOption("rm_tier", "tier the reward-model scores go to", choices=TIERS),
             ImportOption("rm_model", "reward-model name"),
             ImportOption("rm_params_b", "reward-model size in billions", kind="positive number"),
             SCORE_TRANSFORM))
