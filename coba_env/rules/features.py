"""The observation: THE feature table, and the rule computing it (scalar, incremental patch, batched).

Every value derives from revealed evidence only; no correctness label ever enters it. ``FEATURES`` below is
the one feature table of the project: the env docstrings, ``docs/ENV.md`` and the controllers point here.
The scalar form reads an episode's ``coba_env.evidence.Evidence``; the batched form reads the state arrays of
``coba_env.vector_env.CoBaVectorEnv`` and does the same float operations, so both give the same float32 values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pools.schema import TIERS

if TYPE_CHECKING:  # annotations only: the evidence module imports this one
    from coba_env.evidence import Evidence

#: The features before the per-verifier block, in index order: (name, meaning). ``{cheap}`` / ``{strong}``
#: name the verifier whose scores they read (the pool's first cheap judge / strong verifier or reward model).
HEAD_FEATURES: tuple[tuple[str, str], ...] = (
    ("revealed_frac", "candidates revealed / N_max"),
    ("top_answer_share", "size of the largest answer cluster / candidates revealed"),
    ("distinct_answers_frac", "distinct answers revealed / N_max"),
    ("answer_entropy", "entropy of the revealed answer distribution / log(N_max)"),
    ("top2_gap", "(largest - second largest answer cluster) / candidates revealed"),
    ("no_answer_share", "share of revealed candidates with no extractable answer"),
    ("top_v1_mean", "mean {cheap} score over the top cluster's judged candidates (0 if none)"),
    ("top_v1_max", "max {cheap} score in the top cluster (0 if none)"),
    ("top_v1_available", "1 if any candidate of the top cluster has a {cheap} score"),
    ("best_v3", "max {strong} score over all verified candidates (0 if none)"),
    ("top_v3_mean", "mean {strong} score over the top cluster's verified candidates (0 if none)"),
)
#: One feature per verifier of the layout, in the layout's order (``{v}``: the verifier's name).
VERIFIER_FEATURE = ("{v}_verified_frac", "candidates verified at {V} / candidates revealed")
#: The features after the per-verifier block, in index order.
TAIL_FEATURES: tuple[tuple[str, str], ...] = (
    ("budget_used", "cost spent in the env's cost model / B (unbounded above)"),
    ("mean_length", "mean output tokens of revealed candidates / the pool's max output tokens"),
    ("cap_hit_share", "share of revealed candidates that hit the token cap"),
    ("answer_flips", "times the top answer changed after a new sample / N_max"),
    ("step_frac", "actions taken / the most actions an episode can take"),
    ("lambda", "the episode's cost weight lambda (unbounded above)"),
    ("top_fusion_score", "highest fusion rank R among revealed candidates with an answer (0 if none)"),
)

(REVEALED, TOP_SHARE, DISTINCT, ENTROPY, TOP2_GAP, NO_ANSWER, V1_MEAN, V1_MAX, V1_AVAIL, BEST_V3,
 V3_MEAN) = range(len(HEAD_FEATURES))
#: Index of the first verifier's verified_frac; verifier t's is ``V1_FRAC + t``.
V1_FRAC = len(HEAD_FEATURES)


@dataclass(frozen=True)
class FeatureLayout:
    """THE feature table of an env, generated from its verifiers: head, one verified_frac per verifier, tail.

    ``cheap`` / ``strong``: the verifier slots whose scores feed the top_v1_* / best_v3 and top_v3_mean
    features (-1: none, the features stay 0). With the paper's V1, V2, V3 (cheap 0, strong 2) the table is
    the paper layout's 21 features.
    """

    verifiers: tuple[str, ...] = TIERS
    cheap: int = 0
    strong: int = 2
    features: tuple[tuple[str, str], ...] = field(init=False)
    #: Indices of budget_used, mean_length, step_frac, lambda and top_fusion_score (plain attributes: the
    #: scalar step reads them).
    budget: int = field(init=False)
    mean_len: int = field(init=False)
    step: int = field(init=False)
    lam: int = field(init=False)
    top_r: int = field(init=False)

    def __post_init__(self) -> None:
        folded = [v.lower() for v in self.verifiers]
        if len(set(folded)) < len(folded):  # the feature names are lower case: two would share one name
            twins = [v for v in self.verifiers if folded.count(v.lower()) > 1]
            raise ValueError(f"verifier names {twins} are equal up to case; expected names that differ beyond case "
                             "(feature names are lower case)")
        b = V1_FRAC + len(self.verifiers)
        for name, at in (("budget", b), ("mean_len", b + 1), ("step", b + 4), ("lam", b + 5), ("top_r", b + 6)):
            object.__setattr__(self, name, at)
        names = {"cheap": self.verifiers[self.cheap] if self.cheap >= 0 else "cheap judge (none)",
                 "strong": self.verifiers[self.strong] if self.strong >= 0 else "strong verifier (none)"}
        head = tuple((n, m.format(**names)) for n, m in HEAD_FEATURES)
        per = tuple((VERIFIER_FEATURE[0].format(v=v.lower()), VERIFIER_FEATURE[1].format(V=v))
                    for v in self.verifiers)
        object.__setattr__(self, "features", (*head, *per, *TAIL_FEATURES))

    @property
    def n_features(self) -> int:
        """Length of the observation vector."""
        return len(self.features)

    @property
    def names(self) -> tuple[str, ...]:
        """Feature names in index order."""
        return tuple(name for name, _ in self.features)

    def index(self, name: str) -> int:
        """The index of the feature called ``name``."""
        return self.names.index(name)

    def markdown(self) -> str:
        """The feature table as a Markdown table (index, name, meaning), for docs."""
        lines = ["| Num | Feature | Meaning |", "|---:|---|---|"]
        lines += [f"| {i} | {name} | {meaning} |" for i, (name, meaning) in enumerate(self.features)]
        return "\n".join(lines)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the observation Box: [0, 1] for every feature, [0, inf) for budget_used and lambda."""
        high = np.ones(self.n_features, dtype=np.float32)
        high[[self.budget, self.lam]] = np.inf
        return np.zeros(self.n_features, dtype=np.float32), high


def feature_layout(verifiers: tuple[str, ...], roles: tuple[str, ...]) -> FeatureLayout:
    """The feature layout of verifiers with declared ``roles`` (cheap / strong: ``roles.primary_slots``; on the
    paper's verifiers V1 and V3)."""
    from coba_env.rules.roles import primary_slots

    cheap, _, strong = primary_slots(roles)
    return FeatureLayout(tuple(verifiers), cheap, strong)


#: Positions from the end of every observation (any verifiers; a route observation's pooled table is last too):
#: budget_used, mean_length and lambda, the entries a controller rescales to its own units.
BUDGET_FROM_END, MEAN_LEN_FROM_END, LAMBDA_FROM_END = (i - len(TAIL_FEATURES) for i in (0, 1, 5))

#: The paper layout's table (V1, V2, V3): what learned controllers trained on the paper pool read.
PAPER_FEATURE_LAYOUT = FeatureLayout()
FEATURES: tuple[tuple[str, str], ...] = PAPER_FEATURE_LAYOUT.features
FEATURE_NAMES: tuple[str, ...] = PAPER_FEATURE_LAYOUT.names
N_FEATURES = PAPER_FEATURE_LAYOUT.n_features


def feature_table_markdown() -> str:
    """The paper layout's feature table as a Markdown table (index, name, meaning), for docs."""
    return PAPER_FEATURE_LAYOUT.markdown()


def observation_bounds() -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the paper layout's observation Box."""
    return PAPER_FEATURE_LAYOUT.bounds()


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
