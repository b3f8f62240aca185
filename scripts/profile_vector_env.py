"""Where CoBaVectorEnv's time goes: milliseconds per batched step for each part of ``step``.

Steps the vector env with the same uniform random legal actions as scripts/bench_env.py and times each method
(SAMPLE, VERIFY, fusion ranks, observations, masks, resets, STOP selection) with ``time.perf_counter``
wrappers. Wall-clock figures on a shared machine are noisy: compare versions back to back.

Usage: python scripts/profile_vector_env.py [--pool paper] [--env replay|route] [--num-envs 16384] [--steps 300]
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np
from bench_env import legal_action_table  # scripts/ is sys.path[0] when run as a script

from coba_env import compile_pool
from coba_env.vector_env import CoBaVectorEnv
from pools.default import resolve_pool

SECTIONS = ("_sample", "_verify", "_fusion", "_observations", "_masks", "_reset_rows", "_select", "_next_episodes")


def main() -> None:
    """Print ms per batched step for each section of CoBaVectorEnv.step."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default="paper", help="pool directory or simulator profile (default: paper)")
    parser.add_argument("--env", choices=("replay", "route"), default="replay",
                        help="CoBaVectorEnv with the pair grouping (replay) or the item grouping (route); "
                             "default: replay")
    parser.add_argument("--num-envs", type=int, default=16384, help="sub-envs (default: 16384)")
    parser.add_argument("--steps", type=int, default=300, help="timed batched steps after 20 warm-up steps")
    args = parser.parse_args()
    grouping = {"replay": "pair", "route": "item"}[args.env]
    venv = CoBaVectorEnv(args.num_envs, compile_pool(resolve_pool(args.pool)), grouping=grouping)
    spent: dict[str, float] = collections.defaultdict(float)
    for name in SECTIONS:
        method = getattr(venv, name)

        def timed(*a, _method=method, _name=name, **k):
            start = time.perf_counter()
            out = _method(*a, **k)
            spent[_name] += time.perf_counter() - start
            return out

        setattr(venv, name, timed)
    n_actions = int(venv.single_action_space.n)
    count, legal = legal_action_table(n_actions)  # bench_env's action rule
    legal_flat = legal.ravel()
    rng = np.random.default_rng(0)
    _, info = venv.reset(seed=0)
    total = 0.0
    taken = np.zeros(n_actions)
    for i in range(args.steps + 20):
        if i == 20:
            spent.clear()
            total, taken[:] = 0.0, 0
        bits = np.packbits(info["action_mask"], axis=1, bitorder="little")[:, 0]
        pick = (rng.random(venv.num_envs) * count.take(bits)).astype(np.int64)
        actions = legal_flat.take(bits.astype(np.int64) * n_actions + pick)
        start = time.perf_counter()
        _, _, _, _, info = venv.step(actions)
        total += time.perf_counter() - start
        taken += np.bincount(actions, minlength=n_actions)
    per_step = 1e3 / args.steps
    print(f"{args.num_envs} sub-envs, {args.steps} batched steps; action shares "
          + ", ".join(f"{n} {s:.2f}" for n, s in zip(venv.single.actions, taken / taken.sum(), strict=True)))
    print(f"step total      {total * per_step:6.2f} ms  ({total / args.steps / args.num_envs * 1e6:.2f} µs per env-step)")
    for name in SECTIONS:
        print(f"  {name:14s}{spent[name] * per_step:6.2f} ms")
    inner = sum(spent[n] for n in SECTIONS if n not in ("_select", "_next_episodes"))  # those run inside _reset/STOP
    print(f"  {'rest':14s}{(total - inner) * per_step:6.2f} ms  (bookkeeping in step, STOP selection included)")


if __name__ == "__main__":
    main()
