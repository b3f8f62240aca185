"""Import the canonical JSONL format (one line per candidate) into a Pool.

``build_pool`` turns canonical candidate records into the five pool tables; the other importers convert
their own format into canonical records and call it, so extraction, clustering, grading, token and latency
estimation and the grader-agreement report happen in one place. Everything is built in memory; nothing is
written here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pools.errors import PoolError
from pools.grading import (
    cluster_answers,
    extract_answer,
    grade_episode,
    item_scorer,
    literal_key,
    normalize_answer,
    repetition_score,
)
from pools.importers.canonical_records import (
    ITEM_FIELDS,
    UNKNOWN_FINISH_REASON,
    canonical_metadata,
    check_record,
    declared_prices,
    declared_verifier_roles,
    describe_value,
    read_json_lines,
    verifier_order,
    verifier_sequence,
)
from pools.importers.import_format import DATASET, ImportFormat
from pools.importers.score_transform import SCORE_TRANSFORM, SCORE_TRANSFORMS, transform_entries
from pools.prices import PRICES_KEY
from pools.schema import LATER_COLUMNS, TABLES, TIERS, VERIFIER_ROLES
from pools.store import Pool
from pools.tokens import estimate_latency_s, estimate_tokens
from pools.validate import validate_pool

# --------------------------------------------------------------------------------------------------
# Records -> Pool
# --------------------------------------------------------------------------------------------------


class _Columns(dict):
    """Column name -> list of values, appended row by row."""

    def add(self, **row: Any) -> None:
        for key, value in row.items():
            self.setdefault(key, []).append(value)


class _Models:
    """Models in order of first appearance; a name keeps one params_b whatever role it plays."""

    def __init__(self) -> None:
        self.params: dict[str, tuple[float, str]] = {}
        self.roles: dict[str, set[str]] = {}

    def add(self, name: str, params_b: float, role: str, where: str, field: str) -> None:
        if name in self.params and self.params[name][0] != float(params_b):
            first_value, first_where = self.params[name]
            raise PoolError(f"model {name!r} has params_b {params_b!r} here but {first_value!r} at {first_where}",
                            file=where, field=field)
        self.params.setdefault(name, (float(params_b), where))
        self.roles.setdefault(name, set()).add(role)

    def columns(self) -> _Columns:
        out = _Columns()
        for name, (params_b, _) in self.params.items():
            out.add(name=name, params_b=params_b,
                    role="+".join(r for r in ("generator", "verifier") if r in self.roles[name]))
        return out


def _group_records(records: Iterable[tuple[str, dict[str, Any]]], models: _Models):
    """Items and episodes (in order of first appearance) from checked records."""
    items: dict[tuple[str, str], dict[str, Any]] = {}
    item_where: dict[tuple[str, str], str] = {}
    episodes: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = {}
    for where, rec in records:
        item_key = (rec["dataset"], rec["item_id"])
        item = {f: rec.get(f) for f in ITEM_FIELDS}
        item["metadata"] = canonical_metadata(item["metadata"])
        if item_key not in items:
            items[item_key], item_where[item_key] = item, where
        else:
            for f in ITEM_FIELDS:
                if item[f] != items[item_key][f]:
                    raise PoolError(f"differs from {item_where[item_key]} for the same item "
                                    f"(dataset {item_key[0]!r}, item_id {item_key[1]!r})", file=where, field=f)
        models.add(rec["generator"], rec["generator_params_b"], "generator", where, "generator_params_b")
        for tier, entry in rec.get("scores", {}).items():
            models.add(entry["model"], entry["params_b"], "verifier", where, f"scores.{tier}.params_b")
        episodes.setdefault((*item_key, rec["generator"]), []).append((where, rec))
    return items, episodes


def _check_candidate_indices(episodes: dict[tuple, list[tuple[str, dict[str, Any]]]]) -> int:
    """Sort each episode's records by candidate index; each must hold exactly 0..k-1 (k may differ between
    episodes); returns N, the most candidates of an episode."""
    for key, recs in episodes.items():
        recs.sort(key=lambda wr: wr[1]["candidate"])
        label = f"episode (dataset {key[0]!r}, item_id {key[1]!r}, generator {key[2]!r})"
        for k, (where, rec) in enumerate(recs):
            if rec["candidate"] != k:
                if k and recs[k - 1][1]["candidate"] == rec["candidate"]:
                    raise PoolError(f"candidate {rec['candidate']} of {label} already appears at {recs[k - 1][0]}",
                                    file=where, field="candidate")
                raise PoolError(f"{label} has candidate indices {[r['candidate'] for _, r in recs]}; "
                                f"expected exactly 0..{len(recs) - 1}", file=where, field="candidate")
    return max((len(recs) for recs in episodes.values()), default=0)


class _Report:
    """What an import estimated, where its labels came from, and how the grader agrees with given labels."""

    def __init__(self) -> None:
        self.estimated = dict.fromkeys(("prompt_tokens", "output_tokens", "latency_s", "verifier_prompt_tokens",
                                        "verifier_output_tokens", "verifier_latency_s"), 0)
        self.labels = {"given": 0, "graded": 0, "unknown": 0}
        self.groups: dict[tuple[str, str], dict[str, int]] = {}
        self.disagreements: list[dict[str, Any]] = []

    def label(self, rec: dict[str, Any], verdict: bool | None, context: dict[str, Any]) -> bool | None:
        """The candidate's correctness: the record's label when it has one (compared with the grader's
        ``verdict``), else the verdict; an explicit null stays unknown. ``reference_correct`` is a source's
        own label that is only compared with the grader: the verdict is kept. Without a gold answer there is
        no verdict (None): a given label stands uncompared, a missing one stays unknown."""
        if verdict is None:
            self.labels["given" if rec.get("correct") is not None else "unknown"] += 1
            return rec.get("correct")
        if "correct" not in rec:
            self.labels["graded"] += 1
            if rec.get("reference_correct") is not None:
                self._compare(rec["reference_correct"], verdict, context)
            return verdict
        if rec["correct"] is None:
            self.labels["unknown"] += 1
            return None
        self.labels["given"] += 1
        self._compare(rec["correct"], verdict, context)
        return rec["correct"]

    def _compare(self, label: bool, verdict: bool, context: dict[str, Any]) -> None:
        group = self.groups.setdefault((context["dataset"], context["generator"]), {"compared": 0, "agree": 0})
        group["compared"] += 1
        group["agree"] += label == verdict
        if label != verdict:
            self.disagreements.append({**context, "label": label, "grader": verdict})

    def provenance(self) -> dict[str, Any]:
        compared = sum(g["compared"] for g in self.groups.values())
        agree = sum(g["agree"] for g in self.groups.values())
        agreement = {
            "compared": compared, "agree": agree, "rate": agree / compared if compared else None,
            "groups": [{"dataset": d, "generator": g, **v} for (d, g), v in self.groups.items()],
            "disagreements": self.disagreements,
        }
        return {"labels": self.labels, "estimated": self.estimated, "grader_agreement": agreement}


def _add_episode(episode_id: int, recs: list[tuple[str, dict[str, Any]]], item: dict[str, Any],
                 report: _Report, cand: _Columns, verif: _Columns) -> None:
    """Candidate and verification rows of one episode: answers, clusters, labels, costs (docs/POOLS.md)."""
    try:
        scorer = item_scorer(item["task"], item["problem"], item["gold"], item["metadata"])
    except Exception as exc:  # an unknown task, or metadata its scorer cannot use: bad input, not a crash
        raise PoolError(f"cannot build the scorer of task {item['task']!r} ({type(exc).__name__}: {exc}); expected "
                        "a reasoning_gym dataset name or game24 with its metadata", file=recs[0][0],
                        field="task") from exc
    key_of = literal_key if scorer is not None else normalize_answer
    parsed = [_answer_fields(rec) for _, rec in recs]
    if item["gold"] is None and scorer is None:  # an outcome record: nothing to grade against
        graded_clusters, verdicts = cluster_answers([p[0] for p in parsed]), [None] * len(parsed)
    else:
        graded_clusters, verdicts = grade_episode([p[0] for p in parsed], item["gold"], scorer=scorer,
                                                  problem=item["problem"])
    has_cluster = ["cluster" in rec for _, rec in recs]
    if any(has_cluster) and not all(has_cluster):
        raise PoolError("missing while other candidates of this episode give it; expected all or none",
                        file=recs[has_cluster.index(False)][0], field="cluster")
    clusters = [rec["cluster"] for _, rec in recs] if all(has_cluster) else graded_clusters
    for k, ((where, rec), (answer, status, incomplete), verdict) in enumerate(
        zip(recs, parsed, verdicts, strict=True)
    ):
        context = {"episode_id": episode_id, "candidate": k, "dataset": rec["dataset"], "item_id": rec["item_id"],
                   "generator": rec["generator"], "answer": answer, "gold": item["gold"]}
        text = rec.get("text")
        prompt_tokens = rec.get("prompt_tokens")
        if prompt_tokens is None:  # the prompt template is unknown: the problem statement is all we can count
            prompt_tokens = estimate_tokens(item["problem"])
            report.estimated["prompt_tokens"] += 1
        output_tokens = rec.get("output_tokens")
        if output_tokens is not None and rec.get("tokens_estimated"):  # the importer estimated it (e.g. capped)
            report.estimated["output_tokens"] += 1
        if output_tokens is None:
            if text is None:
                raise PoolError("missing, and there is no text to estimate it from", file=where,
                                field="output_tokens")
            output_tokens = estimate_tokens(text)
            report.estimated["output_tokens"] += 1
        latency = rec.get("latency_s")
        if latency is None:
            latency = estimate_latency_s(prompt_tokens, output_tokens, rec["generator_params_b"])
            report.estimated["latency_s"] += 1
        finish_reason = rec.get("finish_reason", UNKNOWN_FINISH_REASON)
        cand.add(
            episode_id=episode_id, candidate=k, text=text, raw_answer=answer,
            answer_key=rec["answer_key"] if "answer_key" in rec else key_of(answer), cluster=clusters[k],
            correct=report.label(rec, verdict, context), prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            tokens_estimated=(rec.get("tokens_estimated", False) or rec.get("output_tokens") is None
                              or rec.get("prompt_tokens") is None),
            latency_s=float(latency), finish_reason=finish_reason,
            cap_hit=rec.get("cap_hit", finish_reason == "length"), extraction_status=status,
            incomplete_boxed=incomplete,
            repetition_score=float(rec["repetition_score"]) if "repetition_score" in rec else repetition_score(text),
            graded_score=_number(rec.get("graded_score")), cost_usd=_number(rec.get("cost_usd")),
        )
        scores = rec.get("scores", {})
        for tier in verifier_order(scores):
            entry = scores[tier]
            if entry is not None:
                _add_verification(verif, report.estimated, episode_id, k, tier, entry, item["problem"], text)


def build_pool(
    records: Sequence[tuple[str, dict[str, Any]]],
    *,
    source: str,
    provenance: dict[str, Any] | None = None,
    verifier_roles: dict[str, str] | None = None,
    generation: dict[str, Any] | None = None,
) -> Pool:
    """Build a validated Pool from checked canonical records ``(where, record)``; see docs/POOLS.md.

    ``verifier_roles`` (tier -> role, ``pools.schema.VERIFIER_ROLES``) goes into the manifest when given;
    ``generation`` (the source's sampling settings, e.g. ``max_output_tokens``) too.
    """
    if not records:
        raise PoolError("no candidates found; expected at least one line", file=source)
    models = _Models()
    items, episodes = _group_records(records, models)
    n = _check_candidate_indices(episodes)
    report = _Report()
    item_rows, episode_rows, cand, verif = _Columns(), _Columns(), _Columns(), _Columns()
    for (dataset, item_id), item in items.items():
        item_rows.add(dataset=dataset, item_id=item_id, **item)
    for episode_id, ((dataset, item_id, generator), recs) in enumerate(episodes.items()):
        episode_rows.add(episode_id=episode_id, dataset=dataset, item_id=item_id, generator=generator)
        _add_episode(episode_id, recs, items[(dataset, item_id)], report, cand, verif)
    pool = Pool(
        items=table_frame(item_rows, "items"),
        models=table_frame(models.columns(), "models"),
        episodes=table_frame(episode_rows, "episodes"),
        candidates=table_frame(cand, "candidates"),
        verifications=table_frame(verif, "verifications"),
    )
    roles = {**declared_verifier_roles(records), **(verifier_roles or {})}
    pool.manifest["tiers"] = verifier_sequence(records)  # the pool's verifier order (Pool.tiers reads it)
    for where, rec in records:
        unnamed = [t for t in rec.get("scores", {}) if t not in TIERS and t not in roles]
        if unnamed:
            raise PoolError(f"verifier {unnamed[0]!r} has no role; expected scores.{unnamed[0]}.role (one of "
                            f"{list(VERIFIER_ROLES)}) on some record; only the paper's {list(TIERS)} have a "
                            "default role", file=where, field=f"scores.{unnamed[0]}")
    prices = declared_prices(records)
    pool.refresh_manifest(n_candidates=n, provenance={**report.provenance(), **(provenance or {})},
                          **({"verifier_roles": roles} if roles else {}), **({PRICES_KEY: prices} if prices else {}),
                          **({"generation": dict(generation)} if generation else {}))
    validate_pool(pool, source=source)
    return pool


def _number(value: float | None) -> float:
    """A record's optional number as a float, NaN when absent or null."""
    return math.nan if value is None else float(value)


def _answer_fields(rec: dict[str, Any]) -> tuple[str | None, str, bool]:
    """(raw answer, extraction status, incomplete boxed) of a record: given, or extracted from its text.

    The answer counts as given when ``answer`` is set or ``extraction_status`` is (a null answer with a
    status is a known "no answer"); otherwise it is extracted from ``text``. ``incomplete_boxed``, when not
    given, is read off the text whenever there is one.
    """
    answer, status, text = rec.get("answer"), rec.get("extraction_status"), rec.get("text")
    if answer is not None and not answer.strip():  # an empty answer is no answer: no vote, no cluster
        answer, status = None, "none"
    found = extract_answer(text) if text is not None and ("incomplete_boxed" not in rec or
                                                         (answer is None and status is None)) else None
    incomplete = rec["incomplete_boxed"] if "incomplete_boxed" in rec else bool(found and found.incomplete_boxed)
    if answer is not None or status is not None or found is None:
        return answer, status or ("given" if answer is not None else "none"), incomplete
    return found.answer, found.status, incomplete


def _add_verification(verif: _Columns, estimated: dict[str, int], episode_id: int, candidate: int, tier: str,
                      entry: dict[str, Any], problem: str, text: str | None) -> None:
    """One verifications row; missing verifier tokens and latency are estimated (docs/POOLS.md)."""
    prompt_tokens = entry.get("prompt_tokens")
    if prompt_tokens is None:
        prompt_tokens = estimate_tokens(problem) + estimate_tokens(text)
        estimated["verifier_prompt_tokens"] += 1
    output_tokens = entry.get("output_tokens")
    if output_tokens is None:
        output_tokens = 0  # a reward model reads a score off its head and writes nothing
        estimated["verifier_output_tokens"] += 1
    latency = entry.get("latency_s")
    if latency is None:
        latency = estimate_latency_s(prompt_tokens, output_tokens, entry["params_b"])
        estimated["verifier_latency_s"] += 1
    score = entry["score"]
    verif.add(episode_id=episode_id, candidate=candidate, tier=tier, model=entry["model"],
              score=math.nan if score is None else float(score), prompt_tokens=prompt_tokens,
              output_tokens=output_tokens, latency_s=float(latency))


def table_frame(columns: dict[str, Any], table: str) -> pd.DataFrame:
    """A DataFrame of ``table`` from collected ``columns``, with the schema's dtypes (even when empty)."""
    out = {}
    rows = len(next(iter(columns.values()))) if columns else 0
    for col, kind in TABLES[table].items():
        values = columns.get(col, [LATER_COLUMNS[table][col]] * rows if col in LATER_COLUMNS.get(table, {}) else [])
        if kind == "int":
            out[col] = pd.Series(np.asarray(values, dtype=np.int64))
        elif kind in ("float", "float?"):
            out[col] = pd.Series(np.asarray(values, dtype=np.float64))
        elif kind == "bool":
            out[col] = pd.Series(np.asarray(values, dtype=bool))
        elif kind == "bool?":
            out[col] = pd.Series(pd.array(values, dtype="boolean"))
        else:
            out[col] = pd.Series(values, dtype="str")
    return pd.DataFrame(out)


def import_jsonl(src: str | os.PathLike[str], score_transform: str = "identity") -> Pool:
    """Read canonical JSONL (one candidate per line) into a validated Pool, in memory; ``score_transform`` maps raw
    reward-model scores to [0, 1] (``pools.importers.score_transform``; default: the scores as given)."""
    src = str(src)
    if score_transform not in SCORE_TRANSFORMS:
        raise PoolError(f"unknown score transform {score_transform!r}; expected one of {list(SCORE_TRANSFORMS)}",
                        file=src)
    records = []
    for lineno, obj in read_json_lines(src):
        where = f"{src}, line {lineno}"
        if not isinstance(obj, dict):
            raise PoolError(f"expected a JSON object per line, got {describe_value(obj)}", file=where)
        check_record(obj, where, raw_scores=score_transform != "identity")
        records.append((where, obj))
    provenance: dict[str, Any] = {"importer": "jsonl", "source": src, "lines": len(records)}
    mapped = transform_entries(records, score_transform)
    if mapped:  # verifier -> its transform, inverse and raw range: the raw scores stay recoverable
        provenance["score_transform"] = mapped
    return build_pool(records, source=src, provenance=provenance)


FORMAT = ImportFormat("jsonl", import_jsonl, "canonical JSONL, one candidate per line (what coba pools export writes)",
                      options=(DATASET.for_format("renames the source's one dataset"), SCORE_TRANSFORM))
