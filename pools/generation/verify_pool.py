"""Score an existing pool's candidates with one verifier through an OpenAI-compatible endpoint.

``coba pools verify POOL --tier T --endpoint URL,MODEL[,PARAMS_B]`` (docs/GENERATION.md, "Scoring an
existing pool"):

* every candidate with a text and no tier-T row yet gets one judge call (``pools.client.judges.judge``);
* each finished call is appended to the journal ``POOL.verify-journal.jsonl`` beside the pool (flushed and
  fsynced) before anything else happens, so an interrupted run loses at most the calls in flight;
* at the end the journal's rows are added to the pool's verifications table and the pool is saved
  atomically in place (``pools.store.save_pool``); the journal is then removed. A re-run first merges a
  journal left by an interrupted run and calls nothing already recorded (in the pool or in the journal);
* a call the server refuses (HTTP 400, 413, 422, e.g. 400 "maximum context length") or answers with
  something unusable is recorded as a call without a usable score (score NaN, ``method`` "refused" /
  "unparsed") and the run goes on; an unreachable server (after the client's retries) or one refusing
  every request (401, 403, 404: key or model name) stops the run;
* with ``context_tokens`` the solution is cut, by tokens, so that the whole judge prompt plus its
  ``max_tokens`` answer fits that context: tokens are counted by the server's tokenizer
  (``/extras/tokenize/count`` of llama-cpp-python, ``/tokenize`` of llama.cpp and vLLM) or, when it has
  none, estimated (``pools.tokens.estimate_tokens``); the cut keeps the solution's head and its tail.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pools.client.judges import DEFAULT_JUDGES, ROLE_JUDGES, JudgeOutcome, judge
from pools.client.openai_client import Endpoint, EndpointError, EndpointPool, OpenAIClient
from pools.client.prompts import chat_messages, load_prompt
from pools.errors import PoolError
from pools.generation.call_runner import run_calls
from pools.generation.generate import RunOptions
from pools.output_paths import check_output_dir
from pools.schema import TIERS, VERIFIER_NAME_PATTERN, VERIFIER_ROLES
from pools.store import load_pool, save_pool
from pools.tokens import estimate_tokens

JOURNAL_SUFFIX = ".verify-journal.jsonl"
#: Tokens a chat template adds per message (role markers) and once per prompt, counted generously.
TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS = 8, 16


def journal_path(pool_dir: str | os.PathLike[str]) -> Path:
    """The journal of ``coba pools verify POOL``: ``POOL.verify-journal.jsonl`` beside the pool folder."""
    p = Path(pool_dir)
    return p.with_name(p.name + JOURNAL_SUFFIX)


class TokenCounter:
    """Counts tokens with the server's tokenizer when it has an endpoint for it, else estimates them."""

    def __init__(self, client: OpenAIClient) -> None:
        self.client = client
        self.mode: str | None = None  # "extras", "tokenize" or "estimate", found on the first count

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.client.base_url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=self.client.timeout_s) as response:
            return json.loads(response.read())

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        for mode in ([self.mode] if self.mode else ["extras", "tokenize"]):
            try:
                if mode == "extras":
                    n = int(self._post("/extras/tokenize/count", {"input": text, "model": self.client.model})["count"])
                elif mode == "tokenize":
                    n = len(self._post("/tokenize", {"content": text})["tokens"])
                else:
                    break
            except (OSError, ValueError, KeyError, TypeError):
                continue
            self.mode = mode
            return n
        self.mode = "estimate"
        return estimate_tokens(text)


def _cut(text: str, keep_chars: int) -> str:
    """``text`` cut to about ``keep_chars`` characters: its first quarter and its end (the final answer)."""
    if keep_chars <= 0:
        return ""
    head = keep_chars // 4
    return text[:head] + "\n[...]\n" + text[len(text) - (keep_chars - head):]


