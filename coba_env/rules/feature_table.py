"""THE feature table: every observation feature's name and meaning in index order, generated from the verifiers.

``FEATURES`` below is the one feature table of the project: the env docstrings, ``docs/ENV.md`` and the
controllers point here. ``FeatureLayout`` generates an env's table from its verifiers (one verified share
each) and, with the item grouping, its generators: an item-grouped observation starts with a per-generator
block (``GENERATOR_FEATURES`` for each generator) before the pooled features, which are computed over every
revealed candidate whatever its generator (N_max there is the per-generator N_max times G). A one-generator
episode has no block, so ``coba/Replay-v0`` keeps its 21 features. The layout also gives the index of every
feature the step writes and the observation's bounds. The rule computing the features from the evidence
(scalar, incremental patch, batched) is ``coba_env.rules.features``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pools.schema import PAPER_TIER_ROLES, TIERS

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

#: The item grouping's per-generator features, in block order: (name, meaning); named ``<feature>_<generator>``,
#: ``{v}`` repeated for each verifier.
GENERATOR_FEATURES: tuple[tuple[str, str], ...] = (
    ("revealed", "candidates revealed from the generator / N_max per generator"),
    ("remaining", "the generator's candidates SAMPLE can still reveal / N_max per generator"),
    ("agreement", "size of the generator's own largest answer cluster / its candidates revealed (0 if none)"),
    ("mean_{v}", "mean usable {v} score over the generator's verified candidates (0 if none)"),
    ("spend", "generation cost spent on the generator in the env's cost model / B (unbounded above)"),
)

(REVEALED, TOP_SHARE, DISTINCT, ENTROPY, TOP2_GAP, NO_ANSWER, V1_MEAN, V1_MAX, V1_AVAIL, BEST_V3,
 V3_MEAN) = range(len(HEAD_FEATURES))
#: Index of the first verifier's verified_frac; verifier t's is ``V1_FRAC + t``.
V1_FRAC = len(HEAD_FEATURES)


@dataclass(frozen=True)
class FeatureLayout:
    """THE feature table of an env, generated from its verifiers (and generators, with the item grouping).

    ``features``: the pooled table: head, one verified_frac per verifier, tail; its indices (``budget``,
    ``lam``...) count from its first feature. ``cheap`` / ``strong``: the verifier slots whose scores feed the
    top_v1_* / best_v3 and top_v3_mean features (-1: none, the features stay 0). With the paper's V1, V2, V3
    (cheap 0, strong 2) the table is the paper layout's 21 features. ``generators`` (the item grouping's, in the
    action layout's order; empty for one generator): the observation starts with ``GENERATOR_FEATURES`` for
    each of them (``block``) before the pooled table; ``observation`` / ``observation_names`` /
    ``observation_bounds`` / ``lambda_index`` describe that whole vector.
    """

    verifiers: tuple[str, ...] = TIERS
    cheap: int = 0
    strong: int = 2
    generators: tuple[str, ...] = ()
    #: The problem features (name, meaning), in front of everything else when the env option asks for them
    #: (``coba_env.problem_features``); empty by default.
    problem: tuple[tuple[str, str], ...] = ()
    features: tuple[tuple[str, str], ...] = field(init=False)
    #: The per-generator block's features, generator after generator (empty without ``generators``).
    block: tuple[tuple[str, str], ...] = field(init=False)
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
        block: list[tuple[str, str]] = []
        for g in self.generators:
            for name, meaning in GENERATOR_FEATURES:
                if "{v}" in name:
                    block += [(f"{name.format(v=v)}_{g}", f"{g}: {meaning.format(v=v)}") for v in self.verifiers]
                else:
                    block.append((f"{name}_{g}", f"{g}: {meaning}"))
        object.__setattr__(self, "block", tuple(block))

    @property
    def n_features(self) -> int:
        """Length of the pooled table (the observation's length without a per-generator block)."""
        return len(self.features)

    @property
    def names(self) -> tuple[str, ...]:
        """The pooled table's feature names in index order."""
        return tuple(name for name, _ in self.features)

    def index(self, name: str) -> int:
        """The index of the feature called ``name`` in the pooled table."""
        return self.names.index(name)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the pooled table: [0, 1] for every feature, [0, inf) for budget_used and lambda."""
        high = np.ones(self.n_features, dtype=np.float32)
        high[[self.budget, self.lam]] = np.inf
        return np.zeros(self.n_features, dtype=np.float32), high

    @property
    def block_size(self) -> int:
        """Features per generator in the block: revealed, remaining, agreement, one mean per verifier, spend."""
        return 4 + len(self.verifiers)

    @property
    def observation(self) -> tuple[tuple[str, str], ...]:
        """The whole observation's table: the problem features (if asked for), the per-generator block (if any),
        then the pooled features."""
        return (*self.problem, *self.block, *self.features)

    @property
    def observation_names(self) -> tuple[str, ...]:
        """The observation's feature names in index order."""
        return tuple(name for name, _ in self.observation)

    @property
    def lambda_index(self) -> int:
        """Index of lambda in the observation."""
        return len(self.problem) + len(self.block) + self.lam

    def observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the observation Box: any finite number for a problem feature, [0, 1] for every other
        feature, [0, inf) for each generator's spend, budget_used and lambda."""
        high = np.ones(len(self.block), dtype=np.float32)
        high[self.block_size - 1::self.block_size] = np.inf
        low0, high0 = self.bounds()
        low, high = np.concatenate([np.zeros(len(high), dtype=np.float32), low0]), np.concatenate([high, high0])
        if not self.problem:
            return low, high
        unbounded = np.full(len(self.problem), np.inf, dtype=np.float32)
        return np.concatenate([-unbounded, low]), np.concatenate([unbounded, high])

    def markdown(self) -> str:
        """The observation's table as a Markdown table (index, name, meaning), for docs."""
        lines = ["| Num | Feature | Meaning |", "|---:|---|---|"]
        lines += [f"| {i} | {name} | {meaning} |" for i, (name, meaning) in enumerate(self.observation)]
        return "\n".join(lines)


def feature_layout(verifiers: tuple[str, ...], roles: tuple[str, ...] | None = None,
                   generators: tuple[str, ...] = ()) -> FeatureLayout:
    """The feature layout of verifiers with declared ``roles`` (cheap / strong: ``roles.primary_slots``; on the
    paper's verifiers V1 and V3; None: the paper names' roles, so a verifier without a paper name feeds no
    top_v1 / best_v3 feature), with the per-generator block of ``generators`` (the item grouping's)."""
    from coba_env.rules.roles import primary_slots

    if roles is None:
        roles = tuple(PAPER_TIER_ROLES.get(v, "") for v in verifiers)
    cheap, _, strong = primary_slots(roles)
    return FeatureLayout(tuple(verifiers), cheap, strong, tuple(generators))


#: Positions from the end of every observation (any verifiers; the pooled table is last with a block too):
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
