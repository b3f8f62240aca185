"""Rewrite plain-text and unicode math into the LaTeX that math-verify reads, before normalization.

Chat models often answer in plain text or unicode (``6√3``, ``7 - 2pi``, ``(-∞, 3) ∪ (3, ∞)``,
``x ∈ ℝ``, ``sqrt(3)/2``, ``[11, -36, -3]``, ``k = 0 or k = 4``, ``$15,000``, ``-1/13 - 5/13 i``), while
gold answers are LaTeX (``6 \\sqrt{3}``, ``\\begin{pmatrix} 11 \\\\ -36 \\\\ -3 \\end{pmatrix}``,
``\\$15,\\!000``, ``2 \\text{ euros}``, ``4\\!:\\!51\\!:\\!06 \\text{ p.m.}``). math-verify's own parsing
(``LatexExtractionConfig`` with its ``NormalizationConfig``, ``ExprExtractionConfig``) reads LaTeX and
sympy-style text but not these spellings; each rule below covers one thing it cannot do, and each is
applied to both sides of a comparison, so it never needs to know which side is gold.
"""

from __future__ import annotations

import re

__all__ = [
    "canonical_time", "latexify_plain_text", "merge_alternatives", "plain_fractions_as_latex", "same_clock_12h",
    "set_builder_as_intervals",
    "ungroup_thousands",
]

# One-character unicode math -> LaTeX (a trailing space keeps "\\pi r" from becoming "\\pir").
_UNICODE = {
    "π": "\\pi ", "∞": "\\infty ", "∪": "\\cup ", "∩": "\\cap ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ",
    "±": "\\pm ", "∓": "\\mp ", "×": "\\times ", "·": "\\cdot ", "÷": "\\div ", "−": "-", "–": "-",
    "θ": "\\theta ", "α": "\\alpha ", "β": "\\beta ", "°": "^\\circ", "²": "^2", "³": "^3", "∅": "\\emptyset ",
}
_REALS = re.compile(
    r"^\s*(?:[a-z]\s*(?:∈|\\in)\s*)?(?:ℝ|\\mathbb\s*\{?R\}?|\\R\b|all\s+real\s+numbers|"
    r"\\text\{\s*all\s+real\s+numbers\s*\}|the\s+set\s+of\s+(?:all\s+)?real\s+numbers)\.?\s*$",
    re.IGNORECASE,
)
_WORD_PI = re.compile(r"(?<![A-Za-z\\])pi(?![A-Za-z])")
_WORD_INF = re.compile(r"(?<![A-Za-z\\])(?:infinity|inf)(?![A-Za-z])")
_SQRT_WORD = re.compile(r"(?<![A-Za-z\\])sqrt\s*(?=\()")
_SQRT_WORD_NUMBER = re.compile(r"(?<![A-Za-z\\])sqrt\s*(\d+(?:\.\d+)?)")
_SQRT_SIGN = re.compile(r"√\s*")
_PLAIN_FRACTION = re.compile(r"(?<![\w.}^])(\d+)\s*/\s*(\d+)(?![\d.])")
_LEADING_CURRENCY = re.compile(r"^\s*(-?)\s*(?:\\\$|\$|€|£|USD\s*)\s*(?=[\d.])")
# LaTeX thousands separators: "15,\!000", "20{,}000", "1,\,000".
_LATEX_THOUSANDS = re.compile(r"(?<=\d)(?:,\\[!,;: ]|\{,\})(?=\d{3}(?!\d))")
# A plain-text number with thousands commas that is not a list: every group after the first has 3 digits.
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")
_MATRIX = re.compile(r"\\begin\{[pbv]?matrix\}(.*?)\\end\{[pbv]?matrix\}", re.DOTALL)
_BRACKET_LIST = re.compile(r"^\[([^\[\]]*)\]$")
_ALTERNATIVE_SPLIT = re.compile(r"\s*(?:\\text\{\s*or\s*\}|\\quad|\bor\b|\band\b|,|;)\s*")
_ASSIGNED = re.compile(r"^\s*([A-Za-z](?:_\{?\w+\}?)?)\s*=\s*(?!=)(.+?)\s*$")
_TIME = re.compile(
    r"^\s*(\d{1,2})\s*:\s*(\d{2})(?:\s*:\s*(\d{2}))?\s*(?:\\text\s*\{\s*)?([ap])?\.?\s*(?:m\.?)?\s*\}?\s*\.?\s*$",
    re.IGNORECASE,
)


