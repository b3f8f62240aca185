"""Save what live runs saw (``coba solve --record``) as a pool, so they can be replayed later.

Each solved problem is one episode: its revealed candidates (text, tokens, latency, finish reason, the
answer and cluster seen live) and every verifier call made on them. The records go through
``pools.importers.jsonl.build_pool`` like any imported pool (validation, estimates, labels). Problems that
revealed different numbers of candidates keep them all: a pool's N is the most an episode holds, and a replay
cannot SAMPLE past what an episode holds (``coba_env.rules.config.EnvConfig.sample_caps``). Correctness is graded against the gold answer when the problem has one, else unknown.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pools.errors import PoolError
from pools.problems import Problem
from pools.store import Pool, save_pool

__all__ = ["live_records", "save_live_pool"]


def live_records(problem: Problem, generator: str, generator_params_b: float,
                 candidates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical candidate records (``pools.importers.jsonl``) of one live episode."""
    item = problem.to_record()
    out = []
    for k, cand in enumerate(candidates):
        rec = {**item, "generator": generator, "generator_params_b": float(generator_params_b), "candidate": k,
               "text": cand["text"], "prompt_tokens": int(cand["prompt_tokens"]),
               "output_tokens": int(cand["output_tokens"]), "tokens_estimated": bool(cand["tokens_estimated"]),
               "latency_s": float(cand["latency_s"]), "finish_reason": cand["finish_reason"],
               "cap_hit": cand["finish_reason"] == "length", "answer": cand["answer"],
               "extraction_status": cand["extraction_status"], "incomplete_boxed": bool(cand["incomplete_boxed"]),
               "cluster": int(cand["cluster"])}
        if not problem.gold and not problem.task:
            rec["correct"] = None  # no gold answer: unknown, never guessed
        scores = {tier: dict(entry) for tier, entry in cand.get("scores", {}).items()}
        if scores:
            rec["scores"] = scores
        out.append(rec)
    return out


def save_live_pool(episodes: Sequence[list[dict[str, Any]]], dest: str | os.PathLike[str], *,
                   force: bool = False, provenance: dict[str, Any] | None = None) -> Pool:
    """Build a pool from the records of several live episodes (``live_records``) and save it atomically."""
    from pools.importers.jsonl import build_pool

    episodes = [e for e in episodes if e]
    if not episodes:
        raise PoolError("nothing to record: no problem revealed a candidate", file=str(dest))
    records = [(f"live episode {i}, candidate {k}", rec) for i, e in enumerate(episodes) for k, rec in enumerate(e)]
    pool = build_pool(records, source=f"coba solve --record {dest}", provenance={
        "importer": "coba solve --record", "live_episodes": len(episodes), **(provenance or {})})
    save_pool(pool, dest, overwrite=force)
    return pool
