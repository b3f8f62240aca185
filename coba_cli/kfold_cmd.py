"""``coba train ROUTER_KIND --kfold``: the K-fold routing protocol of one router kind beside the prior router.

Only parses and calls ``train.protocol_kfold.run_kfold`` (docs/ROUTING.md, "Protocol"); the output folder is
checked before any work and written whole or not at all.
"""

from __future__ import annotations

import argparse

from coba_cli.errors import UsageError
from pools.atomic_write import atomic_dir
from pools.output_paths import check_output_dir


def run_kfold_protocol(args: argparse.Namespace) -> int:
    """Run the protocol for ``args.kind`` on ``args.pool``; print the verdict and table; exit 2 on bad input."""
    from coba_env.env import as_compiled
    from train.protocol_kfold import SEEDS, K, protocol_cost_model, run_kfold

    if args.workers is not None:
        raise UsageError("--workers applies to --lodo only: the K-fold routing protocol fits its folds in one process")
    given = [flag for flag, value in (("--lambdas", args.lambdas), ("--seed", args.seed), ("--datasets", args.datasets),
                                      ("--held-out", args.held_out), ("--ray-address", args.ray_address),
                                      ("--problem-features", args.problem_features), ("--folds", args.folds))
             if value is not None]
    if given:
        raise UsageError(f"{given[0]} does not apply with --kfold: the protocol states its settings in advance "
                         "(docs/ROUTING.md); --seeds chooses the seeds")
    out = check_output_dir(args.out, force=args.force, option="--out", inputs=[args.pool], kind="kfold")
    compiled = as_compiled(args.pool)
    generators = list(dict.fromkeys(compiled.generator.tolist()))
    if len(generators) != 2:
        raise UsageError(f"--kfold scores two-generator pools (APGR, CPT); the pool has {len(generators)}: "
                         f"{generators}")
    cost = protocol_cost_model(compiled)
    if args.cost not in (None, cost):  # not given: the protocol's measure is used
        raise UsageError(f"--kfold costs in the protocol's measure, {cost}, on this pool; got --cost {args.cost}")
    seeds = tuple(args.seeds) if args.seeds is not None else SEEDS
    from pools.default import DEFAULT_SPEC

    name = str(args.pool) if args.pool is not None else DEFAULT_SPEC
    try:
        verdict = atomic_dir(out, lambda tmp: run_kfold(compiled, [args.kind], out_dir=tmp, seeds=seeds, k=K,
                                                        cost_model=cost, progress=not args.no_progress,
                                                        pool_name=name), marker="kfold")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print((out / "stats.md").read_text())
    print(verdict["text"])
    print(f"protocol done in {verdict['seconds']:.0f} s; tables in {args.out}")
    return 0
