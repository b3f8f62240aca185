"""Cost measures: THE table of them. Every action's cost is recorded in all of them; a cost model picks the one the
reward uses.

``COST_TABLE`` declares each measure once: its name (the cost model, the key of ``info["costs"]`` and of a cost
record, the episode-record column), the macro metric it becomes, its unit, its table label and axis text, whether
it needs a priced pool, and its fill rule, how one model call's value is computed from the call's tokens, model
size, latency and model when a pool is compiled (``coba_env.compiled``) or a live call is made
(``call_costs``). Everything else is generated from the table: ``COST_MEASURES`` and the order of the last axis
of every cost array, ``cost_record``, the CLI's ``--cost`` choices, the metric and report column names
(``CostMeasure.metric`` / ``label``). Adding a measure is one entry here; the envs, the vector env and the
compiled pools carry it with no other change.

``usd`` is dollars from the pool's per-model prices (``pools.prices``): ``(prompt_tokens * input + output_tokens
* output) / 1e6`` per call, or the dollars the source recorded for the call where it did (``candidates.cost_usd``). A pool without prices records 0 there and ``CompiledPool.usd_priced`` is False
(``needs_prices``); the bench then shows no usd figure and refuses ``--cost usd``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import add
from typing import Any

import numpy as np

#: Dollars per million tokens -> dollars per token.
PER_MILLION = 1e-6


@dataclass(frozen=True)
class Calls:
    """Model calls (generations or verifications) as columns, one value per call: what a fill rule reads."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    #: The called model's parameters in billions.
    params_b: np.ndarray
    latency_s: np.ndarray
    #: The called model's name (object array).
    models: np.ndarray
    #: The pool's prices by model (``pools.prices``: {"input", "output"} dollars per million tokens); empty: none.
    prices: Mapping[str, Mapping[str, float]]
    #: Dollars the source recorded per call (NaN: none, priced from ``prices``); None: no call has any.
    recorded_usd: np.ndarray | None = None

    @property
    def tokens(self) -> np.ndarray:
        """Prompt plus output tokens of each call (float64)."""
        return (self.prompt_tokens + self.output_tokens).astype(np.float64)


@dataclass(frozen=True)
class CostMeasure:
    """One cost measure: its names for every layer, and how a call's value is filled in."""

    #: The cost model's name, the key of a cost record and of ``info["costs"]``, the episode-record column.
    name: str
    #: The macro metric (per-item mean) the bench reports it as.
    metric: str
    #: Its unit, for reports.
    unit: str
    #: Short column heading of the report's tables.
    label: str
    #: What the frontier figure's axis says (per item).
    axis: str
    #: The value of each call, [n calls] float64, from the calls' columns.
    fill: Callable[[Calls], np.ndarray]
    #: Real only on a pool that prices every model it calls (``CompiledPool.usd_priced``); 0 elsewhere.
    needs_prices: bool = False
    #: The unit of the per-item mean, as results.json's ``meta.units`` states it.
    per_item: str = ""
    #: How the report's tables show a per-item mean: ``table_format.format(value / table_scale)``.
    table_format: str = "{:.4g}"
    table_scale: float = 1.0

    def show(self, value: float) -> str:
        """``value`` (a per-item mean) as the report's tables show it."""
        return self.table_format.format(float(value) / self.table_scale)

    def supported(self, pool: Any) -> bool:
        """Whether ``pool`` (a ``CompiledPool``) records this measure for real (else it holds zeros)."""
        return not self.needs_prices or bool(pool.usd_priced)


def _usd(calls: Calls) -> np.ndarray:
    """Dollars per call: prompt and output tokens at each call's model's input and output price per million."""
    import pandas as pd

    free = {"input": 0.0, "output": 0.0}  # an unpriced model's calls (such a pool has no usd measure)
    codes, names = pd.factorize(np.asarray(calls.models, dtype=object), use_na_sentinel=False)  # few models
    price_in = np.array([calls.prices.get(m, free)["input"] for m in names], dtype=np.float64)[codes]
    price_out = np.array([calls.prices.get(m, free)["output"] for m in names], dtype=np.float64)[codes]
    priced = (np.asarray(calls.prompt_tokens, dtype=np.float64) * price_in
              + np.asarray(calls.output_tokens, dtype=np.float64) * price_out) * PER_MILLION
    recorded = calls.recorded_usd
    return priced if recorded is None else np.where(np.isfinite(recorded), recorded, priced)


#: THE cost measures, in the order of the last axis of every cost array.
COST_TABLE: tuple[CostMeasure, ...] = (
    CostMeasure("tokens", "total_tokens", "tokens", "Total Tok.", "total tokens per item",
                lambda c: c.tokens, per_item="tokens per item", table_format="{:.1f}k", table_scale=1000.0),
    CostMeasure("p_tokens", "p_tokens", "B-param tokens", "P-Tok.", "parameter-weighted tokens per item",
                lambda c: c.tokens * c.params_b, per_item="tokens x params (B) per item", table_format="{:.1f}k",
                table_scale=1000.0),
    CostMeasure("calls", "calls", "calls", "Calls", "model calls per item",
                lambda c: np.ones(len(c.latency_s)), per_item="model calls per item", table_format="{:.2f}"),
    CostMeasure("latency", "latency_s", "s", "Latency", "latency per item, s",
                lambda c: np.asarray(c.latency_s, dtype=np.float64), per_item="seconds per item",
                table_format="{:.1f}"),
    CostMeasure("usd", "usd", "USD", "USD", "dollars per item", _usd, needs_prices=True,
                per_item="dollars per item", table_format="${:.4g}"),
)
#: The measures' names, in table order.
COST_MEASURES: tuple[str, ...] = tuple(m.name for m in COST_TABLE)
#: The order the report's tables show the measures in: the paper's (Tok., Calls, P-Tok., Latency); a measure not
#: named here follows them in ``COST_TABLE`` order, so a new measure needs no entry here.
TABLE_ORDER: tuple[str, ...] = ("tokens", "calls", "p_tokens", "latency")


