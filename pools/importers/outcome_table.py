"""``OutcomeRows`` -> a validated Pool, columnwise: the common end of the wide and the long table importers.

An outcome table already holds the source's judgment of every (query, model) call, so nothing is graded here:
``correct`` is ``score >= correct_threshold`` (the threshold the import states; 1.0 = only a full score is
correct) and a numeric score is kept as the candidate's ``graded_score`` (evaluator side, like ``correct``).
Unlike ``pools.importers.jsonl.build_pool`` (a Python loop per candidate, which grades and clusters), every step
is a numpy / pandas operation over all rows, so a table of 30 models x 100,000 queries imports in seconds;
Python runs per row only for what needs text (answers extracted from response texts, token estimates of
distinct prompts).

* item: (dataset, item_id) with its problem (the prompt), gold (null when the table has none) and subject;
  every row of one item must give the same problem, gold and subject;
* episode: (item, model), candidates 0..N-1 with one N for all (one row per query and model: N = 1);
* answer: the given answer (status ``given``), else the one extracted from the response text, else none; a
  candidate without an answer has status ``outcome`` (``pools.schema.OUTCOME_STATUS``): its outcome is known,
  and the env treats it as an answer of its own, never equal to another (``coba_env.compiled``);
* tokens: given counts are the source's (``tokens_estimated`` false); a missing prompt count is estimated from
  the prompt and a missing output count from the response text, or 0 when there is none (a lower bound), both
  flagged; latency by ``pools.tokens`` from the model's size (0 when unknown: the per-call overhead only);
* dollars: a recorded cost goes to ``cost_usd``; prices come from ``pools.price_list.fill_prices``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pools.grading import extract_answer, normalize_answer, repetition_score
from pools.importers.import_format import ImportOption
from pools.importers.jsonl import table_frame
from pools.importers.outcome_rows import OutcomeRows
from pools.importers.table_cells import OUTSIDE_RULES
from pools.schema import OUTCOME_STATUS
from pools.store import Pool
from pools.tokens import estimate_latency_array, estimate_tokens
from pools.validate import validate_pool

__all__ = ["CORRECT_THRESHOLD", "DEFAULT_CORRECT_THRESHOLD", "SCORES_OUTSIDE", "build_outcome_pool",
           "check_threshold"]

#: ``correct`` = score >= this: only a full score is correct unless the import says otherwise.
DEFAULT_CORRECT_THRESHOLD = 1.0


def check_threshold(value: float) -> str | None:
    """Why ``value`` cannot be a correctness threshold (it must be in (0, 1]), or None."""
    if 0 < value <= 1:
        return None
    return "expected a score in (0, 1]: a candidate is correct when its score is at least this (0 would make " \
           "every candidate correct)"


#: ``--scores-outside``, declared once for every outcome-table format.
SCORES_OUTSIDE = ImportOption("scores_outside", "what a score outside [0, 1] gets: refused, or clipped into [0, 1] "
                              "and listed in the manifest's provenance.scores_clipped", choices=OUTSIDE_RULES)
#: ``--correct-threshold``, declared once for every outcome-table format.
CORRECT_THRESHOLD = ImportOption("correct_threshold", "a candidate is correct when its score is at least this, in "
                                 "(0, 1]", kind="number", check=check_threshold)


def item_codes(rows: OutcomeRows) -> np.ndarray:
    """Each row's item (dataset, item_id) as a code 0.. in order of first appearance (as ``pd.factorize`` of the
    pairs, counted on the two columns' own codes instead of a MultiIndex of 3,000,000 tuples)."""
    dataset = pd.factorize(pd.Series(rows.dataset, dtype=object), use_na_sentinel=False)[0].astype(np.int64)
    item, seen = pd.factorize(pd.Series(rows.item_id, dtype=object), use_na_sentinel=False)
    return pd.factorize(dataset * len(seen) + item)[0]


def _first_difference(rows: OutcomeRows, keys: np.ndarray, name: str, what: str) -> None:
    """Refuse two rows of one item (``keys``: ``item_codes``) that disagree on ``name`` (problem, gold or subject)."""
    values = pd.Series(getattr(rows, name), dtype=object).fillna("\x00none")
    first = values.groupby(keys, sort=False).transform("first")
    differs = (values != first).to_numpy()
    if differs.any():
        pos = int(np.argmax(differs))
        head = int(np.argmax((keys == keys[pos]) & ~differs))
        raise rows.error(f"the {what} of query {rows.item_id[pos]!r} differs from {rows.where(head)} (same query "
                         f"id); expected one {what} per query", pos, name)


