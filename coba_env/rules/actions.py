"""Actions and verifier tiers: the action ids every env, policy and model of the env uses.

The tier axis is always the full V1, V2, V3 (``pools.schema.TIERS``), so action ids never change between
pools; a tier that is disabled or absent from a pool is simply never legal (see ``coba_env.rules.masks``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pools.schema import TIERS

N_TIERS = len(TIERS)
#: Tier indices on the tier axis of scores, costs and verified flags.
V1, V2, V3 = range(N_TIERS)
TIER_INDEX: dict[str, int] = {t: k for k, t in enumerate(TIERS)}

#: Action ids: SAMPLE, VERIFY_V1, VERIFY_V2, VERIFY_V3, STOP.
SAMPLE = 0
VERIFY_V1, VERIFY_V2, VERIFY_V3 = (1 + k for k in range(N_TIERS))
STOP = N_TIERS + 1
N_ACTIONS = N_TIERS + 2


def action_names(tiers: Sequence[str] = TIERS) -> list[str]:
    """Names of the discrete actions: SAMPLE, VERIFY_<tier>..., STOP."""
    return ["SAMPLE", *[f"VERIFY_{t}" for t in tiers], "STOP"]


def verify_action(tier: int) -> int:
    """The action id of VERIFY at tier index ``tier``."""
    return 1 + tier


def tier_of(action: int) -> int:
    """The tier index a VERIFY action id scores at."""
    return action - 1