def cost_index(cost_model: str) -> int:
    """Index of ``cost_model`` in ``COST_MEASURES``; raises ValueError naming the allowed values."""
    try:
        return COST_MEASURES.index(cost_model)
    except ValueError:
        raise ValueError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}") from None


def measure(name: str) -> CostMeasure:
    """The table entry of the measure called ``name``; ValueError naming the allowed values."""
    return COST_TABLE[cost_index(name)]


def supported_measures(pool: Any) -> tuple[CostMeasure, ...]:
    """The measures ``pool`` records for real (``usd`` only where every called model is priced)."""
    return tuple(m for m in COST_TABLE if m.supported(pool))


def default_cost_model(pool: Any) -> tuple[str, str]:
    """Every command's ``--cost`` default on ``pool`` (a ``CompiledPool``): p_tokens, the paper's measure, when the
    pool sizes every model it calls, else the first measure of ``COST_TABLE`` the pool supports; with the one line
    that says so ("" for p_tokens)."""
    free = pool.unsized_models()
    if not free:
        return "p_tokens", ""
    chosen = next(m.name for m in supported_measures(pool) if m.name != "p_tokens")
    return chosen, (f"note: --cost not given: the pool gives {', '.join(free)} no size (params_b 0), so p_tokens "
                    f"cannot weigh its calls; costs are measured in {chosen}, the first measure the pool supports")


def cost_model_or_default(pool: Any, cost_model: str | None) -> str:
    """``cost_model`` when given, else ``default_cost_model``'s, whose line (if any) goes to stderr."""
    if cost_model is not None:
        return cost_model
    chosen, line = default_cost_model(pool)
    if line:
        print(line, file=sys.stderr)
    return chosen


def measure_of_metric(metric: str) -> CostMeasure:
    """The table entry whose macro metric is ``metric`` (``total_tokens`` -> tokens); ValueError naming them."""
    for m in COST_TABLE:
        if m.metric == metric:
            return m
    raise ValueError(f"unknown cost metric {metric!r}; expected one of {[m.metric for m in COST_TABLE]}")


def table_measures(metrics: Any = None) -> tuple[CostMeasure, ...]:
    """The measures in the report tables' order (``TABLE_ORDER``, then the rest), only those whose metric is in
    ``metrics`` (e.g. a frame's columns) when given."""
    rank = {name: i for i, name in enumerate(TABLE_ORDER)}
    ordered = sorted(COST_TABLE, key=lambda m: rank.get(m.name, len(rank)))
    return tuple(m for m in ordered if metrics is None or m.metric in metrics)


#: The measures other code reads by meaning (hard budgets, generator sizes, dollars).
TOKENS, P_TOKENS, CALLS, LATENCY, USD = map(cost_index, ("tokens", "p_tokens", "calls", "latency", "usd"))


def fill_costs(calls: Calls, out: np.ndarray) -> None:
    """Write every measure's fill rule for ``calls`` into ``out`` [n calls, K] (``COST_TABLE`` order)."""
    for k, m in enumerate(COST_TABLE):
        out[:, k] = m.fill(calls)


def call_costs(prompt_tokens: float, output_tokens: float, params_b: float, latency_s: float, model: str = "",
               prices: Mapping[str, Mapping[str, float]] | None = None) -> tuple[float, ...]:
    """One call's cost in every measure (a live call's), by the table's fill rules."""
    calls = Calls(np.array([prompt_tokens]), np.array([output_tokens]), np.array([params_b], dtype=np.float64),
                  np.array([latency_s], dtype=np.float64), np.array([model], dtype=object), prices or {})
    row = np.empty((1, len(COST_TABLE)))
    fill_costs(calls, row)
    return tuple(row[0].tolist())


def add_costs(total: Sequence[float], cost: Sequence[float]) -> tuple[float, ...]:
    """``total`` plus one action's ``cost``, measure by measure over every measure of ``COST_MEASURES``.

    The one cost-adding rule of the one-episode env, the live envs and the oracle's model (the vector env adds
    its whole ``[K, B]`` cost array at once, every measure too).
    """
    return tuple(map(add, total, cost))


def sum_costs(total: Sequence[float], rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """``total`` plus every cost row of ``rows`` in order: ``add_costs`` row by row, the same float additions."""
    if len(total) == 5:  # five measures (today's table), unrolled: every episode's final info reads the sum
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


def _refuse_row(cost: Sequence[float]) -> dict[str, float]:
    raise ValueError(f"a cost row has one value per measure {list(COST_MEASURES)}; got {len(cost)} values")


def _record_builder(names: tuple[str, ...]) -> Callable[[Sequence[float]], dict[str, float]]:
    """``cost -> {names[0]: cost[0], ...}`` as one dict display generated from the table's names: about twice as
    fast as ``dict(zip(names, cost))``, and every final info builds one per episode and one per generator."""
    display = ", ".join(f"{name!r}: cost[{k}]" for k, name in enumerate(names))
    record = eval(f"lambda cost: {{{display}}} if len(cost) == {len(names)} else refuse(cost)",  # noqa: S307
                  {"refuse": _refuse_row, "__name__": __name__})
    record.__name__ = record.__qualname__ = "cost_record"
    record.__doc__ = ("One cost row as ``{measure: value}`` over ``COST_MEASURES`` (a new dict: callers may keep "
                      "or edit it); a row of another length is refused.")
    return record


cost_record: Callable[[Sequence[float]], dict[str, float]] = _record_builder(COST_MEASURES)
