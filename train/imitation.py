"""Train the MLP routing controller by imitation of the cost-aware oracle, with DAgger-style rollouts.

Reads top to bottom:

1. Build the env on the training episodes and the cost-aware oracle with the env's exact configuration.
2. Round 0 rolls out the oracle itself; every later round rolls out the current learner (mixed with the
   oracle with probability ``beta ** round``), so the data holds the states the learner actually reaches.
3. Every visited state is relabelled with a value per action. Round 0: the oracle's cost-to-go for every
   training lambda (AggreVaTe: the best episode value still reachable after playing ``a``; STOP: the value of
   stopping now). Later rounds with ``targets="rollout"`` (default): the return of playing ``a`` and then
   the current learner, at the rollout's lambda and one other training lambda. The oracle knows which
   candidate is correct, so its values overrate continuing and a learner fit on them over-spends; the
   learner's own continuation values are free of that hindsight optimism (``targets="oracle"`` keeps the
   oracle's values in every round, and the round-0 rows are dropped once rollout values exist unless
   ``keep_oracle_rows``).
4. The MLP is fit on the aggregated data. ``loss="q"`` (default) regresses the legal actions' values and the
   policy plays their argmax, so STOP wins only where stopping is worth more than continuing: no collapse
   to STOP by class imbalance. ``loss="ce"`` clones the best-valued action with inverse-frequency class
   weights (capped at 20), the classic remedy against that collapse.
5. The checkpoint (``controller.json`` + ``model.pt``) is written with everything needed to reload it.

The learner never reads a label: the oracle does, on the evaluator side, to produce targets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.learned_mlp import (
    MLPController,
    build_network,
    controller_features,
    save,
)
from coba_env.env import CoBaEnv, as_compiled, default_budget
from pools.store import Pool
from train.cost_aware_oracle import CostAwareOracle
from train.training_log import run_logger

DEFAULT_LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
LOSSES = ("q", "ce")
TARGETS = ("rollout", "oracle")


def _rollout(env: CoBaEnv, oracle: CostAwareOracle, learner: MLPController | None, episode: int, lam: float,
             expert_prob: float, rng: np.random.Generator, feature_kw: dict[str, Any],
             ) -> tuple[list[tuple[np.ndarray, tuple]], float]:
    """Play one episode (oracle with prob. ``expert_prob`` per step, else the learner).

    Returns every visited state as (controller features, action prefix) and the episode's return."""
    obs, info = env.reset(options={"episode": episode, "lam": lam})
    mask, prefix, states, total = info["action_mask"], [], [], 0.0
    plan: list[int] = []
    if learner is not None:
        learner.lam = lam  # the learner acts at the rollout's lambda (it builds its features from learner.lam)
    while True:
        states.append((controller_features(obs, mask, env.evidence, lam=lam, **feature_kw), tuple(prefix)))
        if learner is None or rng.random() < expert_prob:
            if not plan:
                plan = oracle.plan(episode, lam, prefix).actions
            action = plan.pop(0)
        else:
            plan = []
            action = learner.act(obs, mask, env.evidence)
        obs, reward, done, _, info = env.step(action)
        total += reward
        prefix.append(action)
        if done:
            return states, total
        mask = info["action_mask"]


def _learner_values(env: CoBaEnv, learner: MLPController, episode: int, lam: float, prefix: tuple) -> np.ndarray:
    """Return of the whole episode when each legal action is played after ``prefix`` and the learner then
    plays on (its own cost-to-go, free of the oracle's hindsight optimism); -inf for illegal actions."""
    q = np.full(env.layout.n_actions, -np.inf)
    learner.lam = lam
    _, info = env.reset(options={"episode": episode, "lam": lam})
    for a in prefix:
        _, _, _, _, info = env.step(a)
    legal = np.flatnonzero(info["action_mask"])
    for first in legal:
        obs, info = env.reset(options={"episode": episode, "lam": lam})
        total = 0.0
        for a in (*prefix, int(first)):
            obs, r, done, _, info = env.step(a)
            total += r
        while not done:
            obs, r, done, _, info = env.step(learner.act(obs, info["action_mask"], env.evidence))
            total += r
        q[first] = total
    return q


