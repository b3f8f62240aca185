"""Train sb3-contrib MaskablePPO on the CoBa replay env and benchmark the saved model with ``coba bench``.

Run: ``python scripts/sb3_quickstart.py --pool tiny --timesteps 20000 --out runs/sb3-quickstart``
(docs/tutorials/train-an-sb3-agent.md shows this file; tests/test_sb3_path.py runs it as written).
"""

import argparse

import gymnasium as gym
from sb3_contrib import MaskablePPO

import coba_env  # noqa: F401  (registers coba/Replay-v0)
from coba_cli.main import main as coba
from train.sb3_vec_env import CoBaSB3VecEnv

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--pool", default="tiny", help="pool directory or simulator profile (default: tiny)")
parser.add_argument("--timesteps", type=int, default=20_000, help="PPO environment steps (default: 20000)")
parser.add_argument("--num-envs", type=int, default=64, help="parallel sub-envs (default: 64)")
parser.add_argument("--lam", type=float, default=0.1, help="lambda the model is benchmarked at (default: 0.1)")
parser.add_argument("--out", default="runs/sb3-quickstart", help="output folder (default: runs/sb3-quickstart)")
args = parser.parse_args()

# The numpy vector env (not a SyncVectorEnv of single envs); lambda drawn per episode from lambda_range
# (the model reads it from the observation), episodes shuffled so each rollout mixes datasets.
venv = gym.make_vec("coba/Replay-v0", num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                    pool=args.pool, lambda_range=(0.0, 0.5), order="shuffle")
env = CoBaSB3VecEnv(venv=venv)  # SB3's VecEnv interface, with action_masks() for MaskablePPO

model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=256, ent_coef=0.01, seed=0, device="cpu")
model.learn(total_timesteps=args.timesteps)
model.save(f"{args.out}/model.zip")

# Benchmark against the paper's main table, the model acting at lambda = args.lam (PATH@LAMBDA).
status = coba(["bench", "--pool", args.pool, "--policies", f"main,{args.out}/model.zip@{args.lam}",
               "--out", f"{args.out}/bench", "--no-figures", "--no-progress"])
raise SystemExit(status)
