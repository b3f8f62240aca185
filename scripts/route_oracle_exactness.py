"""How often the route cost-aware oracle is exact, and how long it takes per episode.

For every route episode of a pool (default: the paper pool grouped by item, ``EnvConfig.build("paper",
grouping="item")``: one episode per problem, every generator of it) the oracle plans at each lambda (one search
serves them all, ``CostAwareOracle.plan_many``). Prints the number of episodes whose plan is not exact (the search hit its
node limit) at any lambda, per lambda, the expanded nodes, and the CPU seconds per episode (mean, median, max).
Timing uses the process's CPU time (time.process_time): the machines are shared.

Usage: python scripts/route_oracle_exactness.py [--pool paper] [--lambdas 0 0.01 0.05 0.1 0.3 1.0]
       [--n-max 16] [--node-limit N] [--limit EPISODES]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from coba_env.rules.config import EnvConfig
from train.cost_aware_oracle import DEFAULT_NODE_LIMIT, CostAwareOracle
from train.oracle_model import OracleModel

LAMBDAS = (0.0, 0.01, 0.05, 0.1, 0.3, 1.0)


def main() -> None:
    """Plan every route episode at every lambda; print exactness counts and seconds per episode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="paper")
    parser.add_argument("--lambdas", type=float, nargs="+", default=list(LAMBDAS))
    parser.add_argument("--n-max", type=int, default=None, help="N_max per generator (default: the pool's N)")
    parser.add_argument("--node-limit", type=int, default=DEFAULT_NODE_LIMIT)
    parser.add_argument("--limit", type=int, default=None, help="only the first EPISODES episodes")
    parser.add_argument("--stride", type=int, default=1, help="every STRIDE-th episode only (a quick sample)")
    parser.add_argument("--verbose", action="store_true", help="one line per slow (> 1 s) or inexact episode")
    args = parser.parse_args()

    config = EnvConfig.build(args.pool, grouping="item", n_max=args.n_max)
    route, n_max_g = config.route, config.n_max_per_generator
    oracle = CostAwareOracle(OracleModel(config), node_limit=args.node_limit)
    n_episodes = route.pool.n_episodes if args.limit is None else min(args.limit, route.pool.n_episodes)
    seconds, nodes, inexact_eps = [], [], []
    inexact_by_lam = np.zeros(len(args.lambdas), dtype=int)
    episodes = range(0, n_episodes, args.stride)
    for e in episodes:
        t0 = time.process_time()
        plans = oracle.plan_many(e, args.lambdas)
        seconds.append(time.process_time() - t0)
        oracle.clear_cache()
        nodes.append(max(p.nodes for p in plans))
        flags = np.array([not p.exact for p in plans])
        inexact_by_lam += flags
        if flags.any():
            inexact_eps.append(e)
        if args.verbose and (flags.any() or seconds[-1] > 1.0):
            print(f"  episode {e}: {seconds[-1]:.2f} s, {nodes[-1]} nodes, exact {[p.exact for p in plans]}",
                  flush=True)
    s = np.array(seconds)
    print(f"pool {args.pool}: {len(episodes)} route episodes x {len(route.generators)} generators, "
          f"N_max {n_max_g} per generator, node limit {args.node_limit}, lambdas {args.lambdas}")
    print(f"not exact: {len(inexact_eps)}/{len(episodes)} episodes (at some lambda); per lambda: "
          + ", ".join(f"{lam:g}: {int(c)}" for lam, c in zip(args.lambdas, inexact_by_lam, strict=True)))
    if inexact_eps:
        print(f"not exact episodes: {inexact_eps[:40]}{' ...' if len(inexact_eps) > 40 else ''}")
    print(f"expanded nodes per episode: mean {np.mean(nodes):.0f}, max {max(nodes)}")
    print(f"CPU seconds per episode: mean {s.mean():.4f}, median {np.median(s):.4f}, max {s.max():.3f}; "
          f"total {s.sum():.1f}")


if __name__ == "__main__":
    main()
