"""Which of a pool's costs are estimated, and how: the mark and the one footnote every cost display carries.

A pool imported from a source that did not record everything holds estimates: token counts from the text
(``pools.tokens.estimate_tokens``), latencies by rule, verifier calls charged their prompt only, model sizes
given on import rather than by the source. The terminal table, the main tables, the figure axes and the
report mark each cost column built on an estimate with ``ESTIMATE_MARK`` and say how in one footnote
(``CostEstimates.footnote``), instead of a provenance dump. Everything here reads the pool before the bench
drops its candidate table; a simulated pool (its costs drawn by the simulator, not measured) carries no mark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pools.prices import PRICES_KEY
from pools.store import Pool

__all__ = ["ESTIMATE_MARK", "CostEstimates", "cost_estimates", "marked"]

#: Appended to a cost column's heading or axis label when some of its values are estimated.
ESTIMATE_MARK = "~"


@dataclass(frozen=True)
class CostEstimates:
    """The cost metrics (``eval.metrics`` columns) that hold estimates, and the footnote saying how."""

    metrics: frozenset[str] = frozenset()
    footnote: str = ""

    def mark(self, metric: str) -> str:
        """``ESTIMATE_MARK`` when ``metric`` holds estimates, else ""."""
        return ESTIMATE_MARK if metric in self.metrics else ""


def marked(label: str, estimates: CostEstimates | None, metric: str) -> str:
    """``label`` with the estimate mark when ``metric`` holds estimates."""
    return label + (estimates.mark(metric) if estimates is not None else "")


def cost_estimates(pool: Pool) -> CostEstimates:
    """What of ``pool``'s costs is estimated (from its candidate table and its manifest's provenance)."""
    provenance = pool.manifest.get("provenance") or {}
    if "simulator" in provenance:
        return CostEstimates()
    counts = provenance.get("estimated") or {}
    metrics: set[str] = set()
    how: list[str] = []
    n = len(pool.candidates)
    estimated_tokens = int(pool.candidates["tokens_estimated"].sum()) if n else 0
    if estimated_tokens:
        metrics |= {"total_tokens", "p_tokens", "usd"}
        generation = pool.manifest.get("generation") or {}
        capped = ", capped at the source's max_tokens" if "max_tokens" in generation or "per_model" in generation else ""
        hidden = (" (the visible text only: an API model's hidden reasoning tokens are not in it)"
                  if provenance.get("hidden_reasoning_uncounted") else "")
        how.append(f"token counts of {estimated_tokens}/{n} candidates estimated from their text (pools/tokens.py)"
                   + capped + hidden)
    if counts.get("latency_s") or counts.get("verifier_latency_s"):
        metrics.add("latency_s")
        how.append("latencies by rule (one GPU, fp16)")
    if counts.get("verifier_output_tokens") or counts.get("verifier_prompt_tokens"):
        metrics |= {"total_tokens", "p_tokens", "usd"}
        what = []
        if counts.get("verifier_prompt_tokens"):
            what.append("prompt = problem + candidate text, estimated")
        if counts.get("verifier_output_tokens"):
            what.append("no output tokens")
        how.append(f"verifier calls charged as an estimate ({', '.join(what)})")
    if provenance.get("generator_params_from"):
        metrics.add("p_tokens")
        how.append(f"model sizes {provenance['generator_params_from']}")
    if not metrics:
        return CostEstimates()
    footnote = f"{ESTIMATE_MARK} estimated: " + "; ".join(how)
    if PRICES_KEY not in pool.manifest:
        metrics.discard("usd")
    return CostEstimates(frozenset(metrics), footnote + ".")
