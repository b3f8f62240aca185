"""PPO as a method of the learning protocol (``train/protocol.py``) on either env: its grid, its fit, its policies.

``coba train ppo --lodo [--env route]`` runs ``PPOMethod(env)``. Everything here is stated before any held-out
run, per env of the protocol (``PPO_PROTOCOLS``; the env's arena, ``train.protocol_arena``, gives the grouping
and the reference):

- fit: ``train.ppo.train_ppo`` on the fold's training episodes (on the route env, the problems they cover) with
  the protocol's one cost unit B (``train.protocol.cost_unit``), the seed, dataset-balanced episode order,
  lambda drawn per episode from ``LAMBDA_RANGE`` and seen in the observation, and the warm start by behaviour
  cloning of the arena's reference (actor to its actions, critic to its returns-to-go: ``train.ppo_warm_start``),
  so PPO starts from the reference's behaviour. On the route env the env uses the cascade's own selection rule
  (``PPOProtocol.env_kwargs``), so the cloned policy starts from the cascade's outcomes too, and every change PPO
  makes is a deviation from the reference whose payoff the reward measures. PPO coefficients are
  ``train.ppo.DEFAULT_PPO_KWARGS`` (SB3's ent_coef = 0; the rest the standard PPO values) and the lean trainer's
  ``train.ppo.TRAINER_DEFAULTS`` (epochs, minibatch, update, network), none picked on any held-out dataset; ``N_ENVS`` sub-envs and ``total_timesteps`` steps (sized from measured throughput so that
  the 75 fits of the full protocol fit the compute budget: docs/LEARNING.md).
- grid: the one lambda-conditioned model acting deterministically at each lambda of the env's grid, then, where
  stated, the reference itself (``CASCADE_POINT``, the fallback when no lambda qualifies, as issue 27's replay
  methods fall back to CoBa-Strong).
- policy(point): the final checkpoint acting deterministically at lambda = ``point["lam"]`` with its env
  settings (``agents.learned_ppo.PPOController.env_kwargs``: budget B, selection, N_max per generator).

Example::

    from train.protocol import run_protocol
    from train.ppo_method import PPOMethod
    from train.protocol_arena import ROUTE
    result = run_protocol(as_compiled("paper"), PPOMethod("route"), arena=ROUTE, out_dir="runs/protocol-route-ppo")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.learned_ppo import PPOController, load
from train.ppo import DEFAULT_LAMBDA_RANGE

#: Range lambda is drawn from per training episode: ``train.ppo.DEFAULT_LAMBDA_RANGE`` (its docstring says why),
#: which holds every grid lambda of both envs, both ends included.
LAMBDA_RANGE: tuple[float, float] = DEFAULT_LAMBDA_RANGE
#: The grid point that is the reference itself (the route cascade): the route env's fallback.
CASCADE_POINT: dict[str, float] = {"cascade": 1.0}
#: Sub-environments per fit (``train/ppo.py``: 1024 x 16 steps = one rollout of 16,384 transitions).
N_ENVS = 1024


@dataclass(frozen=True)
class PPOProtocol:
    """The PPO method's settings on one env of the protocol, stated in advance: its name, grid, timesteps per
    fit, fallback point (None: the protocol's own) and env arguments."""

    name: str
    lambdas: tuple[float, ...]
    total_timesteps: int
    fallback: dict[str, float] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)


PPO_PROTOCOLS: dict[str, PPOProtocol] = {
    # Replay: the grid spans the frontier's break-even slopes (``train/ppo.py``'s docstring: every step of the
    # fixed policies' frontier lies in lambda [0, 0.4], CoBa-Strong's near 0.05-0.1) with the low end dense,
    # because the selection rule wants the cheapest point at least as accurate as Strong. Timesteps: 12 rollouts
    # of 16,384 transitions, from the throughput measured before the run (10,500 steps/s on one thread of an idle
    # core, a ~8 s warm start: a fit ~27 s, the 75 fits ~34 min of one core, plus the replays).
    "replay": PPOProtocol("ppo", (0.0, 0.01, 0.02, 0.05, 0.1, 0.2), 196_608),
    # Route: B is the protocol's cost unit (1.06M p_tokens on the paper pool) and the cascade spends 174k p_tokens
    # per problem, 0.164 B; the verdict asks for its accuracy within 0.5 points at < 0.8 of its cost, i.e. a
    # saving of >= 0.033 B for <= 0.5-1 point, whose break-even lambda is 0.15-0.3: the grid covers the whole
    # training range [0, 0.5], denser there. Selection "last", the cascade's own, so the warm-started policy
    # reproduces the cascade's outcomes and not only its actions (verifier scores still inform its decisions).
    # Timesteps: 5 rollouts, from the throughput measured on the training side of the aime2025 outer fold
    # (``python scripts/time_route_ppo.py``: 9,000 steps per CPU second; at 81,920 steps a refit took 13.1 CPU s),
    # so that the 75 fits and the replays of the 3-seed run take about 17 minutes of one free core.
    "route": PPOProtocol("route_ppo", (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5), 81_920,
                         fallback=CASCADE_POINT, env_kwargs={"selection": "last"}),
}
#: Lambdas and timesteps of the replay env's protocol (the default ``PPOMethod()``).
GRID_LAMBDAS: tuple[float, ...] = PPO_PROTOCOLS["replay"].lambdas
TOTAL_TIMESTEPS = PPO_PROTOCOLS["replay"].total_timesteps


@dataclass
class PPOFitted:
    """A trained PPO checkpoint directory; ``policy(point)`` is its controller at lambda ``point["lam"]``, or the
    arena's reference at the fallback point."""

    path: Path
    reference: str = ""
    fallback: dict[str, float] | None = None
    _controller: PPOController | None = field(default=None, repr=False)

    def policy(self, point: dict[str, float]) -> Policy:
        """The checkpoint's deterministic controller at ``point["lam"]`` (one loaded model shared by all points)."""
        if self.fallback is not None and point == self.fallback:
            from agents.registry import make_policy

            return make_policy(self.reference)
        if set(point) != {"lam"}:
            other = f" or {self.fallback}" if self.fallback is not None else ""
            raise ValueError(f"a PPO operating point is {{'lam': value}}{other}, got {point}")
        if self._controller is None:
            loaded = load(self.path)
            assert isinstance(loaded, PPOController)
            self._controller = loaded
        base = self._controller
        return PPOController(base.model, base.meta, lam=float(point["lam"]), source=base.source)


class PPOMethod:
    """Lambda-conditioned MaskablePPO (balanced sampling, warm start from the reference) on ``env``'s arena."""

    def __init__(self, env: str = "replay", *, lambdas: Sequence[float] | None = None,
                 total_timesteps: int | None = None, n_envs: int = N_ENVS, **train_options: Any) -> None:
        from train.protocol_arena import arena_named

        self.arena, self.protocol = arena_named(env), PPO_PROTOCOLS[env]
        self.name = self.protocol.name
        low, high = LAMBDA_RANGE
        values = [float(x) for x in (self.protocol.lambdas if lambdas is None else lambdas)]
        if not values or any(not np.isfinite(x) or not low <= x <= high for x in values):
            raise ValueError(f"lambdas must be finite numbers in the training range [{low:g}, {high:g}], "
                             f"got {list(values)}")
        if len(set(values)) != len(values):
            raise ValueError(f"lambdas must be distinct, got {list(values)}")
        total_timesteps = self.protocol.total_timesteps if total_timesteps is None else total_timesteps
        for key, value in (("total_timesteps", total_timesteps), ("n_envs", n_envs)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
        self.lambdas = tuple(values)
        self.total_timesteps = int(total_timesteps)
        self.n_envs = int(n_envs)
        self.train_options = {"order": "balanced", "warm_start": True, **train_options}

    def grid(self) -> list[dict[str, float]]:
        """One operating point per lambda of ``lambdas``, in order, then the fallback where stated."""
        points = [{"lam": lam} for lam in self.lambdas]
        return points + [self.fallback()] if self.protocol.fallback is not None else points

    def fallback(self) -> dict[str, float] | None:
        """The reference itself where stated (``CASCADE_POINT``); else None: the protocol's own."""
        return None if self.protocol.fallback is None else dict(self.protocol.fallback)

    def fit(self, compiled: Any, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> PPOFitted:
        """``train_ppo`` on the episodes ``train_ids`` with budget ``budget``; the checkpoint as a ``PPOFitted``."""
        from train.ppo import train_ppo

        ids = [int(i) for i in np.asarray(train_ids).tolist()]
        if not ids:
            raise ValueError(f"{type(self).__name__}.fit: no training episodes")
        options = dict(self.train_options)
        if self.protocol.env_kwargs:
            options["env_kwargs"] = {**self.protocol.env_kwargs, **options.get("env_kwargs", {})}
        path = train_ppo(compiled, out_dir, grouping=self.arena.grouping, episode_ids=ids,
                         total_timesteps=self.total_timesteps, n_envs=self.n_envs, seed=int(seed), progress=progress,
                         budget=float(budget), lambda_range=LAMBDA_RANGE, tensorboard=False, **options)
        return PPOFitted(Path(path), reference=self.arena.reference, fallback=self.protocol.fallback)
