"""Train the rollout controller (``agents.learned_rollout``): exact Q^Strong on training episodes, regressed.

Reads top to bottom:

1. ``q_strong``: in a state reached by an action prefix, every legal action a is played and then
   ``StrongFromState`` plays to STOP. CoBa-Strong is deterministic and label-free, so the continuation's
   correctness bit and p_tokens are exact (the only labels read: the evaluator-side correctness of the final
   selection, as the env's STOP reports it). Stored separately, so d_correct - lam * d_cost / B is available
   for any lam and B without re-simulating.
2. ``collect``: roll in over episodes (with Strong in round 0, with a rollout controller later), and at every
   visited state with a legal alternative to Strong's action store one row per alternative: the label-free
   features (``budget_used`` in raw p_tokens, rescaled per fold), the action, Strong's action, and the
   differences to Strong's action's continuation. Round-0 rows do not depend on the fold and are cached per
   episode.
3. ``RolloutMethod.fit``: round 0 on every training episode; ``dagger_rounds`` more rounds roll in with the
   round's controller at a grid point drawn per episode (tau finite) on a seeded, dataset-balanced draw of
   ``dagger_episodes`` training episodes, so the data covers the states the learner reaches; a small MLP
   (``AdvantageNet``) fits d_correct and d_cost / B with rows weighted so every training dataset carries
   equal total weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.learned_mlp import numpy_layers, tanh_forward
from agents.learned_rollout import RolloutController, StrongFromState, action_rows, rollout_features
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv

#: The rollout controller's operating points, stated in advance (docs/LEARNING.md, "Protocol").
ROLLOUT_LAMBDAS = (0.05, 0.1, 0.2, 0.5, 1.0)
ROLLOUT_TAUS = (0.0, 0.01, 0.03, 0.1)
COST_MODEL = "p_tokens"


def make_env(compiled: CompiledPool) -> CoBaEnv:
    """The env Strong runs in (its fusion selection), over every episode of ``compiled``; costs are read raw."""
    strong = StrongFromState()
    return CoBaEnv(compiled, cost_model=COST_MODEL, lam=0.0, budget=1.0, **strong.env_kwargs())


def _finish(env: CoBaEnv, policy: Policy, episode: int, prefix: tuple[int, ...]) -> tuple[bool, float]:
    """Replay ``prefix`` in ``episode``, then ``policy`` to STOP: (correct, total p_tokens)."""
    obs, info = env.reset(options={"episode": episode})
    policy.reset(env)
    done = False
    for a in prefix:
        obs, _, done, _, info = env.step(a)
        if done:
            break
    while not done:
        obs, _, done, _, info = env.step(policy.act(obs, info["action_mask"], env.evidence))
    return bool(info["correct"]), float(info["costs"][COST_MODEL])


def q_strong(env: CoBaEnv, episode: int, prefix: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per action after ``prefix``: the continuation's correctness (0/1) and total p_tokens when the action is
    played and ``StrongFromState`` then plays to STOP; NaN for illegal actions."""
    strong = StrongFromState()
    _, info = env.reset(options={"episode": episode})
    for a in prefix:
        _, _, _, _, info = env.step(a)
    n_actions = env.layout.n_actions
    correct, cost = np.full(n_actions, np.nan), np.full(n_actions, np.nan)
    for a in np.flatnonzero(info["action_mask"]):
        correct[a], cost[a] = _finish(env, strong, episode, (*prefix, int(a)))
    return correct, cost


@dataclass
class Rows:
    """Training rows: features (budget_used in raw p_tokens), d_correct, d_cost (raw p_tokens), episode index."""

    x: np.ndarray
    d_correct: np.ndarray
    d_cost: np.ndarray
    episode: np.ndarray

    @staticmethod
    def concat(parts: list[Rows]) -> Rows:
        """All ``parts`` stacked (an empty ``Rows`` of the right width when there are none)."""
        parts = [p for p in parts if len(p.d_correct)]
        if not parts:
            return Rows(np.zeros((0, 0), np.float32), np.zeros(0), np.zeros(0), np.zeros(0, np.int64))
        return Rows(np.vstack([p.x for p in parts]), np.concatenate([p.d_correct for p in parts]),
                    np.concatenate([p.d_cost for p in parts]), np.concatenate([p.episode for p in parts]))


