"""PPO on the route env as a method of the learning protocol (issue 27, item 3): its grid, its fit, its policies.

``coba train ppo --lodo --env route`` runs ``train.protocol.run_protocol(compiled, RoutePPOMethod(),
arena=ROUTE)``: the protocol of docs/LEARNING.md on the route env, judged against the consistency cascade
(``route_cascade``) at the route arena's 0.8 cost bound. Everything here is stated before any held-out run:

- fit: ``train.ppo.train_ppo(..., route=True)`` on the route episodes of the fold's training problems, with the
  protocol's one cost unit B, the seed, dataset-balanced episode order, lambda drawn per episode from
  ``LAMBDA_RANGE`` and seen in the observation, and a warm start by behaviour cloning of the cascade (actor to
  its actions, critic to its returns-to-go: ``train.ppo_warm_start``), so PPO starts from the reference's
  behaviour. The env uses the cascade's own selection rule (``SELECTION``), so the cloned policy starts from the
  cascade's outcomes too, and every change PPO makes is a deviation from the reference whose payoff the reward
  measures. PPO coefficients: ``train.ppo.DEFAULT_PPO_KWARGS`` (none tuned on data), ``N_ENVS`` sub-envs,
  ``TOTAL_TIMESTEPS`` steps (sized from measured throughput so the 75 fits fit the compute budget).
- grid: the one model acting deterministically at each lambda of ``GRID_LAMBDAS``, then the cascade itself
  (``CASCADE_POINT``, the fallback when no lambda qualifies).
- policy(point): ``agents.learned_route_ppo.RoutePPOController`` (a route policy, ``routes = True``) carrying its
  env settings (budget B, N_max per generator, selection) in ``env_kwargs()``; the fallback point is the
  registry's ``route_cascade``.

Example::

    from train.protocol import run_protocol
    from train.protocol_arena import ROUTE
    from train.route_ppo_method import RoutePPOMethod
    result = run_protocol(as_compiled("paper"), RoutePPOMethod(), arena=ROUTE, out_dir="runs/protocol-route-ppo")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.learned_route_ppo import RoutePPOController, load
from train.ppo import DEFAULT_LAMBDA_RANGE
from train.ppo_warm_start import ROUTE_TEACHER

#: Lambdas the one model is evaluated at, stated in advance. The unit B is the protocol's cost unit (1.06M
#: p_tokens on the paper pool) and the cascade spends 174k p_tokens per problem, 0.164 B; the verdict asks for
#: its accuracy within 0.5 points at < 0.8 of its cost, i.e. a saving of >= 0.033 B for <= 0.5-1 point, whose
#: break-even lambda is 0.15-0.3. The grid covers the whole training range [0, 0.5] and is denser there.
GRID_LAMBDAS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
#: The grid point that is the reference itself (the route cascade): the fallback when no lambda qualifies, as
#: issue 27's replay methods fall back to CoBa-Strong.
CASCADE_POINT: dict[str, float] = {"cascade": 1.0}
#: Range lambda is drawn from per training episode: the replay PPO's (``train.ppo.DEFAULT_LAMBDA_RANGE``, its
#: docstring says why), which holds every grid lambda, both ends included.
LAMBDA_RANGE: tuple[float, float] = DEFAULT_LAMBDA_RANGE
#: The selection rule of the route env during training and evaluation: the teacher's own ("last": the newest
#: answered candidate), so the warm-started policy reproduces the cascade's outcomes and not only its actions.
#: Verifier calls still inform the policy's decisions (their scores are observed).
SELECTION = "last"
#: Sub-environments per fit (``train/ppo.py``: 1024 x 16 steps = one rollout of 16,384 transitions).
N_ENVS = 1024
#: Timesteps per fit: 5 rollouts of 16,384 transitions, from the throughput measured on the training side of the
#: aime2025 outer fold (``python scripts/time_route_ppo.py``, process CPU time on the shared machine: 9,000 steps
#: per CPU second; at 81,920 steps a refit took 13.1 CPU s, of which about 4 s warm start and set-up, an inner fit
#: 11.0 s, the 11 inner replays 0.7 s), so that the 75 fits and the replays of the 3-seed run take about 17
#: minutes of one free core, under the 20 allowed (65,536 steps: 14 minutes; 98,304: about 20).
TOTAL_TIMESTEPS = 81_920


@dataclass
class RoutePPOFitted:
    """A trained route-PPO checkpoint directory; ``policy(point)`` is its controller at ``point["lam"]``."""

    path: Path
    _controller: RoutePPOController | None = field(default=None, repr=False)

    def policy(self, point: dict[str, float]) -> Policy:
        """The controller at ``point["lam"]`` (one loaded model shared by all points), or the cascade."""
        if point == CASCADE_POINT:
            from agents.registry import make_policy

            return make_policy(ROUTE_TEACHER)
        if set(point) != {"lam"}:
            raise ValueError(f"a route PPO operating point is {{'lam': value}} or {CASCADE_POINT}, got {point}")
        if self._controller is None:
            self._controller = load(self.path)
        base = self._controller
        return RoutePPOController(base.model, base.meta, lam=float(point["lam"]), source=base.source)


class RoutePPOMethod:
    """Lambda-conditioned MaskablePPO on the route env (balanced order, cascade warm start) under the protocol."""

    name = "route_ppo"

    def __init__(self, *, lambdas: Sequence[float] = GRID_LAMBDAS, total_timesteps: int = TOTAL_TIMESTEPS,
                 n_envs: int = N_ENVS, **train_options: Any) -> None:
        low, high = LAMBDA_RANGE
        values = [float(x) for x in lambdas]
        if not values or any(not np.isfinite(x) or not low <= x <= high for x in values):
            raise ValueError(f"lambdas must be finite numbers in the training range [{low:g}, {high:g}], "
                             f"got {list(lambdas)}")
        if len(set(values)) != len(values):
            raise ValueError(f"lambdas must be distinct, got {list(lambdas)}")
        for key, value in (("total_timesteps", total_timesteps), ("n_envs", n_envs)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
        self.lambdas = tuple(values)
        self.total_timesteps = int(total_timesteps)
        self.n_envs = int(n_envs)
        self.train_options = {"order": "balanced", "warm_start": True, **train_options}

    def grid(self) -> list[dict[str, float]]:
        """One point per lambda of ``lambdas``, in order, then the cascade (``CASCADE_POINT``)."""
        return [{"lam": lam} for lam in self.lambdas] + [self.fallback()]

    def fallback(self) -> dict[str, float]:
        """The cascade itself: the reference."""
        return dict(CASCADE_POINT)

    def fit(self, compiled: Any, train_ids: np.ndarray, *, budget: float, seed: int, out_dir: Path,
            progress: bool) -> RoutePPOFitted:
        """``train_ppo(..., route=True)`` on the problems of the replay episodes ``train_ids`` with budget B."""
        from train.ppo import train_ppo

        ids = np.asarray(train_ids, dtype=np.int64)
        if ids.size == 0:
            raise ValueError("RoutePPOMethod.fit: no training episodes")
        path = train_ppo(compiled, out_dir, episode_ids=ids.tolist(), total_timesteps=self.total_timesteps,
                         n_envs=self.n_envs, seed=int(seed), progress=progress, budget=float(budget),
                         lambda_range=LAMBDA_RANGE, tensorboard=False, route=True,
                         env_kwargs={"selection": SELECTION}, **self.train_options)
        return RoutePPOFitted(Path(path))
