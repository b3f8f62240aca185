"""The pool oracle: an evaluator-side upper bound that READS CORRECTNESS LABELS. Never a deployable method."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import ConfiguredPolicy, can, register
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence


@register("pool_oracle")
class PoolOracle(ConfiguredPolicy):
    """Pool oracle (paper Appendix C): selects a correct candidate whenever the pool holds one.

    !!! THIS POLICY READS CORRECTNESS LABELS (``env.pool.labels``) IN ``reset(env)``. It is one of the three
    oracles that do (``uses_labels = True``, group ``oracle``; the route env's ``route_pool_oracle`` and
    ``route_cost_aware_oracle`` in ``agents.routing_oracle`` are the others); it exists to quantify headroom and
    must never be compared as a deployable method. Every other policy is proven label-free by
    tests/test_label_leak.py.

    Rule: SAMPLE until the first correct candidate (within the env's N_max) is revealed, then STOP with
    selection ``last`` (the newest candidate with an answer: the correct one). When the pool holds no
    correct candidate, nothing can make the episode right, so it SAMPLEs once and STOPs (cheapest). Its cost
    is therefore that of the shortest prefix containing a correct answer, which matches the paper's
    ~1.5 calls per item; exhausting the pool on unsolvable items would cost about +1.3 calls more there.
    """

    group: ClassVar[str] = "oracle"
    uses_labels: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {}

    def configure(self) -> None:
        """Selection ``last``: the newest revealed candidate with an answer."""
        self.selection = "last"
        self._target = 1

    def reset(self, env: CoBaEnv) -> None:
        """Read the episode's labels: how many candidates to reveal (first correct + 1, or 1 if none)."""
        super().reset(env)
        base = env.unwrapped
        # CoBaEnv keeps the current episode's row index private; this evaluator-side policy is its one reader.
        correct = base.pool.labels.correct[base.episode_index, : base.n_max]
        hits = np.flatnonzero(correct)
        self._target = int(hits[0]) + 1 if hits.size else 1

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE up to the first correct candidate, then STOP."""
        if evidence.n_revealed < self._target and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Read the labels of the rows' new episodes, as ``reset`` does for one (evaluator side only)."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_target = np.ones(venv.num_envs, dtype=np.int64)
            rows = np.arange(venv.num_envs)
        correct = venv.pool.labels.correct[venv.ep[rows], : venv.n_max]
        hit = correct.any(axis=1)
        self._b_target[rows] = np.where(hit, correct.argmax(axis=1) + 1, 1)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        return np.where((venv.n < self._b_target) & legal(action_masks, self.sample_id), self.sample_id, self.stop_id)
