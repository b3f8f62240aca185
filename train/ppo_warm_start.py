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

#: The policy imitated by default (registry name; the replay arena's reference): label-free, so cloning it is
#: legitimate on any split.
TEACHER = "coba_strong"
#: Passes over the training episodes when collecting demonstrations (each pass draws new lambdas).
DEMO_PASSES = 2
#: Behaviour-cloning optimisation: Adam, these epochs over the demonstrations, this batch size and rate.
BC_EPOCHS = 15
BC_BATCH = 256
BC_LEARNING_RATE = 1e-3


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


def clone_into(model: Any, demos: Demonstrations, *, epochs: int = BC_EPOCHS, batch_size: int = BC_BATCH,
               learning_rate: float = BC_LEARNING_RATE, seed: int = 0) -> dict[str, float]:
    """Fit ``model.policy`` (a MaskablePPO actor-critic) to ``demos``: actor to the actions, critic to the returns.

    Returns the final epoch's mean losses and the share of demonstration states where the actor's most probable
    legal action is the teacher's (``agreement``)."""
    if len(demos) == 0:
        raise ValueError("warm start: no demonstration states (empty training set?)")
    policy = model.policy
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    obs = torch.as_tensor(demos.observations)
    masks = torch.as_tensor(demos.masks)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    generator = torch.Generator().manual_seed(int(seed))
    n = len(demos)
    actor_loss = critic_loss = float("nan")
    for _ in range(int(epochs)):
        order = torch.randperm(n, generator=generator)
        sums = np.zeros(2)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            values, log_prob, _ = policy.evaluate_actions(obs[idx], actions[idx], action_masks=masks[idx])
            loss_pi = -log_prob.mean()
            loss_v = torch.nn.functional.mse_loss(values.flatten(), returns[idx])
            optimizer.zero_grad()
            (loss_pi + loss_v).backward()
            optimizer.step()
            sums += [float(loss_pi.detach()) * len(idx), float(loss_v.detach()) * len(idx)]
        actor_loss, critic_loss = (sums / n).tolist()
    policy.set_training_mode(False)
    return {"actor_loss": actor_loss, "critic_loss": critic_loss, "agreement": agreement(model, demos),
            "states": n, "episodes": demos.episodes}


def agreement(model: Any, demos: Demonstrations) -> float:
    """Share of demonstration states where ``model``'s most probable legal action is the teacher's."""
    from agents.sb3_scoring import action_scores, best_legal_actions

    scores = action_scores(torch, model.policy, demos.observations, None)
    return float(np.mean(best_legal_actions(scores, demos.masks) == demos.actions))
