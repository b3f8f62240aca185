"""The observation: THE feature table, and the rule computing it (scalar, incremental patch, batched).

Every value derives from revealed evidence only; no correctness label ever enters it. ``FEATURES`` below is
the one feature table of the project: the env docstrings, ``docs/ENV.md`` and the controllers point here.
The scalar form reads an episode's ``coba_env.evidence.Evidence``; the batched form reads the state arrays of
``coba_env.vector_env.CoBaVectorEnv`` and does the same float operations, so both give the same float32 values.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from coba_env.rules.actions import V1, V3

if TYPE_CHECKING:  # annotations only: the evidence module imports this one
    from coba_env.evidence import Evidence

#: Observation features, in index order: (name, meaning). Every value is computed from revealed evidence only.
FEATURES: tuple[tuple[str, str], ...] = (
    ("revealed_frac", "candidates revealed / N_max"),
    ("top_answer_share", "size of the largest answer cluster / candidates revealed"),
    ("distinct_answers_frac", "distinct answers revealed / N_max"),
    ("answer_entropy", "entropy of the revealed answer distribution / log(N_max)"),
    ("top2_gap", "(largest - second largest answer cluster) / candidates revealed"),
    ("no_answer_share", "share of revealed candidates with no extractable answer"),
    ("top_v1_mean", "mean V1 score over the top cluster's judged candidates (0 if none)"),
    ("top_v1_max", "max V1 score in the top cluster (0 if none)"),
    ("top_v1_available", "1 if any candidate of the top cluster has a V1 score"),
    ("best_v3", "max V3 score over all verified candidates (0 if none)"),
    ("top_v3_mean", "mean V3 score over the top cluster's verified candidates (0 if none)"),
    ("v1_verified_frac", "candidates verified at V1 / candidates revealed"),
    ("v2_verified_frac", "candidates verified at V2 / candidates revealed"),
    ("v3_verified_frac", "candidates verified at V3 / candidates revealed"),
    ("budget_used", "cost spent in the env's cost model / B (unbounded above)"),
    ("mean_length", "mean output tokens of revealed candidates / the pool's max output tokens"),
    ("cap_hit_share", "share of revealed candidates that hit the token cap"),
    ("answer_flips", "times the top answer changed after a new sample / N_max"),
    ("step_frac", "actions taken / the most actions an episode can take"),
    ("lambda", "the episode's cost weight lambda (unbounded above)"),
    ("top_fusion_score", "highest fusion rank R among revealed candidates with an answer (0 if none)"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FEATURES)
N_FEATURES = len(FEATURES)

(REVEALED, TOP_SHARE, DISTINCT, ENTROPY, TOP2_GAP, NO_ANSWER, V1_MEAN, V1_MAX, V1_AVAIL, BEST_V3, V3_MEAN,
 V1_FRAC, V2_FRAC, V3_FRAC, BUDGET, MEAN_LEN, CAP_HIT, FLIPS, STEP, LAMBDA, TOP_R) = range(N_FEATURES)
#: Features without an upper bound of 1.
UNBOUNDED = (BUDGET, LAMBDA)


def feature_table_markdown() -> str:
    """The feature table as a Markdown table (index, name, meaning), for docs."""
    lines = ["| Num | Feature | Meaning |", "|---:|---|---|"]
    lines += [f"| {i} | {name} | {meaning} |" for i, (name, meaning) in enumerate(FEATURES)]
    return "\n".join(lines)


def observation_bounds() -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the observation Box: [0, 1] for every feature, [0, inf) for budget_used and lambda."""
    high = np.ones(N_FEATURES, dtype=np.float32)
    high[list(UNBOUNDED)] = np.inf
    return np.zeros(N_FEATURES, dtype=np.float32), high


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
            top_fusion: float) -> list[float]:
    """The observation of ``ev`` as Python floats, in ``FEATURES`` order (scalar form)."""
    n = ev.n_revealed
    top = ev.top
    n_max = ev.n_max
    if n == 0:
        share = gap = no_answer = v1f = v2f = v3f = mean_len = cap = 0.0
    else:
        share = ev.top_count / n if top >= 0 else 0.0
        gap = (ev.top_count - ev.second_count) / n if top >= 0 else 0.0
        no_answer = (n - ev.n_answered) / n
        n_verified = ev.n_verified
        v1f = n_verified[0] / n
        v2f = n_verified[1] / n
        v3f = n_verified[2] / n
        mean_len = ev.len_sum / n / max_output_tokens
        cap = ev.cap_count / n
    na = ev.n_answered
    entropy = (logs[na] - ev.clogc_sum / na) / logs[n_max] if na > 1 and n_max > 1 else 0.0
    if top >= 0:
        tier_stats = ev.tier_stats
        stats = tier_stats.get((V1, top))
        if stats:
            v1_mean, v1_max, v1_avail = stats[0] / stats[1], stats[2], 1.0
        else:
            v1_mean = v1_max = v1_avail = 0.0
        stats = tier_stats.get((V3, top))
        v3_mean = stats[0] / stats[1] if stats else 0.0
    else:
        v1_mean = v1_max = v1_avail = v3_mean = 0.0
    return [n / n_max, share, ev.n_distinct / n_max, entropy, gap, no_answer, v1_mean, v1_max, v1_avail,
            ev.best_v3, v3_mean, v1f, v2f, v3f, budget_used, mean_len, cap, ev.flips / n_max,
            ev.steps / max_steps, ev.lam, top_fusion]


