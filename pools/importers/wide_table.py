"""Import a *wide* outcome table: one row per query, a prompt column, and per model a score column with optional
response, answer, cost and token columns (RouteLLM's and RouterBench's published shape).

Which column holds what is a mapping ``--columns ROLE=NAME,...``. The roles of the row are ``prompt`` (default
``prompt``), ``id`` (default: none, the row's position), ``category`` and ``dataset``; the roles of a model are
patterns in which ``{model}`` stands for the model's name: ``score`` (default ``{model}``: a column named by the
model), ``response``, ``answer``, ``cost``, ``prompt_tokens``, ``output_tokens``. RouterBench's table is
``--columns id=sample_id,category=eval_name,response={model}|model_response,cost={model}|total_cost --models ...``.

* models: ``--models A,B,...``, else every column matching the score pattern that is no other role's column;
* a score cell is True/False (any case) or a number in [0, 1]; empty = the model has no outcome on the query;
  ``correct`` is ``score >= --correct-threshold`` (default 1.0), a number is kept as the graded score;
* several files (or a folder of them) are one table: the files' shared name (``mmlu_anatomy.csv``,
  ``mmlu_virology.csv``: ``mmlu``) is the dataset and each file's own part (``anatomy``) the items' category
  (``items.subject``), unless ``--dataset`` or a ``category`` column says otherwise. One dataset, not one per
  file: the bench averages over datasets, and a source's per-file split (MMLU's 57 subjects) is a split of one
  benchmark whose figures are pooled over all its questions;
* item_id: the ``id`` column, else ``<category>/<row>`` (``<row>``: the 0-based data row; one file: ``<row>``),
  so a question repeated in a file (MMLU repeats 27 within their subject) stays two queries as in the source;
  one id in two files is one query, whose text must be the same in both.

Everything else (tokens, answers, prices) is ``pools.importers.outcome_table``'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

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

__all__ = ["import_wide_table"]

#: Roles of a row (a column name each) and of a model (a pattern with ``{model}``).
ROW_ROLES: tuple[str, ...] = ("prompt", "id", "category", "dataset")
MODEL_ROLES: tuple[str, ...] = ("score", "response", "answer", "cost", "prompt_tokens", "output_tokens")
DEFAULT_COLUMNS: dict[str, str] = {"prompt": "prompt", "score": "{model}"}


def _pattern(text: str, role: str) -> re.Pattern[str]:
    if text.count("{model}") != 1:
        raise ValueError(f"--columns {role}={text}: expected a pattern holding {{model}} once, e.g. {{model}}|{role}")
    head, tail = text.split("{model}")
    return re.compile(re.escape(head) + "(?P<model>.+)" + re.escape(tail))


def _models(table: RawTable, mapping: dict[str, str], given: list[str] | None) -> list[str]:
    """The table's models: ``given`` (each must have its score column), else what the score pattern finds."""
    patterns = {role: _pattern(mapping[role], role) for role in MODEL_ROLES if role in mapping}
    fixed = {mapping[r] for r in ROW_ROLES if r in mapping}
    if given is not None:
        for model in given:
            column = mapping["score"].replace("{model}", model)
            if not table.has(column):
                raise table.error(f"no score column for model {model!r}; expected a column {column!r} (--columns "
                                  f"score={mapping['score']}); the header has {list(table.columns)[:12]}", None, column)
        return given
    found = {c: m.group("model") for c in table.columns if c not in fixed and (m := patterns["score"].fullmatch(c))}
    other = {c for c in table.columns for role, p in patterns.items() if role != "score" and (m := p.fullmatch(c))
             and m.group("model") in found.values() and m.group("model") != c}
    models = [m for c, m in found.items() if c not in other]
    if not models:
        raise table.error(f"no model columns; expected score columns named {mapping['score']!r} besides "
                          f"{sorted(fixed)} (--columns, --models); the header has {list(table.columns)[:12]}",
                          None, None)
    return models