def _check_rows(rows: OutcomeRows, items: np.ndarray) -> int:
    """Duplicates and disagreements refused with file, row and column; returns N (candidates per episode).
    ``items``: each row's ``item_codes``; rows are compared on codes, not on their texts."""
    generator = pd.factorize(pd.Series(rows.generator, dtype=object), use_na_sentinel=False)[0]
    frame = pd.DataFrame({"item": items, "generator": generator, "candidate": rows.candidate})
    dup = frame.duplicated(keep="first").to_numpy()
    if dup.any():
        pos = int(np.argmax(dup))
        same = frame.eq(frame.iloc[pos]).all(axis=1).to_numpy()
        raise rows.error(f"query {rows.item_id[pos]!r} has a second outcome of model {rows.generator[pos]!r} "
                         f"(the first at {rows.where(int(np.argmax(same)))}); expected one per query and model",
                         pos, "item_id")
    for name, what in (("problem", "text"), ("gold", "gold answer"), ("subject", "category")):
        _first_difference(rows, items, name, what)
    sizes = frame.groupby(["item", "generator"], sort=False)["candidate"].agg(["size", "max"])
    bad = sizes["max"] != sizes["size"] - 1  # a query may hold fewer samples of a model than another: no gaps
    if bad.any():
        i, g = bad.index[int(np.argmax(bad.to_numpy()))]
        group = (items == i) & (generator == g)
        numbers = sorted(rows.candidate[group].tolist())
        pos = int(np.argmax(group & (rows.candidate >= len(numbers))))  # the row whose number leaves the gap
        raise rows.error(f"query {rows.item_id[pos]!r} of model {rows.generator[pos]!r} has samples numbered "
                         f"{numbers[:10]}; expected 0..{len(numbers) - 1} without gaps", pos, "candidate")
    return int(sizes["size"].max())


def _answers(rows: OutcomeRows, order: np.ndarray) -> dict[str, np.ndarray]:
    """raw_answer, answer_key, cluster, extraction_status, incomplete_boxed of the rows in ``order``."""
    given, text = rows.answer[order], rows.text[order]
    n = len(order)
    raw = np.array([None] * n + [None], dtype=object)[:-1]
    status = np.full(n, OUTCOME_STATUS, dtype=object)
    incomplete = np.zeros(n, dtype=bool)
    has_given = np.array([a is not None and bool(a.strip()) for a in given], dtype=bool)
    raw[has_given], status[has_given] = given[has_given], "given"
    for k in np.flatnonzero(~has_given & np.array([t is not None for t in text], dtype=bool)):
        found = extract_answer(text[k])
        incomplete[k] = found.incomplete_boxed
        if found.answer is not None:
            raw[k], status[k] = found.answer, found.status
    key = np.array([normalize_answer(a) if a is not None else None for a in raw] + [None], dtype=object)[:-1]
    no_key = np.array([k is None for k in key], dtype=bool)  # an answer that normalizes to nothing is none
    raw[no_key], status[no_key] = None, OUTCOME_STATUS
    return {"raw_answer": raw, "answer_key": key, "extraction_status": status, "incomplete_boxed": incomplete}


