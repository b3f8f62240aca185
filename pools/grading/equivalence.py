"""When are two answers the same? A canonical string key first, math-verify second.

``normalize_answer`` maps surface variants of one answer ("$\\dfrac{1}{2}$.", "\\frac12") to one key
("\\frac{1}{2}"). Equal keys are equivalent without further work; distinct keys go to math-verify, which
compares the parsed SymPy objects (so "0.5" and "\\frac{1}{2}" meet there).

math-verify bounds its own work with ``signal.alarm``, which only works on the main thread. Here its
own timeouts are always switched off (``parsing_timeout=None``, ``timeout_seconds=None``) and the bound
is imposed around the whole comparison instead: on the main thread with a ``SIGALRM`` interval timer
(interrupts the computation), elsewhere by running the comparison on a daemon helper thread and giving
up after ``timeout_s`` (the helper cannot be interrupted and finishes on its own). Both give the same
verdicts; a comparison that runs out of time counts as "not equivalent".
"""

from __future__ import annotations

import functools
import logging
import math
import re
import signal
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import sympy
from math_verify import parse, verify

from pools.grading.equations import final_value, is_arithmetic_equation
from pools.grading.plaintext import (
    canonical_time,
    latexify_plain_text,
    plain_fractions_as_latex,
    ungroup_thousands,
)
from pools.grading.units import strip_text_words_suffix, strip_unit_suffix

__all__ = ["answers_equivalent", "answers_match_gold", "normalize_answer", "numeric_value", "values_differ"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# ---------------------------------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------------------------------

_WRAPPERS: tuple[tuple[str, str], ...] = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_TEXT_COMMANDS = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mbox|operatorname)\s*\{"
)
_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|~")
_DEGREES = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree|°")
_LEADING_ZEROS = re.compile(r"(?<![\d.])0+(?=\d)")
_TRAILING_ZERO_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.0+(?![\d])")
_TRAILING_ZEROS = re.compile(r"(?<![\d.])(\d*\.\d*?[1-9])0+(?![\d])")
_BARE_DECIMAL = re.compile(r"(?<![\d}])\.(\d)")
# A label before the answer: "x=", "a_1=", "f(x)=", "g(t,s)=", "Area=" (a word: "\text{Area}" is "Area" by the
# time this applies, like "\mathbf{v}" is "v"), "\vec{v}=", "\overrightarrow{AB}=".
_SINGLE_ASSIGNMENT = re.compile(
    r"(?:[A-Za-z]+(?:_\{?\w+\}?)?(?:\([A-Za-z](?:,[A-Za-z])*\))?|\\vec\{?[A-Za-z]\}?|\\overrightarrow\{[A-Za-z]+\})=(?!=)")
# A numeric fraction times a variable, "\frac{5}{2}t": math-verify reads it as 5/2 and drops the t (and reads
# "\frac{5}{2}i" and "\frac{5i}{2}" differently), so it is written "\frac{5t}{2}" like the other form.
_COEFFICIENT_FRACTION = re.compile(r"\\frac\{(\d+)\}\{(\d+)\}([A-Za-z]{1,3}(?:\^\{?\w+\}?)?)(?![A-Za-z{(])")
_CHOICE = re.compile(r"\(([A-Ea-e])\)")
_WORD = re.compile(r"[A-Za-z]{2,}")
# A run of 4+ letters that is no LaTeX command and no function name marks words, not math ("5 more",
# "10 thousand": math-verify would read just the number and drop the word).
_LONG_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")
_FUNCTION_NAMES = frozenset({"arcsin", "arccos", "arctan", "arcsec", "arccsc", "arccot", "infty",
                             "sinh", "cosh", "tanh", "coth", "sech", "csch", "sqrt"})


_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[A-Za-z*]*\}")


def _is_prose(key: str) -> bool:
    words = _LONG_WORD.findall(_ENVIRONMENT.sub(" ", key))  # "\begin{pmatrix}" is LaTeX, not a sentence
    return any(word.lower() not in _FUNCTION_NAMES for word in words)


_CLOCK_KEY = re.compile(r"\d{2}:\d{2}(?::\d{2})?")