def _file_rows(table: RawTable, mapping: dict[str, str], models: list[str] | None, dataset: str,
               category: str, scores_outside: str) -> OutcomeRows:
    """The outcome rows of one wide file: one per (row, model) with an outcome."""
    prompt_column = mapping["prompt"]
    if not table.has(prompt_column):
        marked = next((c for c in table.columns if c.lstrip("\ufeff") == prompt_column), None)
        why = (f"; column {marked!r} holds a byte-order mark (U+FEFF) before its name, as when files are joined"
               if marked else "")
        raise table.error(f"no such column; expected the queries' prompt column (--columns prompt=NAME){why}; the "
                          f"header has {list(table.columns)[:12]}", None, prompt_column)
    prompt = text_cells(table, prompt_column)
    empty = np.array([p is None for p in prompt], dtype=bool)
    if empty.any():
        raise table.error("is empty; expected the query's text", int(np.argmax(empty)), prompt_column)
    n = table.n_rows
    row_values = {}
    for role in ("id", "category", "dataset"):
        if role in mapping:
            if not table.has(mapping[role]):
                raise table.error(f"no such column (--columns {role}={mapping[role]}); the header has "
                                  f"{list(table.columns)[:12]}", None, mapping[role])
            row_values[role] = text_cells(table, mapping[role])
            check_name_cells(table, mapping[role], row_values[role], {"id": "id"}.get(role, role))
    cat = row_values.get("category", np.full(n, category or None, dtype=object))
    ids = row_values.get("id", np.array([f"{category}/{k}" if category else str(k) for k in range(n)],
                                         dtype=object))
    data = row_values.get("dataset", np.full(n, dataset, dtype=object))
    parts, clipped = [], []
    for model in _models(table, mapping, models):
        check_data_name(model, what="model", file=f"{table.path}, header", field=None)
        col = {role: mapping[role].replace("{model}", model) for role in MODEL_ROLES if role in mapping}
        score, missing, is_bool = outcome_cells(table, col["score"], scores_outside, clipped)
        keep = ~missing

        def optional(role: str, read, fill, keep=keep, col=col, model=model) -> np.ndarray:
            if role not in col:
                return np.full(int(keep.sum()), fill, dtype=object if fill is None else np.float64)
            if not table.has(col[role]):
                raise table.error(f"no {role} column for model {model!r} (--columns {role}={mapping[role]})", None,
                                  col[role])
            return read(table, col[role])[keep]

        k = int(keep.sum())
        parts.append(OutcomeRows(
            dataset=data[keep], item_id=ids[keep], problem=prompt[keep], gold=np.full(k, None, dtype=object),
            subject=cat[keep], generator=np.full(k, model, dtype=object), candidate=np.zeros(k, dtype=np.int64),
            score=score[keep], graded=~is_bool[keep], text=optional("response", text_cells, None),
            answer=optional("answer", text_cells, None), cost_usd=optional("cost", dollar_cells, np.nan),
            prompt_tokens=optional("prompt_tokens", count_cells, np.nan),
            output_tokens=optional("output_tokens", count_cells, np.nan), origin=np.zeros(k, dtype=np.int64),
            row=table.rows[keep], files=[(table.path, table.unit)],
            columns={"problem": prompt_column, "item_id": mapping.get("id", prompt_column), "score": col["score"],
                     "subject": mapping.get("category", prompt_column), "gold": prompt_column,
                     "dataset": mapping.get("dataset", prompt_column)}))
    rows = OutcomeRows.concat(parts)
    rows.clipped = clipped
    return rows


def import_wide_table(src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, columns: str | None = None,
                      models: str | None = None, dataset: str | None = None,
                      correct_threshold: float = DEFAULT_CORRECT_THRESHOLD, scores_outside: str = "refuse") -> Pool:
    """Read one or several wide outcome tables (CSV or Parquet, or folders of them) into a validated Pool."""
    sources = source_list(src)
    files = table_files(sources, kinds=("csv", "parquet"))
    try:
        mapping = {**DEFAULT_COLUMNS, **parse_mapping(columns, ROW_ROLES + MODEL_ROLES, "--columns")}
        given = [m.strip() for m in models.split(",") if m.strip()] if models else None
    except ValueError as exc:
        raise PoolError(str(exc), file=sources[0]) from None
    problem = check_threshold(correct_threshold)
    if problem:
        raise PoolError(f"--correct-threshold {correct_threshold:g}: {problem}", file=sources[0])
    shared, own = file_categories(files)
    name = dataset or shared or "table"
    check_data_name(name, what="dataset", file=sources[0], field=None)
    parts = [_file_rows(read_table(path), mapping, given, name, category if len(files) > 1 else "", scores_outside)
             for path, category in zip(files, own, strict=True)]
    rows = OutcomeRows.concat(parts)
    sizes = {m: listed.params_b for m in dict.fromkeys(rows.generator.tolist())
             if (listed := listed_model(m)) is not None and listed.params_b}
    provenance = {"importer": "wide", "sources": files, "columns": mapping,
                  "dataset_from": "--dataset" if dataset else "the files' shared name" if len(files) > 1 else
                  "the file's name", "category_from": "the category column" if "category" in mapping else
                  "each file's own name" if len(files) > 1 else "none",
                  "params_b_from": "the shipped price list (pools/data/prices.yaml) where it gives a size"}
    return build_outcome_pool(rows, source=sources[0], correct_threshold=correct_threshold, params_b=sizes,
                              provenance=provenance)


COLUMNS = ImportOption("columns", "which column holds what, ROLE=NAME,... (row roles prompt, id, category, dataset: "
                       "a column name; model roles score, response, answer, cost, prompt_tokens, output_tokens: a "
                       "pattern with {model})", note="default prompt=prompt,score={model}")

FORMAT = ImportFormat(
    "wide", import_wide_table, "an outcome table, one row per query and columns per model (CSV or Parquet; several "
    "files or a folder of them: one dataset, a category per file)",
    options=(COLUMNS, ImportOption("models", "the model names, comma-separated",
                                   note="default: every column matching the score pattern"),
             DATASET.for_format("default: the files' shared name"), CORRECT_THRESHOLD, SCORES_OUTSIDE),
    several_sources=True, folders=True)