def canonical_time(text: str, *, bare: bool = False) -> str | None:
    """A clock time as 24-hour ``HH:MM[:SS]`` ("4:51:06 p.m." -> "16:51:06"), or None when not a time.

    Only a.m./p.m. or seconds make ``h:mm`` a time: "5:12" or "10:24" alone are as likely ratios, which
    math-verify compares as such. ``bare=True`` also reads ``h:mm`` alone as a time (24-hour), for the
    other side of a comparison with an explicit time ("16:51" against "4:51 p.m.").
    """
    cleaned = re.sub(r"\\[!,;: ]", "", text).replace("$", "")
    match = _TIME.match(cleaned)
    if match is None:
        return None
    hours, minutes, seconds, half = match.groups()
    if not bare and seconds is None and half is None:
        return None
    hour, minute = int(hours), int(minutes)
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half.lower() == "p" else 0)
    if hour > 23 or minute > 59 or (seconds is not None and int(seconds) > 59):
        return None
    return f"{hour:02d}:{minute:02d}" + ("" if seconds is None else f":{int(seconds):02d}")


def same_clock_12h(a: str, b: str) -> bool:
    """True when one time has a.m./p.m., the other none, and they read the same on a 12-hour clock.

    MATH's gold "4:51:06 p.m." answers a problem that asks for HH:MM:SS "without am or pm": "4:51:06" is that
    time written as asked (and "16:51:06" its 24-hour form, which ``canonical_time`` already matches)."""
    parsed = []
    for text in (a, b):
        match = _TIME.match(re.sub(r"\\[!,;: ]", "", text).replace("$", ""))
        if match is None:
            return False
        parsed.append(match.groups())
    (h1, m1, s1, half1), (h2, m2, s2, half2) = parsed
    if (half1 is None) == (half2 is None) or (m1, s1) != (m2, s2):
        return False
    marked, bare = (h1, h2) if half1 is not None else (h2, h1)
    return 1 <= int(bare) <= 12 and int(bare) % 12 == int(marked) % 12


# Plain-text function calls ("sin(x)cos(y)", "ln(a/b)") -> LaTeX commands math-verify parses as functions.
_FUNCTION_CALL = re.compile(r"(?<![\\A-Za-z])(arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|sec|csc|cot|ln|log|exp)"
                            r"(?=\s*\()")
# A matrix or vector written as nested lists: "[[1, 2], [3, 4]]".
_NESTED_LIST = re.compile(r"^\s*\[\s*(\[[^\[\]]*\](?:\s*,\s*\[[^\[\]]*\])*)\s*\]\s*$")
# Set-builder "all reals but these": "x ∈ ℝ, x ≠ 2", "x \neq 2 and x \neq -3", "all real numbers except 2".
_REAL_SET = r"(?:ℝ|\\mathbb\s*\{?R\}?|\\R\b)"
_BUILDER_HEAD = re.compile(r"^\s*\\?\{?\s*[a-z]\s*(?:∈|\\in)\s*" + _REAL_SET
                           + r"\s*(?:,|\\mid|\||:|\band\b|\\text\{\s*(?:and|such that)\s*\})?\s*")
_EXCLUDED_VALUE = r"-?\d+(?:\.\d+)?(?:/\d+)?"
_BUILDER_EXCLUSIONS = re.compile(r"^(?:[a-z]\s*(?:≠|\\neq?)\s*(" + _EXCLUDED_VALUE + r")\s*(?:,|\band\b|\\text\{\s*and\s*\})?"
                                 r"\s*)+\\?\}?\s*$")
