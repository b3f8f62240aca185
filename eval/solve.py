"""Solve problems live: a policy acts online over model endpoints, each answer graded and what it saw recorded.

``coba solve`` (docs/SOLVE.md) parses its options and calls this module: ``LiveSolve.open`` builds the live
env over the endpoints (``build_live_env``, the one place that constructs it), ``check_ready`` checks the
policy's selection and the endpoints before any paid call, ``solve`` plays every problem to STOP and grades
the answer against the problem's gold (``pools.live_grading``), ``report`` is the JSON trace of the run and
``record`` saves what was seen as a pool for later replay (``pools.generation.live_record``). It lives in
the eval layer because it runs a policy over episodes, as the bench does, only with live evidence.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.runner import check_selection, run_episode
from coba_env.costs import COST_MEASURES, cost_index
from coba_env.live import EndpointSource, Limits, LiveEndpointError, replay_normalizers
from pools.atomic_write import atomic_write_text
from pools.client.openai_client import Endpoint
from pools.client.prompts import SamplingSettings
from pools.generation.live_record import live_records, save_live_pool
from pools.live_grading import grade_answer
from pools.problems import Problem
from pools.store import Pool
from pools.strict_json import strict_dumps
from pools.tokens import estimate_latency_s

__all__ = ["DEFAULT_LAMBDA", "DEFAULT_N_MAX", "LiveSolve", "SolveInputError", "build_live_env", "live_env_settings",
           "summary", "write_solve_report"]

#: Most candidates per problem when neither a trained controller nor a reference pool sets it.
DEFAULT_N_MAX = 16
#: The cost weight when neither the command nor the policy gives one.
DEFAULT_LAMBDA = 0.1
#: Prompt tokens of a typical problem: without a reference pool, B is N_max generator calls at the cap.
_TYPICAL_PROMPT_TOKENS = 200
#: The final-info keys of a routed problem (several generators) that its result keeps.
_ROUTED_KEYS = ("samples_by_generator", "spend_by_generator", "selected_generator")


class SolveInputError(ValueError):
    """A live solve cannot start with these inputs (``coba solve`` prints it as one line, exit 2)."""


def live_env_settings(policy: Any, generators: Sequence[Endpoint], settings: SamplingSettings, *,
                      cost_model: str, reference: str | None = None, n_max: int | None = None,
                      budget: float | None = None) -> dict[str, Any]:
    """The live env's keyword settings: n_max, budget and max_output_tokens, then the policy's own env settings.

    The scales are a trained controller's own (from its checkpoint), else a reference pool's, else N_max
    generator calls at the output cap (at the generators' mean parameters: a route env's B is the mean cost of
    N_max samples of one generator); ``n_max`` / ``budget`` override them. The controller's own env settings (a
    PPO checkpoint's training budget) win, unless ``budget`` is given.
    """
    if cost_model == "usd":  # live endpoints carry no prices (pools do: docs/POOLS.md, "Prices")
        raise SolveInputError("--cost usd needs per-model prices, which live endpoints do not carry; choose --cost "
                              "p_tokens, tokens, calls or latency")
    trained = getattr(policy, "config", None)
    if isinstance(trained, dict) and {"n_max", "budget", "max_output_tokens"} <= set(trained):
        if trained.get("cost_model", cost_model) != cost_model:
            raise SolveInputError(f"the controller was trained with cost model {trained['cost_model']!r}; "
                                  f"pass --cost {trained['cost_model']}")
        scales = {"n_max": int(trained["n_max"]), "budget": float(trained["budget"]),
                  "max_output_tokens": float(trained["max_output_tokens"])}
    elif reference:
        from coba_env.env import as_compiled

        try:
            scales = replay_normalizers(as_compiled(reference), cost_model, n_max)
        except ValueError as exc:
            raise SolveInputError(f"--reference: {exc}") from None
    else:
        prompt, cap = _TYPICAL_PROMPT_TOKENS, settings.max_tokens
        params_b = sum(ep.params_b for ep in generators) / len(generators)
        one = [prompt + cap, (prompt + cap) * params_b, 1.0, estimate_latency_s(prompt, cap, params_b)]
        scales = {"n_max": DEFAULT_N_MAX, "budget": DEFAULT_N_MAX * one[cost_index(cost_model)],
                  "max_output_tokens": cap}
    if n_max is not None:
        scales["n_max"] = n_max
    if budget is not None:
        scales["budget"] = budget
    own = {k: v for k, v in policy.env_kwargs().items() if not (k == "budget" and budget is not None)}
    return {**scales, **own}


def build_live_env(source: EndpointSource, env_settings: dict[str, Any], *, limits: Limits, lam: float,
                   cost_model: str) -> Any:
    """The live env over ``source``: the one place a live solve constructs it (one generator: the pair layout,
    ``SAMPLE``; several: the item layout, ``SAMPLE_<name>`` each)."""
    from coba_env.live import LiveEnv

    return LiveEnv(source, **env_settings, limits=limits, lam=lam, cost_model=cost_model)


@dataclass
class LiveSolve:
    """One live run of ``policy`` over ``problems``: the env over the endpoints, and what each problem gave."""

    policy: Any
    env: Any
    source: EndpointSource
    problems: list[Problem]
    generators: dict[str, Endpoint]
    judges: dict[str, Endpoint]
    limits: Limits
    lam: float
    cost_model: str
    results: list[dict[str, Any]] = field(default_factory=list)
    #: Per solved problem, the source's records of every call (what ``record`` saves).
    seen: list[list[dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def open(cls, policy: Any, problems: Sequence[Problem], generators: dict[str, Endpoint],
             judges: dict[str, Endpoint], settings: SamplingSettings, *, limits: Limits, lam: float | None = None,
             cost_model: str = "p_tokens", reference: str | None = None, n_max: int | None = None,
             budget: float | None = None, request_timeout_s: float = 600.0, max_attempts: int = 3,
             api_key: str | None = None) -> LiveSolve:
        """Build the live env for ``policy``; ``lam`` defaults to the policy's own, else ``DEFAULT_LAMBDA``.
        Inputs the env refuses raise ValueError (``SolveInputError`` for the settings); no model is called."""
        own_lam = getattr(policy, "lam", None)  # an SB3 zip without @LAMBDA has none: it reads the env's
        lam = lam if lam is not None else float(DEFAULT_LAMBDA if own_lam is None else own_lam)
        generator = generators if len(generators) > 1 else next(iter(generators.values()))
        source = EndpointSource(problems, generator, judges, settings=settings, request_timeout_s=request_timeout_s,
                                max_attempts=max_attempts, api_key=api_key)
        env_settings = live_env_settings(policy, list(generators.values()), settings, cost_model=cost_model,
                                         reference=reference, n_max=n_max, budget=budget)
        env = build_live_env(source, env_settings, limits=limits, lam=lam, cost_model=cost_model)
        return cls(policy, env, source, list(problems), dict(generators), dict(judges), limits, lam, cost_model)

    def check_ready(self, timeout_s: float) -> None:
        """Before any paid call: the env selects as the policy needs, and every endpoint answers
        (``LiveEndpointError`` naming the one that does not)."""
        check_selection(self.policy, self.env)
        self.source.check_endpoints(timeout_s=timeout_s)

    def solve(self, on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Play every problem to STOP and grade its answer; ``on_result`` sees each result as it comes. A failing
        endpoint raises ``LiveEndpointError`` naming the problem."""
        for i, problem in enumerate(self.problems):
            try:
                out = run_episode(self.env, self.policy, i, place=f"problem {problem.item_id!r}")
            except LiveEndpointError as exc:
                raise LiveEndpointError(f"problem {problem.item_id}: {exc}") from exc
            result = _result(problem, out)
            self.results.append(result)
            self.seen.append(list(self.source.records))
            if on_result is not None:
                on_result(result)
        return self.results

    def report(self) -> dict[str, Any]:
        """The JSON trace of the run: the policy, its settings, the endpoints, the env's scales, every result."""
        endpoints = ({"generator": vars(next(iter(self.generators.values())))} if len(self.generators) == 1 else
                     {"generators": {n: vars(e) for n, e in self.generators.items()}})
        return {"policy": self.policy.describe(), "lambda": self.lam, "cost_model": self.cost_model, **endpoints,
                "judges": {t: vars(e) for t, e in self.judges.items()},
                "env": {"n_max": self.env.n_max, "budget": self.env.budget, "limits": vars(self.limits)},
                "results": self.results}

    def record(self, dest: str | os.PathLike[str], *, force: bool = False) -> Pool:
        """Save what the solved problems revealed as a pool at ``dest`` (one episode per problem and generator,
        named as routed, so the same grouping replays it)."""
        if len(self.generators) == 1:
            ep = next(iter(self.generators.values()))
            episodes = [live_records(p, ep.model, ep.params_b, recs) for p, recs in zip(
                self.problems, self.seen, strict=True)]
        else:
            episodes = [live_records(p, name, ep.params_b, _generator_records(recs, name)) for p, recs in zip(
                self.problems, self.seen, strict=True) for name, ep in self.generators.items()]
        return save_live_pool(episodes, dest, force=force, provenance={"policy": self.policy.name})


