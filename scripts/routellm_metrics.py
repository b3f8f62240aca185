"""Print the model-routing reference figures of a two-generator pool (e.g. the imported routellm-gsm8k).

Usage: python scripts/routellm_metrics.py POOL_DIR [--seed 0] [--draws 200]
POOL_DIR is a pool with two generators and one candidate per episode, such as the one
``coba pools import ../shared/data/pools/routellm-gsm8k/gsm8k_responses.csv DEST --format routellm`` writes.
The weak model is the less accurate one. Prints both models' accuracies and, for the random router (the mean
of --draws random routers drawn from --seed) and the oracle, the accuracy at 0%, 10%, ..., 100% strong calls,
CPT(50%), CPT(80%) and APGR (eval.routing_metrics).
"""

from __future__ import annotations

import argparse

from eval.routing_metrics import RANDOM_ROUTER_DRAWS, oracle_curve, random_router_curve, routing_summary
from pools.store import load_pool


def main() -> None:
    """Load the pool, pick weak and strong by accuracy, print the reference curves' figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", help="pool directory with two generators")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=RANDOM_ROUTER_DRAWS)
    args = parser.parse_args()
    pool = load_pool(args.pool)
    first = pool.candidates[pool.candidates["candidate"] == 0].merge(pool.episodes, on="episode_id")
    table = first.pivot(index=["dataset", "item_id"], columns="generator", values="correct")
    if table.shape[1] != 2 or table.isna().any().any():
        raise SystemExit(f"{args.pool}: expected two generators with a known label on every item, got "
                         f"{list(table.columns)}")
    weak_name, strong_name = table.mean().sort_values().index
    weak, strong = table[weak_name].to_numpy(bool), table[strong_name].to_numpy(bool)
    print(f"{args.pool}: {len(table)} items; weak {weak_name} {weak.mean():.4f}, strong {strong_name} "
          f"{strong.mean():.4f}, at least one correct {(weak | strong).mean():.4f}")
    curves = {f"random router ({args.draws} draws, seed {args.seed})":
              random_router_curve(weak, strong, args.seed, draws=args.draws), "oracle": oracle_curve(weak, strong)}
    for name, curve in curves.items():
        s = routing_summary(curve)
        print(f"{name}: CPT(50%) {s['cpt50']:.3f}  CPT(80%) {s['cpt80']:.3f}  APGR {s['apgr']:.3f}")
        print("  accuracy at strong-call share " + "  ".join(f"{x:.1f}:{a:.4f}" for x, a in
                                                         zip(curve.shares, curve.accuracy, strict=True)))


if __name__ == "__main__":
    main()
