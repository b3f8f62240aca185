"""Cheap text audits of a sampled solution (no model calls)."""

from __future__ import annotations

import re

__all__ = ["repetition_score"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


def repetition_score(text: str | None, *, n: int = 10, tail_tokens: int = 500) -> float:
    """Share of n-gram windows in the text's tail that repeat an earlier window there, in [0, 1].

    Rule: split the text into tokens (runs of word characters, and every other non-space character on
    its own, so LaTeX loops count too), keep the last ``tail_tokens`` tokens, slide a window of ``n``
    tokens over them, and return (windows - distinct windows) / windows. A text looping with period p
    over T tail tokens scores about 1 - p / T; ordinary prose scores near 0. None, or a tail shorter than
    ``2 * n`` tokens, scores 0.
    """
    if not text or n < 1:
        return 0.0
    tokens = _TOKEN.findall(text)[-tail_tokens:]
    if len(tokens) < 2 * n:
        return 0.0
    windows = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return (len(windows) - len(set(windows))) / len(windows)