_EXCEPT = re.compile(r"^\s*all\s+real\s+numbers\s+(?:except|but)\s+(.+?)\.?\s*$", re.IGNORECASE)


def _value(text: str) -> float:
    numerator, _, denominator = text.partition("/")
    return float(numerator) / float(denominator or 1)


def _all_reals_except(values: list[str]) -> str:
    """``(-\\infty,a)\\cup(a,b)\\cup(b,\\infty)`` for the excluded values in increasing order."""
    ordered = sorted(dict.fromkeys(v.strip() for v in values), key=_value)
    bounds = ["-\\infty", *ordered, "\\infty"]
    return "\\cup".join(f"({lo},{hi})" for lo, hi in zip(bounds, bounds[1:], strict=False))


def set_builder_as_intervals(text: str) -> str:
    """"x ∈ ℝ, x ≠ 2" (or "x ≠ 2, x ≠ 3", "all real numbers except 2") -> the union of intervals it denotes."""
    except_match = _EXCEPT.match(text)
    if except_match is not None:
        values = [v for v in re.split(r"\s*(?:,|\band\b|\bor\b)\s*", except_match.group(1)) if v]
        if values and all(re.fullmatch(_EXCLUDED_VALUE, v) for v in values):
            return _all_reals_except(values)
        return text
    head = _BUILDER_HEAD.match(text)
    rest = text[head.end():] if head is not None else text.strip()
    if _BUILDER_EXCLUSIONS.match(rest) is None:
        return text
    return _all_reals_except(re.findall(r"(?:≠|\\neq?)\s*(" + _EXCLUDED_VALUE + ")", rest))


def _nested_list_as_matrix(text: str) -> str:
    """``[[1, 2], [3, 4]]`` -> ``\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}`` (rows of equal length; else unchanged)."""
    match = _NESTED_LIST.match(text)
    if match is None:
        return text
    rows = [[cell.strip() for cell in row.strip()[1:-1].split(",")] for row in re.findall(r"\[[^\[\]]*\]", match.group(1))]
    if any(len(row) != len(rows[0]) or not all(row) for row in rows):
        return text
    return "\\begin{pmatrix}" + "\\\\".join("&".join(row) for row in rows) + "\\end{pmatrix}"


def _matrix_rows_by_spaces(match: re.Match[str]) -> str:
    """A matrix whose rows are separated by ``\\ `` (a backslash lost in transit) instead of ``\\\\``."""
    body = match.group(1)
    if "\\\\" in body or "\\ " not in body:
        return match.group(0)
    return match.group(0).replace(body, body.replace("\\ ", "\\\\ "))


def _replace_sqrt_calls(text: str) -> str:
    """``sqrt(expr)`` -> ``\\sqrt{expr}`` with balanced parentheses; ``sqrt3`` -> ``\\sqrt{3}``."""
    while (match := _SQRT_WORD.search(text)) is not None:
        start = match.end()
        depth, i = 0, start
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        if depth:  # unbalanced: leave the rest alone
            return text
        text = f"{text[: match.start()]}\\sqrt{{{text[start + 1 : i]}}}{text[i + 1 :]}"
    return _SQRT_WORD_NUMBER.sub(r"\\sqrt{\1}", text)


def _replace_sqrt_signs(text: str) -> str:
    """``√3``, ``√(x+1)``, ``√{x}`` -> ``\\sqrt{...}``: the radicand is a number, a letter or a group."""
    out = []
    i = 0
    while i < len(text):
        if text[i] != "√":
            out.append(text[i])
            i += 1
            continue
        j = i + 1
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] in "({":
            closer = ")" if text[j] == "(" else "}"
            depth, k = 0, j
            while k < len(text):
                depth += 1 if text[k] == text[j] else -1 if text[k] == closer else 0
                if depth == 0:
                    break
                k += 1
            out.append(f"\\sqrt{{{text[j + 1 : k]}}}")
            i = k + 1
            continue
        radicand = re.match(r"\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+", text[j:])
        if radicand is None:
            out.append("\\sqrt")
            i = j
            continue
        out.append(f"\\sqrt{{{radicand.group(0)}}}")
        i = j + radicand.end()
    return "".join(out)


