"""``coba train KIND``: train a learned controller on either env, or run the learning protocol (``--lodo``).

The kinds, their options, help and protocol methods are read from their one declaration
(``agents/controllers.yaml``, ``agents.controller_kinds``); this module only parses and calls
``train.lodo.train_kind`` or ``train.protocol.run_protocol``.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from agents.controller_kinds import ControllerKind, KindOption, controller_kinds
from coba_cli.arg_types import (
    add_cost_option,
    add_ray_address,
    connect_ray_cluster,
    dataset_list,
    int_in,
    lambda_list,
    non_negative_int,
    positive_int,
    require_ray,
    seed_int,
)
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, add_kind_help, examples
from coba_cli.item_folds import add_fold_options, fold_episode_ids, fold_list
from pools.atomic_write import atomic_dir, mark_output
from pools.limits import MAX_WORKERS
from pools.output_paths import check_output_dir

#: The envs a controller trains on (``train.protocol_arena.ARENAS``, not imported: it would load the protocol).
ENVS = ("replay", "route")
#: An option's declared type -> its argparse type.
OPTION_PARSERS = {"count": non_negative_int, "positive": positive_int, "choice": str}


def seed_list(text: str) -> list[int]:
    """One or more distinct seeds separated by commas (``--seeds 0,1,2``)."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected one or more seeds separated by commas, got {text!r}")
    seeds = [seed_int(p) for p in parts]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct seeds, got {text!r}")
    return seeds


def kind_options() -> dict[str, tuple[KindOption, list[str]]]:
    """Every kind option by flag: the option and the kinds that take it (one declaration per flag)."""
    out: dict[str, tuple[KindOption, list[str]]] = {}
    for kind in controller_kinds().values():
        for option in kind.options:
            seen = out.get(option.flag)
            if seen is not None and (seen[0].dest, seen[0].type) != (option.dest, option.type):
                raise ValueError(f"controller kinds {seen[1]} and {kind.name!r} declare --{option.flag} differently")
            out.setdefault(option.flag, (option, []))[1].append(kind.name)
    return out


