"""Which of a pool's costs are estimated, and how: the mark and the one footnote every cost display carries.

A pool imported from a source that did not record everything holds estimates: token counts from the text
(``pools.tokens.estimate_tokens``), latencies by rule, verifier calls charged their prompt only, model sizes
given on import rather than by the source. The terminal table, the main tables, the figure axes and the
report mark each cost column built on an estimate with ``ESTIMATE_MARK`` and say how in one footnote
(``CostEstimates.footnote``), instead of a provenance dump. Everything here reads the pool before the bench
drops its candidate table; a simulated pool (its costs drawn by the simulator, not measured) carries no mark.

A model the bench calls with no published size (``params_b`` 0, e.g. GPT-4 in the routellm pool) makes
p_tokens count its calls as free, and latencies estimated from the size too: those columns carry
``UNSIZED_MARK`` instead, and the footnote names the model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pools.prices import PRICES_KEY
from pools.store import Pool

__all__ = ["ESTIMATE_MARK", "UNSIZED_MARK", "CostEstimates", "cost_estimates", "marked"]

#: Appended to a cost column's heading or axis label when some of its values are estimated.
ESTIMATE_MARK = "~"
#: Appended instead when the column is not meaningful: it weighs by the size of a model that has none.
UNSIZED_MARK = "*"


@dataclass(frozen=True)
class CostEstimates:
    """The cost metrics (``eval.metrics`` columns) that hold estimates, and the footnote saying how."""

    metrics: frozenset[str] = frozenset()
    footnote: str = ""
    #: Cost metrics that are not meaningful: they weigh calls by the size of a model with params_b 0.
    unsized: frozenset[str] = frozenset()

    def mark(self, metric: str) -> str:
        """``UNSIZED_MARK`` when ``metric`` is not meaningful, ``ESTIMATE_MARK`` when it holds estimates, else ""."""
        return UNSIZED_MARK if metric in self.unsized else ESTIMATE_MARK if metric in self.metrics else ""

    def why(self, metric: str) -> str:
        """What the mark of ``metric`` means, for an axis label ("" without a mark)."""
        if metric in self.unsized:
            return f"{UNSIZED_MARK} not meaningful"
        return f"{ESTIMATE_MARK} estimated" if metric in self.metrics else ""


def marked(label: str, estimates: CostEstimates | None, metric: str) -> str:
    """``label`` with the estimate mark when ``metric`` holds estimates."""
    return label + (estimates.mark(metric) if estimates is not None else "")


def estimated_tokens(pool: Pool) -> tuple[int, int]:
    """(candidates whose token counts are estimated, candidates) of ``pool``'s candidate table."""
    n = len(pool.candidates)
    return (int(pool.candidates["tokens_estimated"].sum()) if n else 0), n


def cost_estimates(pool: Pool, used_models: Iterable[str] | None = None, *,
                   estimated: tuple[int, int] | None = None) -> CostEstimates:
    """What of ``pool``'s costs is estimated (from its candidate table, or ``estimated``: ``estimated_tokens`` of
    it counted before it was dropped, and its manifest's provenance), and which are not meaningful because a model
    of ``used_models`` (default: every model of the pool) has no size."""
    provenance = pool.manifest.get("provenance") or {}
    if "simulator" in provenance:
        return CostEstimates()
    counts = provenance.get("estimated") or {}
    sizes = dict(zip(pool.models["name"].astype(str), pool.models["params_b"].astype(float), strict=True))
    unsized_models = sorted(m for m in (sizes if used_models is None else used_models) if not sizes.get(m, 0.0) > 0)
    unsized: set[str] = set()
    if unsized_models:
        unsized.add("p_tokens")
        if counts.get("latency_s") or counts.get("verifier_latency_s"):  # latency by rule grows with the size
            unsized.add("latency_s")
    metrics: set[str] = set()
    how: list[str] = []
    n_estimated, n = estimated if estimated is not None else estimated_tokens(pool)
    if n_estimated:
        metrics |= {"total_tokens", "p_tokens", "usd"}
        generation = pool.manifest.get("generation") or {}
        capped = ", capped at the source's max_tokens" if "max_tokens" in generation or "per_model" in generation else ""
        hidden = (" (the visible text only: an API model's hidden reasoning tokens are not in it)"
                  if provenance.get("hidden_reasoning_uncounted") else "")
        how.append(f"token counts of {n_estimated}/{n} candidates estimated from their text (pools/tokens.py)"
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
    if PRICES_KEY not in pool.manifest:
        metrics.discard("usd")
    notes = [f"{ESTIMATE_MARK} estimated: " + "; ".join(how) + "."] if how else []
    if unsized:
        latency = " and its estimated latencies (derived from the size)" if "latency_s" in unsized else ""
        notes.append(f"{UNSIZED_MARK} not meaningful: {', '.join(unsized_models)} "
                     f"{'has' if len(unsized_models) == 1 else 'have'} no published size (params_b 0), so "
                     f"p_tokens{latency} count{'' if latency else 's'} those calls as free.")
    return CostEstimates(frozenset(metrics), " ".join(notes), frozenset(unsized))
