"""Train the MLP routing controller by imitation of the cost-aware oracle, with DAgger-style rollouts.

Reads top to bottom, like CleanRL's scripts (``MLPSettings`` is its ``Args``):

1. ``train_mlp`` builds the env on the training episodes (either grouping: ``grouping="item"`` trains on the
   route env, one episode per problem with a SAMPLE per generator; ``datasets`` / ``episode_ids`` hold the rest
   out) and the cost-aware oracle with the env's exact configuration; ``train_mlp_in_env`` takes a built env and
   teacher (the learning protocol's methods pass their own).
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
5. The checkpoint (``controller.json`` + ``model.pt``) is written with everything needed to reload it,
   including the env it was trained on and the datasets it saw (``train_datasets``).

The learner never reads a label: the oracle does, on the evaluator side, to produce targets.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.checkpoint import LAMBDA_INDEX, observation_names, trained_env_fields
from agents.learned_mlp import MLPController, build_network, controller_features, save
from coba_env.env import CoBaEnv, as_compiled
from coba_env.featurizer_files import save_featurizer
from coba_env.featurizers import fit_featurizer
from coba_env.problems import problems_of
from coba_env.rules.config import episode_subset
from pools.store import Pool
from train.cost_aware_oracle import CostAwareOracle
from train.learner_values import ValueTask, learner_values_batch
from train.training_log import run_logger

DEFAULT_LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
LOSSES = ("q", "ce")
TARGETS = ("rollout", "oracle")


@dataclass(frozen=True)
class MLPSettings:
    """Every setting of a DAgger run (the keyword arguments of ``train_mlp`` / ``train_mlp_in_env``).

    ``balance_datasets`` draws each round's episodes with replacement, every training dataset with equal
    probability (the macro objective), instead of uniformly over episodes. A fixed ``seed`` reproduces the
    checkpoint. ``tensorboard`` logs every round's scalars (``rollout/mean_return``, ``train/loss``,
    ``train/rows``, ``train/states``, ``train/expert_prob``, ``time/round_seconds``) as TensorBoard events and
    ``progress.csv`` in ``out_dir/tb/mlp_<run>``, as ``coba train ppo`` logs into ``out_dir/tb/ppo_<run>``.
    ``episodes_per_round`` is capped at the training episodes when drawn without replacement;
    ``round0_episodes`` sizes round 0 apart (its rows only seed the first learner under rollout targets).
    ``gradient_steps`` (None: ``epochs``): whole epochs until at least that many minibatch steps per round, small
    rounds as many updates as large ones. ``states_per_episode`` (None: all): rounds after 0 label at most that many
    uniformly drawn states of an episode (continuations cost its length squared; AggreVaTe labels one, 2014).
    """

    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    cost_model: str = "p_tokens"
    dagger_rounds: int = 4
    epochs: int = 20
    gradient_steps: int | None = None
    states_per_episode: int | None = None
    seed: int = 0
    progress: bool = True
    loss: str = "q"
    hidden: tuple[int, ...] = (128, 128)
    episodes_per_round: int | None = 1200
    round0_episodes: int | None = None  # the oracle's own rollouts (round 0); None: episodes_per_round
    beta: float = 0.5
    lr: float = 3e-3
    batch_size: int = 256
    name: str = "mlp"
    targets: str = "rollout"
    keep_oracle_rows: bool = False
    tensorboard: bool = True
    balance_datasets: bool = False
    extra_config: dict[str, Any] = field(default_factory=dict)  # more controller.json fields

    def __post_init__(self) -> None:
        if self.targets not in TARGETS:
            raise ValueError(f"unknown targets {self.targets!r}; expected one of {list(TARGETS)}")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; expected one of {list(LOSSES)}")
        values = tuple(float(v) for v in self.lambdas)
        if not values or any(v < 0 for v in values):
            raise ValueError(f"lambdas must be a non-empty list of values >= 0, got {list(values)}")
        if self.dagger_rounds < 0 or self.epochs < 1:
            raise ValueError(f"need dagger_rounds >= 0 and epochs >= 1, got {self.dagger_rounds} and {self.epochs}")
        for name in ("round0_episodes", "gradient_steps", "states_per_episode"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"need {name} >= 1 or None, got {getattr(self, name)}")
        object.__setattr__(self, "lambdas", values)
        object.__setattr__(self, "hidden", tuple(self.hidden))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names (a protocol method's settings are checked against them)."""
        return tuple(f.name for f in dataclasses.fields(cls))


