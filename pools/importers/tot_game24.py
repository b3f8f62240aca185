"""Import Tree-of-Thoughts Game-of-24 sample logs (princeton-nlp/tree-of-thought-llm ``logs/game24/*.json``).

The log is a JSON list, one object per puzzle: ``idx`` (the puzzle's 0-based row in ``24.csv``, whose
``Puzzles`` column holds its four numbers), ``ys`` (the sampled texts, each ending in ``Answer: <expr> = 24``
or a sentence), ``infos`` (per sample ``{"r": 0 or 1}``, the source's own check) and ``usage_so_far`` (the
run's *cumulative* OpenAI usage after the puzzle; it restarts when a run was resumed). Every puzzle becomes
one episode of canonical records for ``build_pool``:

* item: dataset ``game24``, item_id ``idx``, task ``game24``, metadata ``{"numbers": [...]}``, gold ``24``;
  the answer is graded by the Game-of-24 check (``pools.grading.game24``: the puzzle's numbers, each once,
  worth 24), and the source's ``r`` is kept only to measure agreement (``reference_correct``);
* tokens: a puzzle's completion tokens are the difference of ``usage_so_far`` with the previous puzzle of
  the same run (a drop in the cumulative count starts a new run), shared among its samples in proportion
  to each text's estimated length (``pools.tokens.apportion``); its prompt tokens are the difference
  divided by the number of API calls, ceil(samples / 20) (ToT's ``chatgpt()`` asks for at most 20
  completions per call), i.e. the prompt's length. All are flagged ``tokens_estimated``; latency estimated.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

from pools.errors import PoolError
from pools.importers.canonical_records import check_record
from pools.importers.import_format import DATASET, GENERATOR, GENERATOR_PARAMS_B, ImportFormat, ImportOption
from pools.importers.jsonl import build_pool
from pools.store import Pool
from pools.tokens import apportion, estimate_tokens

#: Completions per API call in ToT's ``models.chatgpt`` (n is sent in chunks of at most 20).
TOT_COMPLETIONS_PER_CALL = 20

PROBLEM_TEMPLATE = ("Use numbers and basic arithmetic operations (+ - * /) to obtain 24. Each step, you are only "
                    "allowed to choose two of the remaining numbers to obtain a new number.\nInput: {numbers}")


def load_json_file(path: str) -> Any:
    """The parsed JSON of ``path``; a missing, unreadable or malformed file raises PoolError."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise PoolError("no such file", file=path) from exc
    except json.JSONDecodeError as exc:
        raise PoolError(f"malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})", file=path) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PoolError(f"cannot read ({exc})", file=path) from exc


