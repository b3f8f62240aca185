"""Per-model prices in US dollars per million tokens: the pool manifest's ``prices_usd_per_million_tokens``.

Shape: ``{"<model>": {"input": <float>, "output": <float>}}``, every number in 0 .. ``MAX_PRICE_USD_PER_M``
(``pools.limits``), every model a model of the pool. A call of a priced model costs ``(prompt_tokens * input + output_tokens * output) / 1e6``
dollars (``coba_env.costs``, measure ``usd``); a pool without this key has no ``usd`` measure, and a pool
that prices some models but not others cannot be costed in dollars either (``unpriced_models`` names them).
``coba pools import --price MODEL=IN[,OUT]`` writes the key (``parse_price``: one number prices input and
output alike).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pools.limits import MAX_PRICE_USD_PER_M

__all__ = ["PRICES_KEY", "check_prices", "parse_price", "price_problem", "unpriced_models"]

#: The optional manifest key holding the prices.
PRICES_KEY = "prices_usd_per_million_tokens"
_SIDES = ("input", "output")


def parse_price(text: str) -> tuple[str, dict[str, float]]:
    """``"gpt-4=30,60"`` -> ``("gpt-4", {"input": 30.0, "output": 60.0})``; ``"m=0.24"`` prices both sides alike.

    Raises ValueError naming what was expected.
    """
    model, sep, numbers = text.rpartition("=")
    parts = numbers.split(",")
    if not sep or not model.strip() or not 1 <= len(parts) <= 2:
        raise ValueError(f"expected MODEL=IN[,OUT] (dollars per million tokens), got {text!r}")
    values = []
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"expected MODEL=IN[,OUT] with numbers, got {part!r} in {text!r}") from None
        if not _in_range(value):
            raise ValueError(f"expected prices that are numbers in 0..{MAX_PRICE_USD_PER_M:g} dollars per million "
                             f"tokens, got {part!r} in {text!r}")
        values.append(value)
    return model.strip(), {"input": values[0], "output": values[-1]}


def check_prices(prices: Any, models: Iterable[str]) -> str | None:
    """What is wrong with a manifest's ``prices`` for a pool of ``models`` (None when nothing is)."""
    if not isinstance(prices, dict):
        return f"is {prices!r}; expected an object of model -> {{\"input\": $/M tokens, \"output\": $/M tokens}}"
    known = set(models)
    for model, entry in prices.items():
        if model not in known:
            return f"prices model {model!r}, which is not a model of the pool; expected some of {sorted(known)}"
        problem = price_problem(entry)
        if problem:
            return f"gives {model!r} {problem}"
    return None


def price_problem(entry: Any) -> str | None:
    """What is wrong with one model's price ``{"input": $/M, "output": $/M}`` (None when nothing is)."""
    if not isinstance(entry, dict) or set(entry) != set(_SIDES):
        return f"{entry!r}; expected {{\"input\": <number>, \"output\": <number>}}"
    for side in _SIDES:
        value = entry[side]
        if isinstance(value, bool) or not isinstance(value, int | float) or not _in_range(value):
            return (f"{side} price {value!r}; expected a number in 0..{MAX_PRICE_USD_PER_M:g} "
                    "(dollars per million tokens)")
    return None


def _in_range(value: float) -> bool:
    return math.isfinite(value) and 0 <= value <= MAX_PRICE_USD_PER_M


def unpriced_models(prices: Mapping[str, Any] | None, models: Iterable[str]) -> list[str]:
    """The ``models`` without a price (all of them when the pool has no prices)."""
    return [m for m in models if not prices or m not in prices]