@functools.lru_cache(maxsize=65536)
def _explicit_time(answer: str) -> bool:
    """True when the answer is a clock time by its own writing (a.m./p.m. or seconds: ``canonical_time``)."""
    return canonical_time(_strip_outer(answer)) is not None


@functools.lru_cache(maxsize=65536)
def _clock_reading(answer: str) -> str | None:
    """The answer read as a clock time even when written ``h:mm`` alone (24-hour), else None."""
    return canonical_time(_strip_outer(answer), bare=True)


_BASE_SUBSCRIPT = re.compile(r"(?<=[0-9A-Za-z])_\{?(\d+)\}?")


def _unwrap_braced_command(text: str, pattern: re.Pattern[str]) -> str:
    """Replace ``\\cmd{content}`` by ``content`` for every match of ``pattern`` (nested braces handled)."""
    while True:
        match = pattern.search(text)
        if match is None:
            return text
        depth, i = 1, match.end()
        while i < len(text) and depth:
            if text[i] == "\\":
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:  # unbalanced: drop just the command name and stop
            return text[: match.start()] + text[match.end() :]
        text = text[: match.start()] + text[match.end() : i - 1] + text[i:]


def _strip_outer(text: str) -> str:
    changed = True
    while changed:
        changed = False
        text = text.strip()
        if text.endswith(".") and not text.endswith("\\."):  # a sentence's full stop after "$x$."
            text = text[:-1].rstrip()
            changed = True
        for opener, closer in _WRAPPERS:
            if len(text) > len(opener) + len(closer) and text.startswith(opener) and text.endswith(closer):
                text = text[len(opener) : -len(closer)]
                changed = True
        boxed = re.fullmatch(r"\\(?:boxed|fbox)\s*\{(.*)\}", text, re.DOTALL)
        if boxed is not None and _balanced(boxed.group(1)):  # not "\boxed{1}+\boxed{2}"
            text = boxed.group(1)
            changed = True
    return text


def _balanced(text: str) -> bool:
    """True when the unescaped braces of ``text`` pair up and never close more than they opened."""
    depth, i = 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


def _remove_whitespace(text: str) -> str:
    """Drop whitespace, keeping one space where it ends a LaTeX command before a letter (``\\pi r``)."""
    text = re.sub(r"(\\[A-Za-z]+)\s+(?=[A-Za-z])", "\\1\x00", text)
    return re.sub(r"\s+", "", text).replace("\x00", " ")


def normalize_answer(answer: str | None) -> str | None:
    """Canonical string key of an answer; None for a missing or empty answer."""
    if answer is None:
        return None
    text = _strip_outer(str(answer))
    time = canonical_time(text)
    if time is not None:  # a clock time keys as 24-hour HH:MM[:SS]; no number rule below may touch it
        return time
    text = latexify_plain_text(text)
    text = text.replace("\\displaystyle", "")
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    text = re.sub(r"\\[dt]binom", r"\\binom", text)
    text = re.sub(r"\\left\s*\.|\\right\s*\.", "", text)
    text = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", text)
    text = re.sub(r"\\(?:big|Big|bigg|Bigg)[lr]?(?![A-Za-z])", "", text)
    text = _DEGREES.sub("", text)
    text = text.replace("\\%", "").replace("%", "").replace("\\$", "")
    text = _SPACING.sub(" ", text)
    text = text.replace("{,}", ",")
    text = re.sub(r"(?<=\d)_(\d)", r"_{\1}", text)  # a base subscript: 52_8 -> 52_{8}
    text = strip_text_words_suffix(text)  # "12\text{ apples.}" -> "12" (not "10\text{ thousand}")
    text = _unwrap_braced_command(text, _TEXT_COMMANDS)
    text = strip_unit_suffix(text)  # once \text{} is gone: "5\text{ cm}^2" -> "5 cm^2" -> "5"
    text = _strip_outer(text)
    text = _remove_whitespace(text)
    text = text.rstrip(".")
    if text.endswith("\\"):  # a dangling "\" left by "\." or a cut command
        text = text[:-1]
    text = ungroup_thousands(text)  # again: "11,\! 111" is "11,111" only once the spaces are gone
    text = final_value(text)
    assignment = _SINGLE_ASSIGNMENT.match(text)
    if assignment is not None and text.count("=") == 1 and text[assignment.end() :]:
        text = text[assignment.end() :]
    text = _COEFFICIENT_FRACTION.sub(r"\\frac{\1\3}{\2}", text)
    choice = _CHOICE.fullmatch(text)
    if choice is not None:
        text = choice.group(1).upper()
    # LaTeX shorthands: \sqrt2 -> \sqrt{2}, \frac12 -> \frac{1}{2}, \frac{a}2 -> \frac{a}{2}.
    text = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", text)
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", text)
    text = re.sub(r"\\frac(\{[^{}]*\})(\d)", r"\\frac\1{\2}", text)
    text = _BARE_DECIMAL.sub(r"0.\1", text)
    text = _LEADING_ZEROS.sub("", text)
    text = _TRAILING_ZERO_DECIMAL.sub(r"\1", text)
    text = _TRAILING_ZEROS.sub(r"\1", text)
    text = plain_fractions_as_latex(text)  # again: "1/2." became "1/2" only when its full stop went
    if text.startswith("+") and text[1:2].isdigit():
        text = text[1:]
    if text == "-0":
        text = "0"
    return text or None


