"""Importers: foreign candidate formats -> an in-memory Pool (nothing is written until ``save_pool``).

``IMPORTERS`` maps a ``--format`` name to a function ``(src, **options) -> Pool``. Every importer goes
through ``pools.importers.jsonl.build_pool``, so extraction, clustering, grading and estimation rules are
the same whatever the source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pools.importers.jsonl import build_pool, import_jsonl
from pools.importers.llm_monkeys import import_llm_monkeys
from pools.importers.qwen_lists import import_qwen_lists
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


def import_pool(src: str, fmt: str, **options: Any) -> Pool:
    """Import ``src`` in format ``fmt`` (a key of ``IMPORTERS``) with the importer's keyword ``options``."""
    try:
        importer = IMPORTERS[fmt]
    except KeyError:
        raise ValueError(f"unknown import format {fmt!r}; expected one of {list(IMPORTERS)}") from None
    return importer(src, **options)


__all__ = ["IMPORTERS", "build_pool", "import_jsonl", "import_llm_monkeys", "import_pool", "import_qwen_lists",
           "import_rg_eval", "import_tot_game24"]
