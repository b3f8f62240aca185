"""``coba solve``: run a routing policy live against model endpoints: answer plus trace.

Solve problems live: the policy acts online (SAMPLE calls the generator, VERIFY_V1/V2/V3 call the judge / step
judge / verifier, STOP returns the answer). Prints a readable summary of each problem (answer, every action with
its costs and revealed evidence, why it stopped) and writes the JSON trace with --json. Hard per-problem budgets
(--max-tokens, --max-calls, --max-seconds) are never exceeded: a call that could exceed one is not made.

examples:
  coba solve --policy coba_light --generator http://localhost:8000/v1,Qwen3-8B --judge http://localhost:8001/v1,Qwen3-1.7B "What is 7*8?"
  coba solve --policy coba_balanced --generator URL,MODEL --judge URL,MODEL --verifier URL,MODEL --file problems.jsonl --json traces.jsonl

This module parses the options and calls ``eval.solve.LiveSolve``, which builds the live env over the endpoints,
plays and grades every problem and records what it saw; with several ``--generator`` a routing policy routes
between them (``SAMPLE_<name>``). See docs/SOLVE.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from coba_cli import endpoint_options
from coba_cli.arg_types import lambda_value, positive_float, positive_int
from coba_cli.endpoint_options import add_endpoint_options, add_live_env_options
from coba_cli.errors import UsageError
from coba_cli.help_text import command_parser
from eval.solve import DEFAULT_LAMBDA
from pools.output_paths import check_output_dir, check_output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba solve``."""
    p = command_parser(subparsers, "solve", __doc__)
    p.add_argument("problem", nargs="?", help="the problem text (or give --file)")
    p.add_argument("--file", metavar="PROBLEMS.jsonl",
                   help="problems, one JSON object per line: problem (required), dataset, item_id, gold, level, "
                        "subject, task, metadata (Reasoning Gym items carry task and metadata)")
    p.add_argument("--gold", help="gold answer of the PROBLEM given on the command line (only to report correctness)")
    p.add_argument("--policy", required=True, metavar="NAME|CHECKPOINT",
                   help="a registered policy name (e.g. coba_light, coba_balanced), a trained controller's "
                        "checkpoint directory, or your own class as FILE.py:Class / module:Class")
    p.add_argument("--policies-file", metavar="YAML", help="a policy spec YAML merged over agents/policies.yaml")
    add_endpoint_options(p.add_argument_group("endpoints (URL,MODEL[,PARAMS_B]; PARAMS_B = billions of parameters, "
                                              "else read off the model name)"), "--api-key")
    b = p.add_argument_group("hard budgets per problem (never exceeded)")
    b.add_argument("--max-tokens", type=positive_float, metavar="N",
                   help="prompt + output tokens of all calls (a call counts at its bound: prompt bound + its max_tokens)")
    b.add_argument("--max-calls", type=positive_int, metavar="N", help="model calls")
    b.add_argument("--max-seconds", type=positive_float, metavar="S",
                   help="wall-clock seconds; a call gets the remaining time as its timeout and is abandoned after it")
    s = p.add_argument_group("sampling and environment")
    add_live_env_options(s)
    s.add_argument("--lam", type=lambda_value, default=None,
                   help=f"cost weight lambda (default: a checkpoint's PATH@LAMBDA or its default, else {DEFAULT_LAMBDA:g})")
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="OUT", help="write the JSON trace of every problem to OUT")
    o.add_argument("--record", metavar="POOL_DIR", help="save what was seen as a pool, for later replay")
    o.add_argument("--force", action="store_true", help="replace an existing --json file, or a --record pool "
                   "coba-env wrote (a folder holding anything else is never replaced)")
    o.add_argument("--quiet", action="store_true", help="print only the answers")
    p.set_defaults(func=run)


# -------------------------------------------------------------------------------------------------- inputs
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

    problems = _problems(args)
    generators = endpoint_options.generators(args.generator)
    judges = endpoint_options.judges(args)
    settings = endpoint_options.sampling_settings(args)
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
