"""Importers: foreign candidate formats -> an in-memory Pool (nothing is written until ``save_pool``).

``IMPORTERS`` maps a ``--format`` name to a function ``(src, **options) -> Pool``. Every importer goes
through ``pools.importers.jsonl.build_pool``, so extraction, clustering, grading and estimation rules are
the same whatever the source.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pools.importers.jsonl import build_pool, import_jsonl
from pools.importers.llm_monkeys import import_llm_monkeys
from pools.importers.qwen_lists import import_qwen_lists
from pools.importers.relabel import LABEL_SOURCES, rename_dataset, use_grader_labels
from pools.importers.rg_eval import import_rg_eval
from pools.importers.routellm import import_routellm
from pools.importers.tot_game24 import import_tot_game24
from pools.store import Pool

IMPORTERS: dict[str, Callable[..., Pool]] = {
    "jsonl": import_jsonl,
    "qwen-lists": import_qwen_lists,
    "tot-game24": import_tot_game24,
    "rg-eval": import_rg_eval,
    "llm-monkeys": import_llm_monkeys,
    "routellm": import_routellm,
}

#: Formats whose importer takes several sources (a list) and folders.
MULTI_SOURCE_FORMATS: tuple[str, ...] = ("rg-eval",)


def import_pool(src: Any, fmt: str, *, labels: str = "source", dataset: str | None = None, **options: Any) -> Pool:
    """Import ``src`` in format ``fmt`` (a key of ``IMPORTERS``) with the importer's keyword ``options``.

    ``dataset`` goes to an importer that takes it, else renames the source's one dataset (``rename_dataset``);
    ``labels="grader"`` replaces the source's correctness labels by the grader's verdicts (``use_grader_labels``).
    """
    try:
        importer = IMPORTERS[fmt]
    except KeyError:
        raise ValueError(f"unknown import format {fmt!r}; expected one of {list(IMPORTERS)}") from None
    if labels not in LABEL_SOURCES:
        raise ValueError(f"unknown label source {labels!r}; expected one of {list(LABEL_SOURCES)}")
    native = dataset is not None and "dataset" in inspect.signature(importer).parameters
    pool = importer(src, **options, **({"dataset": dataset} if native else {}))
    if dataset is not None and not native:
        pool = rename_dataset(pool, dataset, source=str(src))
    if options.get("generator_params_b") is not None:  # the source did not say: the costs shown are marked
        pool.manifest["provenance"]["generator_params_from"] = (
            f"given on import (--generator-params-b {options['generator_params_b']:g}), not by the source")
    return use_grader_labels(pool) if labels == "grader" else pool


__all__ = ["IMPORTERS", "MULTI_SOURCE_FORMATS", "build_pool", "import_jsonl", "import_llm_monkeys", "import_pool", "import_qwen_lists",
           "import_rg_eval", "import_tot_game24"]
