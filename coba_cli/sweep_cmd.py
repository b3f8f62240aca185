"""``coba sweep``: trace accuracy-cost frontiers: checkpoints over lambda, CoBa / best-of-n over parameters.

Evaluate sweep points on a pool and write frontier.csv / frontier.md and the figure frontier.png / .svg: macro
accuracy and cost of every point with their 95% intervals, which points dominate which, and every two families'
fronts compared over the cost range both cover (mean best-reachable accuracy there).

examples:
  coba sweep --pool tiny --out runs/sweep
  coba sweep --env route --pool tiny --out runs/sweep-route
  coba sweep --pool tiny --policies coba,best_of_n,runs/mlp-tiny --lambdas 0.01,0.1,0.3 --out runs/sweep-mlp
  coba sweep --pool tiny --policies my_rule.py:MyRule --grid k=1,2,4,8 --out runs/sweep-mine

Learned policies are traced over lambda, fixed ones over their parameters (``train.sweep``).
"""

from __future__ import annotations

import argparse

from coba_cli.arg_types import (
    add_cost_option,
    add_episode_options,
    add_ray_address,
    connect_ray_cluster,
    lambda_list,
)
from coba_cli.errors import UsageError
from coba_cli.help_text import command_parser
from eval.envs import ENV_GROUPING


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba sweep``."""
    parser = command_parser(subparsers, "sweep", __doc__)
    parser.add_argument("--pool", default=None, metavar="POOL",
                        help="pool directory or simulator profile ('paper', 'tiny'); default: the paper pool")
    parser.add_argument("--policies", default=None, metavar="ITEMS",
                        help="comma-separated: a fixed family ('coba': N_max x strong routes, 'best_of_n': n; on "
                             "--env route 'route_threshold_judge', 'route_threshold_agreement': the threshold), a "
                             "checkpoint directory (traced over --lambdas), a registered policy name or your own "
                             "class as FILE.py:Class / module:Class (one point each); default: coba,best_of_n "
                             "(--env route: route_threshold_judge,route_threshold_agreement,route_cascade,"
                             "model_switch)")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=v1,v2,...",
                        help="sweep a parameter of every policy named in --policies (registered, from a YAML spec "
                             "file, or FILE.py:Class): one point per value, named POLICY[NAME=value]; repeat the "
                             "option to sweep the product of several parameters (default: no grid)")
    parser.add_argument("--lambdas", type=lambda_list, default=None, metavar="L1,L2,...",
                        help="lambdas at which checkpoints are evaluated (default: 0.01,0.03,0.05,0.1,0.2,0.3,0.5,1)")
    add_cost_option(parser, "cost measure of the x axis")
    parser.add_argument("--out", default="sweep-out", metavar="DIR",
                        help="output directory; a previous sweep folder there is replaced whole (a folder holding "
                             "anything else is refused) (default: sweep-out)")
    add_episode_options(parser)
    add_ray_address(parser, "one Ray task per sweep point on that cluster; the results equal the local run's")
    parser.add_argument("--no-figures", action="store_true", help="skip the figure (frontier.png / .svg)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the sweep for parsed ``args``; bad input exits 2."""
    from coba_env.parallel import RayUnavailable
    from train.sweep import (
        DEFAULT_EVAL_LAMBDAS,
        DEFAULT_POLICIES,
        SweepInputError,
        frontier_markdown,
        run_sweep,
    )

    connect_ray_cluster(args.ray_address)  # before any work: Ray installed and the cluster answering
    grouping = ENV_GROUPING[args.env]
    if args.grid and args.policies is None:
        raise UsageError("--grid sweeps a parameter of the policies you name: give them with --policies")
    given = ",".join(DEFAULT_POLICIES[grouping]) if args.policies is None else args.policies
    specs = [s.strip() for s in given.split(",") if s.strip()]
    if not specs:
        raise UsageError("--policies names nothing")
    try:  # run_sweep resolves the sweep points (failing on bad input) before it builds the pool
        table, summary = run_sweep(args.pool, specs, args.lambdas or DEFAULT_EVAL_LAMBDAS,
                                   out_dir=args.out, cost_model=args.cost, progress=not args.no_progress,
                                   datasets=args.datasets, ray_address=args.ray_address, grouping=grouping,
                                   grid=args.grid, figure=not args.no_figures)
    except (SweepInputError, RayUnavailable) as exc:
        raise UsageError(str(exc)) from exc
    print(frontier_markdown(table, summary, summary["cost_model"]))
    for name, why in summary.get("not_applicable", {}).items():
        print(f"skipped {name}: cannot run on this pool ({why})")
    figure = "" if args.no_figures else f", {args.out}/frontier.png (and .svg)"
    print(f"written: {args.out}/frontier.csv, {args.out}/frontier.md{figure}")
    return 0
