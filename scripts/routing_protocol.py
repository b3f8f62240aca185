"""Run the K-fold routing protocol (docs/ROUTING.md, "Protocol") for every router of its table on one pool.

Usage: python scripts/routing_protocol.py POOL_DIR --out DIR [--routers knn_router,mf_router,...] [--seeds 0,1,2]

POOL_DIR: a two-generator pool such as the imported routellm-gsm8k or routellm-mmlu. Writes the protocol's tables
(stats.md, references.md, verdict.md, protocol.json, settings.csv, scores.csv) to DIR (a new or empty folder, or
one this script wrote) and prints the verdict and the tables. ``coba train ROUTER_KIND --kfold`` runs the same
protocol for one router kind.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coba_env.env import as_compiled
from train.protocol_kfold import ROUTERS, SEEDS, run_kfold


def main() -> None:
    """Parse, run every router's folds, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", help="a two-generator pool directory")
    parser.add_argument("--out", required=True, help="output folder for the tables")
    parser.add_argument("--routers", default=",".join(ROUTERS), help=f"router kinds (default: {','.join(ROUTERS)})")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="seeds (default: 0,1,2)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / "protocol.json").is_file():
        raise SystemExit(f"--out {out}: holds files this script did not write; choose a new folder")
    routers = [r for r in args.routers.split(",") if r]
    seeds = tuple(int(s) for s in args.seeds.split(",") if s)
    verdict = run_kfold(as_compiled(args.pool), routers, out_dir=out, seeds=seeds, progress=not args.no_progress,
                        pool_name=args.pool)
    print((out / "verdict.md").read_text())
    print(f"{verdict['items']} items, weak {verdict['weak']}, strong {verdict['strong']}, cost {verdict['cost_model']}, "
          f"strata {verdict['strata']}; {verdict['seconds']:.0f} s")


if __name__ == "__main__":
    main()
