"""``coba solve``: run a routing policy live on one problem or a problem file (see docs/SOLVE.md).

SAMPLE calls the generator endpoint, VERIFY_l the tier's judge endpoint, STOP returns the answer with
its trace. The environment is ``coba_env.live.LiveEnv`` (the replay env's own features, masks and
selection) over an ``EndpointSource``; hard per-problem budgets are never exceeded. With several
``--generator`` a routing policy runs in ``coba_env.live_route.LiveRouteEnv`` (``SAMPLE_<name>`` each).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from coba_cli.arg_types import (
    COST_CHOICES,
    api_key_text,
    int_in,
    lambda_value,
    non_negative_float,
    positive_float,
    positive_int,
    probability,
    seed_int,
)
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples
from coba_env.costs import COST_MEASURES
from pools.atomic_write import atomic_write_text
from pools.limits import MAX_CANDIDATES, MAX_TOKENS
from pools.output_paths import check_output_dir, check_output_file
from pools.strict_json import strict_dumps

DEFAULT_N_MAX = 16


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba solve``."""
    p = subparsers.add_parser(
        "solve", help="run a routing policy live against model endpoints: answer plus trace",
        description="Solve problems live: the policy acts online (SAMPLE calls the generator, VERIFY_V1/V2/V3 "
        "call the judge / step judge / verifier, STOP returns the answer). Prints a readable summary of each "
        "problem (answer, every action with its costs and revealed evidence, why it stopped) and writes the "
        "JSON trace with --json. Hard per-problem budgets (--max-tokens, --max-calls, --max-seconds) are never "
        "exceeded: a call that could exceed one is not made.",
        formatter_class=ExampleFormatter,
        epilog=examples('coba solve --policy coba_light --generator http://localhost:8000/v1,Qwen3-8B '
                        '--judge http://localhost:8001/v1,Qwen3-1.7B "What is 7*8?"',
                        "coba solve --policy coba_balanced --generator URL,MODEL --judge URL,MODEL "
                        "--verifier URL,MODEL --file problems.jsonl --json traces.jsonl"))
    p.add_argument("problem", nargs="?", help="the problem text (or give --file)")
    p.add_argument("--file", metavar="PROBLEMS.jsonl",
                   help="problems, one JSON object per line: problem (required), dataset, item_id, gold, level, "
                        "subject, task, metadata (Reasoning Gym items carry task and metadata)")
    p.add_argument("--gold", help="gold answer of the PROBLEM given on the command line (only to report correctness)")
    p.add_argument("--policy", required=True, metavar="NAME|CHECKPOINT",
                   help="a registered policy name (e.g. coba_light, coba_balanced), a trained controller's "
                        "checkpoint directory, or your own class as FILE.py:Class / module:Class")
    p.add_argument("--policies-file", metavar="YAML", help="a policy spec YAML merged over agents/policies.yaml")
    g = p.add_argument_group("endpoints (URL,MODEL[,PARAMS_B]; PARAMS_B = billions of parameters, else read off "
                             "the model name)")
    g.add_argument("--generator", required=True, action="append", metavar="[NAME=]URL,MODEL[,PARAMS_B]",
                   help="the generator (SAMPLE); repeat it to route between generators with a routing policy "
                        "(SAMPLE_<NAME> each, NAME defaults to MODEL and must be unique)")
    g.add_argument("--judge", metavar="URL,MODEL[,PARAMS_B]", help="the cheap outcome judge (VERIFY_V1)")
    g.add_argument("--step-judge", metavar="URL,MODEL[,PARAMS_B]", help="the step judge (VERIFY_V2)")
    g.add_argument("--verifier", metavar="URL,MODEL[,PARAMS_B]", help="the strong verifier (VERIFY_V3)")
    g.add_argument("--api", choices=("chat", "completions"), default="chat", help="API of every call (default: chat)")
    g.add_argument("--api-key", type=api_key_text, help="bearer token, if the servers want one")
    g.add_argument("--timeout", type=positive_float, default=600.0,
                   help="seconds per request before it is retried (default: 600; --max-seconds cuts it shorter)")
    g.add_argument("--max-attempts", type=positive_int, default=3,
                   help="attempts per call on timeouts, connection errors, HTTP 408, 409, 429 and 5xx (default: 3)")
    b = p.add_argument_group("hard budgets per problem (never exceeded)")
    b.add_argument("--max-tokens", type=positive_float, metavar="N",
                   help="prompt + output tokens of all calls (a call counts at its bound: prompt bound + its max_tokens)")
    b.add_argument("--max-calls", type=positive_int, metavar="N", help="model calls")
    b.add_argument("--max-seconds", type=positive_float, metavar="S",
                   help="wall-clock seconds; a call gets the remaining time as its timeout and is abandoned after it")
    s = p.add_argument_group("sampling and environment")
    s.add_argument("--sample-max-tokens", type=int_in(1, MAX_TOKENS), default=4096,
                   help="output token cap of one generator call (default: 4096)")
    s.add_argument("--temperature", type=non_negative_float, default=0.6, help="generator temperature (default: 0.6)")
    s.add_argument("--top-p", type=probability, default=0.95, help="generator top-p (default: 0.95)")
    s.add_argument("--seed", type=seed_int, default=0, help="base seed; each sample's seed derives from it (default: 0)")
    s.add_argument("--prompt", help="sampling prompt YAML (default: pools/data/prompts/generate.yaml)")
    s.add_argument("--lam", type=lambda_value, default=None,
                   help="cost weight lambda (default: a checkpoint's PATH@LAMBDA or its default, else 0.1)")
    s.add_argument("--cost", default="p_tokens", choices=COST_CHOICES,
                   help="cost model of the reward and the budget_used feature (default: p_tokens)")
    s.add_argument("--n-max", type=int_in(1, MAX_CANDIDATES), default=None,
                   help=f"most candidates per problem (default: the reference pool's N, else {DEFAULT_N_MAX})")
    s.add_argument("--reference", metavar="POOL",
                   help="pool (directory or simulator profile) whose N_max, budget B and max output tokens set the "
                        "feature scales: give the pool a trained controller was trained on")
    s.add_argument("--budget", type=positive_float, metavar="B",
                   help="B in the cost model (default: the reference pool's, else N_max generator calls at the cap)")
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="OUT", help="write the JSON trace of every problem to OUT")
    o.add_argument("--record", metavar="POOL_DIR", help="save what was seen as a pool, for later replay")
    o.add_argument("--force", action="store_true", help="replace an existing --json file, or a --record pool "
                   "coba-env wrote (a folder holding anything else is never replaced)")
    o.add_argument("--quiet", action="store_true", help="print only the answers")
    p.set_defaults(func=run)