def train_mlp(pool: Pool | str | Any, out_dir: str | Path, *, grouping: str = "pair",
              episode_ids: Sequence[int] | None = None, datasets: Sequence[str] | None = None,
              budget: float | None = None, n_max: int | None = None, node_limit: int = 300,
              problem_features: str | None = None, **settings: Any) -> Path:
    """Train an MLP controller by DAgger imitation of the cost-aware oracle; returns the checkpoint dir.

    ``pool``: a pool, compiled pool, directory or profile name; ``grouping`` the env's ("pair": the replay env,
    "item": the route env, ``n_max`` then per generator); ``episode_ids`` / ``datasets`` restrict the training
    episodes. ``budget`` fixes B (default: the env's default budget over the training episodes only, so no
    held-out episode shapes lambda's scale or the ``budget_used`` feature). ``problem_features``: sources of
    problem features (``coba_env.featurizers``, e.g. "meta,text"), fitted on the training episodes' items and
    saved with the checkpoint; None: none. ``settings``: ``MLPSettings``.
    """
    settings = dict(settings)
    if settings.get("lambdas") is None:
        settings.pop("lambdas", None)
    MLPSettings(**settings)  # every setting checked before the env is built
    train_pool = episode_subset(as_compiled(pool), datasets, None, episode_ids)
    featurizer = None if problem_features is None else \
        fit_featurizer(problems_of(train_pool), problem_features, seed=settings.get("seed", 0))
    env = CoBaEnv(train_pool, grouping=grouping, cost_model=settings.get("cost_model", "p_tokens"), budget=budget,
                  n_max=n_max, problem_features=featurizer)
    return train_mlp_in_env(env, CostAwareOracle.for_env(env, node_limit=node_limit), out_dir, **settings)


def train_mlp_in_env(env: CoBaEnv, oracle: Any, out_dir: str | Path, **settings: Any) -> Path:
    """``train_mlp``'s DAgger loop on a built ``env`` (either grouping, over the training episodes only) with its
    teacher ``oracle`` (``plan`` / ``action_values`` over ``env``'s episode indices); returns the checkpoint dir.
    ``settings``: ``MLPSettings``."""
    s = MLPSettings(**settings)
    t0 = time.perf_counter()
    # A small MLP trains fastest on one thread (more threads only contend on a shared machine); it also
    # makes a seeded run bit-reproducible.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(s.seed)
        return _dagger(env, oracle, out_dir, s, np.random.default_rng(s.seed), t0)
    finally:
        torch.set_num_threads(threads)


@dataclass
class _Rows:
    """The aggregated training rows: features, action values, the oracle's action."""

    x: list[np.ndarray] = field(default_factory=list)
    q: list[np.ndarray] = field(default_factory=list)
    y: list[int] = field(default_factory=list)

    def drop_first(self, n: int) -> None:
        """Forget the first ``n`` rows."""
        del self.x[:n], self.q[:n], self.y[:n]


