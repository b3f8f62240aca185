"""Warm start for PPO: behaviour cloning of CoBa-Strong into a MaskablePPO policy, critic fitted to its returns.

CoBa-Routed-Strong is deterministic and label-free, so replaying it on the training episodes gives, for every
state it visits, the action it takes; the training episodes' rewards (which PPO sees anyway) give each state's
return-to-go under Strong. ``strong_demonstrations`` collects (observation, mask, action, return-to-go) in the
PPO run's own environment (same budget B, cost model, selection rule, lambda range: lambda is drawn per episode
and written into the observation, so the cloned policy starts out lambda-blind, as Strong is).
``clone_into(model, demos)`` then fits the actor by masked cross-entropy to Strong's actions and the critic by
squared error to the returns, so PPO fine-tunes from Strong's behaviour with a value function that already
matches it (a fresh critic would give the first updates advantages of pure noise and undo the cloning).

Why this helps: trained from scratch, PPO learns that an extra sample rarely pays at once and collapses towards
stopping after one sample (the issue's 1.1 samples per rgym_hard episode); started from Strong, the first
policy already samples and verifies where Strong does, and PPO only has to find where deviating pays.

The teacher is the reference of the env's arena (``train.protocol_arena``): CoBa-Strong on the replay env, the
consistency cascade on the route env (``train_ppo(..., grouping="item")``), replayed in an env of the run's
configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.base import Policy
from coba_env.env import CoBaEnv
from coba_env.vector_env import CoBaVectorEnv

#: The policy imitated by default (registry name; the replay arena's reference): label-free, so cloning it is
#: legitimate on any split.
TEACHER = "coba_strong"
#: Passes over the training episodes when collecting demonstrations (each pass draws new lambdas).
DEMO_PASSES = 2
#: Behaviour-cloning optimisation: Adam at this rate over minibatches of this size, for whole epochs until at
#: least ``BC_STEPS`` gradient steps are taken (so a small set of demonstrations gets as many updates as a large
#: one). Sized on the training side by the clone's agreement with its teacher and by time (docs/PERFORMANCE.md,
#: "Warm start"; paper pool, aime2024 left out): 625 steps are 5 epochs on the 64k replay states (agreement
#: 0.992, 3.4 CPU-s; the earlier 15 epochs of 256 at 1e-3: 0.997, 13.7 CPU-s) and 45 on the 7k route states
#: (1.000; earlier 0.995).
BC_STEPS = 625
BC_BATCH = 512
BC_LEARNING_RATE = 2e-3


@dataclass
class Demonstrations:
    """States visited by the teacher: observations [S, F], masks [S, A], actions [S], returns-to-go [S]."""

    observations: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episodes: int

    def __len__(self) -> int:
        return len(self.actions)


def teacher_policy(name: str = TEACHER) -> Policy:
    """A fresh teacher from the registry (default CoBa-Routed-Strong)."""
    from agents.registry import make_policy

    return make_policy(name)


def strong_demonstrations(env: CoBaEnv, *, teacher: Policy | None = None, passes: int = DEMO_PASSES,
                          seed: int = 0) -> Demonstrations:
    """Replay ``teacher`` (default CoBa-Strong) on every episode of ``env`` ``passes`` times; its states and actions.

    ``env`` must draw lambda per episode (``lambda_range``) if the demonstrations are to cover several lambdas."""
    teacher = teacher or teacher_policy()
    ok, reason = teacher.applicable(env)
    if not ok:
        raise ValueError(f"warm start: {teacher.name} cannot run on this pool: {reason}")
    env.reset(seed=seed)
    observations, masks, actions, returns = [], [], [], []
    for _ in range(passes):
        for episode in range(env.n_episodes):
            obs, info = env.reset(options={"episode": episode})
            teacher.reset(env)
            rewards = []
            while True:
                mask = info["action_mask"]
                action = int(teacher.act(obs, mask, env.evidence))
                observations.append(obs)
                masks.append(np.asarray(mask, dtype=bool))
                actions.append(action)
                obs, reward, terminated, truncated, info = env.step(action)
                rewards.append(float(reward))
                if terminated or truncated:
                    break
            # gamma = 1 (train/ppo.py): the return-to-go is the sum of the rewards still to come.
            returns.extend(np.cumsum(rewards[::-1])[::-1].tolist())
    return Demonstrations(np.asarray(observations, dtype=np.float32), np.asarray(masks, dtype=bool),
                          np.asarray(actions, dtype=np.int64), np.asarray(returns, dtype=np.float32),
                          episodes=passes * env.n_episodes)


def batched_demonstrations(venv: CoBaVectorEnv, *, teacher: Policy | None = None, passes: int = DEMO_PASSES,
                           seed: int = 0) -> Demonstrations:
    """``strong_demonstrations`` through the vector env: the teacher's ``act_batch`` plays every episode of
    ``venv``'s pool ``passes`` times, many at once (``venv`` must take its episodes in "sequential" order; its
    lambda range draws each episode's lambda, as the one-episode env's does). Idle rows play placeholder episodes
    whose states are dropped."""
    teacher = teacher or teacher_policy()
    if not (teacher.batched and teacher.supports_batch(venv)):
        raise ValueError(f"warm start: {teacher.name} has no batched form for this env")
    n_real = passes * venv.pool.n_episodes
    obs, info = venv.reset(seed=seed)
    mask = info["action_mask"]
    teacher.start_batch(venv, None)
    serial = np.arange(venv.num_envs)  # each row's episode, in the order they were issued; >= n_real: placeholder
    issued, finished = venv.num_envs, 0
    states: list[tuple[np.ndarray, ...]] = []
    while finished < n_real:
        action = np.asarray(teacher.act_batch(obs, mask, venv), dtype=np.int64)
        idle = np.flatnonzero(serial >= n_real)
        if len(idle):  # STOP, else the first legal action
            stop = venv.layout.stop_action
            action[idle] = np.where(mask[idle, stop] > 0, stop, np.argmax(mask[idle] > 0, axis=1))
        real = np.flatnonzero(serial < n_real)
        next_obs, reward, terminated, _, info = venv.step(action)
        states.append((serial[real], obs[real], mask[real].astype(bool), action[real], reward[real]))
        done = np.flatnonzero(terminated)
        finished += int((serial[done] < n_real).sum())
        serial[done] = issued + np.arange(len(done))
        issued += len(done)
        teacher.start_batch(venv, done)
        obs, mask = next_obs, info["action_mask"]
    episode, observations, masks, actions, rewards = (np.concatenate(column) for column in zip(*states, strict=True))
    order = np.argsort(episode, kind="stable")  # each episode's states together, in step order
    episode, rewards = episode[order], rewards[order]
    # gamma = 1: the return-to-go is the episode's total minus what was earned before this step.
    earned = np.cumsum(rewards)
    first = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])
    totals = np.add.reduceat(rewards, first)
    start_of = np.repeat(first, np.diff(np.r_[first, len(episode)]))
    before = earned - rewards - (earned[start_of] - rewards[start_of])
    returns = np.repeat(totals, np.diff(np.r_[first, len(episode)])) - before
    return Demonstrations(observations[order].astype(np.float32), masks[order], actions[order].astype(np.int64),
                          returns.astype(np.float32), episodes=n_real)


def clone_into(model: Any, demos: Demonstrations, *, epochs: int | None = None, batch_size: int = BC_BATCH,
               learning_rate: float = BC_LEARNING_RATE, seed: int = 0) -> dict[str, float]:
    """Fit ``model.policy`` (a MaskablePPO actor-critic) to ``demos``: actor to the actions, critic to the returns.

    The actor's loss is the masked cross-entropy (MaskablePPO's log-probability of the teacher's action among the
    legal ones), the critic's the squared error; both networks are called module by module as the PPO trainer
    calls them (``train.masked_ppo.ActorCritic``). Returns the final epoch's mean losses and the share of
    demonstration states where the actor's most probable legal action is the teacher's (``agreement``). ``epochs``
    None: enough whole epochs for ``BC_STEPS`` gradient steps."""
    from train.fused_mlp import ActorCritic
    from train.ppo_losses import masked_log_probs

    if len(demos) == 0:
        raise ValueError("warm start: no demonstration states (empty training set?)")
    policy = model.policy
    net = ActorCritic(policy)
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate, fused=True)
    obs = torch.as_tensor(demos.observations)
    masks = torch.as_tensor(demos.masks)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    generator = torch.Generator().manual_seed(int(seed))
    n = len(demos)
    if epochs is None:
        epochs = -(-BC_STEPS // -(-n // batch_size))
    sums = torch.zeros(2)
    net.swap_tanh(True)
    try:
        for _ in range(int(epochs)):
            order = torch.randperm(n, generator=generator)
            sums.zero_()
            for start in range(0, n, batch_size):
                idx = order[start:start + batch_size]
                logits, values = net(obs[idx])
                loss_pi = -masked_log_probs(logits, masks[idx]).gather(1, actions[idx, None]).mean()
                loss_v = torch.nn.functional.mse_loss(values, returns[idx])
                optimizer.zero_grad(set_to_none=True)
                (loss_pi + loss_v).backward()
                optimizer.step()
                sums += torch.stack([loss_pi.detach(), loss_v.detach()]) * len(idx)
    finally:
        net.swap_tanh(False)
        policy.set_training_mode(False)
    actor_loss, critic_loss = (sums / n).tolist()
    return {"actor_loss": actor_loss, "critic_loss": critic_loss, "agreement": agreement(model, demos),
            "states": n, "episodes": demos.episodes, "epochs": int(epochs)}


def agreement(model: Any, demos: Demonstrations) -> float:
    """Share of demonstration states where ``model``'s most probable legal action is the teacher's."""
    from agents.sb3_scoring import action_scores, best_legal_actions

    scores = action_scores(torch, model.policy, demos.observations, None)
    return float(np.mean(best_legal_actions(scores, demos.masks) == demos.actions))