def _matrix_as_tuple(match: re.Match[str]) -> str:
    """A one-column or one-row ``pmatrix``/``bmatrix`` as a tuple; larger matrices stay as they are."""
    rows = [row.strip() for row in re.split(r"\\\\", match.group(1)) if row.strip()]
    cells = [[cell.strip() for cell in row.split("&")] for row in rows]
    if len(cells) > 1 and all(len(row) == 1 for row in cells):
        return "(" + ",".join(row[0] for row in cells) + ")"
    if len(cells) == 1 and len(cells[0]) > 1:
        return "(" + ",".join(cells[0]) + ")"
    return match.group(0)


def merge_alternatives(text: str) -> str:
    """``x = 2 or x = -3`` (or commas, ``\\text{ or }``, "and") -> ``2,-3`` when every part assigns one variable."""
    if "=" not in text:
        return text
    parts = [part for part in _ALTERNATIVE_SPLIT.split(text) if part.strip()]
    if len(parts) < 2:
        return text
    names, values = set(), []
    for part in parts:
        match = _ASSIGNED.match(part)
        if match is None:
            return text
        names.add(match.group(1))
        values.append(match.group(2))
    return ",".join(values) if len(names) == 1 else text


def latexify_plain_text(answer: str) -> str:
    """``answer`` with plain-text and unicode math rewritten as LaTeX (see the module docstring)."""
    text = answer.strip()
    if _REALS.match(text):
        return "(-\\infty,\\infty)"
    text = set_builder_as_intervals(text)
    text = _LATEX_THOUSANDS.sub("", text)
    text = _LEADING_CURRENCY.sub(r"\1", text)
    text = _replace_sqrt_signs(text)
    text = "".join(_UNICODE.get(char, char) for char in text)
    text = _replace_sqrt_calls(text)
    text = _WORD_PI.sub(r"\\pi ", text)
    text = _WORD_INF.sub(r"\\infty ", text)
    text = _FUNCTION_CALL.sub(r"\\\1", text)
    text = _nested_list_as_matrix(text)
    text = _MATRIX.sub(_matrix_rows_by_spaces, text)
    text = _MATRIX.sub(_matrix_as_tuple, text)
    bracket = _BRACKET_LIST.match(text.strip())
    if bracket is not None and bracket.group(1).count(",") >= 2:  # [a, b] is an interval; 3+ items a list
        text = "(" + bracket.group(1) + ")"
    text = plain_fractions_as_latex(ungroup_thousands(text))
    return merge_alternatives(text)


def ungroup_thousands(text: str) -> str:
    """``15,000`` -> ``15000`` wherever a grouped number is one number, not part of a list like ``(1,000)``."""
    return _GROUPED.sub(lambda m: m.group(0).replace(",", "") if _is_single_number(text, m) else m.group(0), text)


def plain_fractions_as_latex(text: str) -> str:
    """``2469/20000`` -> ``\\frac{2469}{20000}`` for every fraction of two plain integers in ``text``."""
    return _PLAIN_FRACTION.sub(r"\\frac{\1}{\2}", text)


def _is_single_number(text: str, match: re.Match[str]) -> bool:
    """A grouped number is a thousands-separated number unless the text around it is a list of numbers."""
    before, after = text[: match.start()].rstrip(), text[match.end() :].lstrip()
    return not (before.endswith(",") or after.startswith(",")) and not (
        before.endswith(("(", "[", "\\{")) and after.startswith((")", "]", "\\}"))
    )
