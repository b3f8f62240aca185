"""Masked PPO over the numpy vector env, in the manner of CleanRL's ``ppo.py``: one loop, read top to bottom.

``learn(policy, venv, settings, ...)`` trains an sb3-contrib ``MaskableActorCriticPolicy`` (the network
``train.ppo`` builds, so the checkpoint stays a MaskablePPO zip that ``coba bench`` loads) on a
``CoBaVectorEnv`` of either grouping: collect a rollout of ``n_envs x n_steps`` transitions, compute GAE
advantages, then ``n_epochs`` passes of clipped-surrogate updates over shuffled minibatches. The losses are
MaskablePPO's (advantages normalized per minibatch, value MSE without clipping, the entropy of the legal actions,
gradient norm clipped), so the same coefficients mean the same thing in both trainers.

Why it is faster than ``MaskablePPO.learn`` on this env (docs/PERFORMANCE.md, "PPO training speed"):

- no Python object per step or per sub-env: SB3's ``VecEnv`` interface builds one info dict per sub-env per step
  and its rollout buffer copies every array once more; here the vector env's arrays go straight into preallocated
  tensors (``torch.from_numpy``, no copy);
- no ``torch.distributions`` object: masked logits are ``torch.where(mask, logits, -1e8)`` (MaskablePPO's own
  constant), log-probabilities one ``log_softmax``, sampling the Gumbel-max trick on them; the distribution
  classes and their argument checks are what sb3-contrib issue #283 blames for MaskablePPO's slowness;
- the actor's and the critic's halves of each gradient step side by side on two threads (``threads=2``, each
  one torch thread: their parameters are disjoint, so the weights are those of one thread, bit for bit);
- the network's ``tanh`` computed as ``2 sigmoid(2x) - 1`` while training (``train.fused_mlp.FastTanh``): torch's
  float32 ``tanh`` kernel on this CPU build runs several times slower than its ``sigmoid`` (same to ~1e-7);
- the rollout shuffled once an epoch (one ``index_select`` per array), its minibatches slices: row gathers of a
  minibatch cost more than its products, and the minibatches are the same as indexing by the order.

``update="hand"`` (``LEAN_SETTINGS``'; ``PPOSettings()`` keeps ``"autograd"``): no autograd in the update. The
networks' forward and backward passes are written out (``train.fused_mlp.TanhMLP``), so are the actor loss's
gradient in the logits (``train.ppo_losses.actor_loss_grad``) and the value loss's in the value, and the
parameters and gradients are one flat tensor each (``FlatParameters``: one Adam tensor, one norm);
``matmul_dtype="bfloat16"`` runs its products in bfloat16. The same update as autograd's in exact arithmetic
(float64: equal weights to 1e-16); in float32 the two differ by rounding.

The defaults (``LEAN_SETTINGS``, ``LEAN_NET_ARCH``): the hand-written update, 5 epochs of 1,024 per 16,384-step
rollout, a 64x64 actor and critic (SB3's default width): ~6x the old trainer's speed, chosen by speed before a
ten-seed run found its returns inside the old trainer's spread on every pool and env (docs/PERFORMANCE.md,
"Wave 6"). ``PPOSettings()`` (SB3's 10 x 1,024, autograd) on 128x128 trains MaskablePPO.learn's weights exactly.

Logged (TensorBoard and ``progress.csv`` through SB3's logger, one row per rollout): ``time/steps_per_second``,
``time/env_share``, ``rollout/`` ``ep_rew_mean``, ``ep_len_mean``, ``accuracy``, ``cost_over_budget``,
``action_share/<ACTION>`` and ``train/*`` (the losses, approximate KL, clip fraction, explained variance, lr).

Reproducibility: the Gumbel noise and the minibatch order come from one ``torch.Generator`` seeded with ``seed``,
the episodes and lambdas from the vector env seeded on reset, so the same seed gives the same weights.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from coba_env.vector_env import CoBaVectorEnv
from train.fused_mlp import ActorCritic, FlatParameters
from train.ppo_losses import actor_loss_grad, masked_log_probs


@dataclass(frozen=True)
class PPOSettings:
    """PPO's coefficients (the names are SB3's; ``batch_size`` is the minibatch size)."""

    learning_rate: float = 3e-4
    n_steps: int = 16
    batch_size: int = 1024
    n_epochs: int = 10
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantage: bool = True
    update: str = "autograd"  # "autograd" (SB3's, this class's default) or "hand" (LEAN_SETTINGS'): train.fused_mlp
    matmul_dtype: str = "float32"  # with update="hand": the products' dtype, "float32" or "bfloat16"

    def __post_init__(self) -> None:
        if self.update not in ("autograd", "hand"):
            raise ValueError(f"update must be one of ['autograd', 'hand'], got {self.update!r}")
        if self.matmul_dtype not in ("float32", "bfloat16"):
            raise ValueError(f"matmul_dtype must be one of ['float32', 'bfloat16'], got {self.matmul_dtype!r}")
        if self.matmul_dtype != "float32" and self.update != "hand":
            raise ValueError("matmul_dtype other than float32 needs update='hand' (the hand-written passes)")


#: The lean trainer's defaults (``PPOSettings()`` is SB3's 10 epochs of 1,024 with autograd): the hand-written
#: update, 5 epochs of 1,024, on the ``LEAN_NET_ARCH`` net; see the module docstring for why.
LEAN_SETTINGS = PPOSettings(n_epochs=5, update="hand")
#: The lean trainer's default hidden layers, for the actor and for the critic (SB3's own default width).
LEAN_NET_ARCH = (64, 64)


@dataclass
class RolloutStats:
    """What finished during one rollout: episodes, their returns, lengths, correct answers, cost over B, actions."""

    episodes: int = 0
    return_sum: float = 0.0
    length_sum: float = 0.0
    correct: int = 0
    cost_over_budget: float = 0.0
    actions: np.ndarray | None = None


def learn(policy: Any, venv: CoBaVectorEnv, settings: PPOSettings, total_timesteps: int, *, seed: int,
          logger: Any = None, on_update: Callable[[int], None] | None = None, progress: bool = False,
          restart_order: Callable[[], None] | None = None, threads: int = 1) -> dict[str, float]:
    """Train ``policy`` on ``venv`` for ``total_timesteps`` (whole rollouts); returns timing figures.

    ``on_update(steps)`` is called after each update (the trainer saves its snapshots there); ``restart_order``
    restarts the episode order on the seeded reset (``train.sb3_vec_env.DatasetBalancedOrder.restart``);
    ``threads`` >= 2 runs the critic's half of each gradient step on a second thread (``_update``)."""
    # ---- 1. sizes, storage and the seeded generator --------------------------------------------------
    n_envs, n_steps = venv.num_envs, settings.n_steps
    rollout, updates = n_envs * n_steps, -(-int(total_timesteps) // (n_envs * n_steps))
    n_obs, n_actions = venv.n_obs, int(venv.single_action_space.n)
    obs_buf, mask_buf = torch.zeros((n_steps, n_envs, n_obs)), torch.zeros((n_steps, n_envs, n_actions), dtype=bool)
    action_buf = torch.zeros((n_steps, n_envs), dtype=torch.int64)
    logp_buf, value_buf, reward_buf, done_buf = (torch.zeros((n_steps, n_envs)) for _ in range(4))
    generator = torch.Generator().manual_seed(int(seed))
    net = ActorCritic(policy, getattr(torch, settings.matmul_dtype))
    optimizer, flat, infer = _optimizer(policy, net, settings)

    # ---- 2. the first observations (a seeded reset, as SB3's learn() does) ---------------------------
    if restart_order is not None:
        restart_order()
    obs, info = venv.reset(seed=int(seed))
    next_obs, next_mask = torch.from_numpy(obs), torch.from_numpy(info["action_mask"].astype(bool))
    returns_now, lengths_now = np.zeros(n_envs), np.zeros(n_envs, dtype=np.int64)
    clock, steps = Clock(), 0
    bar = _progress_bar(updates * rollout) if progress else None
    workers = _critic_worker() if threads >= 2 else None
    net.swap_tanh(flat is None)
    try:
        for _ in range(updates):
            # ---- 3. rollout: n_steps batched steps of every sub-env ------------------------------------
            stats = RolloutStats(actions=np.zeros(n_actions, dtype=np.int64))
            policy.set_training_mode(False)
            for t in range(n_steps):
                obs_buf[t], mask_buf[t] = next_obs, next_mask
                action_buf[t], logp_buf[t], value_buf[t] = sample_actions(infer, next_obs, next_mask, generator)
                actions = action_buf[t].numpy()
                with clock.env():
                    obs, reward, terminated, truncated, info = venv.step(actions)
                done = terminated | truncated
                reward_buf[t] = torch.from_numpy(reward.astype(np.float32))
                done_buf[t] = torch.from_numpy(done.astype(np.float32))
                next_obs, next_mask = torch.from_numpy(obs), torch.from_numpy(info["action_mask"].astype(bool))
                returns_now += reward
                lengths_now += 1
                _count_finished(stats, venv, info, done, returns_now, lengths_now, actions)
            steps += rollout

            # ---- 4. advantages: GAE(lambda) with the critic's value of the state after the rollout -------
            last_values = infer(next_obs)[1]
            advantages = gae(reward_buf, value_buf, done_buf, last_values, settings.gamma, settings.gae_lambda)
            value_targets = advantages + value_buf

            # ---- 5. update: n_epochs passes over shuffled minibatches -----------------------------------
            policy.set_training_mode(True)
            batch = _Batch(*(b.flatten(0, 1) for b in (obs_buf, mask_buf, action_buf, logp_buf, advantages,
                                                        value_targets)))
            losses = _update(net, optimizer, flat, settings, generator, batch, workers)
            losses["explained_variance"] = explained_variance(value_buf.reshape(-1), value_targets.reshape(-1))

            # ---- 6. log, snapshot, progress -------------------------------------------------------------
            if logger is not None:
                _log(logger, venv, stats, losses, clock, steps, settings)
            if on_update is not None:
                _hand_back(policy, flat, optimizer)
                on_update(steps)
            if bar is not None:
                _show(bar, rollout, stats)
    finally:
        _hand_back(policy, flat, optimizer, release=True)
        net.swap_tanh(False)
        if workers is not None:
            workers.shutdown()
        policy.set_training_mode(False)
        if bar is not None:
            bar.close()
    return {"timesteps": steps, **clock.figures(steps)}


def _optimizer(policy: Any, net: ActorCritic, s: PPOSettings) -> tuple[Any, FlatParameters | None, Callable]:
    """SB3's optimizer (Adam, eps 1e-5), fused (one kernel for every parameter), the flat parameters (with
    ``update="hand"``, else None) and the rollout's forward pass. The autograd update's optimizer replaces the
    policy's own, the hand-written one's is handed back before every snapshot: the saved model carries its state."""
    hand = s.update == "hand"
    flat = FlatParameters(list(policy.parameters())) if hand else None
    optimizer = torch.optim.Adam([flat.flat] if hand else policy.parameters(), lr=s.learning_rate, eps=1e-5,
                                 fused=True)
    if not hand:
        policy.optimizer = optimizer
    return optimizer, flat, (net.infer if hand else torch.no_grad()(net))


def _hand_back(policy: Any, flat: FlatParameters | None, optimizer: Any, release: bool = False) -> None:
    """With flat parameters: give the policy an optimizer over its own parameters holding the state; ``release``
    gives the parameters their own storage again."""
    if flat is not None:
        policy.optimizer = flat.per_parameter(optimizer)
        if release:
            flat.release()


def default_threads() -> int:
    """Threads ``learn`` uses by default: 2 (actor and critic side by side) when this process may use 2 cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2, cores)


def _critic_worker() -> ThreadPoolExecutor:
    """One more thread for the critic, on one torch thread: torch's own intra-op threads (OpenMP) spin-wait for
    each other, which on a busy 2-core machine made two of them ~4x slower than one (docs/PERFORMANCE.md)."""
    return ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,))


def sample_actions(net: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], obs: torch.Tensor,
                   masks: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Actions [B] drawn from the masked categorical (the Gumbel-max trick), their log-probabilities [B] and the
    critic's values [B]; an illegal action's ~ -1e8 log-probability never wins against a legal one's."""
    with torch.no_grad():
        logits, values = net(obs)
        log_probs = masked_log_probs(logits, masks)
        # torch.rand draws from [0, 1): a draw of exactly 0 (2^-24 a float32 draw, dozens of times in a protocol
        # run) would give the only legal action a Gumbel of -inf and hand the argmax to an illegal one.
        uniform = torch.rand(log_probs.shape, generator=generator).clamp_(min=torch.finfo(log_probs.dtype).tiny)
        action = (log_probs - torch.log(-torch.log(uniform))).argmax(dim=-1)
    return action, log_probs.gather(1, action[:, None]).squeeze(1), values


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_values: torch.Tensor, gamma: float,
        lam: float) -> torch.Tensor:
    """GAE(lambda) advantages [T, B]; ``dones[t]`` = the episode ended at step t (the next state starts anew)."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    next_values = last_values
    for t in range(rewards.shape[0] - 1, -1, -1):
        going_on = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * going_on - values[t]
        running = delta + gamma * lam * going_on * running
        advantages[t] = running
        next_values = values[t]
    return advantages


def _update(net: ActorCritic, optimizer: Any, flat: FlatParameters | None, s: PPOSettings,
            generator: torch.Generator, batch: _Batch, workers: ThreadPoolExecutor | None) -> dict[str, float]:
    """``s.n_epochs`` passes of clipped-surrogate steps over minibatches of ``s.batch_size``; mean losses.

    The actor's and the critic's losses touch disjoint parameters, so each backward pass gives exactly the
    gradients of their sum; with ``workers`` the critic's half runs on the worker thread beside the actor's."""
    n = len(batch.actions)
    sums = torch.zeros(5)  # policy-gradient loss, value loss, entropy loss, approximate KL, clip fraction
    count = 0
    params = [flat.flat] if flat is not None else list(net.policy.parameters())
    for _ in range(s.n_epochs):
        # one shuffled copy of the rollout an epoch, its minibatches slices of it (row gathers a minibatch cost
        # more than the minibatch's products); the same minibatches as indexing by the order
        order = torch.randperm(n, generator=generator)
        shuffled = _Batch(*(t.index_select(0, order) for t in batch))
        for start in range(0, n, s.batch_size):
            mb = _Batch(*(t[start:start + s.batch_size] for t in shuffled))
            if flat is None:  # the hand-written passes overwrite every gradient
                optimizer.zero_grad(set_to_none=True)
            critic = None if workers is None else workers.submit(_critic_step, net, mb.obs, mb.targets, s)
            pg_loss, entropy_loss, log_ratio, ratio = _actor_step(net, mb, s)
            value_loss = _critic_step(net, mb.obs, mb.targets, s) if critic is None else critic.result()
            torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                sums += torch.stack([pg_loss, value_loss, entropy_loss, ((ratio - 1) - log_ratio).mean(),
                                     ((ratio - 1).abs() > s.clip_range).float().mean()])
            count += 1
    names = ("policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction")
    return dict(zip(names, (sums / max(count, 1)).tolist(), strict=True))


class _Batch(NamedTuple):
    """One rollout flattened to [n] transitions: what the update reads."""

    obs: torch.Tensor
    masks: torch.Tensor
    actions: torch.Tensor
    old_logp: torch.Tensor
    advantages: torch.Tensor
    targets: torch.Tensor


def _actor_step(net: ActorCritic, mb: _Batch, s: PPOSettings) -> tuple[torch.Tensor, ...]:
    """The clipped surrogate and entropy losses of a minibatch, back-propagated into the actor (by autograd or,
    with ``s.update == "hand"``, by ``actor_loss_grad`` and the hand-written pass)."""
    hand = s.update == "hand"
    log_probs = masked_log_probs(net.fast_actor.forward(mb.obs) if hand else net.actor(mb.obs), mb.masks)
    adv = mb.advantages
    if s.normalize_advantage and len(adv) > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    losses, grad = actor_loss_grad(log_probs, mb.masks, mb.actions, mb.old_logp, adv, s.clip_range, s.ent_coef,
                                   by_hand=hand)
    if hand:
        net.fast_actor.backward(grad)
    else:
        (losses[0] + s.ent_coef * losses[1]).backward()
    return tuple(x.detach() for x in losses)


def _critic_step(net: ActorCritic, obs: torch.Tensor, targets: torch.Tensor, s: PPOSettings) -> torch.Tensor:
    """The value loss of a minibatch (MSE to the GAE targets), back-propagated into the critic."""
    if s.update != "hand":
        value_loss = torch.nn.functional.mse_loss(targets, net.critic(obs).squeeze(-1))
        (s.vf_coef * value_loss).backward()
        return value_loss.detach()
    error = net.fast_critic.forward(obs).squeeze(-1) - targets
    net.fast_critic.backward((error * (2.0 * s.vf_coef / len(error)))[:, None])  # d/dv vf_coef mean((v - t)^2)
    return (error * error).mean()


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target] (SB3's), NaN when the target does not vary."""
    var = float(target.var())
    return float("nan") if var == 0 else 1.0 - float((target - predicted).var()) / var


