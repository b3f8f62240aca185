"""Import RouteLLM's two-model GSM8K responses (lm-sys/RouteLLM ``routellm/evals/gsm8k/gsm8k_responses.csv``).

The CSV has one row per GSM8K test question: ``prompt`` (the question), one ``True``/``False`` column per
model named by the model (the source's own check: the last integer of the response, commas removed,
equals the gold number) and ``<model>_response`` (the full response text). The gold answers come from
the GSM8K test split beside it (``test.jsonl``: ``question``, ``answer`` ending in ``#### <number>``); every
prompt must equal one question. Every (question, model) pair becomes one episode of one candidate for
``build_pool``:

* item: dataset ``gsm8k``, item_id the question's 0-based line in ``test.jsonl``, gold the number after
  ``#### `` with commas removed;
* correctness: the source's label, compared with the project's grader (``pools.grading``), whose
  disagreements the manifest lists (``provenance.grader_agreement``);
* tokens: the source recorded none. Output tokens are estimated from the response text and prompt tokens
  from the 8-shot prompt (``pools.tokens.estimate_tokens``): the question line plus eight worked examples,
  each counted as the mean estimated length of a ``Question: ... Answer: ...`` pair of the test split (the
  source's shots are the first eight train examples, which are not shipped here). All flagged
  ``tokens_estimated``; latency estimated too;
* cost: the prices the source's router evaluation used go into the manifest key
  ``prices_usd_per_million_tokens`` (``ROUTELLM_PRICES_USD``); parameter counts are public for Mixtral only
  (46.7B total); GPT-4's are not, so it is stored as 0 and named in ``provenance.params_b_unknown``.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any

from pools.errors import PoolError
from pools.importers.canonical_records import check_record
from pools.importers.import_format import ImportFormat, ImportOption
from pools.importers.jsonl import build_pool
from pools.prices import PRICES_KEY
from pools.store import Pool
from pools.tokens import estimate_tokens

#: The models of the source's GSM8K pair, weak first, with their public parameter counts (billions);
#: None = not public.
ROUTELLM_MODELS: dict[str, float | None] = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 46.7,
    "gpt-4-1106-preview": None,
}
#: $ per million tokens (input and output alike) in the source's router evaluation (RouteLLM paper, Sec. 5).
ROUTELLM_PRICES_USD: dict[str, float] = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 0.24,
    "gpt-4-1106-preview": 24.7,
}
#: Worked examples in the source's prompts (``generate_responses.py``: ``k = 8``).
FEW_SHOT_EXAMPLES = 8

#: Longest CSV field read (characters): csv's default, 131072, is shorter than some long reasoning responses.
CSV_FIELD_LIMIT = 1 << 30

_GOLD = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


def read_gsm8k_test(path: str) -> list[tuple[str, str, str]]:
    """(question, gold number, full answer) per line of a GSM8K ``test.jsonl``; bad lines raise PoolError."""
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except FileNotFoundError as exc:
        raise PoolError("no such file (the GSM8K test split with the gold answers; pass --gold)", file=path) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PoolError(f"cannot read ({exc})", file=path) from exc
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PoolError(f"malformed JSON ({exc.msg} at column {exc.colno})", file=where) from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
            raise PoolError("expected an object with a string question", file=where, field="question")
        match = _GOLD.search(obj.get("answer") or "") if isinstance(obj.get("answer"), str) else None
        if match is None:
            raise PoolError("expected an answer ending in '#### <number>'", file=where, field="answer")
        seen = first_line.setdefault(obj["question"], lineno)
        if seen != lineno:  # a prompt must find one item: which line's gold would it take?
            raise PoolError(f"the question of line {seen} again; expected each question once (a response row must "
                            "match one gold answer)", file=where, field="question")
        rows.append((obj["question"], match.group(1).replace(",", ""), obj["answer"]))
    if not rows:
        raise PoolError("no questions found; expected the GSM8K test split", file=path)
    return rows


def read_responses(path: str) -> tuple[list[str], list[dict[str, str]]]:
    """The models named by the CSV's columns and its rows; a missing column raises PoolError."""
    limit = csv.field_size_limit(CSV_FIELD_LIMIT)  # a response may be far longer than csv's default 128 KiB
    reader = None
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:  # -sig: a spreadsheet's byte-order mark
            reader = csv.DictReader(fh)
            columns = list(reader.fieldnames or [])
            rows = list(reader)
    except FileNotFoundError as exc:
        raise PoolError("no such file", file=path) from exc
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        where = f"{path}, line {reader.line_num}" if isinstance(exc, csv.Error) and reader is not None else path
        raise PoolError(f"cannot read as CSV ({exc})", file=where) from exc
    finally:
        csv.field_size_limit(limit)
    if "prompt" not in columns:
        raise PoolError(f"no 'prompt' column; expected prompt, <model>, <model>_response columns, got {columns}",
                        file=path)
    models = [c for c in columns if c != "prompt" and not c.endswith("_response")]
    if not models:
        raise PoolError(f"no model columns; expected <model> and <model>_response columns, got {columns}", file=path)
    for model in models:
        if f"{model}_response" not in columns:
            raise PoolError(f"model column {model!r} has no {model + '_response'!r} column", file=path)
    if not rows:
        raise PoolError("no rows; expected one row per question", file=path)
    return models, rows


