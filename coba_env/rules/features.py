"""The observation's rule: the features of ``coba_env.rules.feature_table`` computed from the evidence.

Every value derives from revealed evidence only; no correctness label ever enters it. The scalar form reads an
episode's ``coba_env.evidence.Evidence`` (``observe``, and ``patch_after_verify`` for a VERIFY's few changes);
the batched form reads the state arrays of ``coba_env.vector_env.CoBaVectorEnv`` and does the same float
operations, so both give the same float32 values. The table itself (names, meanings, indices, bounds) is
re-exported here, where the env and the controllers have always imported it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from coba_env.rules.feature_table import (  # noqa: F401  (the table's public names, re-exported)
    BEST_V3,
    BUDGET_FROM_END,
    DISTINCT,
    ENTROPY,
    FEATURE_NAMES,
    FEATURES,
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
    observation_bounds,
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
    entropy = (logs[na] - ev.clogc_sum / na) / logs[n_max] if na > 1 and n_max > 1 else 0.0
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

    ``o`` is a feature-major float64 scratch buffer [F, B]; ``s.top_rank`` must be current. Before the first
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
    f = fl.n_features
    if out is None:
        out = np.empty((o.shape[1], f), dtype=np.float32)
    for i in range(0, f, 7):  # cast a few features at a time: fewer passes than one per feature
        out[:, i:i + 7] = o[i:i + 7].T
    return out
