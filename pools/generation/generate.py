"""Sample candidates through OpenAI-compatible servers into a work dir's journal, and build a pool from it.

``generate`` asks, for every item x generator model, for N samples (temperature, top-p, max tokens, a seed
derived per request) through one or more endpoints per model, round-robin, with at most ``concurrency``
calls in flight. Each completed call is one fsync'd journal line (``pools.generation.journal``), so re-running the
same command continues where the last run stopped and a crash loses at most the calls in flight.
Token counts come from the server's ``usage``; they are estimated only when a server sends none.

``build`` turns a journal (candidates plus the verifier scores ``pools.generation.verify_calls`` adds) into canonical
records and hands them to ``pools.importers.jsonl.build_pool``: extraction, clustering, grading and
validation happen there, and the pool is saved atomically.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pools.client.openai_client import Completion, Endpoint, EndpointPool, OpenAIClient
from pools.client.prompts import (
    SamplingSettings,
    call_prompt,
    chat_messages,
    derive_seed,
    load_prompt,
)
from pools.client.request_limits import BACKOFF_S, CALL_ATTEMPTS, CALL_TIMEOUT_S, MAX_BACKOFF_S
from pools.errors import PoolError
from pools.generation.call_runner import PreparedCall, run_calls
from pools.generation.journal import JOURNAL_NAME, Journal, JournalState, read_journal
from pools.output_paths import check_output_dir
from pools.problems import Problem
from pools.schema import TIERS
from pools.store import Pool, save_pool
from pools.tokens import apportion, estimate_tokens

if TYPE_CHECKING:
    from pools.generation.ray_data_http import RayDataOptions

__all__ = ["RunOptions", "build_pool_from_workdir", "generate"]

# --------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------


@dataclass
class RunOptions:
    """How calls are made: concurrency, timeouts and retries, progress bar."""

    concurrency: int = 8
    timeout_s: float = CALL_TIMEOUT_S
    max_attempts: int = CALL_ATTEMPTS
    backoff_s: float = BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S
    api_key: str | None = None
    progress: bool = True

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for ``OpenAIClient``."""
        return {"api_key": self.api_key, "timeout_s": self.timeout_s, "max_attempts": self.max_attempts,
                "backoff_s": self.backoff_s, "max_backoff_s": self.max_backoff_s}


# --------------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------------


@dataclass
class _Request:
    problem: Problem
    model: str
    indices: list[int]
    messages: list[dict[str, str]] = field(repr=False)


def _check_settings(state: JournalState, model: str, settings: dict[str, Any], where: str) -> None:
    for cand in state.candidates.values():
        if cand["generator"] == model and cand["settings"] != settings:
            diff = sorted(k for k in set(settings) | set(cand["settings"])
                          if settings.get(k) != cand["settings"].get(k))
            raise PoolError(f"generator {model!r} was sampled here with other settings ({diff}: "
                            f"{[cand['settings'].get(k) for k in diff]} vs now {[settings.get(k) for k in diff]}); "
                            "use the same settings to resume, or a new work dir", file=where, field=diff[0])


def _output_tokens(completion: Completion, k: int) -> tuple[int | None, bool]:
    """(output tokens of choice k, estimated?) from the server's usage; see the module docstring."""
    choices = completion.choices
    if len(choices) == 1 and completion.completion_tokens is not None:
        return completion.completion_tokens, False
    if choices[k].n_tokens is not None:
        return choices[k].n_tokens, False
    if completion.completion_tokens is None:
        return None, True
    # n > 1 without per-choice counts: split the server's total in proportion to text length (exact sum).
    weights = [float(max(len(c.text), 1)) for c in choices]
    return apportion(completion.completion_tokens, weights)[k], True


def _plan_requests(journal: Journal, problems: Sequence[Problem], models: Sequence[str], settings: SamplingSettings,
                   prompt_spec: dict[str, Any], stats: dict[str, int]) -> list[_Request]:
    """The requests still to make: each item x model's candidate indices the journal lacks, ``n_per_request``
    at a time (``stats["already_done"]`` counts the others)."""
    requests: list[_Request] = []
    for problem in problems:
        messages = chat_messages(prompt_spec, problem=problem.problem)
        for model in models:
            have = journal.state.candidate_indices(problem.dataset, problem.item_id, model)
            stats["already_done"] += len(have & set(range(settings.n)))
            missing = [k for k in range(settings.n) if k not in have]
            for start in range(0, len(missing), settings.n_per_request):
                requests.append(_Request(problem, model, missing[start:start + settings.n_per_request], messages))
    return requests


