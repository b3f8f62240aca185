"""Cost measures: every action's cost is recorded in all of them; a cost model picks the one the reward uses.

``usd`` is dollars from the pool's per-model prices (``pools.prices``): ``(prompt_tokens * input + output_tokens
* output) / 1e6`` per call. A pool without prices records 0 there and ``CompiledPool.usd_priced`` is False; the
bench then shows no usd figure and refuses ``--cost usd``.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add

#: Cost measures, in the order of the last axis of every cost array.
COST_MEASURES: tuple[str, ...] = ("tokens", "p_tokens", "calls", "latency", "usd")
TOKENS, P_TOKENS, CALLS, LATENCY, USD = range(5)
#: Dollars per million tokens -> dollars per token.
PER_MILLION = 1e-6


def cost_index(cost_model: str) -> int:
    """Index of ``cost_model`` in ``COST_MEASURES``; raises ValueError naming the allowed values."""
    try:
        return COST_MEASURES.index(cost_model)
    except ValueError:
        raise ValueError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}") from None


def add_costs(total: Sequence[float], cost: Sequence[float]) -> tuple[float, ...]:
    """``total`` plus one action's ``cost``, measure by measure over every measure of ``COST_MEASURES``.

    The one cost-adding rule of the one-episode env, the live envs and the oracle's model (the vector env adds
    its whole ``[K, B]`` cost array at once, every measure too).
    """
    return tuple(map(add, total, cost))


def sum_costs(total: Sequence[float], rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """``total`` plus every cost row of ``rows`` in order: ``add_costs`` row by row, the same float additions."""
    if len(total) == 5:  # every cost measure of COST_MEASURES, unrolled
        t0, t1, t2, t3, t4 = total
        for row in rows:
            t0 += row[0]
            t1 += row[1]
            t2 += row[2]
            t3 += row[3]
            t4 += row[4]
        return (t0, t1, t2, t3, t4)
    for row in rows:
        total = add_costs(total, row)
    return tuple(total)


def cost_record(cost: Sequence[float]) -> dict[str, float]:
    """One cost row as ``{measure: value}`` over ``COST_MEASURES`` (a new dict: callers may keep or edit it).

    The five measures are spelt out (a dict display is about twice as fast as ``dict(zip(...))``, and every final
    info builds several); a row of another length is refused.
    """
    if len(cost) != len(COST_MEASURES):
        raise ValueError(f"a cost row has one value per measure {list(COST_MEASURES)}; got {len(cost)} values")
    return {"tokens": cost[0], "p_tokens": cost[1], "calls": cost[2], "latency": cost[3], "usd": cost[4]}


if tuple(cost_record(range(len(COST_MEASURES)))) != COST_MEASURES:  # the spelt-out names follow COST_MEASURES
    raise ImportError("coba_env.costs.cost_record names other measures than COST_MEASURES")