def _restore(env: CoBaEnv, episode: int, prefix: tuple[int, ...]) -> tuple[np.ndarray, dict]:
    """Bring ``env`` back to the state after ``prefix`` in ``episode``: (observation, info)."""
    obs, info = env.reset(options={"episode": episode})
    for a in prefix:
        obs, _, _, _, info = env.step(a)
    return obs, info


def collect(env: CoBaEnv, episode: int, roll_in: Policy) -> Rows:
    """Roll in with ``roll_in`` over ``episode``; one row per (visited state, legal action other than Strong's).

    ``roll_in`` and Strong must be Markov in the env's state (``StrongFromState`` and ``RolloutController``
    are): the env is reset and replayed to the state after every Q computation."""
    strong = StrongFromState()
    obs, info = env.reset(options={"episode": episode})
    prefix: list[int] = []
    xs, dc, dk = [], [], []
    max_tokens = float(env.pool.max_output_tokens)
    while True:
        mask = info["action_mask"]
        strong.reset(env)
        a_strong = strong.act(obs, mask, env.evidence)
        legal = np.flatnonzero(mask)
        if legal.size > 1:
            state = rollout_features(obs, mask, env.evidence, budget=1.0, cost_model=COST_MODEL,
                                     max_output_tokens=max_tokens)
            correct, cost = q_strong(env, episode, tuple(prefix))
            others = np.array([a for a in legal if a != a_strong], dtype=np.int64)
            xs.append(action_rows(state, others, a_strong, len(mask)))
            dc.append(correct[others] - correct[a_strong])
            dk.append(cost[others] - cost[a_strong])
            obs, info = _restore(env, episode, tuple(prefix))
        roll_in.reset(env)
        action = roll_in.act(obs, info["action_mask"], env.evidence)
        obs, _, done, _, info = env.step(action)
        prefix.append(action)
        if done:
            break
    if not xs:
        return Rows.concat([])
    x = np.vstack(xs)
    return Rows(x, np.concatenate(dc), np.concatenate(dk), np.full(len(x), episode, dtype=np.int64))


