"""Export a Pool as canonical JSONL: one line per candidate, every schema field, fixed key order.

The lines carry everything the tables hold about a candidate (its item, generator, audit fields and every
verifier score with its cost), so ``import_jsonl`` rebuilds the same tables and export -> import -> export
is byte-identical. A priced pool's prices (manifest ``prices_usd_per_million_tokens``) travel as each line's
``generator_price`` and each score's ``price``. What the format does not carry: the manifest's ``generation`` and ``provenance``
blocks, items without episodes, and models that neither generate nor verify anything.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pools.atomic_write import atomic_write_text
from pools.output_paths import check_output_file
from pools.prices import PRICES_KEY
from pools.schema import TIERS
from pools.store import Pool

#: Key order of an exported line.
LINE_ORDER: tuple[str, ...] = (
    "dataset", "item_id", "problem", "gold", "level", "subject", "task", "metadata",
    "generator", "generator_params_b", "generator_price", "candidate", "text", "answer", "answer_key", "cluster", "correct",
    "prompt_tokens", "output_tokens", "tokens_estimated", "latency_s", "finish_reason", "cap_hit",
    "extraction_status", "incomplete_boxed", "repetition_score", "scores", "graded_score", "cost_usd",
)

SCORE_ORDER: tuple[str, ...] = ("score", "model", "params_b", "prompt_tokens", "output_tokens", "latency_s")
#: Keys a line or a score entry carries only when they apply (a non-paper verifier's role, a priced model's price,
#: a graded score or recorded dollars).
_OPTIONAL = ("generator_price", "graded_score", "cost_usd")


def _json_value(value: Any) -> Any:
    """A table cell as a JSON value: missing (None, NaN, pd.NA) -> None, numpy scalars -> Python."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of ``df`` as dicts of JSON values."""
    columns = list(df.columns)
    return [
        {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
        for row in df.itertuples(index=False, name=None)
    ]


def pool_lines(pool: Pool) -> list[dict[str, Any]]:
    """The canonical JSONL records of ``pool``, ordered by (episode_id, candidate)."""
    params = {str(n): float(p) for n, p in zip(pool.models["name"], pool.models["params_b"], strict=True)}
    items = {(r["dataset"], r["item_id"]): r for r in _records(pool.items)}
    episodes = {r["episode_id"]: r for r in _records(pool.episodes)}
    scores: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    verifs = pool.verifications.copy()
    verifs["_tier_order"] = verifs["tier"].map({t: i for i, t in enumerate(pool.tiers)})
    declared = pool.manifest.get("verifier_roles") or {}
    prices = pool.manifest.get(PRICES_KEY) or {}
    verifs = verifs.sort_values(["episode_id", "candidate", "_tier_order"]).drop(columns="_tier_order")
    for v in _records(verifs):
        entry = {"score": v["score"], "model": v["model"], "params_b": params[v["model"]],
                 "prompt_tokens": v["prompt_tokens"], "output_tokens": v["output_tokens"],
                 "latency_s": v["latency_s"]}
        if v["tier"] not in TIERS and v["tier"] in declared:  # a non-paper name's role travels with its scores
            entry["role"] = declared[v["tier"]]
        if v["model"] in prices:  # so does a priced model's price
            entry["price"] = prices[v["model"]]
        scores.setdefault((v["episode_id"], v["candidate"]), {})[v["tier"]] = entry
    lines = []
    for c in _records(pool.candidates.sort_values(["episode_id", "candidate"])):
        episode = episodes[c["episode_id"]]
        item = items[(episode["dataset"], episode["item_id"])]
        metadata = item["metadata"]
        line = {
            **{k: item[k] for k in ("dataset", "item_id", "problem", "gold", "level", "subject", "task")},
            "metadata": None if metadata is None else json.loads(metadata),
            "generator": episode["generator"],
            "generator_params_b": params[episode["generator"]],
            "generator_price": prices.get(episode["generator"]),
            "answer": c["raw_answer"],
            "scores": scores.get((c["episode_id"], c["candidate"]), {}),
            **{k: c[k] for k in LINE_ORDER if k in c},
        }
        lines.append({k: line[k] for k in LINE_ORDER if k not in _OPTIONAL or line[k] is not None})
    return lines


def dumps_line(line: dict[str, Any]) -> str:
    """One JSONL line (no newline): UTF-8 text kept as is, floats in shortest round-trip form."""
    return json.dumps(line, ensure_ascii=False, allow_nan=False)


def export_jsonl(pool: Pool, dest: str | os.PathLike[str], *, overwrite: bool = False,
                 inputs: Sequence[str | os.PathLike[str] | None] = ()) -> Path:
    """Write ``pool`` to ``dest`` as canonical JSONL, atomically (a temporary sibling renamed into place).

    An existing ``dest`` is replaced only with ``overwrite`` and only when it is a regular file.
    """
    dest = check_output_file(dest, force=overwrite, inputs=inputs)
    text = "".join(dumps_line(line) + "\n" for line in pool_lines(pool))
    atomic_write_text(dest, text)
    return dest
