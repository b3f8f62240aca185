"""Time DAgger's rollout targets two ways in one run: one state at a time (the one-episode env, the path
``train.imitation`` used before issue 37) and batched (``train.learner_values``); print CPU seconds, the ratio and
the largest difference of the values.

The states are those of random legal walks on the route env of the paper pool's training problems with aime2025
held out (as the protocol's timing), at the route MLP's lambdas; the learner is an untrained, seeded controller of
the env's shape (its choices reach states of every depth; only the labelling's speed is measured).

Usage: python scripts/time_learner_values.py [--problems 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from agents.learned_mlp import MLPController, build_network
from coba_env.env import CoBaEnv, as_compiled
from train.imitation import MLPSettings, _checkpoint_config
from train.learner_values import ValueTask, learner_values_batch
from train.protocol import cost_unit, episodes_of
from train.protocol_mlp import ROUTE_MLP_GRID_LAMBDAS


def one_state(env: CoBaEnv, learner: MLPController, task: ValueTask) -> np.ndarray:
    """Replay the prefix, play each legal action, then the learner, on the one-episode env."""
    q = np.full(env.layout.n_actions, -np.inf)
    learner.lam = task.lam
    for first in task.legal:
        obs, info = env.reset(options={"episode": task.episode, "lam": task.lam})
        total, done = 0.0, False
        for a in (*task.prefix, first):
            obs, r, done, _, info = env.step(a)
            total += r
        while not done:
            obs, r, done, _, info = env.step(learner.act(obs, info["action_mask"], env.evidence))
            total += r
        q[first] = total
    return q


def main() -> None:
    """Build the env, the learner and the states; time both paths; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=60, help="training problems walked (default: 60)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paper = as_compiled("paper")
    train = episodes_of(paper, paper.episode_ids[paper.dataset != "aime2025"])
    env = CoBaEnv(train, grouping="item", budget=cost_unit(paper))
    torch.manual_seed(args.seed)
    config = _checkpoint_config(env, MLPSettings(lambdas=ROUTE_MLP_GRID_LAMBDAS, seed=args.seed))
    width = len(config["observation"]) + env.layout.n_actions
    config.update(feature_mean=[0.0] * width, feature_scale=[1.0] * width)
    learner = MLPController(build_network((128, 128), len(config["observation"]), env.layout.n_actions), config)
    rng, tasks = np.random.default_rng(args.seed), []
    for e in rng.choice(env.n_episodes, size=min(args.problems, env.n_episodes), replace=False).tolist():
        lam = float(rng.choice(ROUTE_MLP_GRID_LAMBDAS))
        _, info = env.reset(options={"episode": e, "lam": lam})
        prefix, done = [], False
        while not done:
            legal = tuple(int(a) for a in np.flatnonzero(info["action_mask"]))
            tasks.append(ValueTask(e, lam, tuple(prefix), legal))
            a = int(rng.choice(legal))
            _, _, done, _, info = env.step(a)
            prefix.append(a)
    t0 = time.process_time()
    want = np.vstack([one_state(env, learner, t) for t in tasks])
    one_s = time.process_time() - t0
    t0 = time.process_time()
    got = learner_values_batch(env, learner, tasks)
    batch_s = time.process_time() - t0
    finite = np.isfinite(want)
    print(f"{len(tasks)} states, {int(finite.sum())} continuations, route env of {env.n_episodes} training problems")
    print(f"one state at a time: {one_s:.2f} s CPU; batched: {batch_s:.2f} s CPU; ratio {one_s / batch_s:.1f}x")
    print(f"same legal actions: {bool(np.array_equal(finite, np.isfinite(got)))}; largest difference "
          f"{float(np.max(np.abs(got[finite] - want[finite]))):.2e}")


if __name__ == "__main__":
    main()