def _clusters(episode: np.ndarray, candidate: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Cluster ids per episode, 0.. in order of first appearance of each answer key (rows sorted by episode and
    candidate); -1 where there is no answer."""
    answered = np.array([k is not None for k in key], dtype=bool)
    out = np.full(len(key), -1, dtype=np.int64)
    if not answered.any():
        return out
    frame = pd.DataFrame({"ep": episode[answered], "key": key[answered]})
    first = ~frame.duplicated(["ep", "key"]).to_numpy()
    rank = pd.Series(first.astype(np.int64)).groupby(frame["ep"].to_numpy()).cumsum().to_numpy() - 1
    ids = pd.Series(rank[first], index=pd.MultiIndex.from_frame(frame[first]))
    out[answered] = ids.reindex(pd.MultiIndex.from_frame(frame)).to_numpy()
    return out


def _estimated_prompts(problem: np.ndarray) -> np.ndarray:
    """Estimated prompt tokens of each row's problem, each distinct text estimated once."""
    codes, uniques = pd.factorize(pd.Series(problem, dtype=object))
    return np.array([estimate_tokens(t) for t in uniques], dtype=np.float64)[codes]


def build_outcome_pool(rows: OutcomeRows, *, source: str, correct_threshold: float = DEFAULT_CORRECT_THRESHOLD,
                       params_b: dict[str, float] | None = None, provenance: dict[str, Any] | None = None) -> Pool:
    """A validated Pool from outcome rows (module doc); ``params_b``: model -> billions (0 = unknown)."""
    items = item_codes(rows)
    n = _check_rows(rows, items)
    gen_codes, generators = pd.factorize(pd.Series(rows.generator, dtype=object))
    order = np.lexsort((rows.candidate, gen_codes, items))
    episode_of = pd.factorize(items[order] * len(generators) + gen_codes[order])[0]
    heads = np.flatnonzero(np.r_[True, episode_of[1:] != episode_of[:-1]])
    sizes = {str(g): float((params_b or {}).get(str(g), 0.0)) for g in generators}
    first_of_item = order[np.sort(np.unique(items[order], return_index=True)[1])]
    items = {"dataset": rows.dataset[first_of_item], "item_id": rows.item_id[first_of_item],
             "problem": rows.problem[first_of_item], "gold": rows.gold[first_of_item], "level": [None] * len(
                 first_of_item), "subject": rows.subject[first_of_item], "task": [None] * len(first_of_item),
             "metadata": [None] * len(first_of_item)}
    episodes = {"episode_id": np.arange(len(heads)), "dataset": rows.dataset[order][heads],
                "item_id": rows.item_id[order][heads], "generator": rows.generator[order][heads]}
    answers = _answers(rows, order)
    prompt = rows.prompt_tokens[order]
    output = rows.output_tokens[order]
    text = rows.text[order]
    prompt_missing, output_missing = np.isnan(prompt), np.isnan(output)
    prompt = np.where(prompt_missing, _estimated_prompts(rows.problem[order]), prompt)
    has_text = np.array([t is not None for t in text], dtype=bool)
    output[output_missing & has_text] = [estimate_tokens(t) for t in text[output_missing & has_text]]
    output[output_missing & ~has_text] = 0.0
    gen_params = np.array([sizes[str(g)] for g in generators], dtype=np.float64)[gen_codes[order]]
    score = rows.score[order]
    candidates = {
        "episode_id": episode_of, "candidate": rows.candidate[order], "text": text, **answers,
        "cluster": _clusters(episode_of, rows.candidate[order], answers["answer_key"]),
        "correct": score >= correct_threshold, "prompt_tokens": prompt.astype(np.int64),
        "output_tokens": output.astype(np.int64), "tokens_estimated": prompt_missing | output_missing,
        "latency_s": estimate_latency_array(prompt, output, gen_params), "finish_reason": ["unknown"] * len(order),
        "cap_hit": np.zeros(len(order), dtype=bool),
        "repetition_score": np.array([repetition_score(t) if t is not None else 0.0 for t in text]),
        "graded_score": np.where(rows.graded[order], score, np.nan), "cost_usd": rows.cost_usd[order],
    }
    pool = Pool(items=table_frame(items, "items"), models=table_frame({"name": list(sizes), "params_b": list(sizes.values()),
                                                             "role": ["generator"] * len(sizes)}, "models"),
                episodes=table_frame(episodes, "episodes"), candidates=table_frame(candidates, "candidates"),
                verifications=table_frame({}, "verifications"))
    estimated = {"prompt_tokens": int(prompt_missing.sum()), "output_tokens": int(output_missing.sum()),
                 "latency_s": len(order)}
    pool.refresh_manifest(n_candidates=n, provenance={
        "rows": len(order), "labels_from": f"the source's outcomes: correct = score >= {correct_threshold:g}",
        "correct_threshold": correct_threshold, "graded_scores": int(rows.graded.sum()), "estimated": estimated,
        **({"scores_clipped": rows.clipped} if rows.clipped else {}),
        "params_b_unknown": [g for g, p in sizes.items() if p <= 0], **(provenance or {})})
    validate_pool(pool, source=source)
    return pool