def _count_finished(stats: RolloutStats, venv: CoBaVectorEnv, info: dict[str, Any], done: np.ndarray,
                    returns_now: np.ndarray, lengths_now: np.ndarray, actions: np.ndarray) -> None:
    """Add the actions of a step and the episodes it finished to ``stats``; restart their running sums."""
    stats.actions += np.bincount(actions, minlength=len(stats.actions))
    rows = np.flatnonzero(done)
    if not len(rows):
        return
    stats.episodes += len(rows)
    stats.return_sum += float(returns_now[rows].sum())
    stats.length_sum += float(lengths_now[rows].sum())
    stats.correct += int(info["correct"][rows].sum())
    stats.cost_over_budget += float(info["final_costs"][rows, venv.cost_k].sum()) / venv.budget
    returns_now[rows] = 0.0
    lengths_now[rows] = 0


def _log(logger: Any, venv: CoBaVectorEnv, stats: RolloutStats, losses: dict[str, float], clock: Clock,
         steps: int, s: PPOSettings) -> None:
    """One row of scalars per update (TensorBoard and CSV)."""
    for key, value in clock.figures(steps).items():
        logger.record(f"time/{key}", value)
    if stats.episodes:
        logger.record("rollout/ep_rew_mean", stats.return_sum / stats.episodes)
        logger.record("rollout/ep_len_mean", stats.length_sum / stats.episodes)
        logger.record("rollout/accuracy", stats.correct / stats.episodes)
        logger.record("rollout/cost_over_budget", stats.cost_over_budget / stats.episodes)
    total = max(int(stats.actions.sum()), 1)
    for name, count in zip(venv.layout.names, stats.actions.tolist(), strict=True):
        logger.record(f"rollout/action_share/{name}", count / total)
    for key, value in losses.items():
        logger.record(f"train/{key}", value)
    logger.record("train/learning_rate", s.learning_rate)
    logger.dump(steps)


