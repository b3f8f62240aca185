"""Answers that match the gold only given the problem: a multiple-choice letter, a clock time asked for as HH:MM:SS.

A gold answer "(C)" and a model answer "12" (or gold "12" and answer "C") are the same answer when the
problem lists option C as 12. ``problem_options`` reads the options in the forms contest problems use:
AMC's ``$\\textbf{(A) }5 \\qquad \\textbf{(B) }6 ...$``, inline ``(A) 5 (B) 6``, and one per line
(``A. 5`` / ``A) 5``). ``choice_letter`` reads a bare letter answer ("C", "(C)", "\\text{(C)}",
"\\textbf{(C)}"). The comparison itself stays math-verify's: the option's value against the other answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from pools.grading.plaintext import same_clock_12h

__all__ = ["choice_letter", "match_in_context", "problem_options"]

_LETTERS = "ABCDE"
# "(A) value" up to the next option marker or the end; the markers may be wrapped in \textbf{...} / \mathrm{...}.
_INLINE_OPTION = re.compile(
    r"(?:\\(?:textbf|mathrm|text)\s*\{\s*)?\(([A-E])\)\s*\}?\s*(.*?)"
    r"(?=\s*(?:\\qquad|\\quad|\\\\|\$|,|;)*\s*(?:\\(?:textbf|mathrm|text)\s*\{\s*)?\([A-E]\)|\s*$)",
    re.DOTALL,
)
_LINE_OPTION = re.compile(r"^\s*\(?([A-E])[.):]\s+(.+?)\s*$", re.MULTILINE)
# An answer that starts with an option marker and goes on with its value: "(B) 5", "\\textbf{(B) }5".
_LETTER_PREFIX = re.compile(r"^\s*\$?\s*(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(([A-E])\)\s*\}?\s*(.+)$", re.DOTALL)
_LETTER_ANSWER = re.compile(r"^\s*\$?\s*(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(?([A-E])\)?\s*\}?\s*\$?\s*\.?\s*$")


@functools.lru_cache(maxsize=4096)
def problem_options(problem: str | None) -> dict[str, str]:
    """Option letter -> option text as listed in ``problem`` ({} when it lists fewer than two options)."""
    if not problem:
        return {}
    for pattern in (_INLINE_OPTION, _LINE_OPTION):
        options: dict[str, str] = {}
        for match in pattern.finditer(problem):
            value = match.group(2).strip().strip("$").strip()
            value = re.sub(r"(?:\\qquad|\\quad|\s)+$", "", value)
            if value and match.group(1) not in options:
                options[match.group(1)] = value
        if len(options) >= 2 and "A" in options:
            return options
    return {}


def choice_letter(answer: str | None) -> str | None:
    """The option letter ``answer`` names when it is nothing but a letter A-E ("C", "(C)", "\\textbf{(C)}")."""
    if answer is None:
        return None
    match = _LETTER_ANSWER.match(answer)
    return match.group(1) if match is not None and match.group(1) in _LETTERS else None


#: A problem that asks for a clock time in a fixed form ("HH:MM:SS", "without am or pm").
_ASKS_CLOCK_FORM = re.compile(r"HH:MM|without\s+\W?\s*a\.?\s*m\.?\W?\s+or\s+\W?p\.?\s*m", re.IGNORECASE)


def match_in_context(answer: str, gold: str, problem: str | None, same: Callable[[str, str], bool]) -> bool:
    """True when the problem text makes ``answer`` match ``gold`` where the bare comparison cannot.

    * a multiple-choice letter on one side names the option whose value ``same`` matches the other side;
    * the problem asks for a clock time as HH:MM:SS without a.m./p.m. and the answer is the gold's time
      written so ("4:51:06" for MATH's gold "4:51:06 p.m."; ``same_clock_12h``).
    """
    if problem and _ASKS_CLOCK_FORM.search(problem) and same_clock_12h(_unwrapped(answer), _unwrapped(gold)):
        return True
    return _match_with_options(answer, gold, problem, same)


def _unwrapped(text: str) -> str:
    return re.sub(r"\\text\s*\{([^{}]*)\}", r"\1", text).strip().strip("$").strip()


def _letter_and_value(text: str, options: dict[str, str]) -> tuple[str | None, str | None]:
    """(option letter, value) of an answer: "B" -> (B, option B), "\textbf{(B) }5" -> (B, 5), "5" -> (None, 5)."""
    letter = choice_letter(text)
    if letter is not None:
        return letter, options.get(letter)
    match = _LETTER_PREFIX.match(text)
    if match is None:
        return None, text
    return match.group(1), match.group(2).strip().strip("$").strip() or options.get(match.group(1))


def _match_with_options(answer: str, gold: str, problem: str | None, same: Callable[[str, str], bool]) -> bool:
    """True when one side names an option by letter and its letter or its value matches the other side."""
    options = problem_options(problem)
    letter_a, value_a = _letter_and_value(answer, options)
    letter_g, value_g = _letter_and_value(gold, options)
    if letter_a is None and letter_g is None:
        return False
    if letter_a is not None and letter_g is not None:
        return letter_a == letter_g
    return value_a is not None and value_g is not None and same(value_a, value_g)