def _dagger(env: CoBaEnv, oracle: Any, out_dir: str | Path, s: MLPSettings, rng: np.random.Generator,
            t0: float) -> Path:
    """Steps 2-5 on ``env`` with ``oracle``."""
    config = _checkpoint_config(env, s)
    network = build_network(s.hidden, len(config["observation"]), env.layout.n_actions)
    n_eps, per_round = env.n_episodes, config["episodes_per_round"]
    rows, history, learner = _Rows(), [], None
    from tqdm.auto import tqdm

    bar = tqdm(total=s.dagger_rounds * per_round + config["round0_episodes"], desc="train mlp", unit="ep",
               disable=not s.progress, leave=False)
    logger = run_logger(out_dir, "mlp") if s.tensorboard else None
    for rnd in range(s.dagger_rounds + 1):
        # -- 2. rollouts: the oracle in round 0, then the learner mixed with the oracle
        t_round = time.perf_counter()
        expert_prob = 1.0 if rnd == 0 else s.beta ** rnd
        size = config["round0_episodes"] if rnd == 0 else per_round
        if s.balance_datasets:  # every training dataset equally likely, whatever its size
            episodes = rng.choice(n_eps, size=size, replace=True, p=_dataset_balanced(env))
        else:
            episodes = rng.choice(n_eps, size=size, replace=False)
        returns, n_states = _gather(env, oracle, learner, episodes, rnd, expert_prob, s, rng, rows, bar, config)
        # -- 4. fit on everything gathered so far
        x = np.asarray(rows.x, dtype=np.float32)
        if rnd == 0:
            config.update(_normalization(x, env.layout.n_actions))
        if rnd == 1 and s.targets == "rollout" and not s.keep_oracle_rows:
            # The oracle's hindsight values overrate continuing; once the learner's own cost-to-go is
            # available, the first round's rows are dropped.
            rows.drop_first(history[0]["rows"])
            x = x[history[0]["rows"]:]
        xn = (x - np.asarray(config["feature_mean"], np.float32)) / np.asarray(config["feature_scale"], np.float32)
        fit_loss = _fit(network, xn.astype(np.float32), np.asarray(rows.q), np.asarray(rows.y, dtype=np.int64),
                        loss=s.loss, epochs=_epochs(s, len(xn)), batch_size=s.batch_size, lr=s.lr, seed=s.seed + rnd)
        learner = MLPController(network, config)
        history.append({"round": rnd, "expert_prob": expert_prob, "rollout_mean_return": float(np.mean(returns)),
                        "states": n_states, "rows": len(rows.x), "loss": fit_loss,
                        "seconds": time.perf_counter() - t_round})
        bar.set_postfix_str(f"round {rnd} return {np.mean(returns):.3f} loss {fit_loss:.4f}")
        _log_round(logger, history[-1], rnd)
    bar.close()
    if logger is not None:
        logger.close()
    # -- 5. checkpoint
    config.update(history=history, train_seconds=time.perf_counter() - t0)
    path = save(out_dir, network, config)
    if env.config.problem is not None:  # the featurizer of its problem features goes with the checkpoint
        save_featurizer(env.config.problem.featurizer, path)
    return path


def _checkpoint_config(env: CoBaEnv, s: MLPSettings) -> dict[str, Any]:
    """controller.json before training: the settings, the env it trains on, the datasets it sees."""
    n_eps = env.n_episodes
    seen = sorted(set(env.pool.dataset.tolist()))
    return {
        "kind": "mlp", "name": s.name, "hidden": list(s.hidden), "budget": float(env.budget),
        "cost_model": s.cost_model, "max_output_tokens": float(env.pool.max_output_tokens), "n_max": env.n_max,
        "lambdas": list(s.lambdas), "default_lambda": float(np.median(s.lambdas)), "loss": s.loss,
        "targets": s.targets, "keep_oracle_rows": s.keep_oracle_rows, "dagger_rounds": s.dagger_rounds,
        "epochs": s.epochs, "gradient_steps": s.gradient_steps,
        "states_per_episode": s.states_per_episode, "seed": s.seed,
        "episodes_per_round": _round_size(s.episodes_per_round, n_eps, s.balance_datasets),
        "round0_episodes": _round_size(s.episodes_per_round if s.round0_episodes is None else s.round0_episodes,
                                       n_eps, s.balance_datasets),
        "beta": s.beta, "lr": s.lr, "datasets": seen, "n_train_episodes": n_eps, "train_datasets": seen,
        "balance_datasets": s.balance_datasets, "actions": list(env.layout.names),
        "observation": list(observation_names(env)), **trained_env_fields(env), **s.extra_config,
    }


