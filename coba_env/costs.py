"""Cost measures: every action's cost is recorded in all four; a cost model picks the one the reward uses."""

from __future__ import annotations

#: Cost measures, in the order of the last axis of every cost array.
COST_MEASURES: tuple[str, ...] = ("tokens", "p_tokens", "calls", "latency")
TOKENS, P_TOKENS, CALLS, LATENCY = range(4)


def cost_index(cost_model: str) -> int:
    """Index of ``cost_model`` in ``COST_MEASURES``; raises ValueError naming the allowed values."""
    try:
        return COST_MEASURES.index(cost_model)
    except ValueError:
        raise ValueError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}") from None
