"""``coba calibrate POLICY``: the setting of a policy's operating parameter that meets a target on calibration
items, and its outcome on held-out items (``eval.calibration``; docs/ROUTING.md, "Operating points").

A command of its own rather than an option of ``coba bench``: calibrating is a search (many replays of the
calibration items at candidate settings) followed by one evaluation on other items, where a bench evaluates fixed
policies once on the same items; folding the search into the bench would make ``--policies`` mean a search for
some entries and a fixed policy for others, and would mix calibration and evaluation items in one report.
"""

from __future__ import annotations

import argparse
import json
import sys

from coba_cli.arg_types import add_cost_option
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples
from coba_cli.item_folds import add_fold_options, fold_episode_ids, fold_list
from eval.envs import ENV_GROUPING


def _figures_line(what: str, figures: dict, target: object, cost_model: str) -> str:
    shares = ", ".join(f"{g} {v:.1%}" for g, v in figures["share"].items())
    return (f"{what}: {figures['problems']} problems, accuracy {figures['accuracy']:.4f}, mean {cost_model} "
            f"{figures['mean_cost'][cost_model]:.6g}" + (f", calls: {shares}" if shares else ""))


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from agents.registry import make_policy
    from coba_env.costs import cost_model_or_default
    from coba_env.env import as_compiled
    from eval.calibration import calibrate, outcome, parse_target
    from eval.runner import run_policy
    from pools.output_paths import check_output_file

    try:
        target = parse_target(args.target)
    except ValueError as exc:
        raise UsageError(f"--target: {exc}") from None
    out = None if args.out is None else check_output_file(args.out, force=args.force, option="--out",
                                                           inputs=[args.pool])
    if set(args.calibrate_folds or ()) & set(args.held_out_folds or ()):
        raise UsageError("--calibrate-folds and --held-out-folds share a fold; they must be apart")
    try:
        policy = make_policy(args.policy)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(f"POLICY: {exc}") from None
    compiled = as_compiled(args.pool)
    args.cost = cost_model_or_default(compiled, args.cost)
    held = [] if args.held_out_folds is None else args.held_out_folds
    cal = args.calibrate_folds or [f for f in range(args.k) if f not in held]
    cal_pool = compiled.select(_isin(compiled, fold_episode_ids(compiled, cal, args.k, args.fold_seed,
                                                                "--calibrate-folds")))
    grouping = ENV_GROUPING[args.env]
    try:
        result = calibrate(policy, cal_pool, target, grouping=grouping, cost_model=args.cost,
                           parameter=args.parameter)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    chosen = result.parameter, result.value
    print(f"{policy.name}: {chosen[0]} = {chosen[1]:.6g} for {target.describe()} "
          f"({'met' if result.reached else 'nearest reached'} on the calibration folds {cal})")
    print(_figures_line(f"calibration folds {cal}", result.figures, target, args.cost))
    report = {"policy": policy.name, "target": target.describe(), "parameter": chosen[0], "value": chosen[1],
              "k": args.k, "fold_seed": args.fold_seed, "calibration_folds": cal, "calibration": result.figures,
              "reached": result.reached, "evaluated": result.evaluated}
    if held:
        from eval.calibration import at_setting

        held_pool = compiled.select(_isin(compiled, fold_episode_ids(compiled, held, args.k, args.fold_seed,
                                                                     "--held-out-folds")))
        records = run_policy(at_setting(policy, *chosen), held_pool, grouping=grouping, cost_model=args.cost)
        figures = outcome(records, tuple(dict.fromkeys(str(g) for g in compiled.generator)))
        report.update(held_out_folds=held, held_out=figures)
        print(_figures_line(f"held-out folds {held}", figures, target, args.cost))
    else:
        print("no --held-out-folds: the setting is not evaluated on other items", file=sys.stderr)
    if out is not None:
        from pools.atomic_write import atomic_write_text

        atomic_write_text(out, json.dumps(report, indent=2, allow_nan=False) + "\n")
    return 0


def _isin(compiled: object, ids: object) -> object:
    import numpy as np

    return np.isin(compiled.episode_ids, ids)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba calibrate``."""
    p = subparsers.add_parser(
        "calibrate", help="set a policy's operating point (lambda / threshold) to meet a target",
        formatter_class=ExampleFormatter,
        description="Replay POLICY on the calibration items at settings of its operating parameter (lambda for a "
        "router or a learned controller, share for the random router, threshold for a threshold router) chosen by "
        "bisection, keep the setting whose outcome is nearest the target, and report it with its outcome on the "
        "held-out items. Items are split into --k folds (shuffled by --fold-seed, stratified by category where "
        "there is one; the folds of coba train --folds). Targets: share:GENERATOR=FRACTION (share of problems that "
        "call it), cost:MEASURE=AMOUNT (mean cost per problem), accuracy=FRACTION (the cheapest setting at least "
        "that accurate).",
        epilog=examples("coba calibrate runs/knn-router --pool runs/pools/routellm-gsm8k --cost usd "
                        "--target share:gpt-4-1106-preview=0.3 --calibrate-folds 1,2 --held-out-folds 0",
                        "coba calibrate runs/knn-router --pool runs/pools/routellm-gsm8k --cost usd "
                        "--target cost:usd=0.01 --held-out-folds 0 --out runs/knn-router-cost.json"))
    p.add_argument("policy", help="a policy: a registry name, a checkpoint directory (e.g. a router's), "
                                  "FILE.py:Class or module:Class")
    p.add_argument("--pool", required=True, metavar="POOL", help="pool directory or simulator profile")
    p.add_argument("--target", required=True, metavar="TARGET",
                   help="share:GENERATOR=FRACTION, cost:MEASURE=AMOUNT or accuracy=FRACTION")
    p.add_argument("--env", default="route", choices=("route", "replay"),
                   help="the env the policy runs on (default: route)")
    add_cost_option(p, "cost model of the runs (the accuracy target's cheapest setting)")
    p.add_argument("--parameter", default=None, metavar="NAME",
                   help="the operating parameter (default: the policy's own: lam, share or threshold)")
    p.add_argument("--calibrate-folds", type=fold_list, default=None, metavar="F1,F2",
                   help="the item folds to calibrate on (default: every fold not held out)")
    p.add_argument("--held-out-folds", type=fold_list, default=None, metavar="F1,F2",
                   help="the item folds to report the chosen setting on (default: none)")
    add_fold_options(p)
    p.add_argument("--out", default=None, metavar="FILE.json", help="also write the report as JSON")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=_cmd_calibrate)
