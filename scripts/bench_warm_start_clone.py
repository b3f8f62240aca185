"""PPO warm start: the behaviour clone's agreement with its teacher and its CPU time, old settings against new.

On one training split of a pool (every dataset but ``--held-out``), for the replay and the route env, the
teacher (the arena's reference) plays every training episode twice in the vector env
(``train.ppo_warm_start.batched_demonstrations``, as ``train_ppo`` does), and a fresh PPO policy is cloned from
those demonstrations twice: with the earlier settings (15 epochs of 256 at learning rate 1e-3) and with today's
(``BC_STEPS`` gradient steps of ``BC_BATCH`` at ``BC_LEARNING_RATE``). Printed: states, epochs, final losses,
agreement (share of states where the clone's most probable legal action is the teacher's) and process CPU
seconds. Only training episodes are read: the held-out dataset is never replayed.

    python scripts/bench_warm_start_clone.py --pool paper --held-out aime2024
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch
from sb3_contrib import MaskablePPO

from coba_env.env import as_compiled
from coba_env.rules.config import episode_subset
from coba_env.vector_env import CoBaVectorEnv
from train.ppo import TRAINER_DEFAULTS, WARM_START_ROWS
from train.ppo_warm_start import DEMO_PASSES, batched_demonstrations, clone_into, teacher_policy
from train.protocol_arena import arena_of
from train.sb3_vec_env import CoBaSB3VecEnv

#: The clone settings compared: the earlier ones and today's defaults.
SETTINGS = {"earlier (15 epochs x 256, lr 1e-3)": dict(epochs=15, batch_size=256, learning_rate=1e-3),
            "today (BC_STEPS x BC_BATCH, BC_LEARNING_RATE)": {}}


def main(argv: list[str] | None = None) -> int:
    """Collect the demonstrations per env and clone them under each setting; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="paper", help="pool spec (default: paper)")
    parser.add_argument("--held-out", default="aime2024", help="dataset left out of training (default: aime2024)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    compiled = as_compiled(args.pool)
    datasets = sorted({str(d) for d in compiled.dataset})
    if args.held_out not in datasets:
        print(f"--held-out: unknown dataset {args.held_out!r}; the pool has {datasets}", file=sys.stderr)
        return 2
    print(f"command: python scripts/bench_warm_start_clone.py --pool {args.pool} --held-out {args.held_out}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    train = episode_subset(compiled, [d for d in datasets if d != args.held_out], None, None)
    for grouping in ("pair", "item"):
        env = CoBaSB3VecEnv(1024, train, grouping=grouping, lambda_range=(0.0, 0.5), order="balanced")
        config = dataclasses.replace(env.venv.config, order="sequential")
        rows = min(WARM_START_ROWS, config.pool.n_episodes * DEMO_PASSES)
        teacher = teacher_policy(arena_of(grouping).reference)
        demos = batched_demonstrations(CoBaVectorEnv(rows, config=config), teacher=teacher, seed=0)
        print(f"{grouping}: teacher {teacher.name}, {len(demos):,} states of {demos.episodes:,} episodes")
        for name, kwargs in SETTINGS.items():
            model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu",
                                policy_kwargs=TRAINER_DEFAULTS["lean"]["policy_kwargs"])
            start = time.process_time()
            summary = clone_into(model, demos, seed=0, **kwargs)
            print(f"  {name}: agreement {summary['agreement']:.4f}, {summary['epochs']} epochs, actor loss "
                  f"{summary['actor_loss']:.4f}, critic loss {summary['critic_loss']:.4f}, "
                  f"{time.process_time() - start:.1f} CPU-s", flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