# -------------------------------------------------------------------------------------------------- inputs
def _endpoint(spec: str | None, option: str):
    from pools.client.openai_client import parse_endpoint

    if spec is None:
        return None
    try:
        return parse_endpoint(spec)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def _generators(specs: list[str]) -> dict:
    """``{name: Endpoint}`` of the ``--generator`` options (``[NAME=]URL,MODEL[,PARAMS_B]``), names unique."""
    out: dict = {}
    for spec in specs:
        head, sep, rest = spec.partition("=")
        named = bool(sep) and "://" not in head and rest.strip().startswith(("http://", "https://"))
        name = head.strip() if named else None
        ep = _endpoint(rest if named else spec, "--generator")
        if named and (not name or any(ch in name for ch in " \t,=")):
            raise UsageError(f"--generator {spec!r}: bad NAME {head!r}; expected a name without spaces, commas "
                             "or '=' before =URL,MODEL[,PARAMS_B]")
        name = name or ep.model
        if name in out:
            raise UsageError(f"--generator {spec!r}: duplicate generator name {name!r}; each generator needs its "
                             "own name: give NAME=URL,MODEL[,PARAMS_B]")
        out[name] = ep
    return out


def _check_routing(policy, generators: dict) -> None:
    """A routing policy needs several generators, any other policy exactly one."""
    routing = policy.group == "routing"
    if routing and len(generators) < 2:
        raise UsageError(f"policy {policy.name!r} routes between generators; give at least two --generator "
                         f"(got {len(generators)})")
    if not routing and len(generators) > 1:
        raise UsageError(f"policy {policy.name!r} (group {policy.group!r}) samples one generator, but "
                         f"{len(generators)} --generator were given ({', '.join(generators)}); route between "
                         "them with a routing policy (group 'routing', e.g. route_cheapest_coba)")


