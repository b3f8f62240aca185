"""Verifier scoring through OpenAI-compatible servers: V1/V3 yes-no judges and the V2 step judge.

Judges are described by prompt files in ``pools/data/prompts`` (``v1_judge.yaml``, ``v2_steps.yaml``,
``v3_judge.yaml``; each file documents its scoring). ``verify`` scores every journaled candidate that has
no score for the tier yet, one call per candidate, and journals each call with its score, tokens and
latency; a call that yields no usable score is stored with score null (NaN in the pool, i.e. missing).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pools.client.judges import (
    DEFAULT_JUDGES,
    JudgeOutcome,
    judge,
)
from pools.client.openai_client import Endpoint, EndpointPool
from pools.client.prompts import load_prompt
from pools.errors import PoolError
from pools.generation.call_runner import PreparedCall, run_calls
from pools.generation.generate import RunOptions
from pools.generation.journal import JOURNAL_NAME, Journal
from pools.schema import TIERS

if TYPE_CHECKING:
    from pools.generation.ray_data_http import RayDataOptions

__all__ = ["verify"]


def verify(workdir: str | os.PathLike[str], tier: str, endpoints: Sequence[Endpoint], *,
           prompt: str | os.PathLike[str] | None = None, api: str = "chat", options: RunOptions | None = None,
           limit: int | None = None, ray: RayDataOptions | None = None) -> dict[str, Any]:
    """Score every candidate in ``workdir`` that has no ``tier`` score yet; returns counts (``ray``: the calls
    go through Ray Data's HTTP processor on a Ray cluster, as in ``generate``)."""
    if tier not in TIERS:
        raise PoolError(f"unknown tier {tier!r}; a work dir takes the paper's tiers {list(TIERS)} (score another "
                        "verifier into the built pool: `coba pools verify POOL --tier NAME --role ROLE`)")
    options = options or RunOptions()
    spec = load_prompt(prompt or DEFAULT_JUDGES[tier])
    servers = EndpointPool(endpoints, **options.client_options())
    if not Path(workdir, JOURNAL_NAME).is_file():
        raise PoolError("no journal here; run `coba pools generate` with this work dir first", file=str(workdir))
    stats = {"calls": 0, "scored": 0, "unparsed": 0, "already_scored": 0}
    with Journal(workdir) as journal:
        state = journal.state
        todo = []
        for key, cand in state.candidates.items():
            if key + (tier,) in state.scores:
                stats["already_scored"] += 1
                continue
            todo.append((key, cand))
        if limit is not None:
            todo = todo[:limit]
        models = servers.models
        # Several judge models for one tier share the work, candidate by candidate.
        tasks = [(key, cand, models[i % len(models)]) for i, (key, cand) in enumerate(todo)]

        def prepare(task: tuple) -> PreparedCall:
            key, cand, model = task
            problem = state.items[(key[0], key[1])]["problem"]
            return PreparedCall(servers.client(model),
                                lambda through: judge(through, spec, problem, cand["text"] or "", api=api))

        def call(task: tuple) -> JudgeOutcome:
            return prepare(task).send_here()

        def on_done(task: tuple, outcome: JudgeOutcome) -> list:
            key, _, model = task
            line = {"kind": "verification", "dataset": key[0], "item_id": key[1], "generator": key[2],
                    "candidate": key[3], "tier": tier, "model": model, "params_b": servers.params_b[model],
                    "score": outcome.score, "method": outcome.method, "prompt_tokens": outcome.prompt_tokens,
                    "output_tokens": outcome.output_tokens, "latency_s": round(outcome.latency_s, 6),
                    "reply": outcome.reply[:2000], "prompt_file": Path(spec["_path"]).name, "time": time.time()}
            if journal.append(line):
                stats["scored"] += 1
                stats["unparsed"] += outcome.score is None
            return []

        run = dict(total=len(tasks), desc=f"verify {tier}", progress=options.progress, unit="call",
                   progress_of=lambda task, o: (1, o.output_tokens or 0))
        if ray is None:
            stats["calls"] = run_calls(tasks, call, on_done, concurrency=options.concurrency, **run)
        else:  # the same judge calls and journal lines, sent through Ray Data's HTTP processor
            from pools.generation.ray_data_http import run_calls_on_ray

            stats["calls"] = run_calls_on_ray(tasks, prepare, on_done, ray=ray, options=options, **run)
    return stats
