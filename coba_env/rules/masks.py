"""The legal-action mask and the reason text of an illegal action, scalar (bit pattern) and batched.

Rule: SAMPLE (from a generator) is legal while fewer than N_max candidates (of that generator) are revealed, and
fewer than the episode holds (``EnvConfig.sample_caps``: a pool may hold fewer for some episodes); VERIFY_l while some revealed candidate
with an answer has a tier-l call in the pool and is not verified at l (and tier l is enabled); STOP once a
candidate is revealed, or when nothing else is legal; only STOP once the hard budget ``max_cost`` is spent.
The scalar form is a bit pattern (bit a set = action a legal) looked up in a table of read-only arrays, so
no array is built per step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coba_env.rules.actions import ActionLayout

#: Largest action count whose masks are all built up front (2 ** n arrays); larger layouts build them on use.
EAGER_MASK_ACTIONS = 12


def tier_bits(tier_on: Sequence[bool], layout: ActionLayout) -> list[int]:
    """Mask bit of each tier's VERIFY action in ``layout``, 0 for a disabled tier."""
    return [1 << layout.verify_action(t) if on else 0 for t, on in enumerate(tier_on)]


class _LazyMasks(dict):
    """Masks by bit pattern, each built on first use (layouts with too many actions to build all)."""

    def __init__(self, n_actions: int) -> None:
        super().__init__()
        self.n_actions = n_actions

    def __missing__(self, bits: int) -> np.ndarray:
        m = self[bits] = _mask_of(bits, self.n_actions)
        return m


def _mask_of(bits: int, n_actions: int) -> np.ndarray:
    m = np.array([(bits >> a) & 1 for a in range(n_actions)], dtype=np.int8)
    m.flags.writeable = False
    return m


def mask_table(n_actions: int) -> list[np.ndarray] | dict[int, np.ndarray]:
    """Read-only int8 masks indexed by their bit pattern."""
    if n_actions > EAGER_MASK_ACTIONS:
        return _LazyMasks(n_actions)
    return [_mask_of(bits, n_actions) for bits in range(1 << n_actions)]


def stop_bit(layout: ActionLayout) -> int:
    """The mask bit of ``layout``'s STOP (every lower bit is a model call: a SAMPLE or a VERIFY)."""
    return 1 << layout.stop_action


def mask_bits(n: int, n_max: int, verify_bits: int, spent: bool, blocked: int = 0, *, stop_bit: int,
              sample_bits: int = -1) -> int:
    """The legal actions' bit pattern; ``verify_bits`` = OR of the tier bits with a candidate left to verify.

    ``sample_bits``: OR of the bits of the SAMPLE actions that are legal (default: the replay layout's one
    SAMPLE, legal while ``n < n_max``); ``stop_bit``: the layout's STOP bit. ``blocked``: calls an env's gate
    forbids now (a live env's hard budgets); STOP is legal once a candidate is revealed or when nothing else is.
    """
    if spent:
        return stop_bit
    if sample_bits < 0:
        sample_bits = 1 if n < n_max else 0
    bits = (sample_bits | verify_bits) & ~blocked
    if n > 0 or not bits:
        bits |= stop_bit
    return bits


def legal_actions(bits: int, layout: ActionLayout) -> list[int]:
    """The legal action ids of a bit pattern, in id order (STOP last)."""
    return [a for a in range(layout.n_actions) if (bits >> a) & 1]


def batch_masks(n: np.ndarray, n_max: int | np.ndarray, pending: np.ndarray, tier_on: np.ndarray, spent: np.ndarray,
                can_sample: np.ndarray | None = None) -> np.ndarray:
    """Masks int8 [B, G + T + 1] (batched ``mask_bits``); ``pending`` [T, B] counts candidates left per tier.

    ``can_sample`` [G, B]: which SAMPLE actions are legal (default: the one SAMPLE, legal while ``n < n_max``;
    ``n_max`` [B] holds each row's own cap where episodes hold different numbers of candidates).
    """
    t = len(tier_on)
    if can_sample is None:
        can_sample = (n < n_max)[None]
    g = len(can_sample)
    m = np.empty((len(n), g + t + 1), dtype=np.int8)
    anything = np.zeros(len(n), dtype=bool)
    for k in range(g):
        m[:, k] = can_sample[k]
        anything |= can_sample[k]
    for k in range(t):
        verify = pending[k] > 0
        if not tier_on[k]:
            verify[:] = False
        m[:, g + k] = verify
        anything |= verify
    m[:, g + t] = (n > 0) | ~anything
    if spent.any():
        m[spent] = 0
        m[spent, g + t] = 1
    return m


def illegal_reason(a: int, *, n_actions: int, names: Sequence[str], tiers: Sequence[str],
                   enabled_tiers: Sequence[str], spent: bool, n_max: int, max_cost: float, cost_model: str,
                   layout: ActionLayout, n_cap: int | None = None) -> str:
    """Why action ``a`` is not legal now (the ``ValueError`` text of ``step``); ``n_cap``: the most candidates this
    episode holds when fewer than ``n_max`` (one generator)."""
    if not 0 <= a < n_actions:
        return f"action {a} is outside the action space 0..{n_actions - 1}"
    if spent:
        why = f"the hard budget max_cost={max_cost:g} ({cost_model}) is spent; only STOP is allowed"
    elif layout.is_sample(a):
        if layout.n_generators == 1 and n_cap is not None and n_cap < n_max:
            why = f"the episode's {n_cap} candidates are all revealed (it holds fewer than N_max={n_max})"
        elif layout.n_generators == 1:
            why = f"N_max={n_max} candidates are already revealed"
        else:
            why = (f"generator {layout.generators[layout.generator_of(a)]} has no candidate left to reveal "
                   f"(N_max={n_max} per generator, or the item has none from it)")
    elif layout.is_stop(a):
        why = "no candidate has been revealed yet (SAMPLE first)"
    else:
        tier = tiers[layout.verifier_of(a)]
        if tier not in enabled_tiers:
            why = f"tier {tier} is disabled or absent from the pool"
        else:
            why = f"no revealed candidate is left to verify at {tier}"
    return f"action {a} ({names[a]}) is not allowed now: {why}"
