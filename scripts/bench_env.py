"""Environment speed, measured as ratios in one process (these machines are shared and noisy).

1. steps/s of coba/Replay-v0 and of CartPole-v1, both made with gymnasium.make and stepped with random legal
   actions chosen the same way (uniform over the action mask; CartPole's mask is all ones); target ratio >= 1.
2. steps/s of the batched CoBaVectorEnv against the single env, same pool and action rule; target >= 20x.

Timing uses the process's CPU time (time.process_time), and the measurements are interleaved, so other jobs
on a shared machine disturb the ratios as little as possible.

Usage: python scripts/bench_env.py [--pool paper] [--steps 200000] [--num-envs 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import coba_env  # noqa: F401  (registers coba/Replay-v0)
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


def vector_steps_per_second(venv: CoBaVectorEnv, n_steps: int, rng: np.random.Generator) -> float:
    """Sub-env steps per second of the vector env with uniform random legal actions."""
    _, info = venv.reset(seed=0)
    n_calls = max(n_steps // venv.num_envs, 1)
    start = time.process_time()
    for _ in range(n_calls):
        mask = info["action_mask"].astype(bool)
        # Uniform over legal actions: argmax of random keys restricted to the mask.
        keys = np.where(mask, rng.random(mask.shape), -1.0)
        _, _, _, _, info = venv.step(keys.argmax(axis=1))
    return n_calls * venv.num_envs / (time.process_time() - start)


def main() -> None:
    """Print the figures for docs/PERFORMANCE.md."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default="paper", help="pool directory or simulator profile (default: paper)")
    parser.add_argument("--steps", type=int, default=200_000, help="steps per measurement")
    parser.add_argument("--num-envs", type=int, default=1024, help="sub-envs of the vector env")
    parser.add_argument("--repeats", type=int, default=3, help="measurements; the median is reported")
    args = parser.parse_args()
    compiled = compile_pool(resolve_pool(args.pool))
    rng = np.random.default_rng(0)
    coba = gym.make("coba/Replay-v0", pool=compiled)
    cartpole = gym.make("CartPole-v1")
    venv = CoBaVectorEnv(args.num_envs, compiled)
    rows = []
    for _ in range(args.repeats):
        c = steps_per_second(coba, args.steps, rng, coba.action_space.n)
        p = steps_per_second(cartpole, args.steps, rng, cartpole.action_space.n)
        v = vector_steps_per_second(venv, args.steps * 10, rng)
        rows.append((c, p, v))
    c, p, v = np.median(np.array(rows), axis=0)
    print(f"pool: {args.pool} ({compiled.n_episodes} episodes x {compiled.n_candidates} candidates)")
    print(f"coba/Replay-v0 (gymnasium.make):  {c:12,.0f} steps/s")
    print(f"CartPole-v1 (gymnasium.make):     {p:12,.0f} steps/s")
    print(f"ratio coba / CartPole:            {c / p:12.2f}   (target >= 1.0)")
    print(f"CoBaVectorEnv x{args.num_envs}:           {v:12,.0f} steps/s")
    print(f"ratio vector / single:            {v / c:12.1f}   (target >= 20)")


if __name__ == "__main__":
    main()