def _kind_help(kind: ControllerKind) -> tuple[str, str]:
    return kind.description, examples(*kind.examples)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba train``."""
    kinds = controller_kinds()
    listing = ", ".join(f"{name} ({kind.summary})" for name, kind in kinds.items())
    protocol_only = ", ".join(name for name, kind in kinds.items() if kind.protocol_only)
    parser = subparsers.add_parser(
        "train", help="train a learned routing controller (MLP, MaskablePPO, rollout over CoBa-Strong)",
        add_help=False, formatter_class=ExampleFormatter,
        epilog=examples("coba train mlp --pool tiny --out runs/mlp-tiny",
                        "coba train mlp --env route --pool tiny --datasets math500 --out runs/route-mlp-tiny",
                        "coba train rollout --lodo --out runs/protocol-rollout",
                        "coba train ppo --lodo --workers 2 --out runs/protocol-ppo",
                        "# coba train KIND --help: that kind's options and examples"),
        description="Train a controller on a candidate pool, on the replay env or with --env route on the route env "
        "(one episode per problem, a SAMPLE per generator). 'mlp' imitates the cost-aware oracle with DAgger "
        "rollouts; 'ppo' runs sb3-contrib MaskablePPO; 'rollout' improves on CoBa-Routed-Strong with learned "
        "Q^Strong (--lodo only). With --lodo the learning protocol of docs/LEARNING.md runs: leave-one-dataset-out "
        "per seed, every setting chosen by nested leave-one-dataset-out inside the training datasets, the "
        "chosen point judged against the env's reference on both axes (paired bootstrap); it prints the verdict.")
    options = kind_options()
    add_kind_help(parser, {name: _kind_help(kind) for name, kind in kinds.items()},
                  {name: tuple(o.attribute for o in kind.options if options[o.flag][1] == [name])
                   for name, kind in kinds.items()})
    parser.add_argument("kind", choices=tuple(kinds),
                        help=f"controller kind: {listing}; {protocol_only} run with --lodo only; "
                             "coba train KIND --help shows that kind's options")
    _add_common_arguments(parser)
    for flag, (option, owners) in options.items():
        default = f" (default: {option.default})" if option.default is not None else ""
        parser.add_argument(f"--{flag}", dest=option.attribute, type=OPTION_PARSERS[option.type], default=None,
                            choices=option.choices or None, metavar=option.metavar,
                            help=f"{', '.join(owners)}: {option.help}{default}")
    parser.add_argument("--out", default="train-out", metavar="DIR",
                        help="output: the checkpoint directory, or with --lodo the tables and checkpoints "
                             "(default: train-out)")
    parser.add_argument("--force", action="store_true",
                        help="replace --out if it holds a previous coba-env result (a folder holding anything else "
                             "is never replaced)")
    add_ray_address(parser, "with --lodo, the protocol's outer folds (one per seed and held-out dataset) run as Ray "
                            "tasks on that cluster; the results equal the local run's")
    parser.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None, metavar="N",
                        help="with --lodo: run the protocol's outer folds in N worker processes forked on this "
                             "machine, each on one of the cores this process may use, in turn (one bar over the folds instead of the per-fit bars); the "
                             "results equal --workers 1's (default: 1)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def _add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every kind takes."""
    parser.add_argument("--pool", default=None, metavar="POOL",
                        help="pool directory or simulator profile ('paper', 'tiny'); default: the paper pool")
    parser.add_argument("--env", default=None, choices=ENVS,
                        help="the env: replay (one episode per problem and generator; --lodo judges against "
                             "CoBa-Routed-Strong) or route (one episode per problem, a SAMPLE per generator; --lodo "
                             "judges against the consistency cascade); default: route for a router kind, else replay")
    parser.add_argument("--problem-features", default=None, metavar="SOURCES",
                        help="problem features the controller reads at reset (the env option, docs/ROUTING.md): "
                             "comma-separated from meta, text, embeddings, fitted on the training items only (under "
                             "--lodo / --kfold inside every fit); default: none for mlp and ppo, meta,text for a "
                             "router kind (prior_router: meta)")
    parser.add_argument("--folds", type=fold_list, default=None, metavar="F1,F2",
                        help="without --lodo / --kfold: train on the items of these item folds only (of --k folds "
                             "shuffled by --fold-seed, docs/ROUTING.md; the others stay out for coba calibrate and "
                             "evaluation); default: every item")
    add_fold_options(parser)
    parser.add_argument("--kfold", action="store_true",
                        help="router kinds: run the K-fold routing protocol (docs/ROUTING.md): 5 folds over items x "
                             "3 seeds beside the per-category prior router, CPT(50%%), CPT(80%%), APGR with 95%% CIs")
    parser.add_argument("--datasets", type=dataset_list, default=None, metavar="A,B",
                        help="without --lodo: train on these datasets of the pool only, the others held out "
                             "(controller.json lists the datasets it saw); default: every dataset")
    parser.add_argument("--lodo", action="store_true",
                        help="run the learning protocol (docs/LEARNING.md): leave-one-dataset-out with nested "
                             "selection, 3 seeds, the verdict against the env's reference")
    parser.add_argument("--lambdas", type=lambda_list, default=None, metavar="L1,L2,...",
                        help="training lambdas without --lodo (mlp: every visited state is labelled at each; ppo: "
                             "lambda is drawn per episode between their min and max); default: mlp "
                             "0.02,0.05,0.1,0.2,0.3,0.5,1, ppo its own lambda range (train/ppo.py). Under --lodo the "
                             "method's grid, stated in advance, is used")
    parser.add_argument("--seeds", type=seed_list, default=None, metavar="S1,S2,...",
                        help="with --lodo: the protocol's seeds (default: 0,1,2)")
    parser.add_argument("--held-out", default=None, metavar="DS1,DS2",
                        help="with --lodo: only these held-out datasets (default: every dataset)")
    add_cost_option(parser, "cost model of the reward; --lodo and --kfold cost in their protocol's measure")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed without --lodo; a fixed seed reproduces the run (default: 0; --lodo takes --seeds)")


def _options(args: argparse.Namespace) -> dict:
    """The kind's own options given (trainer keyword -> value); a flag of another kind is refused."""
    kind = controller_kinds()[args.kind]
    mine = {o.flag for o in kind.options}
    foreign: dict[str, list[str]] = {}
    for flag, (option, owners) in kind_options().items():
        if flag not in mine and getattr(args, option.attribute) is not None:
            foreign.setdefault(" and ".join(owners), []).append(f"--{flag}")
    if foreign:
        owners, flags = next(iter(foreign.items()))
        raise UsageError(f"{', '.join(flags)} appl{'ies' if len(flags) == 1 else 'y'} to {owners} only")
    return {o.dest: getattr(args, o.attribute) for o in kind.options if getattr(args, o.attribute) is not None}


