"""The Game-of-24 check: an expression that uses the puzzle's own numbers, each exactly once, and is worth 24.

Any expression worth 24 is not an answer: ``(6 - 4) * 12 = 24`` fails the puzzle "4 5 6 10". The rule
follows the Tree-of-Thoughts check (``tasks/game24.py``: the integers in the expression, sorted, must equal
the puzzle's, and the expression must simplify to 24), evaluated here with exact fractions on a parsed
expression tree (no ``eval``, no SymPy), so a division never rounds and a malformed answer is just wrong.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Sequence
from fractions import Fraction

__all__ = ["game24_expression", "game24_scorer", "is_game24_solution"]

TARGET = 24

_OPERATORS: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
# Spellings of the four operations and brackets that models use, mapped to Python's.
_REWRITES: tuple[tuple[str, str], ...] = (
    ("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("×", "*"), ("·", "*"), ("÷", "/"), ("−", "-"),
    ("\\left", ""), ("\\right", ""), ("[", "("), ("]", ")"), ("{", "("), ("}", ")"), ("$", ""),
)
_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LETTER_TIMES = re.compile(r"(?<=[\d)\s])[xX](?=[\s(\d])")


def game24_expression(answer: str) -> str:
    """The expression part of an answer: the text before its first ``=`` (``(6-4)*12 = 24`` -> ``(6-4)*12``)."""
    return answer.split("=", 1)[0].strip()


def _value(node: ast.AST) -> tuple[Fraction, list[int]]:
    """(exact value, integer literals used) of an arithmetic expression tree; ValueError for anything else."""
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Fraction(node.value), [node.value]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, left_numbers = _value(node.left)
        right, right_numbers = _value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _OPERATORS[type(node.op)](left, right), left_numbers + right_numbers
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value, numbers = _value(node.operand)
        return (value if isinstance(node.op, ast.UAdd) else -value), numbers
    raise ValueError(f"not an arithmetic expression of integers: {type(node).__name__}")


def is_game24_solution(answer: str | None, numbers: Sequence[int], target: int = TARGET) -> bool:
    """True when ``answer``'s expression uses exactly ``numbers`` (each once) and equals ``target``."""
    if not answer or not answer.strip():
        return False
    expression = game24_expression(answer)
    while (match := _LATEX_FRACTION.search(expression)) is not None:
        expression = f"{expression[: match.start()]}(({match.group(1)})/({match.group(2)})){expression[match.end():]}"
    for old, new in _REWRITES:
        expression = expression.replace(old, new)
    expression = _LETTER_TIMES.sub("*", expression)
    try:
        value, used = _value(ast.parse(expression.strip(), mode="eval"))
    except (SyntaxError, ValueError, RecursionError, ZeroDivisionError):
        return False
    return sorted(used) == sorted(int(n) for n in numbers) and value == target


def game24_scorer(numbers: Sequence[int], target: int = TARGET) -> Callable[[str], bool]:
    """A function answer -> correct for the puzzle ``numbers`` (see ``is_game24_solution``)."""
    puzzle = [int(n) for n in numbers]

    def score(answer: str) -> bool:
        return is_game24_solution(answer, puzzle, target)

    return score
