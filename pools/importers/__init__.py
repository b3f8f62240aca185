"""Importers: foreign candidate formats -> an in-memory Pool (nothing is written until ``save_pool``).

``IMPORT_FORMATS`` maps a ``--format`` name to what its module declares beside its code (``FORMAT``, a
``pools.importers.import_format.ImportFormat``: the importer ``(src, **options) -> Pool``, its options and
sources); ``coba pools import`` is generated from it. A new format is one module ending in ``FORMAT = ...``
plus one entry below (or ``register_import_format`` for a format defined elsewhere). Every importer goes
through ``pools.importers.jsonl.build_pool``, so extraction, clustering, grading and estimation rules are
the same whatever the source.
"""

from __future__ import annotations

import inspect
from typing import Any

from pools.importers import jsonl, llm_monkeys, qwen_lists, rg_eval, routellm, tot_game24
from pools.importers.import_format import ImportFormat, ImportOption
from pools.importers.jsonl import build_pool, import_jsonl
from pools.importers.llm_monkeys import import_llm_monkeys
from pools.importers.qwen_lists import import_qwen_lists
from pools.importers.relabel import (
    LABEL_SOURCES,
    add_prices,
    add_verifier_roles,
    rename_dataset,
    use_grader_labels,
)
from pools.importers.rg_eval import import_rg_eval
from pools.importers.tot_game24 import import_tot_game24
from pools.store import Pool

#: ``--format`` name -> its declaration, in the order ``coba pools import --help`` lists them.
IMPORT_FORMATS: dict[str, ImportFormat] = {}


def register_import_format(fmt: ImportFormat) -> ImportFormat:
    """Add ``fmt`` to ``IMPORT_FORMATS``; a taken name, or an option another format declares with another
    meaning (one flag serves every format taking it), raises ValueError."""
    if fmt.name in IMPORT_FORMATS:
        raise ValueError(f"import format {fmt.name!r} is registered already")
    for option in fmt.options:
        for other in IMPORT_FORMATS.values():
            theirs = other.option(option.name)
            if theirs is not None and not theirs.same_meaning(option):
                raise ValueError(f"import format {fmt.name!r}: option {option.flag} differs from format "
                                 f"{other.name!r}'s (one flag has one meaning; declare the shared option once)")
    IMPORT_FORMATS[fmt.name] = fmt
    return fmt


for _module in (jsonl, qwen_lists, tot_game24, rg_eval, llm_monkeys, routellm):
    register_import_format(_module.FORMAT)


def import_pool(src: Any, fmt: str, *, labels: str = "source", dataset: str | None = None,
                verifier_roles: dict[str, str] | None = None, prices: dict[str, dict[str, float]] | None = None,
                **options: Any) -> Pool:
    """Import ``src`` in format ``fmt`` (a key of ``IMPORT_FORMATS``) with the importer's keyword ``options``.

    ``dataset`` goes to an importer that takes it, else renames the source's one dataset (``rename_dataset``);
    ``labels="grader"`` replaces the source's correctness labels by the grader's verdicts (``use_grader_labels``);
    ``verifier_roles`` and ``prices`` are added over the source's own (``add_verifier_roles``, ``add_prices``).
    """
    try:
        importer = IMPORT_FORMATS[fmt].importer
    except KeyError:
        raise ValueError(f"unknown import format {fmt!r}; expected one of {list(IMPORT_FORMATS)}") from None
    if labels not in LABEL_SOURCES:
        raise ValueError(f"unknown label source {labels!r}; expected one of {list(LABEL_SOURCES)}")
    native = dataset is not None and "dataset" in inspect.signature(importer).parameters
    pool = importer(src, **options, **({"dataset": dataset} if native else {}))
    if dataset is not None and not native:
        pool = rename_dataset(pool, dataset, source=str(src))
    if options.get("generator_params_b") is not None:  # the source did not say: the costs shown are marked
        pool.manifest["provenance"]["generator_params_from"] = (
            f"given on import (--generator-params-b {options['generator_params_b']:g}), not by the source")
    pool = use_grader_labels(pool) if labels == "grader" else pool
    first_source = str(src[0]) if isinstance(src, (list, tuple)) else str(src)
    return add_prices(add_verifier_roles(pool, verifier_roles or {}, source=first_source), prices or {})


__all__ = ["IMPORT_FORMATS", "ImportFormat", "ImportOption", "build_pool", "import_jsonl", "import_llm_monkeys",
           "import_pool", "import_qwen_lists", "import_rg_eval", "import_tot_game24", "register_import_format"]
