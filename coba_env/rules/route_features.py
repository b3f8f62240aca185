"""The route observation: per-generator features, then the pooled feature table (scalar and batched forms).

The table is generated from the action layout: for each generator g, in the layout's order, the features of
``GENERATOR_FEATURES`` named ``<feature>_<g>`` (one ``mean_<verifier>`` per verifier), then the pooled
feature table (``coba_env.rules.features.FeatureLayout`` of the verifiers) computed over every revealed candidate (answers clustered across
generators; N_max there is the per-generator N_max times G). Every value derives from revealed evidence only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from coba_env.row_items import row_items
from coba_env.rules.actions import ActionLayout
from coba_env.rules.features import FeatureLayout, feature_layout
from pools.schema import PAPER_TIER_ROLES

if TYPE_CHECKING:  # annotations only
    from coba_env.evidence import Evidence

#: Per-generator features, in block order: (name, meaning); ``{v}`` is repeated for each verifier.
GENERATOR_FEATURES: tuple[tuple[str, str], ...] = (
    ("revealed", "candidates revealed from the generator / N_max per generator"),
    ("remaining", "the generator's candidates SAMPLE can still reveal / N_max per generator"),
    ("agreement", "size of the generator's own largest answer cluster / its candidates revealed (0 if none)"),
    ("mean_{v}", "mean usable {v} score over the generator's verified candidates (0 if none)"),
    ("spend", "generation cost spent on the generator in the env's cost model / B (unbounded above)"),
)


def generator_block_size(layout: ActionLayout) -> int:
    """Features per generator: revealed, remaining, agreement, one mean per verifier, spend."""
    return 4 + layout.n_verifiers


def pooled_layout(layout: ActionLayout, pooled: FeatureLayout | None = None) -> FeatureLayout:
    """The pooled feature table: ``pooled`` (an env's, built from its pool's roles), else the layout's verifiers
    with the paper names' roles (a verifier without a paper name feeds no top_v1 / best_v3 feature)."""
    if pooled is not None:
        return pooled
    return feature_layout(layout.verifiers, tuple(PAPER_TIER_ROLES.get(v, "") for v in layout.verifiers))


def route_features(layout: ActionLayout, pooled: FeatureLayout | None = None) -> tuple[tuple[str, str], ...]:
    """THE route feature table of ``layout``: (name, meaning) in index order."""
    rows: list[tuple[str, str]] = []
    for g in layout.generators:
        for name, meaning in GENERATOR_FEATURES:
            if "{v}" in name:
                rows += [(f"{name.format(v=v)}_{g}", f"{g}: {meaning.format(v=v)}") for v in layout.verifiers]
            else:
                rows.append((f"{name}_{g}", f"{g}: {meaning}"))
    return (*rows, *pooled_layout(layout, pooled).features)


def route_lambda_index(layout: ActionLayout, pooled: FeatureLayout | None = None) -> int:
    """Index of the lambda feature in the route observation."""
    return layout.n_generators * generator_block_size(layout) + pooled_layout(layout, pooled).lam


def route_observation_bounds(layout: ActionLayout, pooled: FeatureLayout | None = None
                             ) -> tuple[np.ndarray, np.ndarray]:
    """(low, high): [0, 1] for every feature, [0, inf) for each spend, budget_used and lambda."""
    size = generator_block_size(layout)
    high = np.ones(layout.n_generators * size, dtype=np.float32)
    high[size - 1::size] = np.inf
    low0, high0 = pooled_layout(layout, pooled).bounds()
    return np.concatenate([np.zeros(len(high), dtype=np.float32), low0]), np.concatenate([high, high0])


def route_features_markdown(layout: ActionLayout, pooled: FeatureLayout | None = None) -> str:
    """The route feature table of ``layout`` as Markdown (index, name, meaning), for docs."""
    lines = ["| Num | Feature | Meaning |", "|---:|---|---|"]
    lines += [f"| {i} | {name} | {meaning} |" for i, (name, meaning) in enumerate(route_features(layout, pooled))]
    return "\n".join(lines)


def generator_block(ev: Evidence, n_max: int, cost_k: int, budget: float) -> list[float]:
    """The per-generator features of ``ev`` as Python floats, in table order (scalar form)."""
    out: list[float] = []
    for g in range(ev.n_generators):
        n = ev.gen_revealed[g]
        out.append(n / n_max)
        out.append((ev.gen_cap[g] - n) / n_max)
        out.append(ev.gen_top_count[g] / n if n else 0.0)
        for t in range(ev.n_tiers):
            mean = ev.score_mean(g, t)
            out.append(0.0 if mean is None else mean)
        out.append(ev.gen_spend[g][cost_k] / budget)
    return out


