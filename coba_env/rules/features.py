"""The observation's rule: the features of ``coba_env.rules.feature_table`` computed from the evidence.

Every value derives from revealed evidence only; no correctness label ever enters it. The scalar form reads an
episode's ``coba_env.evidence.Evidence`` (``observe``, and ``patch_after_verify`` for a VERIFY's few changes;
``generator_block`` and its two patches for the item grouping's per-generator block); the batched form reads
the state arrays of ``coba_env.vector_env.CoBaVectorEnv`` and does the same float operations, so both give the
same float32 values. The table itself (names, meanings, indices, bounds) is
re-exported here, where the env and the controllers have always imported it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from coba_env.row_items import row_items
from coba_env.rules.feature_table import (  # noqa: F401  (the table's public names, re-exported)
    BEST_V3,
    BUDGET_FROM_END,
    DISTINCT,
    ENTROPY,
    FEATURE_NAMES,
    FEATURES,
    GENERATOR_FEATURES,
    HEAD_FEATURES,
    LAMBDA_FROM_END,
    MEAN_LEN_FROM_END,
    N_FEATURES,
    NO_ANSWER,
    PAPER_FEATURE_LAYOUT,
    REVEALED,
    TAIL_FEATURES,
    TOP2_GAP,
    TOP_SHARE,
    V1_AVAIL,
    V1_FRAC,
    V1_MAX,
    V1_MEAN,
    V3_MEAN,
    VERIFIER_FEATURE,
    FeatureLayout,
    feature_layout,
    feature_table_markdown,
)

if TYPE_CHECKING:  # annotations only: the evidence module imports this one
    from coba_env.evidence import Evidence


def clogc_table(n: int) -> list[float]:
    """c * log(c) for c = 0..n, computed once so that every env uses bit-identical values."""
    return [0.0] + [float(c) * math.log(c) for c in range(1, n + 1)]


def log_table(n: int) -> list[float]:
    """log(c) for c = 0..n (log 0 taken as 0)."""
    return [0.0] + [math.log(c) for c in range(1, n + 1)]


def mean_length(len_sum: float, n: int, max_output_tokens: float) -> float:
    """The mean_length feature: mean output tokens over ``n`` revealed candidates / the normalizer."""
    return len_sum / n / max_output_tokens if n else 0.0


def observe(ev: Evidence, budget_used: float, max_steps: int, max_output_tokens: float, logs: list[float],
            top_fusion: float, fl: FeatureLayout = PAPER_FEATURE_LAYOUT) -> list[float]:
    """The observation of ``ev`` as Python floats, in the order of ``fl``'s table (scalar form)."""
    n = ev.n_revealed
    top = ev.top
    n_max = ev.n_max
    n_verified = ev.n_verified
    if n == 0:
        share = gap = no_answer = mean_len = cap = 0.0
        n_safe = 1  # every n_verified is 0
    else:
        share = ev.top_count / n if top >= 0 else 0.0
        gap = (ev.top_count - ev.second_count) / n if top >= 0 else 0.0
        no_answer = (n - ev.n_answered) / n
        n_safe = n
        mean_len = ev.len_sum / n / max_output_tokens
        cap = ev.cap_count / n
    na = ev.n_answered
    # Clipped to its bounds [0, 1]: when every answer agrees, log(n) - n log(n) / n rounds to about -1e-16.
    entropy = min(1.0, max(0.0, (logs[na] - ev.clogc_sum / na) / logs[n_max])) if na > 1 and n_max > 1 else 0.0
    if top >= 0:
        tier_stats = ev.tier_stats
        stats = tier_stats.get((fl.cheap, top))
        if stats:
            v1_mean, v1_max, v1_avail = stats[0] / stats[1], stats[2], 1.0
        else:
            v1_mean = v1_max = v1_avail = 0.0
        stats = tier_stats.get((fl.strong, top))
        v3_mean = stats[0] / stats[1] if stats else 0.0
    else:
        v1_mean = v1_max = v1_avail = v3_mean = 0.0
    if len(n_verified) == 3:  # three verifiers (the paper's): the same list without building the shares apart
        return [n / n_max, share, ev.n_distinct / n_max, entropy, gap, no_answer, v1_mean, v1_max, v1_avail,
                ev.best_v3, v3_mean, n_verified[0] / n_safe, n_verified[1] / n_safe, n_verified[2] / n_safe,
                budget_used, mean_len, cap, ev.flips / n_max, ev.steps / max_steps, ev.lam, top_fusion]
    return [n / n_max, share, ev.n_distinct / n_max, entropy, gap, no_answer, v1_mean, v1_max, v1_avail,
            ev.best_v3, v3_mean, *[k / n_safe for k in n_verified], budget_used, mean_len, cap, ev.flips / n_max,
            ev.steps / max_steps, ev.lam, top_fusion]


