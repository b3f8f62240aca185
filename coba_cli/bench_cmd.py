"""``coba bench``: evaluate every policy on a pool: paper tables, figures, statistics and a report.

Replay every policy on every episode of a candidate pool and write the paper's evaluation (Section 5): macro
accuracy and costs, per-dataset and per-generator tables, the action-allocation audit, the oracle-gap split,
paired bootstrap tests, Pareto frontiers and figures, every macro figure with its 95% interval (bootstrap over
items), as report.md, tables/ (md, csv, tex), figures/ (png, svg), results.json and episodes.parquet. Exit 2
when no selected policy can run on the pool.

examples:
  coba bench --pool tiny --policies main --out runs/bench
  coba bench --pool runs/pools/mine --policies main,my_rules.py:TwoThenJudge,mine.yaml --out runs/b
  coba bench --policies main,runs/mlp-tiny@0.1,runs/sb3/model.zip@0.2 --no-figures --out runs/b2
"""

from __future__ import annotations

import argparse

from coba_cli.arg_types import (
    add_cost_option,
    add_episode_options,
    add_ray_address,
    connect_ray_cluster,
    int_in,
    require_ray,
    seed_int,
)
from coba_cli.errors import UsageError
from coba_cli.help_text import command_parser
from pools.limits import MAX_RESAMPLES, MAX_WORKERS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba bench``."""
    parser = command_parser(subparsers, "bench", __doc__)
    parser.add_argument("--pool", default=None, metavar="POOL",
                        help="pool directory, simulator profile name ('paper', 'tiny') or profile JSON file; "
                             "default: the simulated paper pool (cached)")
    parser.add_argument("--policies", default=None, metavar="ITEMS",
                        help="comma-separated, in any mix: registered policy names; 'all' (every non-learned "
                             "registered policy, the default) or 'main' (the paper's main table); YAML policy spec "
                             "files (their policies run, merged over the built-in specs); your own class as "
                             "FILE.py:Class or module:Class; controller checkpoint directories (coba train) and SB3 "
                             ".zip models, each as PATH or PATH@LAMBDA (the lambda it acts at; without it, a "
                             "lambda-conditioned checkpoint (mlp) acts at the lambda it was trained at, which the "
                             "bench prints, and a PPO checkpoint or SB3 model, which does not read lambda, runs at "
                             "the env's lambda: its label says 'env lambda')")
    add_cost_option(parser, "cost model: the cost measure of the frontier's x axis and of the env's budget")
    parser.add_argument("--seed", type=seed_int, default=0,
                        help="seed of the paired bootstrap resamples and of any stochastic policy (default: 0)")
    parser.add_argument("--pool-seed", type=seed_int, default=0, help="seed of a simulated pool, ignored for a pool directory (default: 0)")
    parser.add_argument("--out", default="bench-out", metavar="DIR",
                        help="output directory, created if missing; a previous bench folder there is replaced whole "
                             "(a folder holding anything else is refused) (default: bench-out)")
    parser.add_argument("--no-figures", action="store_true", help="skip the figures (faster)")
    parser.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None, metavar="N",
                        help="replay worker processes (policies run in parallel, the pool shared by fork); "
                             "default: 2 for large runs where 2 CPUs are available, else 1")
    parser.add_argument("--unit", default="item", choices=("item", "episode"),
                        help="paired-bootstrap resampling unit: items, averaged over generators as in the paper "
                             "(default), or episodes")
    parser.add_argument("--resamples", type=int_in(1, MAX_RESAMPLES), default=2000, metavar="B", help="bootstrap resamples (default: 2000)")
    parser.add_argument("--reference", default=None, metavar="NAME",
                        help="the policy the paired bootstrap tests every other one against, one of the selected "
                             "policies (default: coba_strong on --env replay when it runs, the most accurate "
                             "routing policy on --env route, else the most accurate policy that is not an oracle)")
    add_episode_options(parser, "the report adds the allocation by generator, the route front and, on "
                                "two-model pools, CPT(50%%), CPT(80%%) and APGR")
    parser.add_argument("--replay", default="batched", choices=("batched", "single"),
                        help="batched (default): policies act on thousands of episodes at once through the "
                             "vector env; single: one episode at a time (the reference, same records, slower)")
    add_ray_address(parser, "episode shards (every policy on each shard) run as Ray tasks on that cluster; the "
                            "results equal the local run's")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bars (they show only on a terminal)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the bench for parsed ``args``; input errors become ``UsageError`` (exit 2)."""
    from coba_env.parallel import RayUnavailable
    from eval.bench import BenchInputError, run_bench

    require_ray(args.ray_address)
    if args.ray_address is not None and args.workers is not None:
        raise UsageError("--workers sets the local worker processes; with --ray-address the cluster's CPUs are used")
    connect_ray_cluster(args.ray_address)  # before any work: an unreachable cluster is one line, exit 2
    try:
        run_bench(args.pool, args.policies, cost_model=args.cost, seed=args.seed, out_dir=args.out,
                  progress=not args.no_progress, figures=not args.no_figures, workers=args.workers,
                  unit=args.unit, resamples=args.resamples, pool_seed=args.pool_seed,
                  datasets=args.datasets, replay=args.replay, ray_address=args.ray_address, env=args.env,
                  reference=args.reference)
    except (BenchInputError, RayUnavailable) as exc:
        raise UsageError(str(exc)) from exc
    return 0