def _fit(network: torch.nn.Module, x: np.ndarray, q: np.ndarray, target: np.ndarray, *, loss: str, epochs: int,
         batch_size: int, lr: float, seed: int) -> float:
    """Fit ``network`` on (features, oracle values, oracle actions); returns the last epoch's mean loss."""
    gen = torch.Generator().manual_seed(seed)
    xt = torch.from_numpy(x)
    legal = torch.from_numpy(np.isfinite(q))
    qt = torch.from_numpy(np.where(np.isfinite(q), q, 0.0).astype(np.float32))
    yt = torch.from_numpy(target)
    n_actions = q.shape[1]
    counts = np.bincount(target, minlength=n_actions).astype(np.float64)
    weights = np.where(counts > 0, counts.sum() / np.maximum(counts, 1) / n_actions, 0.0)
    class_w = torch.from_numpy(np.clip(weights, 0.0, 20.0).astype(np.float32))  # inverse frequency, capped
    opt = torch.optim.Adam(network.parameters(), lr=lr)
    network.train()
    last = 0.0
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=gen)
        total, n = 0.0, 0
        for start in range(0, len(xt), batch_size):
            idx = order[start:start + batch_size]
            out = network(xt[idx])
            if loss == "q":
                # Mean squared error against the target action values, over the legal actions only.
                m = legal[idx].float()
                err = (out - qt[idx]) ** 2 * m
                value = err.sum() / m.sum()
            else:
                logits = out.masked_fill(~legal[idx], -1e9)
                value = torch.nn.functional.cross_entropy(logits, yt[idx], weight=class_w)
            opt.zero_grad()
            value.backward()
            opt.step()
            total += float(value.detach()) * len(idx)
            n += len(idx)
        last = total / max(n, 1)
    network.eval()
    return last


def train_mlp(pool: Pool | str | Any, out_dir: str | Path, *, episode_ids: Sequence[int] | None = None,
              datasets: Sequence[str] | None = None, lambdas: Sequence[float] = DEFAULT_LAMBDAS,
              cost_model: str = "p_tokens", dagger_rounds: int = 4, epochs: int = 20, seed: int = 0,
              progress: bool = True, loss: str = "q", hidden: Sequence[int] = (128, 128),
              episodes_per_round: int | None = 1200, beta: float = 0.5, lr: float = 3e-3, batch_size: int = 256,
              budget: float | None = None, node_limit: int = 300, name: str = "mlp",
              targets: str = "rollout", keep_oracle_rows: bool = False, tensorboard: bool = True,
              balance_datasets: bool = False) -> Path:
    """Train an MLP controller by DAgger imitation of the cost-aware oracle; returns the checkpoint dir.

    ``pool``: a pool, compiled pool, directory or profile name; ``episode_ids`` / ``datasets`` restrict the
    training episodes. ``budget`` fixes B (default: the default budget of the training episodes only, so no
    held-out episode shapes lambda's scale or the ``budget_used`` feature). ``balance_datasets`` draws each
    round's episodes with replacement, every training dataset with equal probability (the macro objective),
    instead of uniformly over episodes. A fixed ``seed`` reproduces the checkpoint. ``tensorboard`` (default True) logs every
    round's scalars (``rollout/mean_return``, ``train/loss``, ``train/rows``, ``train/states``,
    ``train/expert_prob``, ``time/round_seconds``) as TensorBoard events and ``progress.csv`` in
    ``out_dir/tb/mlp_<run>``, as ``coba train ppo`` logs into ``out_dir/tb/ppo_<run>``.
    """
    lambdas = _checked(targets, loss, lambdas, dagger_rounds, epochs)
    t0 = time.perf_counter()
    # A small MLP trains fastest on one thread (more threads only contend on a shared machine); it also
    # makes a seeded run bit-reproducible.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(pool, out_dir, episode_ids=episode_ids, datasets=datasets, lambdas=lambdas,
                      cost_model=cost_model, dagger_rounds=dagger_rounds, epochs=epochs, seed=seed,
                      progress=progress, loss=loss, hidden=hidden, episodes_per_round=episodes_per_round,
                      beta=beta, lr=lr, batch_size=batch_size, budget=budget, node_limit=node_limit, name=name,
                      targets=targets, keep_oracle_rows=keep_oracle_rows, tensorboard=tensorboard,
                      balance_datasets=balance_datasets, t0=t0)
    finally:
        torch.set_num_threads(threads)