def _epochs(s: MLPSettings, n_rows: int) -> int:
    """A round's passes over ``n_rows`` rows: ``s.epochs``, or whole ones until ``s.gradient_steps`` steps."""
    if s.gradient_steps is None:
        return s.epochs
    return max(1, -(-s.gradient_steps // max(1, -(-n_rows // s.batch_size))))


def _round_size(size: int | None, n_eps: int, with_replacement: bool) -> int:
    """Episodes drawn in a round: ``size`` (None: every training episode), at most ``n_eps`` unless drawn with
    replacement (dataset-balanced), where a small training set is drawn from again."""
    if size is None:
        return n_eps
    return int(size) if with_replacement else min(int(size), n_eps)


def _dataset_balanced(env: CoBaEnv) -> np.ndarray:
    """Per training episode, the probability that draws every dataset equally often."""
    _, index, sizes = np.unique(env.pool.dataset, return_inverse=True, return_counts=True)
    probs = 1.0 / (sizes[index] * len(sizes))
    return probs / probs.sum()


def _gather(env: CoBaEnv, oracle: Any, learner: MLPController | None, episodes: np.ndarray, rnd: int,
            expert_prob: float, s: MLPSettings, rng: np.random.Generator, rows: _Rows, bar: Any,
            config: dict[str, Any]) -> tuple[list[float], int]:
    """Roll out ``episodes`` and relabel every visited state (step 3); (returns, states visited)."""
    feature_kw = {"budget": config["budget"], "cost_model": s.cost_model,
                  "max_output_tokens": config["max_output_tokens"]}
    n_actions = env.layout.n_actions
    returns, visited, tasks = [], [], []
    for i, e in enumerate(episodes):
        lam = s.lambdas[(i + rnd) % len(s.lambdas)]
        states, ret = _rollout(env, oracle, learner, int(e), lam, expert_prob, rng, feature_kw)
        returns.append(ret)
        k = s.states_per_episode
        if learner is not None and k is not None and len(states) > k:
            states = [states[j] for j in np.sort(rng.choice(len(states), size=k, replace=False))]
        for feats, prefix in states:
            if s.targets == "rollout" and learner is not None:
                # the learner's own continuation at the rollout's lambda and one other, labelled in one batch below
                label_lams = sorted({lam, s.lambdas[int(rng.integers(len(s.lambdas)))]})
                legal = tuple(int(a) for a in np.flatnonzero(feats[-n_actions:] > 0))
                tasks += [ValueTask(int(e), lam_j, prefix, legal) for lam_j in label_lams]
            else:
                label_lams = s.lambdas
            visited.append((int(e), feats, prefix, label_lams))
        bar.update(1)
    # -- 3. relabel every visited state by the oracle (or the learner's own continuation, batched)
    learner_q = iter(learner_values_batch(env, learner, tasks)) if tasks else None
    for e, feats, prefix, label_lams in visited:
        if learner_q is not None:
            q = np.vstack([next(learner_q) for _ in label_lams])
        else:
            q = oracle.action_values(e, s.lambdas, prefix)
        _append_rows(rows, feats, q, label_lams, env.layout.stop_action, len(config["observation"]) + LAMBDA_INDEX)
    return returns, len(visited)


def _append_rows(rows: _Rows, feats: np.ndarray, q: np.ndarray, label_lams: Sequence[float], stop: int,
                 lam_at: int) -> None:
    """One training row per label lambda (lambda's index ``lam_at`` in a feature row: the observation's, counted
    from its end) with the values ``q[j]`` and the best action (among equal values STOP, cheapest, then the
    lowest id)."""
    for j, lam_j in enumerate(label_lams):
        row = feats.copy()
        row[lam_at] = lam_j
        rows.x.append(row)
        rows.q.append(q[j])
        legal_q = np.where(np.isfinite(q[j]), q[j], -np.inf)
        best = float(legal_q.max())
        rows.y.append(stop if legal_q[stop] >= best - 1e-12 else int(np.argmax(legal_q >= best - 1e-12)))


def _normalization(x: np.ndarray, n_actions: int) -> dict[str, list[float]]:
    """The feature normalization of round 0's rows (the mask bits stay 0/1)."""
    mean = x.mean(axis=0)
    scale = np.maximum(x.std(axis=0), 1e-3)
    mean[-n_actions:], scale[-n_actions:] = 0.0, 1.0
    return {"feature_mean": mean.tolist(), "feature_scale": scale.tolist()}


def _log_round(logger: Any, entry: dict[str, Any], rnd: int) -> None:
    """One round's scalars into the TensorBoard / CSV log (none without ``tensorboard``)."""
    if logger is None:
        return
    for key, value in (("rollout/mean_return", entry["rollout_mean_return"]), ("train/loss", entry["loss"]),
                       ("train/rows", entry["rows"]), ("train/states", entry["states"]),
                       ("train/expert_prob", entry["expert_prob"]), ("time/round_seconds", entry["seconds"])):
        logger.record(key, value)
    logger.dump(step=rnd)


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