def patch_after_sample(block: list[float], ev: Evidence, g: int, n_max: int, cost_k: int,
                       budget: float) -> None:
    """``block`` after a SAMPLE from generator ``g``: only g's revealed, remaining, agreement and spend change."""
    at = g * (4 + ev.n_tiers)
    n = ev.gen_revealed[g]
    block[at] = n / n_max
    block[at + 1] = (ev.gen_cap[g] - n) / n_max
    block[at + 2] = ev.gen_top_count[g] / n
    block[at + 3 + ev.n_tiers] = ev.gen_spend[g][cost_k] / budget


def patch_after_verify(block: list[float], ev: Evidence, g: int, tier: int) -> None:
    """``block`` after a VERIFY of one of generator ``g``'s candidates at ``tier``: only that mean changes."""
    at = g * ev.n_tiers + tier
    k = ev.score_counts[at]
    block[g * (4 + ev.n_tiers) + 3 + tier] = ev.score_sums[at] / k if k else 0.0


def batch_generator_block(s: Any) -> np.ndarray:
    """The per-generator features, feature-major [G * block, B], of a ``RouteVectorEnv`` state ``s`` (batched form)."""
    g_n, t_n, b = s.gen_revealed.shape[0], s.n_tiers, s.num_envs
    size = 4 + t_n
    out = np.empty((g_n * size, b))
    n = s.gen_revealed
    for g in range(g_n):
        at = g * size
        np.divide(n[g], float(s.n_max_per_generator), out=out[at])
        np.divide(s.gen_cap[g] - n[g], float(s.n_max_per_generator), out=out[at + 1])
        np.divide(s.gen_top_count[g], np.maximum(n[g], 1), out=out[at + 2])
        counts = s.gen_score_count[g]
        np.divide(s.gen_score_sum[g], np.maximum(counts, 1), out=out[at + 3:at + 3 + t_n])
        np.divide(s.gen_spend[g], s.budget, out=out[at + 3 + t_n])
    return out



def batch_patch_after_sample(block: np.ndarray, s: Any, rows: np.ndarray, g: np.ndarray, at_gen: np.ndarray,
                             n: np.ndarray, spend: np.ndarray) -> None:
    """``block`` [B, G * (4 + T)] after SAMPLEs of ``rows`` from generators ``g`` (batched ``patch_after_sample``).

    ``s`` is a ``RouteVectorEnv`` state already updated; ``at_gen`` = g * B + rows, the flat [G, B] index; ``n``
    and ``spend``: the updated gen_revealed (>= 1) and gen_spend of each (g, row). The values are the ones
    ``batch_generator_block`` computes (float64, then cast to the block's dtype).
    """
    n_max = float(s.n_max_per_generator)
    at = rows * block.shape[1] + g * (4 + s.n_tiers)
    flat = block.ravel()
    flat[at] = n / n_max
    flat[at + 1] = (s.gen_cap.ravel().take(at_gen) - n) / n_max
    flat[at + 2] = s.gen_top_count.ravel().take(at_gen) / n
    flat[at + 3 + s.n_tiers] = spend / s.budget


def batch_patch_after_verify(block: np.ndarray, s: Any, rows: np.ndarray, g: np.ndarray, tier: np.ndarray,
                             sums: np.ndarray, counts: np.ndarray) -> None:
    """``block`` after usable scores at ``tier`` for candidates of generators ``g`` (batched ``patch_after_verify``).

    ``sums`` / ``counts``: the updated gen_score_sum / gen_score_count (>= 1) of each (g, tier, row).
    """
    at = rows * block.shape[1] + g * (4 + s.n_tiers) + 3 + tier
    block.ravel()[at] = sums / counts


def batch_fresh_block(block: np.ndarray, s: Any, rows: np.ndarray) -> None:
    """``block`` for ``rows`` whose episodes just started: every feature 0 but remaining = the generator's cap."""
    fresh = np.zeros((len(rows), block.shape[1]), dtype=block.dtype)
    fresh[:, 1::4 + s.n_tiers] = s.gen_cap.take(rows, axis=1).T / float(s.n_max_per_generator)
    row_items(block)[rows] = row_items(fresh)  # whole rows as single items: one 1-D scatter
