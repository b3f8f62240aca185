"""Transitional aliases for callers outside ``eval`` that still import the route replay's old names.

The route replay is ``eval.runner``'s, with ``grouping="item"`` (issue 34 folded ``eval/route_replay.py`` into the
one runner); ``train/protocol_arena.py`` and ``train/route_search.py`` (and their tests) still import these two
names. Delete this module once they call ``eval.runner.replay_policy`` / ``run_policies`` with ``grouping="item"``.
"""

from __future__ import annotations

from typing import Any

from agents.base import Policy
from coba_env.compiled import CompiledPool
from eval.runner import BenchRun, PolicyRun, replay_policy, run_policies


def replay_route_policy(policy: Policy, pool: CompiledPool, **options: Any) -> PolicyRun:
    """``eval.runner.replay_policy(policy, pool, grouping="item", ...)``."""
    return replay_policy(policy, pool, grouping="item", **options)


def run_route_policies(policies: Any, pool: CompiledPool, **options: Any) -> BenchRun:
    """``eval.runner.run_policies(policies, pool, grouping="item", workers=1, ...)`` (in one process, as before)."""
    return run_policies(policies, pool, grouping="item", workers=1, **options)