def _checked(targets: str, loss: str, lambdas: Sequence[float], dagger_rounds: int, epochs: int) -> list[float]:
    """The training lambdas as floats, after checking the settings (ValueError naming the bad one)."""
    if targets not in TARGETS:
        raise ValueError(f"unknown targets {targets!r}; expected one of {list(TARGETS)}")
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {list(LOSSES)}")
    values = [float(v) for v in lambdas]
    if not values or any(v < 0 for v in values):
        raise ValueError(f"lambdas must be a non-empty list of values >= 0, got {values}")
    if dagger_rounds < 0 or epochs < 1:
        raise ValueError(f"need dagger_rounds >= 0 and epochs >= 1, got {dagger_rounds} and {epochs}")
    return values


def train_mlp_in_env(env: CoBaEnv, oracle: Any, out_dir: str | Path, *, budget: float, max_output_tokens: float,
                     lambdas: Sequence[float], extra_config: dict[str, Any] | None = None, cost_model: str = "p_tokens",
                     dagger_rounds: int = 4, epochs: int = 20, seed: int = 0, progress: bool = True,
                     loss: str = "q", hidden: Sequence[int] = (128, 128), episodes_per_round: int | None = 1200,
                     beta: float = 0.5, lr: float = 3e-3, batch_size: int = 256, name: str = "mlp",
                     targets: str = "rollout", keep_oracle_rows: bool = False, tensorboard: bool = True,
                     balance_datasets: bool = False) -> Path:
    """``train_mlp``'s DAgger loop on a built ``env`` (e.g. a ``RouteEnv`` over the training episodes only) with
    its teacher ``oracle`` (``plan`` / ``action_values`` over ``env``'s episode indices); returns the checkpoint
    dir. ``budget`` must be ``env``'s B; ``extra_config`` is stored in ``controller.json``."""
    values = _checked(targets, loss, lambdas, dagger_rounds, epochs)
    if float(budget) != float(env.budget):
        raise ValueError(f"budget {budget} differs from the env's B {env.budget}")
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in train_mlp: one thread, bit-reproducible
    try:
        torch.manual_seed(seed)
        return _dagger(env, oracle, out_dir, budget=float(budget), max_output_tokens=float(max_output_tokens),
                       lambdas=values, cost_model=cost_model, dagger_rounds=dagger_rounds, epochs=epochs, seed=seed,
                       progress=progress, loss=loss, hidden=hidden, episodes_per_round=episodes_per_round,
                       beta=beta, lr=lr, batch_size=batch_size, name=name, targets=targets,
                       keep_oracle_rows=keep_oracle_rows, tensorboard=tensorboard,
                       balance_datasets=balance_datasets, t0=t0, rng=np.random.default_rng(seed),
                       extra_config=extra_config)
    finally:
        torch.set_num_threads(threads)