@dataclass
class _SampleCalls:
    """How one run's generation requests are sent (``prepare``, ``call``) and what a finished one journals
    (``on_done``, which returns the requests for choices a server did not send)."""

    servers: EndpointPool
    settings: SamplingSettings
    prompt_spec: dict[str, Any]
    fixed: dict[str, Any]  # the journaled settings every candidate of a generator shares
    journal: Journal
    stats: dict[str, int]
    max_n_lock: threading.Lock = field(default_factory=threading.Lock)

    def _seed(self, req: _Request) -> int:
        return derive_seed(self.settings.seed, req.problem.dataset, req.problem.item_id, req.model, req.indices[0])

    def prepare(self, req: _Request) -> PreparedCall:
        """The endpoint of ``req`` (round-robin) and how to send it through a client of that endpoint."""
        servers, settings = self.servers, self.settings
        client = servers.client(req.model)
        n = min(len(req.indices), servers.max_n.get(client.base_url, len(req.indices)))
        params = {"temperature": settings.temperature, "top_p": settings.top_p, "max_tokens": settings.max_tokens,
                  "seed": self._seed(req), "n": n if n > 1 else None,
                  "extra_body": self.prompt_spec.get("request") or None}

        def send(through: OpenAIClient) -> tuple[str, int, Completion]:
            completion = call_prompt(through, settings.api, req.messages, **params)
            if 0 < len(completion.choices) < n:  # the server ignores or caps n: learn it before the next call
                with self.max_n_lock:
                    servers.max_n[client.base_url] = min(len(completion.choices),
                                                         servers.max_n.get(client.base_url, n))
            return client.base_url, n, completion

        return PreparedCall(client, send)

    def call(self, req: _Request) -> tuple[str, int, Completion]:
        """Send ``req`` from this process."""
        return self.prepare(req).send_here()

    def on_done(self, req: _Request, result: tuple[str, int, Completion]) -> list[_Request]:
        """Journal the choices of a finished call; the indices it did not cover become new requests."""
        url, asked, completion = result
        got = completion.choices[:asked]
        if not got:
            raise PoolError("the server returned no choices", file=url)
        if len(got) < asked:  # the server ignores or caps n (learned in send): ask for the rest separately
            self.stats["ignored_n"] += 1
        prompt_tokens = completion.prompt_tokens
        prompt_estimated = prompt_tokens is None
        if prompt_estimated:
            prompt_tokens = sum(estimate_tokens(m["content"]) for m in req.messages)
        candidates = []
        for k, (index, choice) in enumerate(zip(req.indices, got, strict=False)):
            out_tokens, estimated = _output_tokens(
                Completion(got, completion.prompt_tokens, completion.completion_tokens, 0.0), k)
            cand = {"candidate": index, "text": choice.text, "finish_reason": choice.finish_reason,
                    "tokens_estimated": estimated or prompt_estimated}
            if out_tokens is not None:
                cand["output_tokens"] = out_tokens
            candidates.append(cand)
        p = req.problem
        added = self.journal.append({
            "kind": "generation", "dataset": p.dataset, "item_id": p.item_id, "generator": req.model,
            "params_b": self.servers.params_b[req.model], "endpoint": url, "settings": self.fixed,
            "seed": self._seed(req), "requested_n": asked, "prompt_tokens": prompt_tokens,
            "completion_tokens": completion.completion_tokens, "latency_s": round(completion.latency_s, 6),
            "attempts": completion.attempts, "time": time.time(), "candidates": candidates,
        })
        self.stats["candidates"] += len(added)
        rest = req.indices[len(got):]
        return [_Request(req.problem, req.model, rest[i:i + len(got)], req.messages)
                for i in range(0, len(rest), len(got))]

    @staticmethod
    def progress_of(req: _Request, result: tuple[str, int, Completion]) -> tuple[int, int]:
        """(samples, output tokens) a finished call adds to the progress bar."""
        _, asked, completion = result
        return min(len(completion.choices), asked), completion.completion_tokens or 0


def generate(workdir: str | os.PathLike[str], problems: Sequence[Problem], endpoints: Sequence[Endpoint],
             settings: SamplingSettings | None = None, options: RunOptions | None = None, *,
             ray: RayDataOptions | None = None) -> dict[str, Any]:
    """Sample up to ``settings.n`` candidates per item x model into ``workdir``'s journal; returns counts.

    ``ray`` sends the calls through Ray Data's LLM HTTP processor on a Ray cluster (``pools.generation.
    ray_data_http``) instead of this process's threads: same requests, same journal lines, same resume.
    """
    settings = settings or SamplingSettings()
    options = options or RunOptions()
    if settings.n < 1 or settings.n_per_request < 1:
        raise ValueError("n and n_per_request must be >= 1")
    if settings.api not in ("chat", "completions"):
        raise ValueError(f"api must be 'chat' or 'completions', got {settings.api!r}")
    problems = list({(p.dataset, p.item_id): p for p in problems}.values())  # each item once
    prompt_spec = load_prompt(settings.prompt)
    fixed = settings.journal_settings(prompt_spec)
    servers = EndpointPool(endpoints, **options.client_options())
    stats = {"calls": 0, "candidates": 0, "already_done": 0, "ignored_n": 0}
    with Journal(workdir) as journal:
        journal.append_many([{"kind": "item", **problem.to_record()} for problem in problems])
        for model in servers.models:
            _check_settings(journal.state, model, fixed, str(journal.path))
        requests = _plan_requests(journal, problems, servers.models, settings, prompt_spec, stats)
        calls = _SampleCalls(servers, settings, prompt_spec, fixed, journal, stats)
        run = dict(total=sum(len(r.indices) for r in requests), desc="generate", progress=options.progress,
                   unit="sample", progress_of=calls.progress_of)
        if ray is None:
            stats["calls"] = run_calls(requests, calls.call, calls.on_done, concurrency=options.concurrency, **run)
        else:  # the same requests and journal lines; the HTTP calls go through Ray Data's HTTP processor
            from pools.generation.ray_data_http import run_calls_on_ray

            stats["calls"] = run_calls_on_ray(requests, calls.prepare, calls.on_done, ray=ray, options=options,
                                              **run)
    return stats


