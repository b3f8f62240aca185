"""``coba train mlp|ppo``: train a learned routing controller, on a whole pool or leave-one-dataset-out."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from coba_cli.arg_types import (
    COST_CHOICES,
    add_ray_address,
    lambda_list,
    non_negative_int,
    positive_int,
    require_ray,
    seed_int,
)
from coba_cli.errors import UsageError
from pools.atomic_write import atomic_dir, mark_output
from pools.output_paths import check_output_dir

#: ``train.ppo.train_ppo``'s default ``total_timesteps`` (not imported: that would load torch for --help).
PPO_DEFAULT_TIMESTEPS = 200_000


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``coba train``."""
    parser = subparsers.add_parser(
        "train", help="train a learned routing controller (MLP by oracle imitation, or MaskablePPO)",
        description="Train a lambda-conditioned routing controller on a candidate pool. 'mlp' imitates the "
        "cost-aware oracle with DAgger rollouts; 'ppo' runs sb3-contrib MaskablePPO. With --lodo, one controller "
        "per held-out dataset is trained on the other datasets and evaluated beside CoBa and the baselines "
        "(tables, paired bootstrap, action mix, frontier, verdict in --out).")
    parser.add_argument("kind", choices=("mlp", "ppo"), help="controller kind: mlp (imitation) or ppo (RL)")
    parser.add_argument("--pool", default=None, metavar="POOL",
                        help="pool directory or simulator profile ('paper', 'tiny'); default: the paper pool")
    parser.add_argument("--lodo", action="store_true",
                        help="leave-one-dataset-out: train per held-out dataset and evaluate on it")
    parser.add_argument("--lambdas", type=lambda_list, default=None, metavar="L1,L2,...",
                        help="training lambdas (mlp: every visited state is labelled at each; ppo: lambda is drawn "
                             "per episode between their min and max); default: mlp 0.02,0.05,0.1,0.2,0.3,0.5,1, ppo its own "
                             "lambda range (train/ppo.py)")
    parser.add_argument("--eval-lambdas", type=lambda_list, default=None, metavar="L1,L2,...",
                        help="with --lodo: lambdas the learned controller is evaluated at (its frontier); "
                             "default: 0.01,0.03,0.05,0.1,0.2,0.3,0.5,1")
    parser.add_argument("--held-out", default=None, metavar="DS1,DS2",
                        help="with --lodo: only these held-out datasets (default: every dataset)")
    parser.add_argument("--cost", default="p_tokens", choices=COST_CHOICES,
                        help="cost model of the reward (default: p_tokens)")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed; a fixed seed reproduces the run (default: 0)")
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
    add_ray_address(parser, "with --lodo, the folds (one per held-out dataset) run as Ray tasks on that cluster")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict:
    if args.kind == "mlp":
        opts = {"dagger_rounds": args.rounds, "epochs": args.epochs, "episodes_per_round": args.episodes_per_round,
                "loss": args.loss, "targets": args.targets}
        if args.timesteps is not None:
            raise UsageError("--timesteps applies to ppo only")
    else:
        opts = {"total_timesteps": args.timesteps}
        used = [o for o, v in (("--rounds", args.rounds), ("--epochs", args.epochs),
                               ("--episodes-per-round", args.episodes_per_round), ("--loss", args.loss),
                               ("--targets", args.targets)) if v is not None]
        if used:
            raise UsageError(f"{', '.join(used)} apply to mlp only")
    return {k: v for k, v in opts.items() if v is not None}


def _ray_option(run_lodo: object, address: str | None) -> dict[str, str]:
    """``{"ray_address": address}`` for ``run_lodo`` (none without an address); a ``run_lodo`` that does not take
    it yet (the fold spreading lands with train/lodo.py's rewrite) is refused with one line."""
    if address is None:
        return {}
    import inspect

    if "ray_address" not in inspect.signature(run_lodo).parameters:  # type: ignore[arg-type]
        raise UsageError("--ray-address: this build's leave-one-dataset-out runs its folds locally only; "
                         "run without --ray-address")
    return {"ray_address": address}


def run(args: argparse.Namespace) -> int:
    """Train (or run leave-one-dataset-out) for parsed ``args``; bad input exits 2."""
    from coba_env.env import as_compiled

    options = _options(args)
    if not args.lodo and (args.eval_lambdas is not None or args.held_out is not None
                          or args.ray_address is not None):
        raise UsageError("--eval-lambdas, --held-out and --ray-address need --lodo")
    require_ray(args.ray_address)
    out = check_output_dir(args.out, force=args.force, option="--out", inputs=[args.pool],  # before any work
                           kind="lodo" if args.lodo else "checkpoint")
    compiled = as_compiled(args.pool)
    lambdas = args.lambdas
    if args.lodo:
        from train.lodo import run_lodo
        from train.sweep import DEFAULT_EVAL_LAMBDAS

        datasets = list(dict.fromkeys(compiled.dataset.tolist()))
        held = None
        if args.held_out is not None:
            held = [d.strip() for d in args.held_out.split(",") if d.strip()]
            bad = [d for d in held if d not in datasets]
            if bad:
                raise UsageError(f"--held-out: unknown dataset(s) {bad}; the pool has {datasets}")
        from coba_env.parallel import RayUnavailable

        ray_option = _ray_option(run_lodo, args.ray_address)  # before any work
        try:
            result = atomic_dir(out, lambda tmp: run_lodo(
                compiled, tmp, kinds=[args.kind], lambdas=lambdas,
                eval_lambdas=args.eval_lambdas or DEFAULT_EVAL_LAMBDAS, cost_model=args.cost, seed=args.seed,
                progress=not args.no_progress, train_options={args.kind: options}, held_out=held, **ray_option),
                marker="lodo")
        except RayUnavailable as exc:
            raise UsageError(str(exc)) from exc
        v = result.get("verdict")
        print(f"leave-one-dataset-out done in {result['seconds']:.0f} s; tables in {args.out}")
        if v:
            print(f"not dominated by {v['reference']}: {v['met']} (see {args.out}/verdict.md)")
        return 0
    from train.lodo import train_kind

    def train(folder: Path) -> None:
        train_kind(args.kind, compiled, folder, lambdas=lambdas, cost_model=args.cost, seed=args.seed,
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