def _train(pool: Any, out_dir: str | Path, *, episode_ids: Sequence[int] | None, datasets: Sequence[str] | None,
           lambdas: list[float], cost_model: str, dagger_rounds: int, epochs: int, seed: int, progress: bool,
           loss: str, hidden: Sequence[int], episodes_per_round: int | None, beta: float, lr: float,
           batch_size: int, budget: float | None, node_limit: int, name: str, targets: str, keep_oracle_rows: bool,
           tensorboard: bool, balance_datasets: bool, t0: float) -> Path:
    """The body of ``train_mlp`` (arguments validated)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    # -- 1. env and oracle
    full = as_compiled(pool)
    env = CoBaEnv(full, datasets=datasets, episode_ids=episode_ids, cost_model=cost_model, budget=budget)
    if budget is None:  # B from the training episodes only (the env's restricted pool)
        budget = default_budget(env.pool, cost_model, full.n_candidates)
        env = CoBaEnv(full, datasets=datasets, episode_ids=episode_ids, cost_model=cost_model, budget=budget)
    oracle = CostAwareOracle.for_env(env, node_limit=node_limit)
    return _dagger(env, oracle, out_dir, budget=float(budget), max_output_tokens=float(full.max_output_tokens),
                   lambdas=lambdas, cost_model=cost_model, dagger_rounds=dagger_rounds, epochs=epochs, seed=seed,
                   progress=progress, loss=loss, hidden=hidden, episodes_per_round=episodes_per_round, beta=beta,
                   lr=lr, batch_size=batch_size, name=name, targets=targets, keep_oracle_rows=keep_oracle_rows,
                   tensorboard=tensorboard, balance_datasets=balance_datasets, t0=t0, rng=rng)


def _dagger(env: CoBaEnv, oracle: Any, out_dir: str | Path, *, budget: float, max_output_tokens: float,
            lambdas: list[float], cost_model: str, dagger_rounds: int, epochs: int, seed: int, progress: bool,
            loss: str, hidden: Sequence[int], episodes_per_round: int | None, beta: float, lr: float,
            batch_size: int, name: str, targets: str, keep_oracle_rows: bool, tensorboard: bool,
            balance_datasets: bool, t0: float, rng: np.random.Generator,
            extra_config: dict[str, Any] | None = None) -> Path:
    """Steps 2-5 on ``env`` (a ``CoBaEnv`` or ``RouteEnv`` over the training episodes) with ``oracle`` (its
    ``plan`` / ``action_values`` on ``env``'s episode indices); ``extra_config`` goes into the checkpoint."""
    n_eps = env.n_episodes
    #: The observation's feature names (a route env's: per-generator blocks, then the pooled table).
    observation = getattr(env, "feature_names", None) or env.features.names
    per_round = n_eps if episodes_per_round is None else min(int(episodes_per_round), n_eps)
    config: dict[str, Any] = {
        "kind": "mlp", "name": name, "hidden": list(hidden), "budget": float(budget), "cost_model": cost_model,
        "max_output_tokens": max_output_tokens, "n_max": env.n_max, "lambdas": lambdas,
        "default_lambda": float(np.median(lambdas)), "loss": loss, "targets": targets,
        "keep_oracle_rows": keep_oracle_rows, "dagger_rounds": dagger_rounds,
        "epochs": epochs, "seed": seed, "episodes_per_round": per_round, "beta": beta, "lr": lr,
        "datasets": sorted(set(env.pool.dataset.tolist())), "n_train_episodes": n_eps,
        "train_datasets": sorted(set(env.pool.dataset.tolist())), "balance_datasets": balance_datasets,
        "actions": list(env.layout.names), "observation": list(observation),
        **(extra_config or {}),
    }
    feature_kw = {"budget": float(budget), "cost_model": cost_model, "max_output_tokens": max_output_tokens}
    network = build_network(tuple(hidden), len(observation), env.layout.n_actions)
    stop, n_actions = env.layout.stop_action, env.layout.n_actions
    lam_at = getattr(env, "lambda_index", env.features.lam)  # a route env's observation has its own index
    _, index, sizes = np.unique(env.pool.dataset, return_inverse=True, return_counts=True)
    episode_probs = 1.0 / (sizes[index] * len(sizes))
    episode_probs /= episode_probs.sum()
    learner: MLPController | None = None
    xs: list[np.ndarray] = []
    qs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    history = []
    from tqdm.auto import tqdm

    bar = tqdm(total=(dagger_rounds + 1) * per_round, desc="train mlp", unit="ep", disable=not progress,
               leave=False)
    logger = run_logger(out_dir, "mlp") if tensorboard else None
    for rnd in range(dagger_rounds + 1):
        # -- 2. rollouts: the oracle in round 0, then the learner mixed with the oracle
        t_round = time.perf_counter()
        expert_prob = 1.0 if rnd == 0 else beta ** rnd
        if balance_datasets:  # every training dataset equally likely, whatever its size
            episodes = rng.choice(n_eps, size=per_round, replace=True, p=episode_probs)
        else:
            episodes = rng.choice(n_eps, size=per_round, replace=False)
        returns, n_states = [], 0
        for i, e in enumerate(episodes):
            lam = lambdas[(i + rnd) % len(lambdas)]
            states, ret = _rollout(env, oracle, learner, int(e), lam, expert_prob, rng, feature_kw)
            returns.append(ret)
            # -- 3. relabel every visited state by the oracle, for every training lambda
            for feats, prefix in states:
                if targets == "rollout" and learner is not None:
                    label_lams = sorted({lam, lambdas[int(rng.integers(len(lambdas)))]})
                    q = np.vstack([_learner_values(env, learner, int(e), lam_j, prefix) for lam_j in label_lams])
                else:
                    label_lams = lambdas
                    q = oracle.action_values(int(e), lambdas, prefix)
                for j, lam_j in enumerate(label_lams):
                    row = feats.copy()
                    row[lam_at] = lam_j
                    xs.append(row)
                    qs.append(q[j])
                    legal_q = np.where(np.isfinite(q[j]), q[j], -np.inf)
                    best = float(legal_q.max())
                    # The oracle's action; among equal values, STOP (cheapest) first, then the lowest id.
                    ys.append(stop if legal_q[stop] >= best - 1e-12 else int(np.argmax(legal_q >= best - 1e-12)))
                n_states += 1
            bar.update(1)
        # -- 4. fit on everything gathered so far
        x = np.asarray(xs, dtype=np.float32)
        if rnd == 0:
            mean = x.mean(axis=0)
            scale = np.maximum(x.std(axis=0), 1e-3)
            mean[-n_actions:], scale[-n_actions:] = 0.0, 1.0  # mask bits stay 0/1
            config.update(feature_mean=mean.tolist(), feature_scale=scale.tolist())
        if rnd == 1 and targets == "rollout" and not keep_oracle_rows:
            # The oracle's hindsight values overrate continuing; once the learner's own cost-to-go is
            # available, the first round's rows are dropped.
            n0 = history[0]["rows"]
            del xs[:n0], qs[:n0], ys[:n0]
            x = x[n0:]
        xn = (x - np.asarray(config["feature_mean"], np.float32)) / np.asarray(config["feature_scale"], np.float32)
        fit_loss = _fit(network, xn.astype(np.float32), np.asarray(qs), np.asarray(ys, dtype=np.int64), loss=loss,
                        epochs=epochs, batch_size=batch_size, lr=lr, seed=seed + rnd)
        learner = MLPController(network, config)
        history.append({"round": rnd, "expert_prob": expert_prob, "rollout_mean_return": float(np.mean(returns)),
                        "states": n_states, "rows": len(xs), "loss": fit_loss,
                        "seconds": time.perf_counter() - t_round})
        bar.set_postfix_str(f"round {rnd} return {np.mean(returns):.3f} loss {fit_loss:.4f}")
        if logger is not None:
            for key, value in (("rollout/mean_return", history[-1]["rollout_mean_return"]),
                               ("train/loss", fit_loss), ("train/rows", len(xs)), ("train/states", n_states),
                               ("train/expert_prob", expert_prob), ("time/round_seconds", history[-1]["seconds"])):
                logger.record(key, value)
            logger.dump(step=rnd)
    bar.close()
    if logger is not None:
        logger.close()
    # -- 5. checkpoint
    config.update(history=history, train_seconds=time.perf_counter() - t0)
    return save(out_dir, network, config)
