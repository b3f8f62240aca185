"""``coba train mlp|ppo|rollout``: train a learned routing controller, or run the learning protocol (``--lodo``)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from coba_cli.arg_types import (
    COST_CHOICES,
    add_ray_address,
    connect_ray_cluster,
    lambda_list,
    non_negative_int,
    positive_int,
    require_ray,
    seed_int,
)
from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, add_kind_help, examples
from pools.atomic_write import atomic_dir, mark_output
from pools.output_paths import check_output_dir

#: Kinds that exist only as protocol methods (``--lodo``), issue 27's with their module.
PROTOCOL_ONLY_KINDS = ("stop_gate", "coba_search", "route_search")

#: The protocol's methods per (env, kind): (module, class). Route-env methods run with ``--env route``.
PROTOCOL_METHODS: dict[tuple[str, str], tuple[str, str]] = {
    ("replay", "mlp"): ("train.protocol_mlp", "MLPMethod"),
    ("replay", "ppo"): ("train.ppo_method", "PPOMethod"),
    ("replay", "rollout"): ("train.rollout", "RolloutMethod"),
    ("replay", "stop_gate"): ("train.stop_gate", "StopGateMethod"),
    ("replay", "coba_search"): ("train.coba_search", "CoBaSearchMethod"),
    ("route", "mlp"): ("train.route_mlp_method", "RouteMLPMethod"),
    ("route", "ppo"): ("train.route_ppo_method", "RoutePPOMethod"),
    ("route", "route_search"): ("train.route_search", "RouteSearchMethod"),
}

#: ``train.ppo.train_ppo``'s default ``total_timesteps`` (not imported: that would load torch for --help).
PPO_DEFAULT_TIMESTEPS = 200_000


def seed_list(text: str) -> list[int]:
    """One or more distinct seeds separated by commas (``--seeds 0,1,2``)."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected one or more seeds separated by commas, got {text!r}")
    seeds = [seed_int(p) for p in parts]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct seeds, got {text!r}")
    return seeds


