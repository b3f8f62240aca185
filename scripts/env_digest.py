"""A sha256 over everything the envs return on seeded random walks: speed work must leave it unchanged.

For each pool (the paper and ladder simulator pools, and synthetic pools with 3 generators and 5 or 0 verifiers)
and each env (coba/Replay-v0 and coba/Route-v0, one episode at a time, and their vector twins), the walk takes
uniform random legal actions from a seeded generator and hashes every observation (its float32 bytes), reward,
termination flag and mask, and at each episode end the final info (selection, correctness, every cost, the
action names, the per-generator samples and spend of a route episode, and the whole trace of every 25th
episode). Run it before and after a change and compare the printed lines.

Usage: python scripts/env_digest.py [--steps 20000] [--vector-steps 150] [--num-envs 256]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import coba_env  # noqa: F401  (registers the envs)
from coba_env import compile_pool
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool

#: Env arguments walked on every pool: the defaults, and another cost model with a hard budget and a lambda range.
CONFIGS = ({}, {"cost_model": "tokens", "max_cost": 6000.0, "lambda_range": (0.0, 0.5)})


def pools() -> dict[str, object]:
    """The pools walked: simulator profiles, and synthetic layouts when the tests' factory is importable."""
    out = {"paper": compile_pool(resolve_pool("paper")), "ladder": compile_pool(resolve_pool("ladder"))}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conftest import make_synthetic_pool

    generators = {"tiny-1.5B": 1.5, "mid-7B": 7.0, "big-72B": 72.0}
    verifiers = {"judge-s": ("Judge-1.5B", 1.5, "cheap_judge"), "prm": ("PRM-7B", 7.0, "process_judge"),
                 "rm": ("RM-72B", 72.0, "reward_model"), "judge-l": ("Judge-8B", 8.0, "cheap_judge"),
                 "verifier": ("Verifier-14B", 14.0, "strong_verifier")}
    for n_verifiers in (5, 0):
        pool = make_synthetic_pool({"d1": 4, "d2": 3}, generators, n_candidates=16, seed=n_verifiers,
                                   verifiers=dict(list(verifiers.items())[:n_verifiers]))
        out[f"synthetic-3g-{n_verifiers}v"] = compile_pool(pool)
    return out


def single_digest(env: gym.Env, n_steps: int, seed: int) -> str:
    """sha256 of a random legal walk of a one-episode env."""
    h = hashlib.sha256()
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    h.update(obs.tobytes())
    episodes = 0
    for _ in range(n_steps):
        legal = np.flatnonzero(info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(int(legal[int(rng.random() * len(legal))]))
        h.update(obs.tobytes())
        h.update(repr((float(reward), terminated, truncated)).encode())
        h.update(np.asarray(info["action_mask"]).tobytes())
        if terminated:
            final = {k: info.get(k) for k in ("selected_candidate", "selected_answer", "correct", "costs", "actions",
                                              "episode", "samples_by_generator", "spend_by_generator",
                                              "selected_generator", "lambda")}
            h.update(repr(final).encode())
            if episodes % 25 == 0:
                h.update(repr(info["trace"].to_list()).encode())
            episodes += 1
            obs, info = env.reset()
            h.update(obs.tobytes())
    return h.hexdigest()[:16]


def vector_digest(venv: CoBaVectorEnv, n_steps: int, seed: int) -> str:
    """sha256 of a random legal walk of a vector env (every array it returns)."""
    h = hashlib.sha256()
    rng = np.random.default_rng(seed)
    obs, info = venv.reset(seed=seed)
    h.update(obs.tobytes())
    for _ in range(n_steps):
        mask = info["action_mask"]
        pick = rng.random(venv.num_envs)
        actions = np.array([np.flatnonzero(m)[int(u * m.sum())] for m, u in zip(mask, pick, strict=True)])
        obs, reward, terminated, truncated, info = venv.step(actions)
        for x in (obs, reward, terminated, truncated):
            h.update(np.ascontiguousarray(x).tobytes())
        for key in sorted(info):
            h.update(key.encode())
            h.update(np.ascontiguousarray(info[key]).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    """Print one digest line per (pool, config, env)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="one-episode env steps per walk (default 20000)")
    parser.add_argument("--vector-steps", type=int, default=150, help="batched steps per vector walk (default 150)")
    parser.add_argument("--num-envs", type=int, default=256, help="sub-envs of the vector walks (default 256)")
    args = parser.parse_args()
    for name, pool in pools().items():
        for k, config in enumerate(CONFIGS):
            for env_id, grouping in (("coba/Replay-v0", "pair"), ("coba/Route-v0", "item")):
                if env_id == "coba/Route-v0" and len(set(pool.generator)) < 2:
                    continue
                single = single_digest(gym.make(env_id, pool=pool, **config), args.steps, seed=k)
                batched = vector_digest(CoBaVectorEnv(args.num_envs, pool, grouping=grouping, **config),
                                        args.vector_steps, seed=k)
                print(f"{name:20s} config {k} {env_id:15s} single {single}  vector {batched}", flush=True)


if __name__ == "__main__":
    main()
