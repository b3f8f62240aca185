"""The one policy interface shared by fixed rules, the evaluator-side oracle and learned controllers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence


class Policy(ABC):
    """A routing policy: given what the environment revealed, choose SAMPLE, VERIFY_l or STOP.

    A policy sees the observation vector, the action mask and the episode's label-free ``Evidence``
    (``env.unwrapped.evidence``), never correctness labels. ``selection`` is the STOP rule the env is
    configured with for this policy (a ``SelectionRule`` spec); ``requires_tiers`` lists the verifier
    tiers without which the policy is reported as not applicable.
    """

    name: str = "policy"
    label: str = "Policy"
    group: ClassVar[str] = "baseline"  # "coba", "baseline", "oracle" or "learned"
    uses_labels: ClassVar[bool] = False
    requires_tiers: tuple[str, ...] = ()
    selection: Any = None

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``CoBaEnv`` that this policy needs (its selection rule)."""
        return {"selection": self.selection} if self.selection is not None else {}

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Whether the policy can run on ``env``'s pool, and why not."""
        missing = [t for t in self.requires_tiers if t not in env.enabled_tiers]
        if missing:
            return False, f"needs verifier tier(s) {missing}, absent from the pool"
        return True, ""

    def reset(self, env: CoBaEnv) -> None:
        """Called at the start of every episode (after ``env.reset``)."""

    @abstractmethod
    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Choose the next action id (SAMPLE = 0, VERIFY_V1..V3 = 1..3, STOP = 4 with the default tiers)."""

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly description (name, label, group and parameters)."""
        return {"name": self.name, "label": self.label, "group": self.group}