# ---------------------------------------------------------------------------------------------------
# Bounded calls into math-verify from any thread
# ---------------------------------------------------------------------------------------------------


class _GradingTimeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so math-verify's ``except Exception`` lets it pass."""


class _MathVerifyTimeoutNotice(logging.Filter):
    """Hide math-verify's "timeout is disabled" warning: the bound is imposed here instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_MathVerifyTimeoutNotice())


def _alarm_usable() -> bool:
    """True on the main thread of a POSIX process with no interval timer already running."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return False
    remaining, _interval = signal.getitimer(signal.ITIMER_REAL)
    return remaining == 0.0


def _run_with_alarm(func: Callable[[], T], timeout_s: float) -> tuple[bool, T | None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise _GradingTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return True, func()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _GradingTimeout:
        return False, None
    finally:
        signal.signal(signal.SIGALRM, previous)


def _run_on_helper_thread(func: Callable[[], T], timeout_s: float) -> tuple[bool, T | None]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = func()
        except BaseException as error:  # handed back to the caller below
            outcome["error"] = error

    helper = threading.Thread(target=target, name="math-verify-bounded", daemon=True)
    helper.start()
    helper.join(timeout_s)
    if helper.is_alive():
        return False, None
    if "error" in outcome:
        raise outcome["error"]
    return True, outcome["value"]


def call_with_timeout(func: Callable[[], T], timeout_s: float) -> tuple[bool, T | None]:
    """Run ``func()`` bounded by ``timeout_s`` seconds from any thread; returns (finished, result)."""
    if timeout_s is None or not math.isfinite(timeout_s) or timeout_s <= 0:
        return True, func()
    if _alarm_usable():
        return _run_with_alarm(func, timeout_s)
    return _run_on_helper_thread(func, timeout_s)


# ---------------------------------------------------------------------------------------------------
# Equivalence
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=65536)
def _parsed(key: str) -> tuple[Any, ...]:
    """math-verify's parse of a normalized key (SymPy object(s) plus the string fallback), cached."""
    return tuple(parse(f"${key}$", parsing_timeout=None))


def _value_of_key(key: str) -> complex | None:
    parsed = _parsed(key)
    if not parsed or not isinstance(parsed[0], sympy.Expr) or parsed[0].free_symbols:
        return None
    value = complex(parsed[0].evalf(30))
    return value if math.isfinite(value.real) and math.isfinite(value.imag) else None


_EXACT_NUMBER = re.compile(r"(-?)(?:(\d+)|\\frac\{(\d+)\}\{(\d+)\}|(\d*\.\d+))")


def _exact_number(key: str) -> tuple[Fraction, bool] | None:
    """(value, written with a decimal point) of a key that is an integer, decimal or ``\\frac{p}{q}``; else None."""
    match = _EXACT_NUMBER.fullmatch(key)
    if match is None:
        return None
    sign, integer, numerator, denominator, decimal = match.groups()
    if numerator is not None and int(denominator) == 0:
        return None
    value = Fraction(integer or decimal or 0) if numerator is None else Fraction(int(numerator), int(denominator))
    return (-value if sign else value), decimal is not None