def protocol_method(kind: str, env: str = "replay") -> object:
    """The protocol ``Method`` of ``kind`` on ``env`` with the protocol's settings (its declared ``methods``)."""
    kinds = controller_kinds()
    if env not in kinds[kind].methods:
        there = ", ".join(name for name, k in kinds.items() if env in k.methods)
        raise UsageError(f"{kind} has no protocol method on the {env} env; there: {there}")
    return kinds[kind].method(env)


def run_lodo_protocol(args: argparse.Namespace, options: dict, out: Path) -> int:
    """``--lodo``: run the learning protocol and print its verdict and table."""
    from coba_env.env import as_compiled
    from train.protocol import SEEDS, run_protocol
    from train.protocol_arena import arena_named
    from train.protocol_stats import stats_markdown

    _refuse_with_lodo(args, options)
    method = protocol_method(args.kind, args.env)  # before any work: a kind the env has no method for is one line
    if args.problem_features is not None:  # the method fits them inside every fit, on its training items only
        try:
            method = controller_kinds()[args.kind].method(args.env, problem_features=args.problem_features)
        except TypeError:
            raise UsageError(f"--problem-features: {args.kind}'s protocol method reads no problem features") from None
        except ValueError as exc:
            raise UsageError(f"--problem-features: {exc}") from None
    fold_map = map
    workers = 1 if args.workers is None else args.workers
    if workers > 1:  # every (seed, outer fold) in a forked worker on one core; the results are one process's
        from train.protocol_workers import forked_fold_map

        fold_map = forked_fold_map(workers, progress=not args.no_progress)
    if args.ray_address is not None:  # every (seed, outer fold) is one Ray task; the results are the local run's
        from functools import partial

        from coba_env.parallel import map_tasks

        connect_ray_cluster(args.ray_address)  # before any work: an unreachable cluster is one line, exit 2
        fold_map = partial(map_tasks, ray_address=args.ray_address, progress=not args.no_progress,
                           desc="protocol folds on Ray")
    compiled = as_compiled(args.pool)
    datasets = list(dict.fromkeys(compiled.dataset.tolist()))
    if len(datasets) < 3:
        raise UsageError(f"--lodo needs a pool with at least 3 datasets (nested leave-one-dataset-out); "
                         f"the pool has {datasets}")
    arena = arena_named(args.env)
    try:  # before any work: a pool the env cannot run the protocol on is one line
        arena.check(compiled)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    held = None
    if args.held_out is not None:
        held = [d.strip() for d in args.held_out.split(",") if d.strip()]
        bad = [d for d in held if d not in datasets]
        if bad:
            raise UsageError(f"--held-out: unknown dataset(s) {bad}; the pool has {datasets}")
    seeds = tuple(args.seeds) if args.seeds is not None else SEEDS
    from pools.default import DEFAULT_SPEC

    pool_name = str(args.pool) if args.pool is not None else DEFAULT_SPEC
    result = atomic_dir(out, lambda tmp: run_protocol(compiled, method, seeds=seeds, out_dir=tmp,
                                                        progress=not args.no_progress and workers == 1,
                                                        held_out=held,
                                                        fold_map=fold_map, pool_name=pool_name,
                                                        arena=arena), marker="lodo")
    print(stats_markdown(result.stats))
    print()
    if held is not None:
        print(f"partial run (held out: {', '.join(held)}): the verdict covers these datasets only")
    print(result.verdict["text"])
    print(f"protocol done in {result.seconds:.0f} s; tables in {args.out}")
    return 0


def _refuse_with_lodo(args: argparse.Namespace, options: dict) -> None:
    """The options the protocol states in advance itself: one line naming the first one given."""
    if args.lambdas is not None:
        raise UsageError("--lambdas does not apply with --lodo: the protocol uses the method's grid, stated in advance")
    if args.seed is not None:
        raise UsageError("--seed does not apply with --lodo: the protocol's seeds are --seeds (default: 0,1,2)")
    if args.datasets is not None:
        raise UsageError("--datasets does not apply with --lodo: the protocol holds out each dataset in turn "
                         "(--held-out restricts which)")
    if options:
        flags = {o.dest: f"--{flag}" for flag, (o, _) in kind_options().items()}
        raise UsageError(f"{', '.join(flags[k] for k in options)}: --lodo runs the protocol's settings, stated in "
                         "advance (train/protocol_mlp.py, train/ppo_method.py); they cannot be changed per run")
    if args.cost not in (None, "p_tokens"):
        raise UsageError("--lodo: the protocol's cost model is p_tokens")


