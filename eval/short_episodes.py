"""Policies defined by a number of candidates (best-of-n's n) on episodes that hold fewer: the one-line note.

A pool may hold different numbers of candidates per episode (N is the most; ``pools.validate``). SAMPLE is illegal
once an episode's own are revealed (``EnvConfig.sample_caps``), so a best-of-n or sample-then-verify policy takes
what a short episode has, as a researcher running best-of-n on such a pool expects (a policy that needs more than
N is still not applicable: ``agents.configured.need_candidates``). The bench and the sweep say so, one line per
such policy, so that a result over short episodes is never read as a full best-of-n.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.policy_calls import contained_call
from eval.runner import BenchRun


def short_episode_notes(policies: Sequence[Any], run: BenchRun, caps: np.ndarray) -> list[str]:
    """One line per policy that ran and wants more candidates than some episodes hold: how many of them.

    ``caps``: the episodes' ``EnvConfig.sample_caps`` ([E] with pairs, [E, G] per generator with items). With
    items a policy's n counts against the generator its SAMPLE draws from (``sample_id``: generator g's SAMPLE is
    action g), not the item's total: best-of-n samples one generator."""
    caps = np.asarray(caps)
    if not len(caps):
        return []
    ran = {r.name for r in run.runs if r.applicable}
    out = []
    for policy in policies:
        wanted = getattr(policy, "wanted_candidates", None)
        n = contained_call(policy, "wanted_candidates", "", wanted) if callable(wanted) and policy.name in ran else 0
        held = caps[:, int(getattr(policy, "sample_id", 0))] if caps.ndim == 2 else caps
        short = int((held < n).sum()) if isinstance(n, int) and n > 0 else 0
        if short:
            out.append(f"note: {policy.name}: {short} of {len(held)} episodes had fewer than {n} candidates; it used "
                       "what they had")
    return out
