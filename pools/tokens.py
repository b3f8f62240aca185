"""Estimates for token counts and latencies that a source did not record.

Both rules are deliberately simple, deterministic and documented (docs/POOLS.md), and every value they
produce is flagged where the schema has a flag (``candidates.tokens_estimated``) and counted in the
manifest's provenance otherwise.

Token rule (``estimate_tokens``), tuned for BPE tokenizers of the Qwen / Llama family on math text:

* each run of letters is a word piece and counts 1.3 tokens (the usual tokens-per-English-word ratio);
* each digit counts 1 token (Qwen tokenizers split numbers into single digits);
* each other non-space character (punctuation, LaTeX backslashes and braces, operators) counts 1 token;
* whitespace is free (it merges into the neighbouring token); the total is rounded up.

Latency rule (``estimate_latency_s``), a single request served in fp16 on one modern GPU:

* a fixed overhead of ``LATENCY_OVERHEAD_S`` per call;
* prefill is compute bound: 2 FLOPs per parameter per prompt token at ``PREFILL_FLOPS`` effective;
* decode is memory-bandwidth bound: all weights (2 bytes per parameter) are read once per output token at
  ``DECODE_BYTES_PER_S`` effective.
"""

from __future__ import annotations

import math
import re

import numpy as np

#: Tokens per run of letters (a word piece).
TOKENS_PER_WORD = 1.3
#: Seconds of fixed overhead per model call (scheduling, HTTP, detokenization).
LATENCY_OVERHEAD_S = 0.05
#: Effective prefill throughput in FLOP/s.
PREFILL_FLOPS = 200e12
#: Effective decode memory bandwidth in bytes/s.
DECODE_BYTES_PER_S = 1.5e12

_WORD = re.compile(r"[^\W\d_]+")
_DIGIT = re.compile(r"\d")
_SYMBOL = re.compile(r"[^\w\s]|_")


def estimate_tokens(text: str | None) -> int:
    """Estimated token count of ``text``: 1.3 per letter run + 1 per digit + 1 per other non-space char."""
    if not text:
        return 0
    words = len(_WORD.findall(text))
    digits = len(_DIGIT.findall(text))
    symbols = len(_SYMBOL.findall(text))
    return math.ceil(TOKENS_PER_WORD * words + digits + symbols)


def estimate_latency_s(prompt_tokens: int, output_tokens: int, params_b: float) -> float:
    """Estimated seconds for one call of a ``params_b``-billion model (see the module docstring)."""
    params = max(float(params_b), 0.0) * 1e9
    prefill = prompt_tokens * 2.0 * params / PREFILL_FLOPS
    decode = output_tokens * 2.0 * params / DECODE_BYTES_PER_S
    return round(LATENCY_OVERHEAD_S + prefill + decode, 6)


def estimate_latency_array(prompt_tokens: np.ndarray, output_tokens: np.ndarray, params_b: np.ndarray) -> np.ndarray:
    """``estimate_latency_s`` over arrays of calls (float64), for tables of millions of calls."""
    params = np.maximum(np.asarray(params_b, dtype=np.float64), 0.0) * 1e9
    prefill = np.asarray(prompt_tokens, dtype=np.float64) * 2.0 * params / PREFILL_FLOPS
    decode = np.asarray(output_tokens, dtype=np.float64) * 2.0 * params / DECODE_BYTES_PER_S
    return np.round(LATENCY_OVERHEAD_S + prefill + decode, 6)


def apportion(total: int, weights: list[float]) -> list[int]:
    """Split the integer ``total`` in proportion to ``weights`` (largest remainders; the parts sum to total).

    All-zero weights split evenly. Used to share one call's (or one puzzle's) recorded token count among
    the samples it produced, weighted by each sample's estimated length.
    """
    if total < 0 or any(w < 0 for w in weights):
        raise ValueError("apportion needs a non-negative total and weights")
    if not weights:
        return []
    if not any(weights):
        weights = [1.0] * len(weights)
    scale = total / sum(weights)
    exact = [w * scale for w in weights]
    parts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts
