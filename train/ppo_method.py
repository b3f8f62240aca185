"""PPO as a method of the issue-19 protocol (``train/protocol.py``): its grid, its fit, its policies.

Everything here is stated before any held-out run:

- grid: the lambdas the one lambda-conditioned PPO model is evaluated at, ``GRID_LAMBDAS``. They span the
  frontier's break-even slopes (``train/ppo.py``'s docstring: every step of the fixed policies' frontier lies
  in lambda [0, 0.4], CoBa-Strong's near 0.05-0.1) with the low end dense, because the selection rule wants
  the cheapest point that is at least as accurate as Strong and accuracy is bought at the low lambdas.
- fit: ``train_ppo`` on the fold's training episodes with the budget B the protocol gives (issue 19: the
  training datasets' own; since issue 27 the pool's one cost unit, ``train.protocol.cost_unit``), the seed, dataset-balanced episode order, the warm start from CoBa-Strong and
  ``TOTAL_TIMESTEPS`` steps (set from the measured throughput so that the 75 fits of the full protocol fit
  the compute budget: docs/LEARNING.md). PPO coefficients are ``train.ppo.DEFAULT_PPO_KWARGS`` (SB3's
  ent_coef = 0; the rest the standard PPO values), none picked on any held-out dataset.
- policy(point): the final checkpoint acting deterministically at lambda = ``point["lam"]``, observing with the
  fold's B (``PPOController.env_kwargs``).
- fallback: none stated; the protocol's own (the point with the highest inner item-pooled difference).

Example::

    from train.protocol import run_protocol
    from train.ppo_method import PPOMethod
    result = run_protocol(as_compiled("paper"), PPOMethod(), out_dir="runs/protocol-ppo")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.learned_ppo import PPOController, load

#: Lambdas PPO is evaluated at (the protocol's grid for this method), stated in advance.
GRID_LAMBDAS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)
#: Timesteps per fit (12 rollouts of 16,384 transitions), from the throughput measured before the run: PPO on a
#: paper-pool fold ran 10,500 steps/s on one thread of an idle core and the warm start took ~8 s, so a fit is
#: ~27 s and the 75 fits of the protocol ~34 min of one core, plus the replays (the 3 seeds took 69 min of wall
#: time on the 2 shared cores).
TOTAL_TIMESTEPS = 196_608
#: Sub-environments per fit (``train/ppo.py``: 1024 x 16 steps = one rollout of 16,384 transitions).
N_ENVS = 1024


@dataclass
class PPOFitted:
    """A trained PPO checkpoint directory; ``policy(point)`` is its controller at lambda ``point["lam"]``."""

    path: Path
    _controller: PPOController | None = field(default=None, repr=False)

    def policy(self, point: dict[str, float]) -> Policy:
        """The checkpoint's deterministic controller at ``point["lam"]`` (one loaded model shared by all points)."""
        if set(point) != {"lam"}:
            raise ValueError(f"a PPO operating point is {{'lam': value}}, got {point}")
        if self._controller is None:
            loaded = load(self.path)
            assert isinstance(loaded, PPOController)
            self._controller = loaded
        base = self._controller
        return PPOController(base.model, base.meta, lam=float(point["lam"]), source=base.source)


class PPOMethod:
    """Lambda-conditioned MaskablePPO (balanced sampling, CoBa-Strong warm start) under the protocol."""

    name = "ppo"

    def __init__(self, *, lambdas: Sequence[float] = GRID_LAMBDAS, total_timesteps: int = TOTAL_TIMESTEPS,
                 n_envs: int = N_ENVS, **train_options: Any) -> None:
        values = [float(x) for x in lambdas]
        if not values or any(not np.isfinite(x) or x < 0 for x in values):
            raise ValueError(f"lambdas must be finite numbers >= 0, got {list(lambdas)}")
        if int(total_timesteps) < 1 or int(n_envs) < 1:
            raise ValueError(f"total_timesteps and n_envs must be >= 1, got {total_timesteps}, {n_envs}")
        self.lambdas = tuple(values)
        self.total_timesteps = int(total_timesteps)
        self.n_envs = int(n_envs)
        self.train_options = {"order": "balanced", "warm_start": True, **train_options}

    def grid(self) -> list[dict[str, float]]:
        """One operating point per lambda of ``lambdas``, in order."""
        return [{"lam": lam} for lam in self.lambdas]

    def fit(self, compiled: Any, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> PPOFitted:
        """``train_ppo`` on the episodes ``train_ids`` with budget ``budget``; the checkpoint as a ``PPOFitted``."""
        from train.ppo import train_ppo

        ids = [int(i) for i in np.asarray(train_ids).tolist()]
        if not ids:
            raise ValueError("PPOMethod.fit: no training episodes")
        path = train_ppo(compiled, out_dir, episode_ids=ids, total_timesteps=self.total_timesteps,
                         n_envs=self.n_envs, seed=int(seed), progress=progress, budget=float(budget),
                         tensorboard=False, **self.train_options)
        return PPOFitted(Path(path))
