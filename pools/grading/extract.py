"""Pull the final answer out of a sampled solution.

Strategies, strongest first; the first that finds something wins:

0. ``answer_tag``: the last non-empty ``<answer>...</answer>`` block (a box inside it gives the box's content,
   a final-answer statement its answer; otherwise the whole block, never a number picked out of it:
   ``<answer>\\frac{5}{8}</answer>`` is 5/8). Empty blocks followed by more text (an echoed format
   instruction) are skipped; an empty block that ends the text is an explicit empty answer (none).
1. ``boxed``: the last complete ``\\boxed{...}`` or ``\\fbox{...}`` (nested and escaped braces handled;
   ``\\boxed 5`` without braces too).
2. ``final_answer``: the last "final answer is ...", "the answer is ...", "Answer: ..." statement, or a
   GSM8K-style ``#### n`` line (the rest of the line one number; a ``#### Step 2`` heading is no answer).
   A prose statement gives its number only when it says what the thing is or has ("The animals have a total
   of 160 legs" is 160); "the number of divisors of 12" or "no combination equals 24" stay sentences.
3. ``last_expression``: the last inline math segment (``$...$``, ``\\(...\\)``, ``\\[...\\]``) or the last
   number (a unit glued to it counts, "48g" is 48; a variable does not, "2m" is no number), whichever ends
   later; for a segment ``x = 5`` the part after the last ``=``.
4. ``none``: nothing usable.

A ``\\boxed{`` that is opened and never closed (the text was cut at the token cap) sets
``incomplete_boxed`` and is otherwise ignored: an earlier complete box, or the other strategies, decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pools.grading.units import GLUED_UNITS, MULTIPLIER_WORDS

__all__ = ["Extraction", "extract_answer", "find_boxed"]

STATUSES: tuple[str, ...] = ("answer_tag", "boxed", "final_answer", "last_expression", "none")


@dataclass(frozen=True)
class Extraction:
    """The answer found in a solution text, how it was found, and whether a box was left open."""

    answer: str | None
    status: str
    incomplete_boxed: bool


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "\boxed 5" style (no braces): one token up to whitespace, "$" or end of sentence.
_BOX_BARE = re.compile(r"\\boxed\s+([^\s${}]+)")
_EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{\s*\}")


def _matching_brace(text: str, open_index: int) -> int | None:
    """Index of the brace closing the one at ``open_index``; escaped ``\\{`` ``\\}`` do not count."""
    depth = 0
    i = open_index
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2  # skip the escaped character, e.g. \{ in a set
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _scan_boxes(text: str) -> tuple[str | None, int | None]:
    """The last complete, non-empty box content and the start of an unclosed box (None if all closed)."""
    last: str | None = None
    last_end = -1
    unclosed_at: int | None = None
    position = 0
    while True:
        match = _BOX_OPEN.search(text, position)
        if match is None:
            break
        close = _matching_brace(text, match.end() - 1)
        if close is None:
            # Everything after an unclosed box is inside it, so there is nothing more to find.
            unclosed_at = match.start()
            break
        content = text[match.end() : close].strip()
        if content:
            last, last_end = content, close
        position = close + 1
    limit = len(text) if unclosed_at is None else unclosed_at
    for bare in _BOX_BARE.finditer(text, 0, limit):
        if bare.start() > last_end:
            last, last_end = bare.group(1).rstrip(".,;"), bare.end()
    return last, unclosed_at


def find_boxed(text: str) -> tuple[str | None, bool]:
    """The content of the last complete, non-empty box in ``text`` and whether a box was left unclosed."""
    last, unclosed_at = _scan_boxes(text)
    return last, unclosed_at is not None


# GSM8K's "#### 18": only when the rest of the line is one number (or an ordinal place, "#### 6th place"),
# never a "#### Step 2" heading.
_GSM8K_ANSWER = re.compile(
    r"(?:^|\n)[ \t]*####(?=[ \t]*[-+]?(?:\\?\$)?[ \t]*(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?"
    r"(?:(?<=\d)(?:st|nd|rd|th)(?:[ \t]+place)?)?[ \t.]*(?:\n|$))")
# "6th place" -> "6": the place is the number.
_ORDINAL_PLACE = re.compile(r"(?<=\d)(?:st|nd|rd|th)(?:\s+place)?$", re.IGNORECASE)
# A sentence stated as the answer whose number is what the sentence says the thing is or has ("Answer: The
# animals have a total of 160 legs", "the number of ways is 12"): a subject, then is/are/was/were/be/equals/
# has/have/had (optionally "a total of"), then the one number ending the sentence, at most one word (a unit or
# a noun) after it. A number that is the argument of a description ("the number of divisors of 12", "the sum
# of the first 10 primes", "2 more than x") has no such verb before it, so the sentence stays the answer.
_PROSE_ANSWER = re.compile(
    r"^(?P<subject>[A-Za-z][A-Za-z',]*(?:\s+[A-Za-z][A-Za-z',]*)*)"
    r"\s+(?:is|are|was|were|be|equals|has|have|had)(?:\s+(?:a\s+)?total\s+of)?"
    r"\s+\$?(?P<number>-?\d+(?:,\d{3})*(?:\.\d+)?)(?:\s+(?P<unit>[A-Za-z]+))?$",
    re.IGNORECASE,
)
# Words that make the number not the answer: a comparison or bound ("more than 5", "at least 5"), a negation
# ("no combination ... equals 24", "cannot be 24") or a condition ("the value of x when y is 3").
_NOT_THE_ANSWER = frozenset({
    "than", "least", "most", "over", "under", "nearly", "almost", "about", "approximately", "per", "every",
    "not", "no", "cannot", "can't", "never", "none", "unable", "without",
    "when", "if", "where", "whenever", "unless", "until", "such", "that", "which", "whose",
})


def _prose_number(answer: str) -> str:
    """The number a prose answer says the thing is ("...have a total of 160 legs" -> "160"); else ``answer``."""
    match = _PROSE_ANSWER.match(answer)
    if match is None:
        return answer
    subject = {word.strip("',").lower() for word in match.group("subject").split()}
    unit = (match.group("unit") or "").lower()
    if subject & (_NOT_THE_ANSWER | MULTIPLIER_WORDS) or unit in MULTIPLIER_WORDS | _NOT_THE_ANSWER:
        return answer
    return match.group("number")


# Prefixes only: the answer is what follows on the same line. Matching just the prefix keeps a later
# statement findable ("Final Answer: The final answer is 42" ends with "42", not the whole sentence).
_FINAL_PREFIXES: tuple[re.Pattern[str], ...] = (
    re.compile(r"final\s+answer\s*(?:is|:|=)\s*:?", re.IGNORECASE),
    re.compile(r"\bthe\s+(?:correct\s+)?answer\s+is\s*:?", re.IGNORECASE),
    re.compile(r"(?:^|\n)[ \t>#*_]*answer[*_]*\s*[:：]", re.IGNORECASE),
    _GSM8K_ANSWER,
)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_WORD_OR_NUMBER = re.compile(r"[A-Za-z0-9]")
_DELIMITED = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# A clause ends at a full stop, ;, !, ? followed by a space, or at a comma followed by a word
# ("3.14, approximately"); a comma between numbers ("(3, 4]") does not end it.
_CLAUSE_END = re.compile(r"\.(?:\s|$)|[;!?](?:\s|$)|,\s+(?=[A-Za-z]{3,})")


def _clean_statement(raw: str) -> str | None:
    """The answer part of what follows "final answer is": the math segment or the clause up to its end."""
    text = raw.strip().strip("*_").strip()
    for opener, closer in _DELIMITED:
        if text.startswith(opener):
            end = text.find(closer, len(opener))
            if end < 0:
                # An unclosed "$" (truncated text): keep what follows it as a plain clause.
                text = text[len(opener) :]
                break
            return text[len(opener) : end].strip() or None
    end = _CLAUSE_END.search(text)
    if end is not None:
        text = text[: end.start()]
    text = text.strip().strip("*_").strip().rstrip(".,;:")
    return text or None


def _final_answer_statement(text: str) -> str | None:
    best: tuple[int, str] | None = None
    for pattern in _FINAL_PREFIXES:
        for match in pattern.finditer(text):
            line_end = text.find("\n", match.end())
            rest = text[match.end() : len(text) if line_end < 0 else line_end]
            answer = _clean_statement(rest)
            if answer is not None:
                answer = _ORDINAL_PLACE.sub("", answer) if pattern is _GSM8K_ANSWER else _prose_number(answer)
            if answer is not None and (best is None or match.end() > best[0]):
                best = (match.end(), answer)
    return None if best is None else best[1]


_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# A number standing alone, or with a unit glued to it ("48g" is 48; "6th" and "2x" are no number).
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)(?:/\d+)?"
                     r"(?:(?![\w])|(?=(?:" + "|".join(GLUED_UNITS) + r")(?![\w])))")
# An amount of money ("$3") and where a sentence ends (".", "!", "?" before a space, or a line break).
_MONEY = re.compile(r"\$\s?(\d+(?:,\d{3})*(?:\.\d+)?)(?![\d/])")
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s)|\n")
_COUNTED_FRACTION = re.compile(r"-?\d+/\d+\s+([A-Za-z]+)")
_MONEY_WORDS = frozenset({"dollar", "dollars", "cent", "cents", "usd"})


def _money_of_sentence(text: str, number_start: int) -> str | None:
    """The one amount of money in the sentence of the last number, when that number is a fraction restated after it.

    "So, it costs $3 more for a mixture of 1/2 pound almonds and 1/3 pound walnuts.": the amount asked for is
    the $3; the numbers after it restate the question's quantities.
    """
    start = 0
    for brk in _SENTENCE_BREAK.finditer(text, 0, number_start):
        start = brk.end()
    end_match = _SENTENCE_BREAK.search(text, number_start)
    end = len(text) if end_match is None else end_match.start()
    amounts = list(_MONEY.finditer(text, start, end))
    if len(amounts) != 1 or amounts[0].end() > number_start:
        return None
    # Only when the last number is a fraction of something else ("1/3 pound") restated after the amount, with
    # no computation between them: "...$2 each, so she buys 4 tickets." keeps 4, "60 * $1.25 = 75" keeps 75.
    counted = _COUNTED_FRACTION.match(text, number_start)
    if counted is None or "=" in text[amounts[0].end():number_start]:
        return None
    if counted.group(1).lower() in _MONEY_WORDS | MULTIPLIER_WORDS:
        return None
    return amounts[0].group(1)


def _last_expression(text: str) -> str | None:
    segment: tuple[int, str] | None = None
    for match in _MATH_SEGMENT.finditer(text):
        content = next(group for group in match.groups() if group is not None).strip()
        if content:
            segment = (match.end(), content)
    number: tuple[int, str] | None = None
    for match in _NUMBER.finditer(text):
        number = (match.end(), match.group(0))
        number_start = match.start()
    if number is not None:
        money = _money_of_sentence(text, number_start)
        if money is not None:
            number = (number[0], money)
    if segment is not None and (number is None or segment[0] >= number[0]):
        content = segment[1]
        if "=" in content:
            content = content.rsplit("=", 1)[1].strip() or content
        return content.rstrip(".,;") or None
    if number is not None:
        return number[1]
    return None


def _answer_tag(text: str) -> str | None:
    """The answer in the last non-empty ``<answer>`` block: its box, else its final-answer statement, else all of it.

    "" when the text ends with an empty block and holds no other (an explicit empty answer); None when it
    has no block, or only empty ones followed by more text (an echoed instruction "... in
    <answer></answer> tags.": the other strategies read the text).
    """
    matches = list(_ANSWER_TAG.finditer(text))
    for match in reversed(matches):
        content = match.group(1).strip()
        boxed, _ = _scan_boxes(content)
        found = (boxed or _final_answer_statement(content) or content).strip()
        if found:
            return found
    if matches and not _WORD_OR_NUMBER.search(text, matches[-1].end()):
        return ""
    return None


def extract_answer(text: str | None) -> Extraction:
    """Extract the final answer from a solution text (answer tag, boxed, final-answer statement, fallback)."""
    if not text or not text.strip():
        return Extraction(answer=None, status="none", incomplete_boxed=False)
    tagged = _answer_tag(text)
    if tagged is not None:  # an empty answer block is no answer, never a vote
        return Extraction(answer=tagged or None, status="answer_tag" if tagged else "none",
                          incomplete_boxed=_scan_boxes(text)[1] is not None)
    text = _ANSWER_TAG.sub(" ", text)  # only empty blocks are left: no answer, and not a math segment
    boxed, unclosed_at = _scan_boxes(text)
    incomplete = unclosed_at is not None
    if boxed is not None:
        return Extraction(answer=boxed, status="boxed", incomplete_boxed=incomplete)
    if unclosed_at is not None:
        # Search only before the unclosed box: what follows it is a truncated half-answer.
        text = text[:unclosed_at]
    text = _EMPTY_BOX.sub(" ", text)  # an empty box is no answer, and not a math segment either
    stated = _final_answer_statement(text)
    if stated is not None:
        return Extraction(answer=stated, status="final_answer", incomplete_boxed=incomplete)
    fallback = _last_expression(text)
    if fallback is not None:
        return Extraction(answer=fallback, status="last_expression", incomplete_boxed=incomplete)
    return Extraction(answer=None, status="none", incomplete_boxed=incomplete)