def _result(problem: Problem, out: dict[str, Any]) -> dict[str, Any]:
    """One solved problem: the answer, graded against the problem's gold, with its actions, trace and costs."""
    correct = grade_answer(out["selected_answer"], gold=problem.gold, problem=problem.problem,
                           task=problem.task, metadata=problem.metadata)
    result = {"dataset": problem.dataset, "item_id": problem.item_id, "problem": problem.problem,
              "answer": out["selected_answer"], "selected_candidate": out["selected_candidate"],
              "correct": correct, "gold": problem.gold or None, "actions": out["actions"],
              "trace": out["trace"].to_list(), "costs": out["costs"], "return": out["return"], "live": out["live"]}
    result.update({key: out[key] for key in _ROUTED_KEYS if key in out})
    return result


def _generator_records(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Generator ``name``'s records of a routed problem, answer clusters renumbered within them (a pool's
    clusters are per episode; the route env joins them again across generators with the grading code)."""
    own: dict[int, int] = {}
    out = []
    for rec in records:
        if rec.get("generator") == name:
            c = rec["cluster"]
            out.append({**rec, "cluster": c if c < 0 else own.setdefault(c, len(own))})
    return out


def write_solve_report(path: str | os.PathLike[str], report: dict[str, Any]) -> None:
    """Write ``report`` as JSON to ``path`` atomically (temp file in the same folder, then rename)."""
    atomic_write_text(path, strict_dumps(report, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_list"):
        return value.to_list()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _costs(costs: dict[str, Any]) -> str:
    """``measure value`` pairs; usd only when charged (endpoints carry no prices: no $0)."""
    return ", ".join(f"{k} {_fmt(costs[k])}" for k in COST_MEASURES if k != "usd" or costs[k])


def _step_line(i: int, step: dict[str, Any], width: int) -> str:
    """One action of the trace: what it revealed and what it cost."""
    ev = step["evidence"]
    if step["action"].startswith("SAMPLE"):
        what = (f"answer {ev['answer']!r} (cluster {ev['cluster']}, {ev['output_tokens']:.0f} output tokens"
                f"{', cap hit' if ev['cap_hit'] else ''})")
    elif step["action"] == "STOP":
        what = f"selects candidate {ev['selected_candidate']}"
    else:
        what = f"score {_fmt(ev['score'])}"
    target = f"c{step['candidate']}" if step["candidate"] >= 0 else "  "
    costs = "  ".join(f"{k} {_fmt(v)}" for k, v in step["cost"].items() if k != "usd" or v) \
        if step["action"] != "STOP" else ""
    return f"  {i:>2}. {step['action']:<{width}} {target:<4} {what}" + (f"   [{costs}]" if costs else "")


def summary(result: dict[str, Any]) -> str:
    """A short readable account of one solved problem."""
    lines = [f"problem {result['item_id']} ({result['dataset']}): answer {result['answer']!r}"
             + (f"  [correct: {result['correct']}, gold {result['gold']!r}]" if result.get("correct") is not None
                else "")]
    width = max(10, *(len(step["action"]) for step in result["trace"]))  # SAMPLE_<generator> when routing
    lines += [_step_line(i, step, width) for i, step in enumerate(result["trace"], start=1)]
    live = result["live"]
    lines.append(f"  stopped: {live['stop_reason']}")
    spent, limits = live["spent"], live["limits"]
    lines.append("  spent: " + ", ".join(
        f"{k} {_fmt(spent[k])}" + (f"/{_fmt(limits[k])}" if limits.get(k) is not None else "") for k in spent)
        + "; costs: " + _costs(result["costs"]))
    if "samples_by_generator" in result:  # a routed problem: what each generator was asked and charged
        lines.append("  by generator: " + "; ".join(
            f"{g} {n} samples, " + ", ".join(f"{k} {_fmt(v)}" for k, v in result["spend_by_generator"][g].items()
                                             if k != "usd" or v)
            for g, n in result["samples_by_generator"].items())
            + f"; answer from {result['selected_generator']}")
    return "\n".join(lines)
