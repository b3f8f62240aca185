"""``coba sweep --grid NAME=v1,v2,...``: any constructor parameter of any policy swept, one sweep point per value.

The policy may be a registered one (``agents/policies.yaml``), one of a YAML spec file, or the user's own class
(``FILE.py:Class`` / ``module:Class``); each point is that policy built with the parameter overridden
(``agents.registry.make_policy(name, **{NAME: value})``), named ``<policy>[NAME=value]``. Several ``--grid``
options sweep their product. Values are read as YAML scalars: ``4`` an integer, ``0.5`` a number, ``true`` a
boolean, anything else text.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

#: The most points one grid may make (its product over every ``--grid``).
MAX_GRID_POINTS = 200


class GridError(ValueError):
    """A malformed ``--grid`` option; the sweep turns it into its one-line input error."""


def parse_value(text: str) -> Any:
    """One grid value as a YAML scalar would read: int, float, bool, else the text itself."""
    raw = text.strip()
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for convert in (int, float):
        try:
            value = convert(raw)
        except ValueError:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise GridError(f"--grid value {raw!r}: expected a finite number")
        return value
    return raw


def parse_grid(options: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """``["NAME=v1,v2", ...]`` -> {NAME: (v1, v2)}; a malformed option raises ``GridError`` naming it."""
    grid: dict[str, tuple[Any, ...]] = {}
    for option in options:
        name, sep, values = option.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise GridError(f"--grid {option!r}: expected NAME=v1,v2,... with NAME a parameter name")
        if name in grid:
            raise GridError(f"--grid names {name!r} twice; give all its values in one option")
        if not values.strip():
            raise GridError(f"--grid {option!r}: no value after '='")
        items = values.split(",")
        if not all(v.strip() for v in items):
            raise GridError(f"--grid {option!r}: an empty value between commas; expected NAME=v1,v2,...")
        parsed = [parse_value(v) for v in items]
        # A repeated value is one point; keyed by type too, so that 1 and true stay two points (True == 1).
        grid[name] = tuple({(type(v), v): v for v in parsed}.values())
    points = math.prod(len(v) for v in grid.values())
    if points > MAX_GRID_POINTS:
        raise GridError(f"--grid makes {points} points; at most {MAX_GRID_POINTS}")
    return grid


def grid_settings(grid: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the order given (the first parameter varies slowest)."""
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def setting_text(setting: dict[str, Any]) -> str:
    """A setting as ``NAME=value,...`` (numbers in their shortest form)."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting.items())


def point_name(policy: str, setting: dict[str, Any]) -> str:
    """The sweep point's name: ``<policy>[NAME=value,...]``."""
    return f"{policy}[{setting_text(setting)}]"
