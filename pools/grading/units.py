"""Units written after a quantity ("5 cm", "2 \\text{ euros}", "864 square inches"): the one list of them.

Only these words come off an answer, and only at its very end right after a number or a closing
bracket. Any other word stays, so it still counts: a multiplier ("10 thousand", "1.5 million",
"7 hundred", "a dozen"), an operation ("12 squared") or a comparison ("5 more") changes the answer,
and a single letter (``3+2\\mathrm{i}``, ``2\\mathrm{e}``) is a symbol, not a unit.
"""

from __future__ import annotations

import re

__all__ = ["GLUED_UNITS", "MULTIPLIER_WORDS", "UNIT_WORDS", "strip_text_words_suffix", "strip_unit_suffix"]

UNIT_WORDS: tuple[str, ...] = (
    "degrees?",
    "radians?",
    "(?:square|sq\\.?|cubic)\\s*(?:units?|centimeters?|meters?|inches|feet|cm|m|in|ft)",
    "units?",
    "cm",
    "mm",
    "km",
    "meters?",
    "centimeters?",
    "kilometers?",
    "inches",
    "inch",
    "feet",
    "foot",
    "ft",
    "yards?",
    "miles?",
    "mph",
    "dollars?",
    "cents?",
    "euros?",
    "seconds?",
    "minutes?",
    "hours?",
    "days?",
    "weeks?",
    "years?",
    "pounds?",
    "ounces?",
)
#: Unit abbreviations written glued to a number in running text ("60g", "2.5kg", "3pm"): the number is the
#: quantity. Ordinals ("6th") and variables ("2x") are not here, so they stay no number; nor are "m" and
#: "in", which double as variables ("Thus n = 2m" is two m, no number).
GLUED_UNITS: tuple[str, ...] = (
    "g", "kg", "mg", "lbs?", "oz", "ml", "cm", "mm", "km", "ft", "mph", "hrs?", "mins?", "secs?", "am", "pm",
)
# "m" and "in" double as variables ("2m" is two m), so those two need a space before them.
_UNIT_SUFFIX = re.compile(
    r"(?<=[\d}\)])(?:\s*(?:" + "|".join(UNIT_WORDS) + r")|\s+(?:m|in))\s*(?:\^\s*\{?\s*[23]\s*\}?|²|³)?\s*\.?\s*$",
    re.IGNORECASE,
)


def strip_unit_suffix(text: str) -> str:
    """``text`` without a known unit at its end ("5 cm^2" -> "5"); never reduced to nothing."""
    stripped = _UNIT_SUFFIX.sub("", text)
    return stripped if stripped.strip() else text


#: Words that change the quantity before them: never dropped as a trailing ``\\text{}`` label.
MULTIPLIER_WORDS: frozenset[str] = frozenset({
    "hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion", "billions", "trillion",
    "dozen", "dozens", "more", "less", "fewer", "squared", "cubed", "times", "percent", "degrees", "radians",
})
# "12\text{ apples.}": words (no digit, no math) in a \text{} that ends the answer, right after a number or a bracket.
_TEXT_WORDS_SUFFIX = re.compile(r"(?<=[\d}\)\]])\s*\\text\s*\{\s*([A-Za-z][A-Za-z\s.,'!-]*)\}\s*\.?\s*$")


def strip_text_words_suffix(text: str) -> str:
    """``12\\text{ apples.}`` -> ``12``: a label in words after the answer, unless a word changes the quantity."""
    match = _TEXT_WORDS_SUFFIX.search(text)
    if match is None:
        return text
    words = re.findall(r"[A-Za-z]+", match.group(1))
    if not any(len(w) >= 3 for w in words) or any(w.lower() in MULTIPLIER_WORDS for w in words):
        return text
    return text[: match.start()] if text[: match.start()].strip() else text
