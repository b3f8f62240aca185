"""One number format per column, chosen from the column's own values: the same scale and decimals for every row.

A column of per-item costs spans orders of magnitude (dollars from 8e-05 to 0.0012, tokens from 4,447 to
17,460); formatting each value on its own mixes ``0.001186``, ``8.046e-05`` and ``1.746e+04`` in one column. Here
the largest magnitude of the column picks a scale (none, thousands "k" or millions "M", named in the header's unit)
and the decimals that give it ``digits`` significant digits; every value of the column then uses that format, so
the digits line up and a reader compares rows at a glance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: Significant digits of a column's largest value.
DIGITS = 4
#: The most decimals a column gets (a column of zeros and tiny values stays readable).
MAX_DECIMALS = 8
#: Scales by the column's largest magnitude: at or above the threshold, values are divided by the factor.
SCALES: tuple[tuple[float, float, str], ...] = ((1e7, 1e6, "M"), (1e4, 1e3, "k"))


def _finite(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            out.append(x)
    return out


@dataclass(frozen=True)
class ColumnFormat:
    """A column's format: divide by ``scale`` (``prefix`` "k", "M" or ""), then ``decimals`` decimals."""

    scale: float = 1.0
    prefix: str = ""
    decimals: int = 2
    signed: bool = False

    def __call__(self, value: Any) -> str:
        """``value`` in this format ("-" when missing or not finite)."""
        x = _finite([value])
        if not x:
            return "-"
        return f"{x[0] / self.scale:{'+' if self.signed else ''},.{self.decimals}f}"

    def unit(self, unit: str) -> str:
        """``unit`` with the scale's prefix ("k tokens")."""
        return f"{self.prefix} {unit}".strip() if self.prefix else unit

    def interval(self, low: Any, high: Any) -> str:
        """An interval in this format: "[1.23, 4.56]" ("" when either end is missing)."""
        lo, hi = self(low), self(high)
        return "" if "-" in (lo, hi) else f"[{lo}, {hi}]"


def column_format(values: Iterable[Any], digits: int = DIGITS, *, scaled: bool = True,
                  signed: bool = False) -> ColumnFormat:
    """The format of a column holding ``values``: its largest magnitude gets ``digits`` significant digits.

    ``scaled``: divide by thousands or millions when the largest magnitude reaches 10^4 or 10^7 (False for
    percentages, which keep their unit)."""
    finite = [abs(v) for v in _finite(values)]
    top = max(finite, default=0.0)
    scale, prefix = 1.0, ""
    if scaled:
        for threshold, factor, name in SCALES:
            if top >= threshold:
                scale, prefix = factor, name
                break
    top /= scale
    decimals = 0 if top == 0 else digits - 1 - math.floor(math.log10(top))
    return ColumnFormat(scale, prefix, min(max(decimals, 0), MAX_DECIMALS), signed)


def fixed(decimals: int, signed: bool = False) -> ColumnFormat:
    """A fixed format: ``decimals`` decimals, no scale (accuracy in percent, differences in points)."""
    return ColumnFormat(1.0, "", decimals, signed)


def formatter(values: Iterable[Any], digits: int = DIGITS) -> Callable[[Any], str]:
    """``column_format(values, digits)`` as a plain one-value formatter (for ``eval.table_render.Column``)."""
    return column_format(values, digits)