def first_observation(lam: float, fl: FeatureLayout = PAPER_FEATURE_LAYOUT) -> list[float]:
    """The observation before anything is revealed: every feature 0 but lambda (what ``observe`` gives)."""
    obs = [0.0] * fl.n_features
    obs[fl.lam] = lam
    return obs


def patch_after_verify(obs: list[float], ev: Evidence, t: int, c: int, score: float, budget_used: float,
                       max_steps: int, fl: FeatureLayout = PAPER_FEATURE_LAYOUT) -> None:
    """Update ``obs`` in place after candidate ``c`` was verified at tier ``t`` (equal to a fresh ``observe``).

    A VERIFY changes only the verified tier's entries, the budget, the step count and the top R.
    """
    obs[V1_FRAC + t] = ev.n_verified[t] / ev.n_revealed
    if score == score:
        cluster = ev.clusters[c]
        top = ev.top
        if t == fl.cheap and cluster == top:
            stats = ev.tier_stats[(t, top)]
            obs[V1_MEAN], obs[V1_MAX], obs[V1_AVAIL] = stats[0] / stats[1], stats[2], 1.0
        if t == fl.strong:
            obs[BEST_V3] = ev.best_v3
            if cluster == top:
                stats = ev.tier_stats[(t, top)]
                obs[V3_MEAN] = stats[0] / stats[1]
    b = fl.budget
    obs[b] = budget_used
    obs[b + 4] = ev.steps / max_steps
    obs[b + 6] = ev.best_r


def generator_block(ev: Evidence, n_max: int, cost_k: int, budget: float) -> list[float]:
    """The per-generator block of ``ev`` (item grouping) as Python floats, in table order (scalar form)."""
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


def patch_block_after_sample(block: list[float], ev: Evidence, g: int, n_max: int, cost_k: int,
                             budget: float) -> None:
    """``block`` after a SAMPLE from generator ``g``: only g's revealed, remaining, agreement and spend change."""
    at = g * (4 + ev.n_tiers)
    n = ev.gen_revealed[g]
    block[at] = n / n_max
    block[at + 1] = (ev.gen_cap[g] - n) / n_max
    block[at + 2] = ev.gen_top_count[g] / n
    block[at + 3 + ev.n_tiers] = ev.gen_spend[g][cost_k] / budget


def patch_block_after_verify(block: list[float], ev: Evidence, g: int, tier: int) -> None:
    """``block`` after a VERIFY of one of generator ``g``'s candidates at ``tier``: only that mean changes."""
    at = g * ev.n_tiers + tier
    k = ev.score_counts[at]
    block[g * (4 + ev.n_tiers) + 3 + tier] = ev.score_sums[at] / k if k else 0.0


def rescaled(observation: np.ndarray, ev: Evidence, *, cost_k: int, budget: float, max_output_tokens: float,
             lam: float) -> np.ndarray:
    """``observation`` with budget_used, mean_length and lambda recomputed in other units (a controller's)."""
    x = np.array(observation, dtype=np.float32)
    x[BUDGET_FROM_END] = ev.cost[cost_k] / budget
    x[MEAN_LEN_FROM_END] = mean_length(ev.len_sum, ev.n_revealed, max_output_tokens)
    x[LAMBDA_FROM_END] = lam
    return x


