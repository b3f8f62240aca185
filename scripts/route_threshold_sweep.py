"""Trace a threshold router's curve on a pool's route episodes: accuracy against the share of strong-model calls.

Usage: python scripts/route_threshold_sweep.py [--pool paper] [--policy route_threshold_judge] [--cost p_tokens]
Replays the router (``agents.routing_threshold``) at each threshold of ``eval.route_analysis.THRESHOLDS`` on
``coba/Route-v0`` and prints, per threshold, the share of problems calling its strong generator, the accuracy
and the mean cost; then CPT(50%), CPT(80%) and APGR of that curve, of the random router and of the oracle router
between the router's weak and strong generators (each model's first candidate; ``eval.routing_metrics``).
"""

from __future__ import annotations

import argparse

from agents.registry import make_policy
from agents.routing import chosen_generator
from coba_env.compiled import as_compiled
from coba_env.route_pool import compile_route_pool
from eval import routing_metrics as rm
from eval.route_analysis import threshold_sweep


def main() -> None:
    """Sweep the threshold, print the curve and its routing figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="paper", help="pool directory or simulator profile (default: paper)")
    parser.add_argument("--policy", default="route_threshold_judge", help="a registered route_threshold policy")
    parser.add_argument("--cost", default="p_tokens", help="cost measure of the cost column (default: p_tokens)")
    args = parser.parse_args()
    policy = make_policy(args.policy)
    if getattr(policy, "kind", "") != "route_threshold":
        raise SystemExit(f"--policy {args.policy}: expected a route_threshold policy, got kind {policy.kind!r}")
    compiled = as_compiled(args.pool)
    route = compile_route_pool(compiled)
    weak, strong = chosen_generator(route, policy.params["weak"]), chosen_generator(route, policy.params["strong"])
    points = threshold_sweep(policy, compiled, cost_model=args.cost, strong=route.generators[strong])
    print(f"{args.policy} on {args.pool}: {route.pool.n_episodes} problems, weak {route.generators[weak]}, "
          f"strong {route.generators[strong]}")
    print(f"{'threshold':>9} {'strong calls':>12} {'acc %':>7} {args.cost:>12}")
    for row in points.itertuples(index=False):
        print(f"{row.threshold:>9.2f} {100 * row.strong_share:>11.1f}% {100 * row.acc:>7.2f} "
              f"{getattr(row, args.cost):>12.1f}")
    n = route.n_per_generator
    both = route.available[:, weak] & route.available[:, strong]
    weak_ok = route.pool.labels.correct[both, weak * n]
    strong_ok = route.pool.labels.correct[both, strong * n]
    curves = {"threshold router (swept)": rm.curve_from_points(points["strong_share"], points["acc"],
                                                               float(weak_ok.mean()), float(strong_ok.mean())),
              "random router": rm.random_router_curve(weak_ok, strong_ok, 0),
              "oracle router": rm.oracle_curve(weak_ok, strong_ok)}
    print(f"first candidates: weak {100 * weak_ok.mean():.2f}%, strong {100 * strong_ok.mean():.2f}%")
    for name, curve in curves.items():
        s = rm.routing_summary(curve)
        print(f"{name}: CPT(50%) {100 * s['cpt50']:.1f}%  CPT(80%) {100 * s['cpt80']:.1f}%  APGR {s['apgr']:.3f}")


if __name__ == "__main__":
    main()
