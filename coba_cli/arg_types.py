"""Argument types shared by the ``coba`` subcommands: argparse ``type=`` callables with clear messages."""

from __future__ import annotations

import argparse

#: The cost measures a subcommand may charge in (see docs/ENV.md, "Costs and budget").
COST_CHOICES = ("p_tokens", "tokens", "calls", "latency")


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A number > 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def lambda_list(text: str) -> list[float]:
    """One or more lambdas >= 0, separated by commas or spaces."""
    try:
        values = [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected one or more lambdas >= 0, got {text!r}")
    return values