class Clock:
    """Wall and process-CPU time of the run and of the env's steps inside it."""

    def __init__(self) -> None:
        self.start, self.cpu_start = time.perf_counter(), time.process_time()
        self.env_seconds = self.env_cpu_seconds = 0.0

    @contextlib.contextmanager
    def env(self) -> Iterator[None]:
        """A context that adds its wall and CPU time to the env's."""
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.env_seconds += time.perf_counter() - wall
        self.env_cpu_seconds += time.process_time() - cpu

    def figures(self, steps: int) -> dict[str, float]:
        """Steps per second, seconds, CPU seconds and the env's share of each."""
        wall, cpu = time.perf_counter() - self.start, time.process_time() - self.cpu_start
        return {"steps_per_second": steps / wall if wall > 0 else 0.0, "seconds": wall, "cpu_seconds": cpu,
                "env_seconds": self.env_seconds, "env_share": self.env_seconds / wall if wall > 0 else 0.0,
                "env_cpu_seconds": self.env_cpu_seconds,
                "env_cpu_share": self.env_cpu_seconds / cpu if cpu > 0 else 0.0}


def _show(bar: Any, rollout: int, stats: RolloutStats) -> None:
    """Advance the progress bar by a rollout; show the accuracy and cost of the episodes it finished."""
    bar.update(rollout)
    if stats.episodes:
        bar.set_postfix(acc=f"{stats.correct / stats.episodes:.3f}",
                        cost=f"{stats.cost_over_budget / stats.episodes:.3f}B")


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="ppo", unit="step", smoothing=0.1)