@functools.lru_cache(maxsize=65536)
def numeric_value(answer: str | None, *, timeout_s: float = 2.0) -> complex | None:
    """The number an answer denotes (math-verify's parse of its key, evaluated), or None if not a number."""
    key = normalize_answer(answer)
    if (key is None or _WORD.fullmatch(key) or _is_prose(key) or _CLOCK_KEY.fullmatch(key)
            or _BASE_SUBSCRIPT.search(key) or is_arithmetic_equation(key)):
        return None
    exact = _exact_number(key)
    if exact is not None:  # no parse needed
        return complex(float(exact[0]))
    try:
        finished, value = call_with_timeout(lambda: _value_of_key(key), timeout_s)
    except Exception:  # SymPy failing to evaluate means "not a plain number", nothing more
        return None
    return value if finished else None


#: Numbers further apart than this (relative to the larger, at least 1) are never equivalent: math-verify
#: compares floats rounded to 6 decimals and everything else exactly.
VALUE_TOLERANCE = 1e-4


def values_differ(a: complex | None, b: complex | None) -> bool:
    """True when both are numbers and they differ by more than ``VALUE_TOLERANCE`` (relative): no need to ask."""
    if a is None or b is None:
        return False
    return abs(a - b) > VALUE_TOLERANCE * max(1.0, abs(a), abs(b))


def _verify(gold_key: str, answer_key: str, *, both_directions: bool) -> bool:
    gold_parsed, answer_parsed = list(_parsed(gold_key)), list(_parsed(answer_key))
    if not gold_parsed or not answer_parsed:
        return False
    if verify(gold_parsed, answer_parsed, timeout_seconds=None):
        return True
    # verify() is not symmetric (assignments, equation/interval conversion); for clustering it must be.
    return both_directions and verify(answer_parsed, gold_parsed, timeout_seconds=None)


def _compare(a: str | None, b: str | None, timeout_s: float, *, both_directions: bool) -> bool:
    key_a, key_b = normalize_answer(a), normalize_answer(b)
    if key_a is None or key_b is None:
        return False
    if key_a == key_b:
        return True
    if _WORD.fullmatch(key_a) or _WORD.fullmatch(key_b) or _is_prose(key_a) or _is_prose(key_b):
        # SymPy reads a word as a product of one-letter symbols, so "east" would equal "seat"; a sentence
        # ("Not possible with these numbers") is compared as text, and never costs a math-verify call.
        return key_a.lower() == key_b.lower()
    exact_a, exact_b = _exact_number(key_a), _exact_number(key_b)
    if exact_a is not None and exact_b is not None and not (exact_a[1] or exact_b[1]):
        return exact_a[0] == exact_b[0]  # two integers or fractions: exact; decimals go on (0.333333 ~ 1/3)
    if _explicit_time(a) or _explicit_time(b):  # a clock time against anything: compared as clock times
        return _clock_reading(a) is not None and _clock_reading(a) == _clock_reading(b)
    if is_arithmetic_equation(key_a) or is_arithmetic_equation(key_b):
        return False  # an equation of numbers that is not a true one matches only itself (equations.py)
    bases_a, bases_b = _BASE_SUBSCRIPT.findall(key_a), _BASE_SUBSCRIPT.findall(key_b)
    if bases_a and bases_b and bases_a != bases_b:
        return False  # math-verify drops subscripts: it would read 52_8 and 52_9 as 52 and 52
    finished, verdict = call_with_timeout(
        lambda: _verify(key_a, key_b, both_directions=both_directions), timeout_s
    )
    if not finished:
        logger.warning("math-verify gave up after %.1f s on %r vs %r", timeout_s, key_a[:80], key_b[:80])
        return False
    return bool(verdict)


def answers_equivalent(a: str | None, b: str | None, *, timeout_s: float = 5.0) -> bool:
    """True when two answers are mathematically the same (symmetric; None is never equivalent)."""
    return _compare(a, b, timeout_s, both_directions=True)


def answers_match_gold(answer: str | None, gold: str | None, *, timeout_s: float = 5.0) -> bool:
    """True when ``answer`` matches the ``gold`` answer (math-verify with gold in the gold position)."""
    return _compare(gold, answer, timeout_s, both_directions=False)
