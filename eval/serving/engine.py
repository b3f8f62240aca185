"""The one adapter between ``coba serve`` and the project's live path: answer one request with one policy.

``Engine.answer(request)`` runs one live episode of the request's policy over the endpoints fixed at start and
returns an ``Answer``: the selected candidate's text, the computation path (every internal call: action,
endpoint, tokens, latency, score or answer, cost in every measure; then STOP and the selected candidate), the
usage summed over those calls, whether the answer is correct (only with a gold answer), and the episode's
canonical pool records. Everything the server needs from ``coba_env`` (``Limits``, and ``EndpointSource``
through ``served_source.ServedSource``), ``eval.solve`` (the live env's settings and construction, as ``coba
solve`` makes them), ``agents`` (policy loading, ``run_episode``) and ``pools`` (grading, the live records) is
reached from this module and its helper ``served_source`` only, so a change of the live path touches nothing
else of the server.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from eval.serving.answer import Answer, RequestCancelled
from eval.serving.config import ServeConfig
from eval.serving.gates import EndpointGates
from eval.serving.served_source import ServedSource
from eval.solve import build_live_env
from pools.client.prompts import SamplingSettings
from pools.problems import Problem

__all__ = ["Engine", "build_path", "usage_of"]

#: Per-thread instances of checkpoint policies kept, one per (policy, lambda).
POLICY_CACHE = 8


@dataclass
class _Entry:
    """One policy a request may pick: how to make it, and its env settings."""

    spec: str
    policy: Any  # the instance checked at start (its name, group, lambda)
    env_settings: dict[str, Any]  # the live env's n_max, budget, max_output_tokens and the policy's own
    checkpoint: bool


class Engine:
    """Answers requests with the policies and endpoints of ``config`` (``check`` first; see the module)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.gates = EndpointGates(config.endpoint_concurrency)
        self.entries: dict[str, _Entry] = {}
        self._local = threading.local()

    # -- start --------------------------------------------------------------------------------------
    def check(self) -> None:
        """Load every allowed policy and check it can run with the endpoints; ValueError says why not."""
        for spec in self.config.policies:
            name, _, rest = spec.partition("=")
            named = bool(rest) and name.isidentifier()
            policy = self._load(rest if named else spec, None)
            ident = name if named else (spec if not self._is_checkpoint(spec) else policy.name.split("@")[0])
            if "@" in ident or ident == self.config.served_name or ident in self.entries:
                raise ValueError(f"policy {spec!r}: its name {ident!r} is taken or holds '@'; give it another as "
                                 "NAME=SPEC")
            entry = _Entry(rest if named else spec, policy, self._env_settings(policy),
                           self._is_checkpoint(rest if named else spec))
            self._check_runs(ident, entry)
            self.entries[ident] = entry

    def check_endpoints(self, timeout_s: float = 10.0) -> None:
        """Raise ValueError naming the first endpoint that does not answer ``GET /v1/models``."""
        from coba_env.live import LiveEndpointError

        try:
            self._source().check_endpoints(timeout_s=timeout_s)
        except LiveEndpointError as exc:
            raise ValueError(str(exc)) from None

    @property
    def policy_ids(self) -> list[str]:
        """The policies a request may name, the default first."""
        return list(self.entries)

    def describe(self, ident: str) -> dict[str, Any]:
        """A policy's description for ``GET /v1/models``."""
        entry = self.entries[ident]
        return {**entry.policy.describe(), "n_max": entry.env_settings["n_max"], "lambda": self.default_lambda(ident)}

    def default_lambda(self, ident: str) -> float:
        """Lambda of a request that gives none: the server's ``--lam``, else the policy's own, else 0.1."""
        return self._default_lambda(self.entries[ident].policy)

    def _default_lambda(self, policy: Any) -> float:
        from eval.solve import DEFAULT_LAMBDA

        own = getattr(policy, "lam", None)
        return float(self.config.lam if self.config.lam is not None else DEFAULT_LAMBDA if own is None else own)

    # -- one request --------------------------------------------------------------------------------
    def answer(self, request: Any, request_id: str, cancel: threading.Event, deadline: float) -> Answer:
        """Run ``request`` (a ``ServedRequest``) to its answer; ``deadline`` (monotonic) bounds it."""
        from agents.runner import run_episode
        from coba_env.live import Limits

        ident = request.policy
        lam = self.default_lambda(ident) if request.lam is None else request.lam
        done = Answer(request_id, "cancelled", ident, lam)
        seconds = min(float(request.limits["seconds"]), deadline - time.monotonic())
        if cancel.is_set():
            done.error = "the client went away before the request started"
            return done
        if seconds <= 0.01:
            done.status, done.error = "expired", "the request waited in the queue past its time limit"
            return done
        policy, source = self._policy(ident, lam), self._source()
        c = self.config
        source.prepare(Problem(c.dataset, request_id, request.problem, request.gold or ""), request.history,
                       replace(c.sampling, temperature=request.temperature, top_p=request.top_p,
                               max_tokens=request.max_tokens, seed=request.seed),
                       cancel)
        calls = request.limits["calls"]
        limits = Limits(tokens=request.limits["tokens"], calls=None if calls is None else int(calls), seconds=seconds)
        env = build_live_env(source, self.entries[ident].env_settings, limits=limits, lam=lam, cost_model=c.cost)
        try:
            out = run_episode(env, policy, 0)
        except RequestCancelled as exc:
            done.error, done.path = str(exc), build_path(list(env.gate.calls), None, source.failures)
            done.usage, done.episodes = usage_of(done.path), self._episodes(source)
            return done
        return self._finish(done, out, source, request)

    def _finish(self, done: Answer, out: dict[str, Any], source: Any, request: Any) -> Answer:
        """Fill ``done`` from the episode's final info ``out``."""
        from pools.live_grading import grade_answer

        k = int(out["selected_candidate"])
        chosen = source.records[k] if 0 <= k < len(source.records) else None
        done.status = "ok" if chosen is not None else "failed"
        done.selected_candidate, done.answer = k, out["selected_answer"]
        done.text = None if chosen is None else chosen["text"]
        done.finish_reason = "length" if chosen is not None and chosen["finish_reason"] == "length" else "stop"
        done.selected_generator = out.get("selected_generator")
        done.path = build_path(list(out["live"]["calls"]), out, source.failures)
        done.usage, done.costs = usage_of(done.path), dict(out["costs"])
        done.stop_reason = out["live"]["stop_reason"].replace("budget: endpoint failure: ", "endpoint failure: ")
        done.spent, done.limits = dict(out["live"]["spent"]), dict(out["live"]["limits"])
        if request.gold and chosen is not None:
            done.correct = grade_answer(done.answer, gold=request.gold, problem=request.problem)
        elif request.gold:
            done.correct = False
        done.episodes = self._episodes(source)
        if chosen is None:
            failures = "; ".join(f"{f['endpoint']}: {f['error']}" for f in source.failures)
            done.error = (f"no answer: {failures}" if failures else f"no candidate was drawn ({done.stop_reason})")
        return done

    # -- helpers ------------------------------------------------------------------------------------
    def _episodes(self, source: Any) -> list[list[dict[str, Any]]]:
        """Canonical pool records of the request: one episode per generator that was sampled."""
        from pools.generation.live_record import live_records

        problem, records = source.problem, list(source.records)
        if len(self.config.generators) == 1:
            ep = next(iter(self.config.generators.values()))
            return [live_records(problem, ep.model, ep.params_b, records)] if records else []
        out = []
        for name, ep in self.config.generators.items():
            own: dict[int, int] = {}  # a pool's clusters are per episode: renumber within the generator
            mine = [{**r, "cluster": r["cluster"] if r["cluster"] < 0 else own.setdefault(r["cluster"], len(own))}
                    for r in records if r.get("generator") == name]
            if mine:
                out.append(live_records(problem, name, ep.params_b, mine))
        return out

    def _source(self) -> Any:
        """This worker thread's ``ServedSource``."""
        source = getattr(self._local, "source", None)
        if source is None:
            c = self.config
            settings = SamplingSettings(n=1, prompt=c.sampling.prompt, api=c.sampling.api)
            source = ServedSource(
                c.generators, c.judges, self.gates, settings=settings,
                request_timeout_s=c.call_timeout, max_attempts=c.max_attempts, api_key=c.upstream_api_key)
            self._local.source = source
        return source

    def _policy(self, ident: str, lam: float) -> Any:
        """This worker thread's instance of policy ``ident`` (a checkpoint's at ``lam``)."""
        cache = getattr(self._local, "policies", None)
        if cache is None:
            cache = self._local.policies = OrderedDict()
        entry = self.entries[ident]
        key = (ident, lam if entry.checkpoint else None)
        if key not in cache:
            cache[key] = self._load(entry.spec, lam if entry.checkpoint else None)
            while len(cache) > POLICY_CACHE:
                cache.popitem(last=False)
        cache.move_to_end(key)
        return cache[key]

    def _is_checkpoint(self, spec: str) -> bool:
        from agents.learned import is_checkpoint

        return is_checkpoint(spec) or os.path.exists(spec)

    def _load(self, spec: str, lam: float | None) -> Any:
        """The policy of ``spec``: a registered name, ``FILE.py:Class`` / ``module:Class``, or a checkpoint."""
        from agents.learned import load_checkpoint
        from agents.registry import make_policy

        try:
            if self._is_checkpoint(spec):
                return load_checkpoint(spec, lam=lam)
            return make_policy(spec, specs=self.config.policies_file)
        except (ValueError, OSError) as exc:
            raise ValueError(f"policy {spec!r}: {exc}") from None

    def _check_runs(self, ident: str, entry: _Entry) -> None:
        """The policy's group fits the generator count, and it can run with these verifier endpoints."""
        from agents.runner import check_selection
        from coba_env.live import Limits

        policy, g = entry.policy, len(self.config.generators)
        if getattr(policy, "uses_labels", False):
            raise ValueError(f"policy {ident!r} reads correctness labels, which a live request does not have")
        if (policy.group == "routing") != (g > 1):
            raise ValueError(f"policy {ident!r} (group {policy.group!r}) " + (
                "routes between generators; give at least two --generator" if g == 1 else
                f"samples one generator, but {g} --generator were given; route with a routing policy"))
        env = build_live_env(self._source(), entry.env_settings, limits=Limits(), lam=self._default_lambda(policy),
                             cost_model=self.config.cost)
        ok, why = policy.applicable(env)
        if not ok:
            raise ValueError(f"policy {ident!r} cannot run with these endpoints: {why} (endpoints: --judge, "
                             "--step-judge, --verifier)")
        check_selection(policy, env)

    def _env_settings(self, policy: Any) -> dict[str, Any]:
        """The live env's settings for ``policy``, as ``coba solve`` chooses them (``eval.solve``)."""
        from eval.solve import live_env_settings

        c = self.config
        return live_env_settings(policy, list(c.generators.values()),
                                 SamplingSettings(n=1, max_tokens=c.sampling.max_tokens), cost_model=c.cost,
                                 reference=c.reference, n_max=c.n_max, budget=c.budget)