def load_problems_file(path: str) -> list:
    """Problems from a JSONL file; a bad line raises PoolError naming the file, line and field."""
    from pools.errors import PoolError
    from pools.importers.canonical_records import read_json_lines
    from pools.problems import Problem

    fields = {"problem": str, "dataset": str, "item_id": str, "gold": str, "level": str, "subject": str,
              "task": str, "metadata": dict}
    problems = []
    for lineno, obj in read_json_lines(path):
        where = f"{path}, line {lineno}"
        if not isinstance(obj, dict):
            raise PoolError("expected a JSON object", file=where)
        for name, value in obj.items():
            if name not in fields:
                raise PoolError(f"unknown field; expected some of {list(fields)}", file=where, field=name)
            if value is not None and not isinstance(value, fields[name]):
                raise PoolError(f"expected {fields[name].__name__}, got {type(value).__name__}", file=where,
                                field=name)
        if not obj.get("problem"):
            raise PoolError("missing or empty (the problem text)", file=where, field="problem")
        problems.append(Problem(dataset=obj.get("dataset") or "live", item_id=obj.get("item_id") or f"line-{lineno}",
                                problem=obj["problem"], gold=obj.get("gold") or "", level=obj.get("level"),
                                subject=obj.get("subject"), task=obj.get("task"), metadata=obj.get("metadata")))
    if not problems:
        raise PoolError("no problem found; expected one JSON object per line", file=path)
    return problems


def _load_policy(args: argparse.Namespace):
    from agents.learned import is_checkpoint, load_checkpoint
    from agents.registry import make_policy

    if is_checkpoint(args.policy) or os.path.exists(args.policy):

        try:
            return load_checkpoint(args.policy, lam=args.lam)
        except (ValueError, OSError) as exc:
            raise UsageError(f"--policy {args.policy}: {exc}") from None
    try:
        return make_policy(args.policy, specs=args.policies_file)
    except ValueError as exc:
        raise UsageError(f"--policy: {exc}") from None


def _scales(args: argparse.Namespace, policy, generators: list, settings) -> dict[str, float]:
    """n_max, budget and max_output_tokens of the live env: a trained controller's own (from its checkpoint),
    else a reference pool's, else N_max generator calls at the output cap (at the generators' mean parameters:
    a route env's B is the mean cost of N_max samples of one generator); --n-max / --budget override."""
    from coba_env.costs import cost_index
    from coba_env.live import replay_normalizers

    if args.cost == "usd":  # live endpoints carry no prices (pools do: docs/POOLS.md, "Prices")
        raise UsageError("--cost usd needs per-model prices, which live endpoints do not carry; choose --cost "
                         "p_tokens, tokens, calls or latency")
    trained = getattr(policy, "config", None)
    if isinstance(trained, dict) and {"n_max", "budget", "max_output_tokens"} <= set(trained):
        if trained.get("cost_model", args.cost) != args.cost:
            raise UsageError(f"the controller was trained with cost model {trained['cost_model']!r}; "
                             f"pass --cost {trained['cost_model']}")
        scales = {"n_max": int(trained["n_max"]), "budget": float(trained["budget"]),
                  "max_output_tokens": float(trained["max_output_tokens"])}
    elif args.reference:
        from coba_env.env import as_compiled

        try:
            scales = replay_normalizers(as_compiled(args.reference), args.cost, args.n_max)
        except ValueError as exc:
            raise UsageError(f"--reference: {exc}") from None
    else:
        from pools.tokens import estimate_latency_s

        prompt = 200  # a typical prompt; B only scales the reward and the budget_used feature
        params_b = sum(ep.params_b for ep in generators) / len(generators)
        one = [prompt + settings.max_tokens, (prompt + settings.max_tokens) * params_b, 1.0,
               estimate_latency_s(prompt, settings.max_tokens, params_b)]
        n = DEFAULT_N_MAX
        scales = {"n_max": n, "budget": n * one[cost_index(args.cost)], "max_output_tokens": settings.max_tokens}
    if args.n_max is not None:
        scales["n_max"] = args.n_max
    if args.budget is not None:
        scales["budget"] = args.budget
    return scales


