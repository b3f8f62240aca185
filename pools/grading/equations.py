"""Answers written as equations of numbers (``18+3=21``, ``(6 - 4) * 12 = 24``): their value, or a literal key.

An equation of numbers is a claim. Handed to math-verify it is compared by its truth value, so every
false equation would equal every other one (``1+1=3`` and ``2+2=5``). The rule here:

* a true equation (every side worth the same, checked with exact fractions) states its final value:
  ``9-5=4`` is the answer 4, like ``2+2=4`` and ``1+3=4``; a decimal last side may be the others
  rounded to the digits it shows (``22/7=3.14``);
* any other equation of numbers (false, or with a side exact arithmetic cannot evaluate, such as a
  root or pi) stays whole: it keys as itself and matches only the same equation written the same way
  (``is_arithmetic_equation`` tells the comparison never to send it to math-verify).

Keys arrive normalized (no spaces, ``\\dfrac`` as ``\\frac``, no ``\\left``/``\\right``).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from fractions import Fraction

__all__ = ["arithmetic_value", "final_value", "is_arithmetic_equation"]

# Arithmetic-only sides: digits, operators, brackets, and the LaTeX of numbers (\frac, \sqrt, \pi ...).
_ARITHMETIC = re.compile(
    r"^(?:[\d.\s+\-*/^(){}\[\]]|\\(?:frac|dfrac|tfrac|sqrt|times|cdot|div|pi|left|right|[,;:! ]))+$"
)
_FRACTION = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
_REWRITES: tuple[tuple[str, str], ...] = (
    ("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("^", "**"), ("{", "("), ("}", ")"), ("[", "("), ("]", ")"),
)
_OPERATORS: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
_MAX_EXPONENT = 64  # 2**64 is an answer; 10**10**10 is an attack on the grader
_DECIMAL_PLACES = re.compile(r"^-?\d*\.(\d+)$")


def _sides(text: str) -> list[str] | None:
    """The sides of an equation whose every side is arithmetic, else None (no ``=``, an inequality, a variable)."""
    if "=" not in text or any(op in text for op in ("==", "\\le", "\\ge", "\\ne", "<", ">")):
        return None
    sides = [side.strip() for side in text.split("=")]
    return sides if all(side and _ARITHMETIC.match(side) for side in sides) else None


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return Fraction(repr(node.value))  # repr: 0.1 is one tenth, not the nearest binary float
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _evaluate(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, exponent = _evaluate(node.left), _evaluate(node.right)
        if exponent.denominator != 1 or abs(exponent) > _MAX_EXPONENT or (base == 0 and exponent < 0):
            raise ValueError("exponent out of range")
        if max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(exponent) > 4096:
            raise ValueError("power too large")
        return base ** int(exponent)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError(f"not exact arithmetic: {type(node).__name__}")


def arithmetic_value(side: str) -> Fraction | None:
    """The exact value of one arithmetic side (``(6-4)*12``, ``\\frac{3}{4}+0.5``, ``2^3``), or None."""
    if "\\sqrt" in side or "\\pi" in side:
        return None  # irrational: not decidable with fractions
    expression = re.sub(r"\\(?:left|right)|\\[,;:! ]", "", side)
    while (match := _FRACTION.search(expression)) is not None:
        expression = f"{expression[: match.start()]}(({match.group(1)})/({match.group(2)})){expression[match.end():]}"
    for old, new in _REWRITES:
        expression = expression.replace(old, new)
    try:
        return _evaluate(ast.parse(expression.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return None


def _states(value: Fraction, side: str, written: Fraction) -> bool:
    """True when the side worth ``written`` states ``value``: exactly, or as its rounding to the decimals shown."""
    if written == value:
        return True
    places = _DECIMAL_PLACES.match(side)
    return places is not None and abs(value - written) <= Fraction(1, 2 * 10 ** len(places.group(1)))


def final_value(text: str) -> str:
    """``expr = value`` -> ``value`` when it is a true equation of numbers; every other text unchanged."""
    sides = _sides(text)
    if sides is None:
        return text
    values = [arithmetic_value(side) for side in sides]
    first = values[0]
    if first is None or any(
        value is None or not _states(first, side, value) for side, value in zip(sides[1:], values[1:], strict=True)
    ):
        return text
    return sides[-1]


def is_arithmetic_equation(key: str) -> bool:
    """True for an equation of numbers left whole by ``final_value``: it matches only an identical key."""
    return _sides(key) is not None
