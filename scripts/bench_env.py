"""Environment speed, measured as ratios in one process (these machines are shared and noisy).

1. steps/s of coba/Replay-v0 and of CartPole-v1, both made with gymnasium.make and stepped with random legal
   actions chosen the same way (uniform over the action mask; CartPole's mask is all ones); target ratio >= 1.
2. env-steps/s (num_envs x batch steps) of the batched CoBaVectorEnv against the single env, same pool and
   action rule (legal[int(u * len(legal))], u uniform; for the vector env done in numpy for all sub-envs at
   once through a table indexed by each mask's bit pattern); target >= 20x.

Timing uses the process's CPU time (time.process_time). The measurements run in short interleaved rounds
(coba, CartPole, vector, ...), each round gives its own ratios, and the medians over the rounds are
printed, so a burst of load from other jobs on a shared machine disturbs one round, not the figures.

3. The same two figures for coba/Route-v0 (the item grouping: one episode per problem, one SAMPLE per generator)
   and its CoBaVectorEnv over the same pool (--env route, or --env both for all of them in the same rounds).

Usage: python scripts/bench_env.py [--pool paper] [--env replay|route|both] [--steps 20000] [--num-envs 16384]
       [--repeats 15]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import coba_env  # noqa: F401  (registers coba/Replay-v0 and coba/Route-v0)
from coba_env import compile_pool
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool


def steps_per_second(env: gym.Env, n_steps: int, rng: np.random.Generator, n_actions: int) -> float:
    """Step ``env`` ``n_steps`` times with uniform random legal actions; reset on episode end."""
    uniform = rng.random(n_steps)
    all_legal = np.ones(n_actions, dtype=np.int8)
    _, info = env.reset(seed=0)
    start = time.process_time()
    for i in range(n_steps):
        legal = np.flatnonzero(info.get("action_mask", all_legal))
        _, _, terminated, truncated, info = env.step(int(legal[int(uniform[i] * len(legal))]))
        if terminated or truncated:
            _, info = env.reset()
    return n_steps / (time.process_time() - start)


def legal_action_table(n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """For every mask bit pattern: how many actions are legal, and the legal actions in increasing order."""
    count = np.zeros(1 << n_actions, dtype=np.int64)
    legal = np.zeros((1 << n_actions, n_actions), dtype=np.int64)
    for bits in range(1 << n_actions):
        actions = [a for a in range(n_actions) if bits >> a & 1]
        count[bits] = len(actions)
        legal[bits, :len(actions)] = actions
    return count, legal


def vector_steps_per_second(venv: CoBaVectorEnv, n_steps: int, rng: np.random.Generator) -> float:
    """Sub-env steps per second of the vector env with uniform random legal actions.

    The rule is the single env's (legal[int(u * len(legal))] with legal in increasing order), done for all
    sub-envs at once: each mask row packed into its bit pattern indexes a table of the legal actions.
    """
    n_actions = int(venv.single_action_space.n)
    count, legal = legal_action_table(n_actions)
    legal_flat = legal.ravel()
    _, info = venv.reset(seed=0)
    n_calls = max(n_steps // venv.num_envs, 1)
    start = time.process_time()
    for _ in range(n_calls):
        bits = np.packbits(info["action_mask"], axis=1, bitorder="little")[:, 0]
        pick = (rng.random(venv.num_envs) * count.take(bits)).astype(np.int64)
        _, _, _, _, info = venv.step(legal_flat.take(bits.astype(np.int64) * n_actions + pick))
    return n_calls * venv.num_envs / (time.process_time() - start)


def main() -> None:
    """Print the figures for docs/PERFORMANCE.md."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default="paper", help="pool directory or simulator profile (default: paper)")
    parser.add_argument("--steps", type=int, default=20_000, help="single-env steps per round")
    parser.add_argument("--vector-steps", type=int, default=None,
                        help="vector env-steps per round (default: 20 x --steps, at least 8 batch steps)")
    parser.add_argument("--num-envs", type=int, default=16384, help="sub-envs of the vector env")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved rounds; medians are reported")
    parser.add_argument("--env", choices=("replay", "route", "both"), default="replay",
                        help="which env pair to measure against CartPole (default: replay)")
    args = parser.parse_args()
    compiled = compile_pool(resolve_pool(args.pool))
    rng = np.random.default_rng(0)
    pairs = {}
    if args.env in ("replay", "both"):
        pairs["coba/Replay-v0"] = (gym.make("coba/Replay-v0", pool=compiled), CoBaVectorEnv(args.num_envs, compiled))
    if args.env in ("route", "both"):
        pairs["coba/Route-v0"] = (gym.make("coba/Route-v0", pool=compiled),
                                  CoBaVectorEnv(args.num_envs, compiled, grouping="item"))
    cartpole = gym.make("CartPole-v1")
    vector_steps = args.vector_steps or max(20 * args.steps, 8 * args.num_envs)
    steps_per_second(cartpole, 2_000, rng, cartpole.action_space.n)  # warm-up
    for env, venv in pairs.values():
        steps_per_second(env, 2_000, rng, env.action_space.n)
        vector_steps_per_second(venv, 2 * args.num_envs, rng)
    rows: dict[str, list] = {name: [] for name in pairs}
    for _ in range(args.repeats):
        for name, (env, venv) in pairs.items():
            c = steps_per_second(env, args.steps, rng, env.action_space.n)
            p = steps_per_second(cartpole, args.steps, rng, cartpole.action_space.n)
            v = vector_steps_per_second(venv, vector_steps, rng)
            rows[name].append((c, p, v, c / p, v / c))
    print(f"pool: {args.pool} ({compiled.n_episodes} episodes x {compiled.n_candidates} candidates); "
          f"{args.repeats} interleaved rounds, medians")
    for name, (_, venv) in pairs.items():
        c, p, v, cp, vc = np.median(np.array(rows[name]), axis=0)
        low, high = np.percentile(np.array(rows[name])[:, 3], [25, 75])
        print(f"{name} (gymnasium.make):".ljust(34) + f"{c:12,.0f} steps/s")
        print(f"CartPole-v1 (gymnasium.make):     {p:12,.0f} steps/s")
        print(f"ratio {name} / CartPole:".ljust(34) + f"{cp:12.2f}   (target >= 1.0; quartiles {low:.2f}..{high:.2f})")
        print(f"{type(venv).__name__} ({venv.config.grouping}) x{args.num_envs}:".ljust(34) + f"{v:12,.0f} env-steps/s")
        print(f"ratio vector / single:            {vc:12.1f}   (target >= 20)")


if __name__ == "__main__":
    main()
