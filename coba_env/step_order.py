"""The order of calls a one-episode env accepts (reset before step), enforced by the env itself.

``gymnasium.make`` adds no ``OrderEnforcing`` wrapper to the registered envs (a call on every step), so the env
raises what that wrapper raised: a step before the first reset is ``gymnasium.error.ResetNeeded``; it is also a
``RuntimeError``, which the env raises for a step after the episode ended.
"""

from __future__ import annotations

from gymnasium.error import ResetNeeded

__all__ = ["StepBeforeReset"]


class StepBeforeReset(ResetNeeded, RuntimeError):
    """``step()`` called before ``reset()``: gymnasium's ``ResetNeeded`` and a ``RuntimeError``."""