def batch_observe(s: Any, o: np.ndarray, fl: FeatureLayout = PAPER_FEATURE_LAYOUT,
                  out: np.ndarray | None = None) -> np.ndarray:
    """The observations [B, F] of a ``CoBaVectorEnv`` state ``s`` (batched form of ``observe``).

    ``o`` is a feature-major float32 scratch buffer [F, B] (each value is computed in float64 and rounded
    once, as the scalar form's); ``s.top_rank`` must be current. Before the first
    candidate every count and sum is 0, and without an answer the top-cluster counts and statistics are 0, so
    dividing by max(n, 1) (or max(count, 1)) gives the scalar form's 0 features. ``s._ints`` rows: n,
    n_distinct, flips, steps, top_count, cap_count, then n_verified per verifier. ``out``: a float32 [B, F]
    array (or view) to write into instead of a new one.
    """
    n = s.n
    n_safe = np.maximum(n, 1).astype(np.float64)
    b = fl.budget
    counters = (REVEALED, DISTINCT, b + 3, b + 4)  # n, n_distinct, flips, steps
    scale = (s.n_max, s.n_max, s.n_max, s.max_steps)
    for k, feature in enumerate(counters):  # counter rows 0..3 of s._ints
        np.divide(s._ints[k], float(scale[k]), out=o[feature])
    shares = (TOP_SHARE, b + 2, *range(V1_FRAC, b))  # top_count, cap_count, n_verified[T]
    for k, feature in enumerate(shares):  # counter rows 4.. of s._ints
        np.divide(s._ints[4 + k], n_safe, out=o[feature])
    na = s.n_answered
    if s.n_max > 1:
        np.divide(s.logs[na] - s.clogc_sum / np.maximum(na, 1), s.logs[s.n_max], out=o[ENTROPY])
        np.clip(o[ENTROPY], 0.0, 1.0, out=o[ENTROPY])  # the scalar form's clip: rounding stays inside [0, 1]
    else:
        o[ENTROPY] = 0.0
    np.divide(s.top_count - s.second, n_safe, out=o[TOP2_GAP])
    np.divide(n - na, n_safe, out=o[NO_ANSWER])
    # The top cluster's cheap-judge sum, count, max and strong-verifier sum, count (all 0 without a top answer).
    stats = s.top_record
    np.divide(stats[:, 0], np.maximum(stats[:, 1], 1.0), out=o[V1_MEAN])
    o[V1_MAX] = stats[:, 2]
    o[V1_AVAIL] = stats[:, 1] > 0
    o[BEST_V3] = s.best_v3
    np.divide(stats[:, 3], np.maximum(stats[:, 4], 1.0), out=o[V3_MEAN])
    np.divide(s._cost[s.cost_k], s.budget, out=o[b])
    np.divide(s.len_sum / n_safe, s.max_output_tokens, out=o[b + 1])
    o[b + 5] = s.lams
    o[b + 6] = np.where(na > 0, s.top_rank, 0.0)  # each row's largest R, kept by the fusion
    if out is None:
        out = np.empty((o.shape[1], fl.n_features), dtype=np.float32)
    out[...] = o.T  # one transposed cast (fast when o's row stride is not a power of two: see VectorState)
    return out


def batch_generator_block(s: Any) -> np.ndarray:
    """The per-generator block, feature-major [G * block, B], of an item-grouped ``CoBaVectorEnv`` state ``s``,
    computed from its counters (batched form of ``generator_block``; the env patches it instead)."""
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


def batch_patch_block_after_sample(block: np.ndarray, s: Any, rows: np.ndarray, g: np.ndarray, at_gen: np.ndarray,
                                   n: np.ndarray, spend: np.ndarray) -> None:
    """``block`` [B, G * (4 + T)] after SAMPLEs of ``rows`` from generators ``g`` (batched
    ``patch_block_after_sample``).

    ``s`` is an item-grouped ``CoBaVectorEnv`` state already updated; ``at_gen`` = g * B + rows, the flat [G, B]
    index; ``n`` and ``spend``: the updated gen_revealed (>= 1) and gen_spend of each (g, row). The values are
    the ones ``batch_generator_block`` computes (float64, then cast to the block's dtype).
    """
    n_max = float(s.n_max_per_generator)
    at = rows * block.shape[1] + g * (4 + s.n_tiers)
    flat = block.ravel()
    flat[at] = n / n_max
    flat[at + 1] = (s.gen_cap.ravel().take(at_gen) - n) / n_max
    flat[at + 2] = s.gen_top_count.ravel().take(at_gen) / n
    flat[at + 3 + s.n_tiers] = spend / s.budget


def batch_patch_block_after_verify(block: np.ndarray, s: Any, rows: np.ndarray, g: np.ndarray, tier: np.ndarray,
                                   sums: np.ndarray, counts: np.ndarray) -> None:
    """``block`` after usable scores at ``tier`` for candidates of generators ``g`` (batched
    ``patch_block_after_verify``); ``sums`` / ``counts``: the updated gen_score_sum / gen_score_count (>= 1) of
    each (g, tier, row)."""
    at = rows * block.shape[1] + g * (4 + s.n_tiers) + 3 + tier
    block.ravel()[at] = sums / counts


def batch_fresh_block(block: np.ndarray, s: Any, rows: np.ndarray) -> None:
    """``block`` for ``rows`` whose episodes just started: every feature 0 but remaining = the generator's cap."""
    fresh = np.zeros((len(rows), block.shape[1]), dtype=block.dtype)
    fresh[:, 1::4 + s.n_tiers] = s.gen_cap.take(rows, axis=1).T / float(s.n_max_per_generator)
    row_items(block)[rows] = row_items(fresh)  # whole rows as single items: one 1-D scatter
