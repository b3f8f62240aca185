"""The cost-aware oracle as a ``Policy`` (evaluator side: it reads the correctness labels)."""

from __future__ import annotations

import numpy as np

from agents.base import Policy
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence
from train.cost_aware_oracle import DEFAULT_NODE_LIMIT, CostAwareOracle


class CostAwareOraclePolicy(Policy):
    """The oracle as a Policy (evaluator-side: reads labels; an upper bound, never a deployable method).

    It plans at the first ``act`` of an episode with the env's episode index and the episode's lambda, then
    replays the plan. Without an oracle it builds one for the env at its first episode
    (``CostAwareOracle.for_env``, either grouping); or pass an oracle configured like the env it will run in.
    """

    name = "cost_aware_oracle"
    label = "Cost-aware oracle"
    group = "oracle"
    uses_labels = True

    def __init__(self, oracle: CostAwareOracle | None = None, node_limit: int = DEFAULT_NODE_LIMIT) -> None:
        self.oracle = oracle
        self.node_limit = node_limit
        self._plan: list[int] = []
        self._episode = -1

    def reset(self, env: CoBaEnv) -> None:
        """Remember the env's episode; (re)build the oracle if it was built for another pool."""
        if self.oracle is None or self.oracle.pool is not env.pool:
            self.oracle = CostAwareOracle.for_env(env, self.node_limit)
        self._episode = env.episode_index
        self._plan = []
        self._started = False

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Replay the plan computed at the episode's first step."""
        if not self._started:
            self._plan = list(self.oracle.plan(self._episode, evidence.lam).actions)
            self._started = True
        return self._plan.pop(0)