class AdvantageNet:
    """A small MLP predicting (d_correct, d_cost / B) per row, trained in torch, evaluated in numpy.

    Inputs are standardized with the training rows' mean and scale; inference is a few matrix products
    (one call per state, ~10 us; the controller asks for it at every step of every replay)."""

    def __init__(self, hidden: tuple[int, ...] = (64, 64), epochs: int = 30, lr: float = 1e-3,
                 batch_size: int = 512, seed: int = 0) -> None:
        self.hidden, self.epochs, self.lr, self.batch_size, self.seed = hidden, epochs, lr, batch_size, seed
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def fit(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> AdvantageNet:
        """Weighted mean squared error on both outputs; one torch thread, seeded."""
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            torch.manual_seed(self.seed)
            self.mean = x.mean(axis=0)
            self.scale = np.maximum(x.std(axis=0), 1e-3)
            xt = torch.from_numpy(((x - self.mean) / self.scale).astype(np.float32))
            yt = torch.from_numpy(y.astype(np.float32))
            wt = torch.from_numpy((sample_weight / sample_weight.mean()).astype(np.float32))
            mods: list[torch.nn.Module] = []
            width = x.shape[1]
            for h in self.hidden:
                mods += [torch.nn.Linear(width, h), torch.nn.Tanh()]
                width = h
            mods.append(torch.nn.Linear(width, y.shape[1]))
            net = torch.nn.Sequential(*mods)
            opt = torch.optim.Adam(net.parameters(), lr=self.lr)
            gen = torch.Generator().manual_seed(self.seed)
            for _ in range(self.epochs):
                order = torch.randperm(len(xt), generator=gen)
                for start in range(0, len(xt), self.batch_size):
                    idx = order[start:start + self.batch_size]
                    err = ((net(xt[idx]) - yt[idx]) ** 2).sum(axis=1)
                    loss = (err * wt[idx]).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        finally:
            torch.set_num_threads(threads)
        self.layers = numpy_layers(net)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        """[n, 2]: predicted d_correct and d_cost / B."""
        return tanh_forward(x, self.mean, self.scale, self.layers)


def _fold_rows(rows: Rows, budget: float, budget_column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, d_correct, d_cost / B) with budget_used (column ``budget_column``) in units of ``budget``."""
    x = rows.x.copy()
    x[:, budget_column] /= budget
    return x, rows.d_correct, rows.d_cost / budget


def balanced_weights(datasets: np.ndarray) -> np.ndarray:
    """Row weights giving every dataset equal total weight (mean weight 1)."""
    _, index, counts = np.unique(datasets, return_inverse=True, return_counts=True)
    return len(datasets) / (counts[index] * len(counts))


@dataclass
class FittedRollout:
    """The advantage model fit on one fold, its budget, and a prediction cache shared by its policies."""

    model: Any
    budget: float
    max_output_tokens: float
    name: str = "rollout"
    cache: dict = field(default_factory=dict)
    #: The action names of the layout it was fit on (the regressor's one-hot width).
    actions: tuple[str, ...] = ()

    def policy(self, point: dict[str, float]) -> RolloutController:
        """The controller at ``point`` (``lam``, ``tau``)."""
        return RolloutController(self.model, budget=self.budget, lam=float(point["lam"]),
                                 tau=float(point["tau"]), cost_model=COST_MODEL,
                                 max_output_tokens=self.max_output_tokens, cache=self.cache, name=self.name,
                                 actions=self.actions)


@dataclass
class RolloutMethod:
    """One-step improvement over CoBa-Strong with learned Q^Strong differences (settings stated in advance)."""

    name: str = "rollout"
    lambdas: tuple[float, ...] = ROLLOUT_LAMBDAS
    taus: tuple[float, ...] = ROLLOUT_TAUS
    dagger_rounds: int = 1
    dagger_episodes: int = 600
    regressor: dict[str, Any] = field(default_factory=lambda: {"hidden": (64, 64), "epochs": 30, "lr": 1e-3,
                                                               "batch_size": 512})
    _round0: dict[int, Rows] = field(default_factory=dict, repr=False)
    _round0_pool: Any = field(default=None, repr=False)  # the pool whose row indices the cached rows hold

    def grid(self) -> list[dict[str, float]]:
        """lambda x tau, then tau = infinity (Strong itself)."""
        return [{"lam": lam, "tau": tau} for lam in self.lambdas for tau in self.taus] + [self.fallback()]

    def fallback(self) -> dict[str, float]:
        """tau = infinity: never deviate, i.e. CoBa-Strong."""
        return {"lam": 0.0, "tau": math.inf}

    def _round0_rows(self, env: CoBaEnv, episodes: np.ndarray) -> Rows:
        strong = StrongFromState()
        if self._round0_pool is not env.pool:  # cached rows index episodes of one pool: another pool starts over
            self._round0, self._round0_pool = {}, env.pool
        for e in episodes:
            key = int(env.pool.episode_ids[e])
            if key not in self._round0:
                self._round0[key] = collect(env, int(e), strong)
        return Rows.concat([self._round0[int(env.pool.episode_ids[e])] for e in episodes])

    def _fit_models(self, rows: Rows, datasets: np.ndarray, budget: float, seed: int,
                    max_tokens: float, env: CoBaEnv) -> FittedRollout:
        x, dc, dk = _fold_rows(rows, budget, env.features.budget)
        w = balanced_weights(datasets[rows.episode])
        model = AdvantageNet(seed=seed, **self.regressor).fit(x, np.column_stack([dc, dk]), sample_weight=w)
        return FittedRollout(model, budget=budget, max_output_tokens=max_tokens, name=self.name,
                             actions=tuple(env.layout.names))

    def fit(self, compiled: CompiledPool, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> FittedRollout:
        """Round 0 (Strong roll-in, every training episode), then ``dagger_rounds`` learner roll-ins; refit each."""
        env = make_env(compiled)
        episodes = np.flatnonzero(np.isin(compiled.episode_ids, np.asarray(train_ids)))
        datasets = np.asarray(compiled.dataset)
        max_tokens = float(compiled.max_output_tokens)
        rows = self._round0_rows(env, episodes)
        fitted = self._fit_models(rows, datasets, budget, seed, max_tokens, env)
        rng = np.random.default_rng(seed)
        finite = [p for p in self.grid() if math.isfinite(p["tau"])]
        for _ in range(self.dagger_rounds):
            p = balanced_weights(datasets[episodes])
            size = min(self.dagger_episodes, episodes.size)
            drawn = rng.choice(episodes, size=size, replace=False, p=p / p.sum())
            parts = [rows]
            for e in drawn:
                point = finite[int(rng.integers(len(finite)))]
                parts.append(collect(env, int(e), fitted.policy(point)))
            rows = Rows.concat(parts)
            fitted = self._fit_models(rows, datasets, budget, seed, max_tokens, env)
        return fitted