#: ``coba train KIND --help``: each kind's description and examples.
KIND_HELP: dict[str, tuple[str, str]] = {
    "mlp": ("Train the MLP controller: DAgger-style imitation of the cost-aware oracle, lambda-conditioned "
            "(docs/CONTROLLERS.md, 'The MLP controller'). Writes a checkpoint directory to --out; bench it at a "
            "lambda with --policies main,DIR@LAMBDA. With --lodo: the learning protocol (docs/LEARNING.md).",
            examples("coba train mlp --pool tiny --out runs/mlp-tiny",
                     "coba train mlp --pool tiny --rounds 2 --epochs 10 --lambdas 0.05,0.1,0.3 --out runs/mlp-small",
                     "coba bench --pool tiny --policies main,runs/mlp-tiny@0.1 --out runs/bench-mlp",
                     "coba train mlp --lodo --out runs/protocol-mlp")),
    "ppo": ("Train a MaskablePPO controller (sb3-contrib) on the replay env, lambda drawn per episode, warm-started "
            "by cloning CoBa-Routed-Strong (docs/CONTROLLERS.md, 'The SB3 path'). Writes a checkpoint directory "
            "to --out. With --lodo: the learning protocol (docs/LEARNING.md).",
            examples("coba train ppo --pool tiny --timesteps 20000 --out runs/ppo-tiny",
                     "coba bench --pool tiny --policies main,runs/ppo-tiny@0.1 --out runs/bench-ppo",
                     "coba train ppo --lodo --out runs/protocol-ppo",
                     "coba train ppo --lodo --env route --out runs/protocol-route-ppo")),
    "rollout": ("One-step improvement over CoBa-Routed-Strong with learned Q^Strong, trained under the learning "
                "protocol only: needs --lodo (docs/CONTROLLERS.md, 'The rollout controller').",
                examples("coba train rollout --lodo --out runs/protocol-rollout",
                         "coba train rollout --lodo --seeds 0 --held-out math500 --out runs/rollout-partial")),
    "stop_gate": ("A stop gate over CoBa-Routed-Strong whose threshold is set by Learn-then-Test, under the learning "
                  "protocol only: needs --lodo (docs/LEARNING.md, 'Protocol').",
                  examples("coba train stop_gate --lodo --out runs/protocol-stop-gate")),
    "coba_search": ("Optuna TPE search over CoBa-Routed-Strong's own parameters, nested inside the training "
                    "datasets, under the learning protocol only: needs --lodo (docs/LEARNING.md, 'Protocol').",
                    examples("coba train coba_search --lodo --out runs/protocol-coba-search")),
    "route_search": ("Optuna TPE search over the hand-made routing policies' own parameters on the route env, "
                     "nested inside the training datasets, under the learning protocol only: needs --lodo --env "
                     "route (docs/LEARNING.md, 'Protocol').",
                     examples("coba train route_search --lodo --env route --out runs/protocol-route-search")),
}
#: Options that only one kind takes (their help is hidden under another kind's --help).
KIND_ONLY_OPTIONS: dict[str, tuple[str, ...]] = {
    "mlp": ("rounds", "epochs", "episodes_per_round", "loss", "targets"),
    "ppo": ("timesteps",),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba train``."""
    parser = subparsers.add_parser(
        "train", help="train a learned routing controller (MLP, MaskablePPO, rollout over CoBa-Strong)",
        add_help=False, formatter_class=ExampleFormatter,
        epilog=examples("coba train mlp --pool tiny --out runs/mlp-tiny",
                        "coba train rollout --lodo --out runs/protocol-rollout",
                        "# coba train KIND --help: that kind's options and examples"),
        description="Train a routing controller on a candidate pool. 'mlp' imitates the cost-aware oracle with "
        "DAgger rollouts; 'ppo' runs sb3-contrib MaskablePPO; 'rollout' improves on CoBa-Routed-Strong with learned "
        "Q^Strong (--lodo only). With --lodo the learning protocol of docs/LEARNING.md runs: leave-one-dataset-out "
        "per seed, every setting chosen by nested leave-one-dataset-out inside the training datasets, the "
        "chosen point judged against CoBa-Routed-Strong on both axes (paired bootstrap); it prints the verdict.")
    add_kind_help(parser, KIND_HELP, KIND_ONLY_OPTIONS)
    parser.add_argument("kind", choices=tuple(KIND_HELP),
                        help="controller kind: mlp (imitation), ppo (RL), rollout (improvement over Strong), "
                             "stop_gate (LTT-calibrated early stop over Strong), coba_search (Optuna TPE over "
                             "CoBa's parameters) or route_search (Optuna TPE over the routing policies' parameters, "
                             "--env route); rollout, stop_gate, coba_search and route_search run with --lodo only; "
                             "coba train KIND --help shows that kind's options")
    parser.add_argument("--pool", default=None, metavar="POOL",
                        help="pool directory or simulator profile ('paper', 'tiny'); default: the paper pool")
    parser.add_argument("--lodo", action="store_true",
                        help="run the learning protocol (docs/LEARNING.md): leave-one-dataset-out with nested "
                             "selection, 3 seeds, the verdict against CoBa-Routed-Strong")
    parser.add_argument("--lambdas", type=lambda_list, default=None, metavar="L1,L2,...",
                        help="training lambdas without --lodo (mlp: every visited state is labelled at each; ppo: "
                             "lambda is drawn per episode between their min and max); default: mlp "
                             "0.02,0.05,0.1,0.2,0.3,0.5,1, ppo its own lambda range (train/ppo.py). Under --lodo the "
                             "method's grid, stated in advance, is used")
    parser.add_argument("--env", default="replay", choices=("replay", "route"),
                        help="with --lodo: the env the protocol runs on: replay (one generator per episode, judged "
                             "against CoBa-Routed-Strong) or route (one episode per problem, every generator, judged "
                             "against the consistency cascade); default: replay")
    parser.add_argument("--seeds", type=seed_list, default=None, metavar="S1,S2,...",
                        help="with --lodo: the protocol's seeds (default: 0,1,2)")
    parser.add_argument("--held-out", default=None, metavar="DS1,DS2",
                        help="with --lodo: only these held-out datasets (default: every dataset)")
    parser.add_argument("--cost", default="p_tokens", choices=COST_CHOICES,
                        help="cost model of the reward (default: p_tokens)")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed without --lodo; a fixed seed reproduces the run (default: 0; --lodo takes --seeds)")
    parser.add_argument("--rounds", type=non_negative_int, default=None, metavar="R",
                        help="mlp: DAgger rounds after the oracle round (default: 4)")
    parser.add_argument("--epochs", type=positive_int, default=None, metavar="E", help="mlp: epochs per round (default: 20)")
    parser.add_argument("--episodes-per-round", type=positive_int, default=None, metavar="K",
                        help="mlp: episodes rolled out per round (default: 1200)")
    parser.add_argument("--loss", default=None, choices=("q", "ce"),
                        help="mlp: 'q' regresses the oracle's action values (default), 'ce' clones its actions "
                             "with class weights")
    parser.add_argument("--targets", default=None, choices=("rollout", "oracle"),
                        help="mlp: action values after round 0 from the learner's own continuation (rollout, "
                             "default) or from the cost-aware oracle (oracle)")
    parser.add_argument("--timesteps", type=positive_int, default=None, metavar="T",
                        help=f"ppo: total timesteps (default: {PPO_DEFAULT_TIMESTEPS}); PPO collects whole rollouts "
                             "(1024 envs x up to 16 steps), so a count that is not a multiple of the rollout "
                             "rounds up, and the run says so")
    parser.add_argument("--out", default="train-out", metavar="DIR",
                        help="output: the checkpoint directory, or with --lodo the tables and checkpoints "
                             "(default: train-out)")
    parser.add_argument("--force", action="store_true",
                        help="replace --out if it holds a previous coba-env result (a folder holding anything else "
                             "is never replaced)")
    add_ray_address(parser, "with --lodo, the protocol's outer folds (one per seed and held-out dataset) run as Ray tasks on that cluster; the results equal the local run's")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict:
    if args.kind == "mlp":
        opts = {"dagger_rounds": args.rounds, "epochs": args.epochs, "episodes_per_round": args.episodes_per_round,
                "loss": args.loss, "targets": args.targets}
        if args.timesteps is not None:
            raise UsageError("--timesteps applies to ppo only")
    else:
        opts = {"total_timesteps": args.timesteps} if args.kind == "ppo" else {}
        used = [o for o, v in (("--rounds", args.rounds), ("--epochs", args.epochs),
                               ("--episodes-per-round", args.episodes_per_round), ("--loss", args.loss),
                               ("--targets", args.targets)) if v is not None]
        if used:
            raise UsageError(f"{', '.join(used)} apply to mlp only")
        if args.kind != "ppo" and args.timesteps is not None:
            raise UsageError("--timesteps applies to ppo only")
    return {k: v for k, v in opts.items() if v is not None}


def protocol_method(kind: str, env: str = "replay") -> object:
    """The protocol ``Method`` of ``kind`` on ``env`` with the protocol's settings (``PROTOCOL_METHODS``)."""
    import importlib

    where = PROTOCOL_METHODS.get((env, kind))
    if where is None:
        kinds = ", ".join(k for e, k in PROTOCOL_METHODS if e == env)
        raise UsageError(f"{kind} has no protocol method on the {env} env; there: {kinds}")
    module_name, class_name = where
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise UsageError(f"{kind} on the {env} env needs {module_name.replace('.', '/')}.py, which this checkout "
                         "does not have") from None
    return getattr(module, class_name)()


def run_lodo_protocol(args: argparse.Namespace, options: dict, out: Path) -> int:
    """``--lodo``: run the learning protocol and print its verdict and table."""
    from coba_env.env import as_compiled
    from train.protocol import SEEDS, run_protocol
    from train.protocol_arena import arena_named
    from train.protocol_stats import stats_markdown

    if args.lambdas is not None:
        raise UsageError("--lambdas does not apply with --lodo: the protocol uses the method's grid, stated in advance")
    if args.seed is not None:
        raise UsageError("--seed does not apply with --lodo: the protocol's seeds are --seeds (default: 0,1,2)")
    if options:
        flags = {"dagger_rounds": "--rounds", "epochs": "--epochs", "episodes_per_round": "--episodes-per-round",
                 "loss": "--loss", "targets": "--targets", "total_timesteps": "--timesteps"}
        raise UsageError(f"{', '.join(flags[k] for k in options)}: --lodo runs the protocol's settings, stated in "
                         "advance (train/protocol_mlp.py, train/ppo_method.py); they cannot be changed per run")
    if args.cost != "p_tokens":
        raise UsageError("--lodo: the protocol's cost model is p_tokens")
    method = protocol_method(args.kind, args.env)  # before any work: a kind the env has no method for is one line
    fold_map = map
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
                                                        progress=not args.no_progress, held_out=held,
                                                        fold_map=fold_map, pool_name=pool_name,
                                                        arena=arena), marker="lodo")
    print(stats_markdown(result.stats))
    print()
    if held is not None:
        print(f"partial run (held out: {', '.join(held)}): the verdict covers these datasets only")
    print(result.verdict["text"])
    print(f"protocol done in {result.seconds:.0f} s; tables in {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Train (or run leave-one-dataset-out) for parsed ``args``; bad input exits 2."""
    from coba_env.env import as_compiled

    options = _options(args)
    if not args.lodo and (args.seeds is not None or args.held_out is not None or args.ray_address is not None):
        raise UsageError("--seeds, --held-out and --ray-address need --lodo")
    if not args.lodo and args.env != "replay":
        raise UsageError("--env route needs --lodo: route-env controllers are trained under the protocol")
    require_ray(args.ray_address)
    if args.kind in ("rollout", *PROTOCOL_ONLY_KINDS) and not args.lodo:
        raise UsageError(f"{args.kind} trains under the protocol only: add --lodo")
    out = check_output_dir(args.out, force=args.force, option="--out", inputs=[args.pool],  # before any work
                           kind="lodo" if args.lodo else "checkpoint")
    if args.lodo:
        return run_lodo_protocol(args, options, out)
    compiled = as_compiled(args.pool)
    from coba_env.rules.config import check_cost_model_priced

    try:  # before any work: a usd reward needs the pool's prices
        check_cost_model_priced(compiled, args.cost)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    lambdas = args.lambdas
    from train.lodo import train_kind

    def train(folder: Path) -> None:
        train_kind(args.kind, compiled, folder, lambdas=lambdas, cost_model=args.cost, seed=0 if args.seed is None else args.seed,
                   progress=not args.no_progress, options=options)

    try:
        if args.kind == "ppo":
            # PPO writes loadable snapshots while it trains (an interrupted run keeps them), so it trains in
            # place; the folder was checked above and is marked as ours when training ends.
            train(out)
            mark_output(out, "checkpoint")
        else:
            atomic_dir(out, train, marker="checkpoint")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    from pools.default import DEFAULT_SPEC

    pool = args.pool if args.pool is not None else DEFAULT_SPEC
    print(f"checkpoint: {out} (evaluate with: coba bench --pool {shlex.quote(str(pool))} "
          f"--policies {shlex.quote(f'main,{out}')})")
    return 0