def fit_solution(counter: TokenCounter, spec: dict[str, Any], problem: str, solution: str,
                 context_tokens: int) -> tuple[str, bool]:
    """(solution, cut?): the solution cut so the judge prompt and its answer fit ``context_tokens``."""
    messages = chat_messages(spec, problem=problem, solution="")
    overhead = sum(counter.count(m["content"]) for m in messages) + TEMPLATE_TOKENS + \
        TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + int(spec.get("max_tokens") or 0)
    room = context_tokens - overhead
    n = counter.count(solution)
    if n <= room:
        return solution, False
    text = solution
    for _ in range(8):  # shrink in proportion until the count fits (tokens per character vary along a text)
        text = _cut(solution, int(len(text) * max(room, 0) / max(n, 1) * 0.95))
        n = counter.count(text)
        if n <= room:
            break
    return text, True


class _Journal:
    """Append-only JSON lines, each flushed and fsynced; reading skips a torn last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            for lineno, line in enumerate(lines, start=1):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    if lineno == len(lines):
                        continue  # the last line cut by a crash: its call is made again
                    raise PoolError("not a JSON line (only the last line may be cut short)",
                                    file=f"{path}, line {lineno}") from None
                self.rows.append(_checked_row(row, f"{path}, line {lineno}"))
        self._fh = None

    def append(self, row: dict[str, Any]) -> None:
        """Write ``row`` durably."""
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._fh.write(json.dumps(row, allow_nan=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.rows.append(row)

    def close(self) -> None:
        """Close the file (rows stay in memory)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


#: Journal fields and the types their values must have.
_ROW_TYPES: dict[str, tuple[type, ...]] = {
    "episode_id": (int,), "candidate": (int,), "tier": (str,), "model": (str,), "score": (int, float, type(None)),
    "prompt_tokens": (int,), "output_tokens": (int,), "latency_s": (int, float),
}


def _checked_row(row: Any, where: str) -> dict[str, Any]:
    """A journal row with every field the pool needs, of the right type (a hand-edited journal is refused)."""
    if not isinstance(row, dict):
        raise PoolError(f"expected a JSON object, got {type(row).__name__}", file=where)
    for name, types in _ROW_TYPES.items():
        value = row.get(name)
        if isinstance(value, bool) or not isinstance(value, types):
            raise PoolError(f"is {value!r}; expected {' or '.join(t.__name__ for t in types)}", file=where,
                            field=name)
    return row


#: HTTP statuses that refuse this one request (too long, malformed for this input), not every request: a
#: wrong key (401/403) or model name (404) would refuse them all, so those stop the run instead.
REFUSED_STATUS = (400, 413, 422)


def _refused(exc: EndpointError) -> bool:
    """A call the server answered but would not serve, or answered unusably; not an unreachable server."""
    if exc.status is not None:
        return exc.status in REFUSED_STATUS
    return "giving up:" not in str(exc)  # the client's words after its retries on timeouts and connections


def _check_verifier(tier: str, role: str | None) -> None:
    """A verifier name and role the pool can hold (PoolError otherwise), checked before the pool is read."""
    if not re.fullmatch(VERIFIER_NAME_PATTERN, tier):
        raise PoolError(f"verifier name {tier!r}; expected a name matching {VERIFIER_NAME_PATTERN} (the paper's "
                        f"are {list(TIERS)})")
    if role is not None and role not in VERIFIER_ROLES:
        raise PoolError(f"unknown verifier role {role!r}; expected one of {list(VERIFIER_ROLES)}")


def _judge_prompt(pool: Any, pool_dir: str | os.PathLike[str], tier: str, role: str | None,
                  prompt: str | os.PathLike[str] | None, context_tokens: int | None) -> dict[str, Any]:
    """The judge prompt of verifier ``tier``: the paper's names keep their tier's prompt, any other verifier is
    prompted by its role (given, or declared by the pool; PoolError when there is none)."""
    declared = (pool.manifest.get("verifier_roles") or {}).get(tier) if role is None else role
    if tier not in TIERS and declared is None:
        raise PoolError(f"verifier {tier!r} has no role; give --role (one of {list(VERIFIER_ROLES)}): only the "
                        f"paper's {list(TIERS)} have a default role", file=str(pool_dir))
    spec = load_prompt(prompt or DEFAULT_JUDGES.get(tier) or ROLE_JUDGES[declared])
    if context_tokens is not None:
        spec = {**spec, "max_solution_chars": 1 << 40}  # the cut is by tokens (fit_solution), not characters
    return spec