def read_puzzles(path: str) -> list[list[int]]:
    """The four numbers of every row of ToT's ``24.csv`` (column ``Puzzles``), in row order."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError as exc:
        raise PoolError("no such file (the puzzles file 24.csv; pass --puzzles)", file=path) from exc
    puzzles = []
    for lineno, row in enumerate(rows, start=2):
        try:
            puzzles.append([int(n) for n in (row.get("Puzzles") or "").split()])
        except ValueError:
            raise PoolError(f"expected four integers, got {row.get('Puzzles')!r}", file=f"{path}, line {lineno}",
                            field="Puzzles") from None
        if len(puzzles[-1]) != 4:
            raise PoolError(f"expected four integers, got {row.get('Puzzles')!r}", file=f"{path}, line {lineno}",
                            field="Puzzles")
    return puzzles


def _usage(entry: dict[str, Any], where: str) -> tuple[int, int]:
    usage = entry.get("usage_so_far")
    if not isinstance(usage, dict):
        raise PoolError("expected an object with completion_tokens and prompt_tokens", file=where,
                        field="usage_so_far")
    values = []
    for name in ("completion_tokens", "prompt_tokens"):
        value = usage.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PoolError(f"expected an integer >= 0, got {value!r}", file=where, field=f"usage_so_far.{name}")
        values.append(value)
    return values[0], values[1]


def _check_entry(entry: Any, where: str, n_puzzles: int) -> None:
    if not isinstance(entry, dict):
        raise PoolError(f"expected a JSON object per puzzle, got {type(entry).__name__}", file=where)
    idx = entry.get("idx")
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n_puzzles:
        raise PoolError(f"expected a row index of 24.csv in [0, {n_puzzles - 1}], got {idx!r}", file=where,
                        field="idx")
    ys, infos = entry.get("ys"), entry.get("infos")
    if not isinstance(ys, list) or not ys or not all(isinstance(y, str) for y in ys):
        raise PoolError("expected a non-empty list of sample texts", file=where, field="ys")
    if not isinstance(infos, list) or len(infos) != len(ys):
        raise PoolError(f"expected a list of {len(ys)} objects (one per sample)", file=where, field="infos")
    for k, info in enumerate(infos):
        if not isinstance(info, dict) or info.get("r") not in (0, 1):
            raise PoolError(f"expected {{\"r\": 0 or 1}}, got {info!r}", file=where, field=f"infos[{k}]")


def import_tot_game24(
    src: str | os.PathLike[str],
    *,
    puzzles: str | os.PathLike[str] | None = None,
    generator: str | None = None,
    generator_params_b: float | None = None,
) -> Pool:
    """Read a ToT Game-of-24 log (and its ``24.csv``) into a validated Pool, in memory; see the module doc."""
    src = str(src)
    if generator_params_b is None:
        raise PoolError("the log does not say the generator's size; pass --generator-params-b", file=src)
    puzzles_path = str(puzzles) if puzzles is not None else str(Path(src).with_name("24.csv"))
    numbers_by_row = read_puzzles(puzzles_path)
    data = load_json_file(src)
    if not isinstance(data, list) or not data:
        raise PoolError("expected a non-empty JSON list of puzzle objects", file=src)
    generator = generator or Path(src).name.split("_")[0]
    records: list[tuple[str, dict[str, Any]]] = []
    previous = (0, 0)
    runs = 1
    totals = [0, 0]
    for position, entry in enumerate(data):
        where = f"{src}, puzzle {position}"
        _check_entry(entry, where, len(numbers_by_row))
        completion, prompt = _usage(entry, where)
        if completion < previous[0] or prompt < previous[1]:  # the cumulative count restarted: a resumed run
            previous, runs = (0, 0), runs + 1
        delta_completion, delta_prompt = completion - previous[0], prompt - previous[1]
        previous = (completion, prompt)
        totals[0] += delta_completion
        totals[1] += delta_prompt
        ys = entry["ys"]
        calls = math.ceil(len(ys) / TOT_COMPLETIONS_PER_CALL)
        prompt_tokens = round(delta_prompt / calls)
        output_tokens = apportion(delta_completion, [float(estimate_tokens(y)) for y in ys])
        numbers = numbers_by_row[entry["idx"]]
        for k, text in enumerate(ys):
            rec = {
                "dataset": "game24", "item_id": str(entry["idx"]),
                "problem": PROBLEM_TEMPLATE.format(numbers=" ".join(map(str, numbers))), "gold": "24",
                "task": "game24", "metadata": {"numbers": numbers}, "generator": generator,
                "generator_params_b": generator_params_b, "candidate": k, "text": text,
                "reference_correct": bool(entry["infos"][k]["r"]), "prompt_tokens": prompt_tokens,
                "output_tokens": output_tokens[k], "tokens_estimated": True,
            }
            rec_where = f"{where}, sample {k}"
            check_record(rec, rec_where)
            records.append((rec_where, rec))
    provenance = {
        "importer": "tot-game24", "source": src, "puzzles_file": puzzles_path, "lines": len(data),
        "labels_from": "the Game-of-24 check (pools.grading.game24); the log's infos[].r only for agreement",
        "usage": {"runs": runs, "completion_tokens": totals[0], "prompt_tokens": totals[1],
                  "tokens": "completion tokens apportioned to samples by estimated length; prompt tokens "
                            f"= puzzle delta / ceil(samples / {TOT_COMPLETIONS_PER_CALL})"},
    }
    return build_pool(records, source=src, provenance=provenance)


FORMAT = ImportFormat(
    "tot-game24", import_tot_game24, "a Tree-of-Thoughts Game-of-24 log, with its 24.csv",
    options=(GENERATOR.for_format("default from the file name"), GENERATOR_PARAMS_B.for_format(required=True),
             ImportOption("puzzles", "the puzzles file 24.csv", note="default: 24.csv next to SRC"),
             DATASET.for_format("renames the source's one dataset")))
