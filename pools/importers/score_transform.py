"""Raw reward-model scores mapped to [0, 1]: the ``--score-transform`` every format holding verifier scores takes.

A reward model writes an unbounded logit (Qwen2.5-Math-RM-72B: about -10 to 10) where a pool's score is a number in
[0, 1]. ``sigmoid`` maps a raw score through the logistic function (monotone, so every ranking and AUROC is kept);
``auto`` does so for each verifier whose scores fall outside [0, 1] and leaves the others as they are; ``identity``
keeps the scores as given (one outside [0, 1] is then refused by the pool's validation). What was done, its
inverse and the raw range go into the manifest's provenance, so the raw scores can be recovered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pools.importers.import_format import ImportOption

__all__ = ["SCORE_TRANSFORM", "SCORE_TRANSFORMS", "chosen_transform", "sigmoid", "transform_entries",
           "transform_record"]

SCORE_TRANSFORMS: tuple[str, ...] = ("auto", "sigmoid", "identity")

#: The option, declared once for every format that takes it (its meaning must be the same in each).
SCORE_TRANSFORM = ImportOption("score_transform", "map reward-model scores to [0, 1]: auto = sigmoid when any is "
                                                  "outside [0, 1]", choices=SCORE_TRANSFORMS)


def sigmoid(x: float) -> float:
    """The logistic function 1 / (1 + exp(-x)), computed without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def chosen_transform(name: str, present: Iterable[float]) -> str:
    """``sigmoid`` or ``identity``: ``name`` itself, or for ``auto`` sigmoid exactly when a score of ``present``
    (one verifier's, None left out) is outside [0, 1]."""
    if name != "auto":
        return name
    return "identity" if all(0.0 <= s <= 1.0 for s in present) else "sigmoid"


def transform_record(name: str, raw_range: list[float] | None) -> dict[str, Any]:
    """The provenance entry of one verifier's transform: its name, inverse and the raw scores' range."""
    return {"transform": name, "inverse": "raw = ln(score / (1 - score))" if name == "sigmoid" else "raw = score",
            "raw_range": raw_range}


def transform_entries(records: list[tuple[str, dict[str, Any]]], name: str) -> dict[str, dict[str, Any]]:
    """Map the ``scores.<verifier>.score`` of canonical records (in place) by ``name`` (``SCORE_TRANSFORMS``), each
    verifier on its own under ``auto``; returns the provenance of every verifier that was mapped (none: {})."""
    by_verifier: dict[str, list[float]] = {}
    for _, rec in records:
        for tier, entry in (rec.get("scores") or {}).items():
            if isinstance(entry.get("score"), int | float) and not isinstance(entry.get("score"), bool):
                by_verifier.setdefault(tier, []).append(float(entry["score"]))
    done: dict[str, dict[str, Any]] = {}
    for tier, present in by_verifier.items():
        chosen = chosen_transform(name, present)
        if chosen == "identity":
            continue
        done[tier] = transform_record(chosen, [min(present), max(present)])
        for _, rec in records:
            entry = (rec.get("scores") or {}).get(tier)
            if entry is not None and entry.get("score") is not None:
                entry["score"] = sigmoid(float(entry["score"]))
    return done