def _refuse_another_model(pool: Any, pool_dir: str | os.PathLike[str], tier: str, model: str) -> None:
    """One verifier per tier: a tier holding another model's scores is refused (PoolError)."""
    ver = pool.verifications
    held = sorted(set(ver.loc[ver["tier"] == tier, "model"]) - {model})
    if held:
        raise PoolError(f"tier {tier} already holds scores of {held}; score {model} into another tier",
                        file=str(pool_dir))


def _recorded(pool: Any, journal: _Journal, tier: str, model: str) -> set[tuple[int, int]]:
    """(episode, candidate) pairs scored at ``tier`` in the pool; a journal of another verifier or pool is
    refused (PoolError)."""
    ver = pool.verifications
    other = sorted({(r.get("tier"), r.get("model")) for r in journal.rows} - {(tier, model)})
    if other:
        raise PoolError(f"the journal holds calls of {other}, not of {tier} {model}; run that command again to "
                        "finish it (or delete the journal)", file=str(journal.path))
    known = set(zip(pool.candidates["episode_id"].astype(int), pool.candidates["candidate"].astype(int),
                    strict=True))
    for r in journal.rows:
        if (r["episode_id"], r["candidate"]) not in known:
            raise PoolError(f"the journal has a call for episode {r['episode_id']} candidate {r['candidate']}, "
                            "which the pool does not hold; it belongs to another pool (move it away)",
                            file=str(journal.path))
    return {(int(e), int(c)) for e, c in zip(ver.loc[ver["tier"] == tier, "episode_id"],
                                             ver.loc[ver["tier"] == tier, "candidate"], strict=True)}


def _to_score(pool: Any, done: set[tuple[int, int]], stats: dict[str, int],
              limit: int | None) -> list[tuple[tuple[int, int], str, str]]:
    """``((episode, candidate), problem, text)`` of the candidates with a text and no call recorded (``done``),
    the first ``limit`` of them; ``stats`` counts the ones already recorded and the ones without text."""
    problems = dict(zip(zip(pool.items["dataset"], pool.items["item_id"], strict=True), pool.items["problem"],
                        strict=True))
    item_of = {int(r.episode_id): (r.dataset, r.item_id) for r in pool.episodes.itertuples(index=False)}
    todo = []
    for r in pool.candidates.itertuples(index=False):
        key = (int(r.episode_id), int(r.candidate))
        if key in done:
            stats["already_recorded"] += 1
        elif not isinstance(r.text, str) or not r.text:
            stats["no_text"] += 1
        else:
            todo.append((key, problems[item_of[key[0]]], r.text))
    return todo[:limit] if limit is not None else todo


@dataclass
class _JudgeCalls:
    """One judge call per candidate to score (``call``), journaled as it finishes (``on_done``)."""

    servers: EndpointPool
    model: str
    tier: str
    spec: dict[str, Any]
    api: str
    journal: _Journal
    stats: dict[str, int]
    counter: TokenCounter | None = None
    context_tokens: int | None = None

    def call(self, task: tuple) -> dict[str, Any]:
        """Judge one candidate (cut to the context first, when one is given); a refused call is a row too."""
        (episode, cand), problem, text = task
        cut = False
        if self.counter is not None:
            text, cut = fit_solution(self.counter, self.spec, problem, text, self.context_tokens)
        start = time.perf_counter()
        try:
            out: JudgeOutcome = judge(self.servers.client(self.model), self.spec, problem, text, api=self.api)
        except EndpointError as exc:
            if not _refused(exc):
                raise
            out = JudgeOutcome(None, "refused", 0, 0, time.perf_counter() - start, str(exc)[:500])
        return {"episode_id": episode, "candidate": cand, "tier": self.tier, "model": self.model,
                "params_b": self.servers.params_b[self.model], "score": out.score, "method": out.method,
                "prompt_tokens": int(out.prompt_tokens or 0), "output_tokens": int(out.output_tokens or 0),
                "latency_s": round(out.latency_s, 6), "cut": cut, "reply": out.reply[:500], "time": time.time()}

    def on_done(self, task: tuple, row: dict[str, Any]) -> list:
        """Journal the row durably and count it."""
        self.journal.append(row)
        outcome = "scored" if row["score"] is not None else "refused" if row["method"] == "refused" else "unparsed"
        self.stats[outcome] += 1
        self.stats["cut"] += bool(row["cut"])
        return []


