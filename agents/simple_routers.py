"""The simple baselines beside every prompt-aware router: always one generator, or a random one.

LLMRouterBench re-ran ten routers under one protocol and found that many do not beat such baselines, so every
claim of ``docs/ROUTING.md`` stands beside them. Each samples its generator ``samples`` times and stops
(selection: majority). They are registered policy kinds but not named in ``agents/policies.yaml`` (a route
bench's default selection stays as it was): bench them by class, ``--policies
agents.simple_routers:AlwaysLargest``, or name them in a spec file (``{kind: always_generator, params:
{generator: largest}}``). The per-category prior router is trained (``coba train prior_router``) and the oracle
is ``route_pool_oracle``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.configured import can, register
from agents.routing_base import RoutePolicy
from agents.routing_single import SingleGeneratorRouter
from coba_env.evidence import Evidence


@register("always_generator")
class AlwaysGenerator(SingleGeneratorRouter):
    """SAMPLE ``generator`` ("cheapest", "largest" or a name) ``samples`` times, then STOP by majority; runs on a
    one-generator route pool too (``route_single`` with another STOP rule)."""

    min_generators: ClassVar[int] = 1
    selection_rule: ClassVar[str] = "majority"


@register("always_cheapest")
class AlwaysCheapest(AlwaysGenerator):
    """Always the generator with the fewest parameters."""

    defaults: ClassVar[dict[str, Any]] = {"generator": "cheapest", "samples": 1}


@register("always_largest")
class AlwaysLargest(AlwaysGenerator):
    """Always the generator with the most parameters (an API model of unknown size counts as largest)."""

    defaults: ClassVar[dict[str, Any]] = {"generator": "largest", "samples": 1}


@register("random_router")
class RandomRouter(RoutePolicy):
    """Route each problem to ``strong`` with probability ``share``, else to ``weak`` (one draw per episode from
    ``seed``, independent of the problem); ``share`` is its operating point. Expected APGR 0.5."""

    defaults: ClassVar[dict[str, Any]] = {"share": 0.5, "seed": 0, "weak": "cheapest", "strong": "largest"}
    generator_params: ClassVar[tuple[str, ...]] = ("weak", "strong")
    operating_parameter: ClassVar[str] = "share"
    share: float
    seed: int
    weak: str
    strong: str

    def configure(self) -> None:
        """Majority selection; share in [0, 1]."""
        if not 0.0 <= float(self.share) <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {self.share}")
        self.selection = "majority"

    def _draws(self, n_episodes: int) -> np.ndarray:
        """One uniform draw per episode of the env's episode list (the same draws at every share)."""
        return np.random.default_rng(self.seed).random(n_episodes)

    def reset(self, env: Any) -> None:
        """Draw this episode's route."""
        super().reset(env)
        base = env.unwrapped
        strong = self._draws(base.pool.n_episodes)[base.episode_index] < self.share
        self._action = self.layout.sample_action(self.gen["strong" if strong else "weak"])

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE the drawn generator once, then STOP."""
        if evidence.n_revealed < 1 and can(action_mask, self._action):
            return self._action
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Draw the routes of the rows' new episodes."""
        super().start_batch(venv, rows)
        if rows is None:
            self._u = self._draws(venv.pool.n_episodes)
            self._b_action = np.zeros(venv.num_envs, dtype=np.int64)
            rows = np.arange(venv.num_envs)
        strong = self._u[venv.ep[rows]] < self.share
        weak_id, strong_id = (self.layout.sample_action(self.gen[p]) for p in ("weak", "strong"))
        self._b_action[rows] = np.where(strong, strong_id, weak_id)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row."""
        go = (venv.n < 1) & (np.take_along_axis(action_masks, self._b_action[:, None], axis=1)[:, 0] > 0)
        return np.where(go, self._b_action, self.stop_id).astype(np.int64)