def _label(value: str | None, where: str, field: str) -> bool:
    if value not in ("True", "False"):
        raise PoolError(f"expected True or False, got {value!r}", file=where, field=field)
    return value == "True"


def import_routellm(
    src: str | os.PathLike[str],
    *,
    gold: str | os.PathLike[str] | None = None,
) -> Pool:
    """Read RouteLLM's GSM8K responses (and the GSM8K test split) into a validated Pool; see the module doc."""
    src = str(src)
    gold_path = str(gold) if gold is not None else str(Path(src).with_name("test.jsonl"))
    test = read_gsm8k_test(gold_path)
    models, rows = read_responses(src)
    line_of = {}
    for index, (question, _, _) in enumerate(test):
        line_of.setdefault(question, index)
    shot_tokens = sum(estimate_tokens(f"Question: {q}\nAnswer: {a}\n\n") for q, _, a in test) / len(test)
    few_shot_tokens = round(FEW_SHOT_EXAMPLES * shot_tokens)
    records: list[tuple[str, dict[str, Any]]] = []
    for rowno, row in enumerate(rows, start=2):
        where = f"{src}, line {rowno}"
        prompt = row.get("prompt")
        if prompt not in line_of:
            raise PoolError("the prompt is not a question of the GSM8K test split " + gold_path, file=where,
                            field="prompt")
        index = line_of[prompt]
        prompt_tokens = few_shot_tokens + estimate_tokens(f"Question: {prompt}\nAnswer:")
        for model in models:
            text = row.get(f"{model}_response")
            if text is None:
                raise PoolError("missing value", file=where, field=f"{model}_response")
            rec: dict[str, Any] = {
                "dataset": "gsm8k", "item_id": str(index), "problem": prompt, "gold": test[index][1],
                "generator": model, "generator_params_b": ROUTELLM_MODELS.get(model) or 0.0, "candidate": 0,
                "text": text, "correct": _label(row.get(model), where, model), "prompt_tokens": prompt_tokens, "tokens_estimated": True,
            }
            check_record(rec, where)
            records.append((where, rec))
    provenance = {
        "importer": "routellm", "source": src, "gold_file": gold_path, "rows": len(rows),
        "labels_from": ("the source's labels (the last integer of the response equals the gold number); the "
                        "project's grader only for agreement"),
        "tokens": (f"estimated (pools.tokens): output from the response text; prompt = {FEW_SHOT_EXAMPLES} shots x "
                   f"{shot_tokens:.1f} (mean estimated Question/Answer pair of the test split) + the question line"),
        "params_b_unknown": [m for m in models if ROUTELLM_MODELS.get(m) is None],
        "prices": "the source's router evaluation (RouteLLM paper): $/M tokens, input and output alike",
    }
    pool = build_pool(records, source=src, provenance=provenance)
    prices = {m: {"input": ROUTELLM_PRICES_USD[m], "output": ROUTELLM_PRICES_USD[m]}
              for m in models if m in ROUTELLM_PRICES_USD}
    if prices:
        pool.manifest[PRICES_KEY] = prices
    return pool


FORMAT = ImportFormat(
    "routellm", import_routellm, "RouteLLM's two-model GSM8K responses (gsm8k_responses.csv)",
    options=(ImportOption("gold", "the GSM8K test split with the gold answers", note="default: test.jsonl next to SRC"),))
