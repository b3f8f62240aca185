"""Import a *long* outcome table: one record per (query, model) from JSON lines, CSV or Parquet files, fields mapped
by ``--fields ROLE=PATH,...`` (a dotted path reaches into a JSON record: ``evaluation_result.score``).

Roles: ``prompt`` and ``score`` (required), ``id``, ``model``, ``cost`` (dollars of the call), ``prompt_tokens``,
``output_tokens``, ``response``, ``answer``, ``gold``, ``category``, ``dataset``, ``candidate`` (the sample's
number when a model answered a query several times). The defaults are LLMRouterBench's record fields: prompt,
score, cost, prompt_tokens, completion_tokens (output tokens), prediction (the response), ground_truth (the
gold), model. A default field a file lacks is simply absent; a field named with ``--fields`` must be there.

* the query: the ``id`` field when mapped, else the prompt text itself (item_id: its 0-based order of first
  appearance); one query's records must agree on its text, gold and category, whichever file they are in;
* the model: the ``model`` field, else the file's name without its ending (one file per model);
* the dataset: ``--dataset``, else the ``dataset`` field, else the files' shared name (``table`` when none);
* ``correct`` = score >= ``--correct-threshold`` (default 1.0), a numeric score kept as the graded score;
  given token counts are the source's (not estimated); given dollars go to ``candidates.cost_usd``.

``pools.importers.routerarena`` is this importer with RouterArena's fields.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pools.errors import PoolError
from pools.importers.import_format import DATASET, ImportFormat, ImportOption
from pools.importers.outcome_rows import OutcomeRows
from pools.importers.outcome_table import (
    CORRECT_THRESHOLD,
    DEFAULT_CORRECT_THRESHOLD,
    SCORES_OUTSIDE,
    build_outcome_pool,
    check_threshold,
)
from pools.importers.table_cells import count_cells, dollar_cells, outcome_cells, text_cells
from pools.importers.table_files import RawTable, read_table, table_files
from pools.importers.table_mapping import check_name_cells, file_categories, parse_mapping, source_list
from pools.price_list import listed_model
from pools.safe_names import check_data_name
from pools.store import Pool

__all__ = ["import_long_table", "read_long_rows"]

ROLES: tuple[str, ...] = ("prompt", "score", "id", "model", "cost", "prompt_tokens", "output_tokens", "response",
                          "answer", "gold", "category", "dataset", "candidate")
#: LLMRouterBench's record fields.
DEFAULT_FIELDS: dict[str, str] = {"prompt": "prompt", "score": "score", "model": "model", "cost": "cost",
                                  "prompt_tokens": "prompt_tokens", "output_tokens": "completion_tokens",
                                  "response": "prediction", "gold": "ground_truth"}


def _file_rows(table: RawTable, fields: dict[str, str], named: set[str], dataset: str,
               scores_outside: str) -> OutcomeRows:
    """The outcome rows of one long file."""
    for role in sorted(named | {"prompt", "score"}, key=ROLES.index):
        if role in fields and not table.has(fields[role]):
            raise table.error(f"no such {'field' if table.unit == 'line' else 'column'} in any record (--fields "
                              f"{role}={fields[role]}); expected the records' {role}", None, fields[role])
    n = table.n_rows
    has = {role: role in fields and table.has(fields[role]) for role in ROLES}

    def read(role: str, reader, fill):
        if not has[role]:
            return np.full(n, fill, dtype=object if fill is None else np.float64)
        return reader(table, fields[role])

    prompt = read("prompt", text_cells, None)
    clipped: list[dict] = []
    score, missing, is_bool = outcome_cells(table, fields["score"], scores_outside, clipped)
    for role, values in (("prompt", prompt), ("score", np.where(missing, None, score))):
        absent = np.array([v is None for v in values], dtype=bool)
        if absent.any():
            raise table.error(f"is missing; expected the record's {role}", int(np.argmax(absent)), fields[role])
    names = {}
    for role, what in (("id", "id"), ("model", "model name"), ("category", "category"), ("dataset", "dataset")):
        names[role] = read(role, text_cells, None)
        if has[role]:
            check_name_cells(table, fields[role], names[role], what)
    model = names["model"] if has["model"] else np.full(n, check_data_name(
        Path(table.path).stem, what="model", file=table.path, field=None), dtype=object)
    candidate = read("candidate", count_cells, 0.0)
    return OutcomeRows(
        dataset=names["dataset"] if has["dataset"] else np.full(n, dataset, dtype=object),
        item_id=names["id"], problem=prompt, gold=read("gold", text_cells, None), subject=names["category"],
        generator=model, candidate=np.nan_to_num(candidate).astype(np.int64), score=score, graded=~is_bool,
        text=read("response", text_cells, None), answer=read("answer", text_cells, None),
        cost_usd=read("cost", dollar_cells, np.nan), prompt_tokens=read("prompt_tokens", count_cells, np.nan),
        output_tokens=read("output_tokens", count_cells, np.nan), origin=np.zeros(n, dtype=np.int64),
        row=table.rows, files=[(table.path, table.unit)],
        columns={"problem": fields["prompt"], "item_id": fields.get("id", fields["prompt"]), **{
            r: fields[r] for r in ("gold", "category", "candidate", "dataset") if r in fields},
            "subject": fields.get("category", fields["prompt"])}, clipped=clipped)


def read_long_rows(sources: list[str], fields: dict[str, str], *, named: set[str], dataset: str | None,
                   scores_outside: str = "refuse") -> tuple[OutcomeRows, list[str], str]:
    """(the outcome rows of every file of ``sources``, the files, the dataset name used); ``named``: the roles
    the user mapped (their fields must exist)."""
    files = table_files(sources)
    shared, _ = file_categories(files) if len(files) > 1 else ("", [""])
    name = dataset or shared or "table"
    check_data_name(name, what="dataset", file=sources[0], field=None)
    paths = tuple(fields.values())
    rows = OutcomeRows.concat([_file_rows(read_table(f, paths), fields, named, name, scores_outside) for f in files])
    if "id" not in fields or not any(i is not None for i in rows.item_id):  # queries keyed by their text
        codes, _ = pd.factorize(pd.Series(rows.problem, dtype=object))
        rows.item_id = np.array([str(c) for c in codes] + [None], dtype=object)[:-1]
    return rows, files, name


def import_long_table(src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, fields: str | None = None,
                      dataset: str | None = None, correct_threshold: float = DEFAULT_CORRECT_THRESHOLD,
                      scores_outside: str = "refuse") -> Pool:
    """Read one or several long outcome tables into a validated Pool (module doc)."""
    sources = source_list(src)
    try:
        named = parse_mapping(fields, ROLES, "--fields")
    except ValueError as exc:
        raise PoolError(str(exc), file=sources[0]) from None
    return build_long_pool(sources, {**DEFAULT_FIELDS, **named}, named=set(named), dataset=dataset,
                           correct_threshold=correct_threshold, scores_outside=scores_outside, importer="long")


def build_long_pool(sources: list[str], fields: dict[str, str], *, named: set[str], dataset: str | None,
                    correct_threshold: float, scores_outside: str, importer: str, categories=None) -> Pool:
    """``read_long_rows`` then ``build_outcome_pool``; ``categories(item ids) -> categories`` derives the items'
    category when the records have no category field (RouterArena's ids carry it)."""
    problem = check_threshold(correct_threshold)
    if problem:
        raise PoolError(f"--correct-threshold {correct_threshold:g}: {problem}", file=sources[0])
    rows, files, name = read_long_rows(sources, fields, named=named, dataset=dataset, scores_outside=scores_outside)
    if categories is not None and not any(s is not None for s in rows.subject):
        rows.subject = categories(rows.item_id)
    sizes = {m: listed.params_b for m in dict.fromkeys(rows.generator.tolist())
             if (listed := listed_model(m)) is not None and listed.params_b}
    provenance = {"importer": importer, "sources": files, "fields": fields,
                  "dataset_from": "--dataset" if dataset else "the dataset field" if "dataset" in fields else
                  "the files' shared name", "queries_keyed_by": "the id field" if "id" in fields else "their text"}
    return build_outcome_pool(rows, source=sources[0], correct_threshold=correct_threshold, params_b=sizes,
                              provenance=provenance)


FORMAT = ImportFormat(
    "long", import_long_table, "an outcome table, one record per query and model (JSON lines, CSV or Parquet; "
    "several files, e.g. one per model)",
    options=(ImportOption("fields", "which record field holds what, ROLE=PATH,... (roles prompt, score, id, model, "
                          "cost, prompt_tokens, output_tokens, response, answer, gold, category, dataset, "
                          "candidate; a dotted PATH reaches into a JSON record)",
                          note="default: LLMRouterBench's prompt, score, model, cost, prompt_tokens, "
                               "completion_tokens, prediction, ground_truth"),
             DATASET.for_format("default: the files' shared name"), CORRECT_THRESHOLD, SCORES_OUTSIDE),
    several_sources=True, folders=True)