def verify_pool(pool_dir: str | os.PathLike[str], tier: str, endpoints: Sequence[Endpoint], *,
                role: str | None = None, prompt: str | os.PathLike[str] | None = None, api: str = "chat",
                options: RunOptions | None = None, limit: int | None = None,
                context_tokens: int | None = None) -> dict[str, int]:
    """Score ``pool_dir``'s candidates at ``tier`` (see the module docstring); returns counts."""
    _check_verifier(tier, role)
    pool = load_pool(pool_dir)
    spec = _judge_prompt(pool, pool_dir, tier, role, prompt, context_tokens)
    options = options or RunOptions()
    servers = EndpointPool(endpoints, **options.client_options())
    if len(servers.models) != 1:
        raise PoolError(f"one verifier per tier: give endpoints of one model, got {servers.models}")
    model = servers.models[0]
    check_output_dir(pool_dir, force=True, option="POOL", kind="pool")  # it is saved in place at the end
    _refuse_another_model(pool, pool_dir, tier, model)
    path = journal_path(pool_dir)
    journal = _Journal(path)
    in_pool = _recorded(pool, journal, tier, model)
    stats = {"calls": 0, "scored": 0, "refused": 0, "unparsed": 0, "cut": 0, "already_recorded": 0, "no_text": 0}
    todo = _to_score(pool, in_pool | {(r["episode_id"], r["candidate"]) for r in journal.rows}, stats, limit)
    counter = TokenCounter(servers.client(model)) if context_tokens is not None else None
    calls = _JudgeCalls(servers, model, tier, spec, api, journal, stats, counter, context_tokens)
    try:
        stats["calls"] = run_calls(todo, calls.call, calls.on_done, concurrency=options.concurrency, total=len(todo),
                                   desc=f"verify {tier}", progress=options.progress, unit="call")
    finally:
        journal.close()
    # A crash between saving the pool and removing the journal leaves rows the pool already has.
    fresh = [r for r in journal.rows if (r["episode_id"], r["candidate"]) not in in_pool]
    _merge(pool, pool_dir, fresh, tier, model, servers.params_b[model], role)
    path.unlink(missing_ok=True)
    return stats


def _merge(pool: Any, pool_dir: str | os.PathLike[str], rows: list[dict[str, Any]], tier: str, model: str,
           params_b: float, role: str | None) -> None:
    """Add the journal's rows (and the verifier model, and its role) to the pool and save it in place."""
    if not rows and role is None:
        return
    if rows:
        new = pd.DataFrame([{k: r[k] for k in ("episode_id", "candidate", "tier", "model", "prompt_tokens",
                                               "output_tokens", "latency_s")} for r in rows])
        new["score"] = [float("nan") if r["score"] is None else float(r["score"]) for r in rows]
        pool.verifications = pd.concat([pool.verifications, new[pool.verifications.columns]], ignore_index=True)
        models = pool.models
        if model in set(models["name"]):
            idx = models.index[models["name"] == model][0]
            if "verifier" not in str(models.at[idx, "role"]):
                models.at[idx, "role"] = "generator+verifier"
        else:
            pool.models = pd.concat([models, pd.DataFrame([{"name": model, "params_b": params_b,
                                                              "role": "verifier"}])], ignore_index=True)
    if role is not None:
        pool.manifest["verifier_roles"] = {**(pool.manifest.get("verifier_roles") or {}), tier: role}
    from pools.validate import validate_pool

    pool.refresh_manifest()
    validate_pool(pool, source=str(pool_dir))
    save_pool(pool, pool_dir, overwrite=True)
