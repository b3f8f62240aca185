"""The legal-action mask and the reason text of an illegal action, scalar (bit pattern) and batched.

Rule: SAMPLE is legal while fewer than N_max candidates are revealed; VERIFY_l while some revealed candidate
with an answer has a tier-l call in the pool and is not verified at l (and tier l is enabled); STOP once a
candidate is revealed, or when nothing else is legal; only STOP once the hard budget ``max_cost`` is spent.
The scalar form is a bit pattern (bit a set = action a legal) looked up in a table of read-only arrays, so
no array is built per step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coba_env.rules.actions import SAMPLE, STOP

STOP_BIT = 1 << STOP


def tier_bits(tier_on: Sequence[bool]) -> list[int]:
    """Mask bit of each tier's VERIFY action, 0 for a disabled tier."""
    return [2 << t if on else 0 for t, on in enumerate(tier_on)]


def mask_table(n_actions: int) -> list[np.ndarray]:
    """Read-only int8 masks indexed by their bit pattern."""
    table = []
    for bits in range(1 << n_actions):
        m = np.array([(bits >> a) & 1 for a in range(n_actions)], dtype=np.int8)
        m.flags.writeable = False
        table.append(m)
    return table


def mask_bits(n: int, n_max: int, verify_bits: int, spent: bool, blocked: int = 0) -> int:
    """The legal actions' bit pattern; ``verify_bits`` = OR of the tier bits with a candidate left to verify.

    ``blocked``: calls an env's gate forbids now (a live env's hard budgets); STOP is legal when nothing else is.
    """
    if spent:
        return STOP_BIT
    bits = ((1 if n < n_max else 0) | verify_bits) & ~blocked
    if n > 0 or not bits:
        bits |= STOP_BIT
    return bits


def legal_actions(bits: int) -> list[int]:
    """The legal action ids of a bit pattern, in id order (STOP last)."""
    return [a for a in range(STOP + 1) if (bits >> a) & 1]


def batch_masks(n: np.ndarray, n_max: int, pending: np.ndarray, tier_on: np.ndarray, spent: np.ndarray) -> np.ndarray:
    """Masks int8 [B, n_actions] (batched ``mask_bits``); ``pending`` [T, B] counts candidates left per tier."""
    t = len(tier_on)
    m = np.empty((len(n), t + 2), dtype=np.int8)
    can_sample = n < n_max
    m[:, SAMPLE] = can_sample
    anything = can_sample.copy()
    for k in range(t):
        m[:, 1 + k] = verify = (pending[k] > 0) & tier_on[k]
        anything |= verify
    m[:, t + 1] = (n > 0) | ~anything
    if spent.any():
        m[spent] = 0
        m[spent, t + 1] = 1
    return m


def illegal_reason(a: int, *, n_actions: int, names: Sequence[str], tiers: Sequence[str],
                   enabled_tiers: Sequence[str], spent: bool, n_max: int, max_cost: float, cost_model: str) -> str:
    """Why action ``a`` is not legal now (the ``ValueError`` text of ``step``)."""
    if not 0 <= a < n_actions:
        return f"action {a} is outside the action space 0..{n_actions - 1}"
    if spent:
        why = f"the hard budget max_cost={max_cost:g} ({cost_model}) is spent; only STOP is allowed"
    elif a == SAMPLE:
        why = f"N_max={n_max} candidates are already revealed"
    elif a == STOP:
        why = "no candidate has been revealed yet (SAMPLE first)"
    else:
        tier = tiers[a - 1]
        if tier not in enabled_tiers:
            why = f"tier {tier} is disabled or absent from the pool"
        else:
            why = f"no revealed candidate is left to verify at {tier}"
    return f"action {a} ({names[a]}) is not allowed now: {why}"