def first_observation(lam: float) -> list[float]:
    """The observation before anything is revealed: every feature 0 but lambda (what ``observe`` gives)."""
    obs = [0.0] * N_FEATURES
    obs[LAMBDA] = lam
    return obs


def patch_after_verify(obs: list[float], ev: Evidence, t: int, c: int, score: float, budget_used: float,
                       max_steps: int) -> None:
    """Update ``obs`` in place after candidate ``c`` was verified at tier ``t`` (equal to a fresh ``observe``).

    A VERIFY changes only the verified tier's entries, the budget, the step count and the top R.
    """
    obs[V1_FRAC + t] = ev.n_verified[t] / ev.n_revealed
    if score == score:
        cluster = ev.clusters[c]
        top = ev.top
        if t == V1 and cluster == top:
            stats = ev.tier_stats[(V1, top)]
            obs[V1_MEAN], obs[V1_MAX], obs[V1_AVAIL] = stats[0] / stats[1], stats[2], 1.0
        elif t == V3:
            obs[BEST_V3] = ev.best_v3
            if cluster == top:
                stats = ev.tier_stats[(V3, top)]
                obs[V3_MEAN] = stats[0] / stats[1]
    obs[BUDGET] = budget_used
    obs[STEP] = ev.steps / max_steps
    obs[TOP_R] = ev.best_r


def rescaled(observation: np.ndarray, ev: Evidence, *, cost_k: int, budget: float, max_output_tokens: float,
             lam: float) -> np.ndarray:
    """``observation`` with budget_used, mean_length and lambda recomputed in other units (a controller's)."""
    x = np.array(observation, dtype=np.float32)
    x[BUDGET] = ev.cost[cost_k] / budget
    x[MEAN_LEN] = mean_length(ev.len_sum, ev.n_revealed, max_output_tokens)
    x[LAMBDA] = lam
    return x


_COUNTER_FEATURES = (REVEALED, DISTINCT, FLIPS, STEP)  # the vector env's counters n, n_distinct, flips, steps
_SHARE_FEATURES = (TOP_SHARE, CAP_HIT, V1_FRAC, V2_FRAC, V3_FRAC)  # top_count, cap_count, n_verified[T]


def batch_observe(s: Any, o: np.ndarray) -> np.ndarray:
    """The observations [B, N_FEATURES] of a ``CoBaVectorEnv`` state ``s`` (batched form of ``observe``).

    ``o`` is a feature-major float64 scratch buffer [N_FEATURES, B]; ``s.rank_t`` must be current. Before the
    first candidate every count and sum is 0, and without an answer the top-cluster counts and statistics are 0,
    so dividing by max(n, 1) (or max(count, 1)) gives the scalar form's 0 features.
    """
    n = s.n
    n_safe = np.maximum(n, 1).astype(np.float64)
    scale = (s.n_max, s.n_max, s.n_max, s.max_steps)
    for k, feature in enumerate(_COUNTER_FEATURES):  # counter rows 0..3 of s._ints
        np.divide(s._ints[k], float(scale[k]), out=o[feature])
    for k, feature in enumerate(_SHARE_FEATURES):  # counter rows 4.. of s._ints
        np.divide(s._ints[4 + k], n_safe, out=o[feature])
    na = s.n_answered
    if s.n_max > 1:
        np.divide(s.logs[na] - s.clogc_sum / np.maximum(na, 1), s.logs[s.n_max], out=o[ENTROPY])
    else:
        o[ENTROPY] = 0.0
    np.divide(s.top_count - s.second, n_safe, out=o[TOP2_GAP])
    np.divide(n - na, n_safe, out=o[NO_ANSWER])
    # The top cluster's V1 sum, count, max and V3 sum, count (all 0 without a top answer).
    stats = s.top_record
    np.divide(stats[:, 0], np.maximum(stats[:, 1], 1.0), out=o[V1_MEAN])
    o[V1_MAX] = stats[:, 2]
    o[V1_AVAIL] = stats[:, 1] > 0
    o[BEST_V3] = s.best_v3
    np.divide(stats[:, 3], np.maximum(stats[:, 4], 1.0), out=o[V3_MEAN])
    np.divide(s._cost[s.cost_k], s.budget, out=o[BUDGET])
    np.divide(s.len_sum / n_safe, s.max_output_tokens, out=o[MEAN_LEN])
    o[LAMBDA] = s.lams
    o[TOP_R] = np.where(na > 0, s.rank_t.max(axis=0), 0.0)  # slot-major: a reduction across rows
    out = np.empty((o.shape[1], N_FEATURES), dtype=np.float32)
    for i in range(0, N_FEATURES, 7):  # cast a few features at a time: fewer passes than one per feature
        out[:, i:i + 7] = o[i:i + 7].T
    return out