# --------------------------------------------------------------------------------------------------
# Journal -> pool
# --------------------------------------------------------------------------------------------------


def journal_records(state: JournalState, where: str, n: int | None = None,
                    drop_incomplete: bool = False) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """Canonical candidate records (``pools.importers.jsonl``) of the first ``n`` candidates per episode."""
    from pools.importers.canonical_records import check_record

    per_episode = {ep: sorted(ks) for ep, ks in state.by_episode.items()}
    if n is None:
        n = max((len(ks) for ks in per_episode.values()), default=0)
    complete = {ep for ep, ks in per_episode.items() if ks[:n] == list(range(n))}
    incomplete = sorted(set(per_episode) - complete)
    if incomplete and not drop_incomplete:
        ep = incomplete[0]
        raise PoolError(f"{len(incomplete)} episode(s) have fewer than {n} candidates, e.g. (dataset {ep[0]!r}, "
                        f"item_id {ep[1]!r}, generator {ep[2]!r}) has {len(per_episode[ep])}; run generate "
                        "again to finish them, or build with --drop-incomplete", file=where)
    records = []
    for (dataset, item_id, generator, k), cand in state.candidates.items():
        if (dataset, item_id, generator) not in complete or k >= n:
            continue
        item = state.items.get((dataset, item_id))
        if item is None:
            raise PoolError(f"candidate of unknown item (dataset {dataset!r}, item_id {item_id!r})", file=where)
        rec = {"dataset": dataset, "item_id": item_id, **item,
               "generator": generator, "generator_params_b": float(cand["params_b"]), "candidate": k,
               "text": cand["text"], "prompt_tokens": int(cand["prompt_tokens"]),
               "tokens_estimated": bool(cand.get("tokens_estimated", False)),
               "latency_s": float(cand["latency_s"]), "finish_reason": cand["finish_reason"],
               "cap_hit": cand["finish_reason"] == "length"}
        if cand.get("output_tokens") is not None:
            rec["output_tokens"] = int(cand["output_tokens"])
        scores = {}
        for tier in TIERS:
            s = state.scores.get((dataset, item_id, generator, k, tier))
            if s is not None:
                entry = {"score": s["score"], "model": s["model"], "params_b": float(s["params_b"]),
                         "latency_s": float(s["latency_s"])}
                for name in ("prompt_tokens", "output_tokens"):
                    if s.get(name) is not None:
                        entry[name] = int(s[name])
                scores[tier] = entry
        if scores:
            rec["scores"] = scores
        label = f"{where}, candidate ({dataset}, {item_id}, {generator}, {k})"
        check_record(rec, label)
        records.append((label, rec))
    settings = {}
    for cand in state.candidates.values():
        settings.setdefault(cand["generator"], cand["settings"])
    info = {"n": n, "dropped_incomplete_episodes": len(incomplete) if drop_incomplete else 0,
            "settings": settings}
    return records, info


def build_pool_from_workdir(workdir: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None, *,
                            n: int | None = None, force: bool = False, drop_incomplete: bool = False) -> Pool:
    """Grade, validate and (with ``dest``) atomically save the pool of a work dir's journal."""
    from pools.importers.jsonl import build_pool

    where = str(Path(workdir) / JOURNAL_NAME)
    if dest is not None:  # before the journal is read: a wrong destination fails at once
        check_output_dir(dest, force=force, inputs=[workdir], kind="pool")
    state = read_journal(workdir)
    records, info = journal_records(state, where, n=n, drop_incomplete=drop_incomplete)
    tiers = sorted({k[4] for k in state.scores})
    pool = build_pool(records, source=where, provenance={
        "importer": "coba pools generate", "workdir": str(workdir), "journal_lines": state.lines,
        "duplicate_lines_ignored": state.duplicates, "dropped_incomplete_episodes":
        info["dropped_incomplete_episodes"], "tiers_scored": tiers})
    pool.manifest["generation"] = {"n": info["n"], "per_generator": info["settings"]}
    if dest is not None:
        save_pool(pool, dest, overwrite=force, inputs=[workdir])
    return pool

