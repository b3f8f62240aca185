"""Where a coba/Route-v0 step's time goes: the bench loop's CPU time per step with one piece of the env stubbed out.

Each ablation replaces one piece with a stub (so the episodes it plays are wrong; only the time is of interest)
and runs the loop of scripts/bench_env.py (uniform random legal actions, reset on episode end) against CartPole
in the same process:

- none: the env as it is;
- rank: the fusion-rank refreshes (SAMPLE's whole list, VERIFY's one candidate; VERIFY then finds no target);
- observe: the pooled features recomputed after a SAMPLE (a fixed list instead);
- pack: the float32 packing of the observation (a copy of a fixed array instead);
- final_info: the final info of a STOP (the mask alone instead);
- policy: the loop's random legal policy alone (no step), the same for every env.

Usage: python scripts/ablate_route_step.py [--steps 150000] [--repeats 3] [ABLATION ...]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import coba_env  # noqa: F401  (registers coba/Route-v0)
import coba_env.env as env_module
from coba_env import compile_pool
from pools.default import resolve_pool

ABLATIONS = ("none", "rank", "observe", "pack", "final_info", "policy")


def stub(ablation: str) -> None:
    """Replace the piece ``ablation`` names with a stub, in this process."""
    if ablation == "rank":
        env_module.refresh_rank = lambda ev: None
        env_module.refresh_rank_of = lambda ev, c: None
    elif ablation == "observe":
        fixed = [0.0] * 21
        env_module.observe = lambda ev, *args: fixed
    elif ablation == "pack":
        zeros = np.zeros(42, np.float32)
        env_module.CoBaEnv._as_block_observation = lambda self, obs: zeros.copy()
    elif ablation == "final_info":
        env_module.CoBaEnv._final_info = lambda self, selected, correct: {"action_mask": self._mask.copy()}


def seconds_per_step(env: gym.Env, uniform: np.ndarray, n_actions: int, step: bool = True) -> float:
    """CPU seconds per step of the bench loop (``step=False``: the random legal policy alone)."""
    all_legal = np.ones(n_actions, dtype=np.int8)
    _, info = env.reset(seed=0)
    start = time.process_time()
    for u in uniform:
        legal = np.flatnonzero(info.get("action_mask", all_legal))
        action = int(legal[int(u * len(legal))])
        if step:
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                _, info = env.reset()
    return (time.process_time() - start) / len(uniform)


def main() -> None:
    """Print µs per step of the route env and of CartPole under each ablation (one process per ablation)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ablations", nargs="*", default=list(ABLATIONS), help=f"any of {', '.join(ABLATIONS)}")
    parser.add_argument("--steps", type=int, default=150_000, help="steps per measurement (default 150000)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per ablation; medians (default 3)")
    args = parser.parse_args()
    unknown = set(args.ablations) - set(ABLATIONS)
    if unknown:
        parser.error(f"unknown ablation(s) {sorted(unknown)}; expected any of {list(ABLATIONS)}")
    if len(args.ablations) > 1:  # stubs are process-wide: one process per ablation
        import subprocess
        import sys

        for ablation in args.ablations:
            subprocess.run([sys.executable, __file__, ablation, "--steps", str(args.steps), "--repeats",
                            str(args.repeats)], check=True)
        return
    ablation = args.ablations[0]
    stub(ablation)
    route = gym.make("coba/Route-v0", pool=compile_pool(resolve_pool("paper")))
    cartpole = gym.make("CartPole-v1")
    uniform = np.random.default_rng(0).random(args.steps)
    rows = [(seconds_per_step(route, uniform, 7, step=ablation != "policy"), seconds_per_step(cartpole, uniform, 2))
            for _ in range(args.repeats)]
    route_us, cartpole_us = (1e6 * float(np.median(column)) for column in zip(*rows, strict=True))
    print(f"{ablation:11s} route {route_us:6.2f} µs/step   CartPole {cartpole_us:6.2f} µs/step", flush=True)


if __name__ == "__main__":
    main()
