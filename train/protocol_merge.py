"""One protocol run from its seeds run apart: the per-seed output folders of a protocol merged into the tables
the run over every seed would have written.

Every (seed, fold) of both protocols is computed from its seed alone (the folds, the fits, the held-out replay),
and the statistics only read the stacked per-seed results, so running each seed as its own process and merging
gives the same tables as one run over all seeds: what makes the protocol fit the time on a shared 2-core machine.

- ``merge_lodo``: the leave-one-dataset-out protocol (``coba train KIND --lodo --seeds S``, ``train.protocol``):
  the held-out records (``episodes.csv``), inner tables and choices of every seed, then ``compare_seeds`` and the
  verdict over all of them.
- ``merge_kfold``: the K-fold routing protocol (``scripts/routing_protocol.py --seeds S [--routers ...]``,
  ``train.protocol_kfold``): every held-out switch lambda (``scores.csv``) and setting, then its statistics; a
  (seed, router) run in two folders (the prior router runs beside every router set) must hold equal scores.

Floats are read back exactly (pandas' round-trip parser).

Usage: python -m train.protocol_merge {lodo,kfold} DIR [DIR ...] --out OUT [--pool POOL]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from pools.atomic_write import atomic_dir
from pools.errors import PoolError
from pools.output_paths import check_output_dir


def _csv(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():  # pandas 3 deprecates the option (its default reads floats back exactly too)
        warnings.simplefilter("ignore")
        return pd.read_csv(path, float_precision="round_trip")


def _protocol_json(folder: Path) -> dict[str, Any]:
    path = folder / "protocol.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no protocol.json (not a finished protocol run)")
    return json.loads(path.read_text())


def merge_lodo(folders: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """The LODO protocol's tables over the seeds of ``folders`` (one finished run each, same method, pool and
    folds), written to ``out``; returns the verdict."""
    from train import protocol_stats
    from train.protocol import ProtocolResult
    from train.protocol_arena import arena_named

    runs = [(Path(f), _protocol_json(Path(f))) for f in folders]
    first = runs[0][1]
    method, v0 = first["method"], first["verdict"]
    for folder, meta in runs[1:]:
        v = meta["verdict"]
        if (meta["method"], v["pool"], v["folds"], v["env"], meta["cost_unit"]) != \
                (method, v0["pool"], v0["folds"], v0["env"], first["cost_unit"]):
            raise ValueError(f"{folder}: another method, pool, fold set, env or cost unit than {runs[0][0]}")
    seeds = tuple(int(s) for _, m in runs for s in m["verdict"]["seeds"])
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"the folders repeat a seed: {seeds}")
    arena = arena_named(v0["env"])
    records = pd.concat([_csv(f / "episodes.csv") for f, _ in runs], ignore_index=True)
    inner = pd.concat([_csv(f / "inner.csv") for f, _ in runs], ignore_index=True)
    chosen = pd.concat([_csv(f / "chosen.csv") for f, _ in runs], ignore_index=True)
    stats = protocol_stats.compare_seeds(records, method, arena.reference)
    coverage = protocol_stats.Coverage(pool=v0["pool"], seeds=seeds, folds=tuple(v0["folds"]),
                                       all_folds=tuple(v0["folds"]) + tuple(v0["missing_folds"]), env=arena.env,
                                       reference=arena.reference)
    verdict = protocol_stats.verdict(stats, method, coverage, ratio_high_max=arena.ratio_high_max)
    timings = {k: t for _, m in runs for k, t in m["timings"].items()}
    result = ProtocolResult(method=method, records=records, inner=inner, chosen=chosen, stats=stats, verdict=verdict,
                            seconds=float(sum(m["seconds"] for _, m in runs)), cost_unit=float(first["cost_unit"]),
                            timings=timings, arena=arena)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    protocol_stats.write_tables(result, target)
    return verdict


def merge_kfold(pool: str | Path, folders: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """The K-fold routing protocol's tables over the seeds of ``folders`` (finished runs of
    ``scripts/routing_protocol.py`` on ``pool``, each with its own seeds), written to ``out``; returns the
    verdict."""
    from coba_env.env import as_compiled
    from coba_env.splits import fold_strata
    from train import protocol_kfold_stats as stats
    from train.protocol_kfold import REFERENCE, SEEDS, K, KFoldRun, pool_outcomes

    compiled = as_compiled(pool)
    metas = [_protocol_json(Path(f)) for f in folders]
    cost_model = metas[0]["cost_model"]
    if any(m["cost_model"] != cost_model or m["k"] != K for m in metas):
        raise ValueError(f"the folders differ in cost model or K (expected {cost_model}, K = {K})")
    outcomes = pool_outcomes(compiled, cost_model)
    keys = outcomes.problems[["dataset", "item_id"]].astype(str).reset_index(drop=True)
    scores: dict[tuple[int, str], np.ndarray] = {}
    for folder in folders:
        table = _csv(Path(folder) / "scores.csv")
        for (seed, kind), part in table.groupby(["seed", "router"], sort=False):
            if not part[["dataset", "item_id"]].astype(str).reset_index(drop=True).equals(keys):
                raise ValueError(f"{folder}/scores.csv: items of {kind} seed {seed} are not the pool's, in order")
            values = part["switch_lambda"].to_numpy(dtype=np.float64)
            if (int(seed), str(kind)) in scores and not np.array_equal(scores[int(seed), str(kind)], values):
                raise ValueError(f"{folder}: seed {seed} of {kind} is in two folders with different scores")
            scores[int(seed), str(kind)] = values  # the same router and seed run twice (the prior) is one
    settings = pd.concat([_csv(Path(f) / "settings.csv") for f in folders], ignore_index=True)
    settings = settings.drop_duplicates(["seed", "fold", "router"], ignore_index=True)
    seeds = tuple(dict.fromkeys(int(s) for s, _ in scores))
    kinds = list(dict.fromkeys(settings["router"].astype(str)))
    run = KFoldRun(outcomes=outcomes, kinds=kinds, seeds=seeds, scores=scores, settings=settings,
                   strata=fold_strata(compiled)[0], cost_model=cost_model,
                   seconds=float(sum(m["seconds"] for m in metas)), reference=REFERENCE)
    table = stats.routing_stats(run)
    verdict = stats.verdict(table, run, pool_name=metas[0]["pool"], k=K, full=set(seeds) >= set(SEEDS))
    stats.write_tables(run, table, verdict, Path(out))
    return verdict


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit 2 (bad input), never a traceback."""
    print(f"protocol_merge: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse, merge, print the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", choices=("lodo", "kfold"), help="which protocol the folders are runs of")
    parser.add_argument("folders", nargs="+", help="finished per-seed runs")
    parser.add_argument("--out", required=True, help="output folder for the merged tables (new or empty)")
    parser.add_argument("--pool", help="kfold: the pool directory the runs read")
    args = parser.parse_args(argv)
    if args.protocol == "kfold" and not args.pool:
        _fail("--pool is required with kfold")
    try:  # the project's own --out rules (project-made folders only, never an input), then write aside and swap in
        out = check_output_dir(args.out, force=False, option="--out", inputs=[*args.folders, args.pool])
        if args.protocol == "lodo":
            verdict = atomic_dir(out, lambda tmp: merge_lodo(args.folders, tmp), marker="lodo")
        else:
            verdict = atomic_dir(out, lambda tmp: merge_kfold(args.pool, args.folders, tmp), marker="kfold")
    except (PoolError, ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    except KeyError as exc:  # a protocol.json without a field the merge reads: another protocol's run, or unfinished
        _fail(f"a folder's protocol.json has no {exc}; expected finished {args.protocol} runs (one per seed)")
    print((out / "verdict.md").read_text())
    print(verdict["text"])


if __name__ == "__main__":
    main()