# -------------------------------------------------------------------------------------------------- the path
def build_path(calls: list[dict[str, Any]], out: dict[str, Any] | None,
               failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The computation path: each internal call (the gate's ``live.calls`` joined with the trace's cost and
    evidence), a failed SAMPLE with its error, then STOP and the selected candidate (None: cut short)."""
    from coba_env.endpoint_source import TIER_ROLES

    steps = [s for s in out["trace"].to_list() if s["action"] != "STOP"] if out is not None else []
    sample_failures = iter([f for f in failures if f["sample"]])
    path, k = [], 0
    for call in calls:
        action = call["action"]
        entry: dict[str, Any] = {"action": action}
        if action.startswith("SAMPLE"):
            entry["endpoint"] = "generator" + (f" {action[len('SAMPLE_'):]}" if action != "SAMPLE" else "")
        else:
            name = action.removeprefix("VERIFY_")
            entry["endpoint"] = TIER_ROLES.get(name, f"verifier {name}")
        if call.get("abandoned"):
            failure = next(sample_failures, None) if action.startswith("SAMPLE") else None
            entry.update(abandoned=True, token_bound=call["token_bound"])
            if failure:
                entry["error"] = failure["error"]
            else:
                entry["timed_out"] = "the time budget ran out during the call"
            path.append(entry)
            continue
        entry.update(candidate=call["candidate"], model=call.get("model"), prompt_tokens=call.get("prompt_tokens"),
                     completion_tokens=call.get("output_tokens"), latency_s=call.get("latency_s"))
        step = steps[k] if k < len(steps) else None
        k += 1
        if step is not None:
            entry["cost"] = dict(step["cost"])
            entry.update({key: v for key, v in step["evidence"].items() if key in ("answer", "cluster", "score")})
        for key in ("finish_reason", "score", "method", "error"):
            if key in call:
                entry[key] = call[key]
        path.append(entry)
    if out is not None:
        path.append({"action": "STOP", "selected_candidate": int(out["selected_candidate"]),
                     "answer": out["selected_answer"], **({"generator": out["selected_generator"]}
                                                          if "selected_generator" in out else {})})
    return path


def usage_of(path: list[dict[str, Any]]) -> dict[str, int]:
    """The OpenAI ``usage`` of a request: prompt and completion tokens summed over every internal call."""
    prompt = sum(int(s.get("prompt_tokens") or 0) for s in path if s["action"] != "STOP")
    completion = sum(int(s.get("completion_tokens") or 0) for s in path if s["action"] != "STOP")
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