def run(args: argparse.Namespace) -> int:
    """Train (or run leave-one-dataset-out) for parsed ``args``; bad input exits 2."""
    options = _options(args)
    router = controller_kinds()[args.kind].router is not None
    if args.env is None:
        args.env = "route" if router else "replay"
    if args.problem_features is not None:
        from coba_env.featurizers import parse_sources

        try:
            parse_sources(args.problem_features)
        except ValueError as exc:
            raise UsageError(f"--problem-features: {exc}") from None
    envs = controller_kinds()[args.kind].envs
    if args.env not in envs:
        raise UsageError(f"{args.kind} trains on --env {' or '.join(envs)} only "
                         f"({controller_kinds()[args.kind].summary}); got --env {args.env}")
    if args.kfold:
        if args.lodo or not router:
            raise UsageError("--kfold runs the K-fold routing protocol of a router kind (not with --lodo); "
                             f"{args.kind} is {'not a router kind' if not router else 'given --lodo too'}")
        from coba_cli.kfold_cmd import run_kfold_protocol

        return run_kfold_protocol(args)
    if not args.lodo and (args.seeds is not None or args.held_out is not None or args.ray_address is not None
                          or args.workers is not None):
        raise UsageError("--seeds, --held-out, --ray-address and --workers need --lodo")
    if args.ray_address is not None and args.workers is not None:
        raise UsageError("--workers sets the local worker processes; with --ray-address the folds run on the cluster")
    if args.lodo and args.folds is not None:
        raise UsageError("--folds does not apply with --lodo: the protocol holds out each dataset in turn")
    require_ray(args.ray_address)
    if controller_kinds()[args.kind].protocol_only and not args.lodo:
        raise UsageError(f"{args.kind} trains under the protocol only: add --lodo")
    out = check_output_dir(args.out, force=args.force, option="--out", inputs=[args.pool],  # before any work
                           kind="lodo" if args.lodo else "checkpoint")
    if args.lodo:
        return run_lodo_protocol(args, options, out)
    return train_one(args, options, out)


def train_one(args: argparse.Namespace, options: dict, out: Path) -> int:
    """Without --lodo: one controller of the kind on the env, written to ``out``; how to bench it is printed."""
    from coba_env.costs import cost_model_or_default
    from coba_env.env import as_compiled
    from coba_env.rules.config import check_cost_model_priced
    from train.lodo import train_kind
    from train.protocol_arena import arena_named

    compiled = as_compiled(args.pool)
    args.cost = cost_model_or_default(compiled, args.cost)
    try:  # before any work: a usd reward needs the pool's prices
        check_cost_model_priced(compiled, args.cost)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    present = list(dict.fromkeys(compiled.dataset.tolist()))
    unknown = [d for d in args.datasets or () if d not in present]
    if unknown:
        raise UsageError(f"--datasets: unknown dataset(s) {unknown}; the pool has {present}")
    kind = controller_kinds()[args.kind]
    ids = None if args.folds is None else fold_episode_ids(compiled, args.folds, args.k, args.fold_seed, "--folds")

    def train(folder: Path) -> None:
        train_kind(args.kind, compiled, folder, grouping=arena_named(args.env).grouping, datasets=args.datasets,
                   episode_ids=ids, lambdas=args.lambdas, cost_model=args.cost,
                   seed=0 if args.seed is None else args.seed, progress=not args.no_progress, options=options,
                   problem_features=args.problem_features)

    try:
        if kind.snapshots:
            # The trainer writes loadable snapshots while it trains (an interrupted run keeps them), so it trains
            # in place; the folder was checked above and is marked as ours when training ends.
            train(out)
            mark_output(out, "checkpoint")
        else:
            atomic_dir(out, train, marker="checkpoint")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    from pools.default import DEFAULT_SPEC

    pool = args.pool if args.pool is not None else DEFAULT_SPEC
    print(f"checkpoint: {out} (evaluate with: coba bench --pool {shlex.quote(str(pool))} "
          f"--policies {shlex.quote(f'main,{out}')} --env {args.env})")
    return 0
