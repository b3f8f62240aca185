"""``coba solve``: run a routing policy live on one problem or a problem file (see docs/SOLVE.md).

SAMPLE calls the generator endpoint, VERIFY_l the tier's judge endpoint, STOP returns the answer with
its trace; hard per-problem budgets are never exceeded. This module parses the options and calls
``eval.solve.LiveSolve``, which builds the live env over the endpoints, plays and grades every problem and
records what it saw; with several ``--generator`` a routing policy routes between them (``SAMPLE_<name>``).
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
from eval.solve import DEFAULT_LAMBDA, DEFAULT_N_MAX
from pools.limits import MAX_CANDIDATES, MAX_TOKENS
from pools.output_paths import check_output_dir, check_output_file


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
                   help=f"cost weight lambda (default: a checkpoint's PATH@LAMBDA or its default, else {DEFAULT_LAMBDA:g})")
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
    from pools.safe_names import control_character

    out: dict = {}
    for spec in specs:
        head, sep, rest = spec.partition("=")
        named = bool(sep) and "://" not in head and rest.strip().startswith(("http://", "https://"))
        name = head.strip() if named else None
        bad = control_character(head) if named else None
        if bad is not None:  # a name goes into action names, reports and the recorded pool: one line only
            raise UsageError(f"--generator {spec!r}: NAME {head!r} holds the control character {bad}; expected a name "
                             "on one line")
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


def _refuse_repeated_ids(problems: list[Any], source: str | None) -> None:
    """``--record`` stores each problem as one pool item: two problems with one (dataset, id) cannot both be."""
    seen: dict[tuple[str, str], int] = {}
    for line, problem in enumerate(problems, start=1):
        key = (str(problem.dataset), str(problem.item_id))
        if key in seen:
            raise UsageError(f"{source}, problem {line}: id {problem.item_id!r} (dataset {problem.dataset!r}) is "
                             f"used by problem {seen[key]} too; --record needs each id once")
        seen[key] = line


def _problems(args: argparse.Namespace) -> list:
    """The problems to solve (PROBLEM or --file), with the outputs checked first: a wrong --json or --record must
    not waste the model calls."""
    from pools.problems import Problem, load_problems_file

    if (args.problem is None) == (args.file is None):
        raise UsageError("give exactly one of PROBLEM (the text) or --file PROBLEMS.jsonl")
    if args.problem is not None and not args.problem.strip():
        raise UsageError("PROBLEM is empty; expected the problem text")
    if args.gold is not None and args.file:
        raise UsageError("--gold goes with a PROBLEM given on the command line; put gold in the --file lines")
    if args.json:
        check_output_file(args.json, force=args.force, option="--json", inputs=[args.file])
    if args.record:
        check_output_dir(args.record, force=args.force, option="--record", inputs=[args.file], kind="pool")
    problems = (load_problems_file(args.file) if args.file else
                [Problem("live", "problem-1", args.problem, args.gold or "")])
    if args.record:  # a pool keys items by (dataset, item_id): a repeat is refused before any model call is paid
        _refuse_repeated_ids(problems, args.file)
    return problems


# -------------------------------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> int:
    """Solve every problem of ``args`` (``eval.solve.LiveSolve``) and report; input and endpoint errors become
    exit code 2."""
    from coba_env.live import Limits, LiveEndpointError
    from eval.solve import LiveSolve, summary, write_solve_report
    from pools.client.prompts import SamplingSettings

    problems = _problems(args)
    generators = _generators(args.generator)
    judges = {tier: ep for tier, ep in (("V1", _endpoint(args.judge, "--judge")),
                                        ("V2", _endpoint(args.step_judge, "--step-judge")),
                                        ("V3", _endpoint(args.verifier, "--verifier"))) if ep is not None}
    settings = SamplingSettings(n=1, temperature=args.temperature, top_p=args.top_p,
                                max_tokens=args.sample_max_tokens, seed=args.seed, api=args.api,
                                prompt=args.prompt or "generate")
    policy = _load_policy(args)
    _check_routing(policy, generators)
    limits = Limits(tokens=args.max_tokens, calls=args.max_calls, seconds=args.max_seconds)
    try:
        live = LiveSolve.open(policy, problems, generators, judges, settings, limits=limits, lam=args.lam,
                              cost_model=args.cost, reference=args.reference, n_max=args.n_max, budget=args.budget,
                              request_timeout_s=args.timeout, max_attempts=args.max_attempts, api_key=args.api_key)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ok, why = policy.applicable(live.env)
    if not ok:
        raise UsageError(f"policy {policy.name!r} cannot run with these endpoints: {why} "
                         "(endpoints: --judge, --step-judge, --verifier)")
    try:
        live.check_ready(timeout_s=min(args.timeout, 10.0))
        live.solve(on_result=lambda result: print(result["answer"] if args.quiet else summary(result), flush=True))
    except LiveEndpointError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        write_solve_report(args.json, live.report())
    if args.record:
        pool = live.record(args.record, force=args.force)
        print(f"recorded {args.record}: {pool.manifest['counts']['episodes']} episodes x "
              f"{pool.manifest['n_candidates']} candidates", file=sys.stderr)
    return 0