# -------------------------------------------------------------------------------------------------- output
def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def summary(result: dict[str, Any]) -> str:
    """A short readable account of one solved problem."""
    lines = [f"problem {result['item_id']} ({result['dataset']}): answer {result['answer']!r}"
             + (f"  [correct: {result['correct']}, gold {result['gold']!r}]" if result.get("correct") is not None
                else "")]
    width = max(10, *(len(step["action"]) for step in result["trace"]))  # SAMPLE_<generator> when routing
    for i, step in enumerate(result["trace"], start=1):
        cost = step["cost"]
        ev = step["evidence"]
        if step["action"].startswith("SAMPLE"):
            what = (f"answer {ev['answer']!r} (cluster {ev['cluster']}, {ev['output_tokens']:.0f} output tokens"
                    f"{', cap hit' if ev['cap_hit'] else ''})")
        elif step["action"] == "STOP":
            what = f"selects candidate {ev['selected_candidate']}"
        else:
            what = f"score {_fmt(ev['score'])}"
        target = f"c{step['candidate']}" if step["candidate"] >= 0 else "  "
        costs = "  ".join(f"{k} {_fmt(v)}" for k, v in cost.items() if k != "usd" or v) if step["action"] != "STOP" else ""
        lines.append(f"  {i:>2}. {step['action']:<{width}} {target:<4} {what}" + (f"   [{costs}]" if costs else ""))
    live = result["live"]
    lines.append(f"  stopped: {live['stop_reason']}")
    spent, limits = live["spent"], live["limits"]
    lines.append("  spent: " + ", ".join(
        f"{k} {_fmt(spent[k])}" + (f"/{_fmt(limits[k])}" if limits.get(k) is not None else "") for k in spent)
        + "; costs: " + ", ".join(f"{k} {_fmt(result['costs'][k])}" for k in COST_MEASURES
                                  if k != "usd" or result["costs"][k]))  # endpoints carry no prices: no $0
    if "samples_by_generator" in result:  # a routed problem: what each generator was asked and charged
        lines.append("  by generator: " + "; ".join(
            f"{g} {n} samples, " + ", ".join(f"{k} {_fmt(v)}" for k, v in result["spend_by_generator"][g].items()
                                             if k != "usd" or v)
            for g, n in result["samples_by_generator"].items())
            + f"; answer from {result['selected_generator']}")
    return "\n".join(lines)


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


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename)."""
    atomic_write_text(path, strict_dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_list"):
        return value.to_list()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _refuse_repeated_ids(problems: list[Any], source: str | None) -> None:
    """``--record`` stores each problem as one pool item: two problems with one (dataset, id) cannot both be."""
    seen: dict[tuple[str, str], int] = {}
    for line, problem in enumerate(problems, start=1):
        key = (str(problem.dataset), str(problem.item_id))
        if key in seen:
            raise UsageError(f"{source}, problem {line}: id {problem.item_id!r} (dataset {problem.dataset!r}) is "
                             f"used by problem {seen[key]} too; --record needs each id once")
        seen[key] = line


# -------------------------------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> int:
    """Solve every problem of ``args`` and report; input and endpoint errors become exit code 2."""
    from agents.runner import check_selection, run_episode
    from coba_env.live import EndpointSource, Limits, LiveEndpointError, LiveEnv
    from coba_env.live import LiveEnv as LiveRouteEnv
    from pools.client.prompts import SamplingSettings
    from pools.live_grading import grade_answer
    from pools.problems import Problem

    if (args.problem is None) == (args.file is None):
        raise UsageError("give exactly one of PROBLEM (the text) or --file PROBLEMS.jsonl")
    if args.problem is not None and not args.problem.strip():
        raise UsageError("PROBLEM is empty; expected the problem text")
    if args.gold is not None and args.file:
        raise UsageError("--gold goes with a PROBLEM given on the command line; put gold in the --file lines")
    # Outputs are checked before any model call: a wrong --json or --record must not waste the calls.
    if args.json:
        check_output_file(args.json, force=args.force, option="--json", inputs=[args.file])
    if args.record:
        check_output_dir(args.record, force=args.force, option="--record", inputs=[args.file],
                         kind="pool")
    problems = (load_problems_file(args.file) if args.file else
                [Problem("live", "problem-1", args.problem, args.gold or "")])
    if args.record:  # a pool keys items by (dataset, item_id): a repeat is refused before any model call is paid
        _refuse_repeated_ids(problems, args.file)
    generators = _generators(args.generator)
    generator = next(iter(generators.values()))
    judges = {tier: ep for tier, ep in (("V1", _endpoint(args.judge, "--judge")),
                                        ("V2", _endpoint(args.step_judge, "--step-judge")),
                                        ("V3", _endpoint(args.verifier, "--verifier"))) if ep is not None}
    settings = SamplingSettings(n=1, temperature=args.temperature, top_p=args.top_p,
                                max_tokens=args.sample_max_tokens, seed=args.seed, api=args.api,
                                prompt=args.prompt or "generate")
    policy = _load_policy(args)
    _check_routing(policy, generators)
    own_lam = getattr(policy, "lam", None)  # an SB3 zip without @LAMBDA has none: it reads the env's
    lam = args.lam if args.lam is not None else float(0.1 if own_lam is None else own_lam)
    source = EndpointSource(problems, generators if len(generators) > 1 else generator, judges, settings=settings,
                            request_timeout_s=args.timeout, max_attempts=args.max_attempts, api_key=args.api_key)
    limits = Limits(tokens=args.max_tokens, calls=args.max_calls, seconds=args.max_seconds)
    env_class = LiveRouteEnv if len(generators) > 1 else LiveEnv
    try:
        # The controller's own env settings (a PPO checkpoint's training budget) win, unless --budget is given.
        own = {k: v for k, v in policy.env_kwargs().items() if not (k == "budget" and args.budget is not None)}
        env = env_class(source, **{**_scales(args, policy, list(generators.values()), settings), **own},
                        limits=limits, lam=lam, cost_model=args.cost)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ok, why = policy.applicable(env)
    if not ok:
        flags = {"V1": "--judge", "V2": "--step-judge", "V3": "--verifier"}
        raise UsageError(f"policy {policy.name!r} cannot run with these endpoints: {why} "
                         f"(endpoints: {', '.join(flags.values())})")
    check_selection(policy, env)
    try:
        source.check_endpoints(timeout_s=min(args.timeout, 10.0))
    except LiveEndpointError as exc:
        raise UsageError(str(exc)) from None
    results, recorded = [], []
    for i, problem in enumerate(problems):
        try:
            out = run_episode(env, policy, i)
        except LiveEndpointError as exc:
            raise UsageError(f"problem {problem.item_id}: {exc}") from None
        correct = grade_answer(out["selected_answer"], gold=problem.gold, problem=problem.problem,
                               task=problem.task, metadata=problem.metadata)
        result = {"dataset": problem.dataset, "item_id": problem.item_id, "problem": problem.problem,
                  "answer": out["selected_answer"], "selected_candidate": out["selected_candidate"],
                  "correct": correct, "gold": problem.gold or None, "actions": out["actions"],
                  "trace": out["trace"].to_list(), "costs": out["costs"], "return": out["return"],
                  "live": out["live"]}
        for key in ("samples_by_generator", "spend_by_generator", "selected_generator"):  # a routed problem
            if key in out:
                result[key] = out[key]
        results.append(result)
        recorded.append(list(source.records))
        print(result["answer"] if args.quiet else summary(result), flush=True)
    report = {"policy": policy.describe(), "lambda": lam, "cost_model": args.cost,
              **({"generator": vars(generator)} if len(generators) == 1 else
                 {"generators": {n: vars(e) for n, e in generators.items()}}),
              "judges": {t: vars(e) for t, e in judges.items()},
              "env": {"n_max": env.n_max, "budget": env.budget, "limits": vars(limits)}, "results": results}
    if args.json:
        _write_json(args.json, report)
    if args.record:
        from pools.generation.live_record import live_records, save_live_pool

        if len(generators) == 1:
            episodes = [live_records(p, generator.model, generator.params_b, recs) for p, recs in zip(
                problems, recorded, strict=True)]
        else:  # one episode per (problem, generator), named as routed, so coba/Route-v0 replays it
            episodes = [live_records(p, name, ep.params_b, _generator_records(recs, name)) for p, recs in zip(
                problems, recorded, strict=True) for name, ep in generators.items()]
        pool = save_live_pool(episodes, args.record, force=args.force, provenance={"policy": policy.name})
        print(f"recorded {args.record}: {pool.manifest['counts']['episodes']} episodes x "
              f"{pool.manifest['n_candidates']} candidates", file=sys.stderr)
    return 0
