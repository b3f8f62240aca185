"""One validated env configuration: every argument of ``CoBaEnv`` / ``CoBaVectorEnv`` checked once, here.

``EnvConfig.build`` resolves the pool, restricts its episodes, validates every argument (finite numbers in
range, known names, integer counts) and fills in the defaults (budget, N_max, selection). Both envs, the
live env and the oracle's model read the same fields. Bad input raises ``ValueError`` naming the argument.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from coba_env.compiled import CompiledPool
from coba_env.costs import cost_index
from coba_env.rules.actions import ActionLayout
from coba_env.rules.features import FeatureLayout, feature_layout
from coba_env.rules.roles import RoleMap, map_roles
from coba_env.rules.selection import SelectionRule

ORDERS = ("sequential", "shuffle", "random")
#: How a pool's candidates group into episodes, each with its configuration builder (an ``EnvConfig`` classmethod
#: over the restricted pool): "pair", one episode per (item, generator) (``coba/Replay-v0``); "item", one episode
#: per item with all its generators (``coba/Route-v0``; ``n_max`` is then per generator).
_BUILDERS = {"pair": "for_pool", "item": "_by_item"}
GROUPINGS = tuple(_BUILDERS)
#: Largest cost weight lambda accepted (far above any useful trade-off; keeps rewards finite).
LAM_MAX = 1e6
#: Largest budget B accepted (far above any pool's cost per episode; keeps costs / B meaningful).
BUDGET_MAX = 1e15
#: Smallest budget B accepted: budget_used = cost / B stays finite in float32 for any cost a pool can hold
#: (``pools.limits`` bounds every call; a whole episode's cost in any measure is below 1e21, and 1e21 / 1e-6 is
#: far below float32's 3.4e38), while a B of 1e-300 would put inf into the observation.
BUDGET_MIN = 1e-6
#: Keys ``CoBaEnv.reset(options=...)`` accepts.
RESET_OPTIONS = ("episode", "lam")


def _shown(value: Any) -> str:
    """``value`` as a user wrote it: numpy scalars shown as plain numbers (``2.5``, not ``np.float64(2.5)``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return repr(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    return repr(value)


def check_number(name: str, value: Any, *, low: float = 0.0, high: float = math.inf, low_open: bool = False,
                 allow_inf: bool = False) -> float:
    """``value`` as a float, refusing non-numbers, NaN, infinities (unless ``allow_inf``) and values out of range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {_shown(value)}")
    x = float(value)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {_shown(value)}")
    if x < low or (low_open and x == low) or x > high:
        lo = f"> {low:g}" if low_open else f">= {low:g}"
        hi = f" and <= {high:g}" if math.isfinite(high) else ""
        raise ValueError(f"{name} must be {lo}{hi}, got {_shown(value)}")
    return x


def check_int(name: str, value: Any, *, low: int, high: int) -> int:
    """``value`` as an int in low..high, refusing booleans and non-integral numbers such as 2.7."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be an integer, got {_shown(value)}")
    if isinstance(value, numbers.Integral):
        k = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        k = int(value)
    else:
        raise ValueError(f"{name} must be an integer, got {_shown(value)}")
    if not low <= k <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {_shown(value)}")
    return k


def check_lam(name: str, value: Any) -> float:
    """A cost weight lambda: a finite number in [0, LAM_MAX]."""
    return check_number(name, value, high=LAM_MAX)


def as_names(name: str, value: Any) -> list | None:
    """A selection argument as a list: one str (or int) is one item, never split into characters."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, numbers.Integral)):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise ValueError(f"{name} must be a name or a sequence of names, got {value!r}") from None


def check_options(options: Mapping[str, Any] | None, allowed: Sequence[str]) -> dict[str, Any]:
    """``reset`` options as a dict, refusing unknown keys."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"reset options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; expected some of {list(allowed)}")
    return dict(options)


def _check_known(what: str, wanted: list, present: np.ndarray) -> None:
    known = set(present.tolist())
    missing = [w for w in wanted if w not in known]
    if missing:
        raise ValueError(f"unknown {what}(s) {missing}; the pool has {sorted(map(str, known))[:20]}")


def episode_subset(pool: CompiledPool, datasets: Any = None, generators: Any = None,
                   episode_ids: Any = None) -> CompiledPool:
    """The episodes of ``pool`` matching every given restriction; ValueError when none does."""
    keep = np.ones(pool.n_episodes, dtype=bool)
    given = {}
    for what, arg, column in (("dataset", datasets, pool.dataset), ("generator", generators, pool.generator),
                              ("episode id", episode_ids, pool.episode_ids)):
        wanted = as_names(f"{what}s", arg)
        if wanted is not None:
            _check_known(what, wanted, column)
            keep &= np.isin(column, wanted)
            given[what.replace(" ", "_") + "s"] = wanted
    if not keep.any():
        detail = ", ".join(f"{k}={v}" for k, v in given.items()) or "the pool has no episodes"
        raise ValueError(f"the episode subset is empty: no episode matches {detail}")
    return pool if keep.all() else pool.select(keep)


def default_budget(compiled: CompiledPool, cost_model: str, n_max: int) -> float:
    """Default B: the mean cost of drawing up to ``n_max`` candidates (what each episode holds, when fewer), so
    C/B = 1 is 'best-of-N_max spending'."""
    k = cost_index(cost_model)
    value = float(compiled.gen_cost[:, :n_max, k].sum(axis=1).mean()) if compiled.n_episodes else 1.0
    return value if value > 0 else 1.0


def check_cost_model_priced(pool: CompiledPool, cost_model: str) -> None:
    """Refuse cost model usd unless the pool prices every model its episodes call (ValueError naming the rest)."""
    if cost_model == "usd" and (unpriced := pool.unpriced_models()):
        raise ValueError(f"cost model 'usd' needs a price for every model the pool calls; it has none for "
                         f"{', '.join(unpriced)} (manifest prices_usd_per_million_tokens: import with "
                         "--price MODEL=IN[,OUT], docs/POOLS.md)")


def pair_caps(pool: CompiledPool, n_max: int) -> np.ndarray:
    """The most SAMPLEs each pair episode of ``pool`` allows: N_max, or the episode's own count if smaller."""
    return np.minimum(pool.n_available, n_max)


@dataclass(frozen=True)
class EnvConfig:
    """A validated env configuration over one (restricted) compiled pool; see ``CoBaEnv`` for the arguments."""

    pool: CompiledPool
    cost_model: str
    cost_k: int
    n_max: int
    lam: float
    lambda_range: tuple[float, float] | None
    budget: float
    max_cost: float
    selection: SelectionRule
    weights: tuple[float, ...]
    enabled_tiers: tuple[str, ...]
    tier_on: tuple[bool, ...]
    order: str
    max_steps: int
    roles: RoleMap
    #: The feature table of the pool's verifiers (``coba_env.rules.features.FeatureLayout``).
    features: FeatureLayout
    #: The episode grouping (``GROUPINGS``).
    grouping: str = "pair"
    #: "item" grouping: the route episodes (``coba_env.route_pool.RoutePool``) and N_max per generator.
    route: Any = None
    n_max_per_generator: int | None = None
    #: The problem features of every episode (``coba_env.problem_features.ProblemBlock``), None when the env option
    #: ``problem_features`` is off (the default).
    problem: Any = None
    #: The most candidates SAMPLE may reveal in each episode, the one rule of both envs' masks: with pairs int64 [E],
    #: N_max or the episode's own count if smaller (``for_pool``); with items int64 [E, G], per generator N_max per
    #: generator or the item's count from it if smaller, 0 where it has none (``for_route``). A pool may hold
    #: different numbers of candidates per episode (N is the most): SAMPLE is illegal once an episode's are revealed.
    sample_caps: Any = None

    @property
    def layout(self) -> ActionLayout:
        """The action layout: one SAMPLE per generator (the episode's own with pairs, ``SAMPLE_<g>`` per generator of
        the item grouping), one VERIFY per verifier of the pool, STOP."""
        # The feature table names the generators of an item grouping; a pair's one generator is the episode's own.
        return ActionLayout(generators=self.features.generators or ("",), verifiers=tuple(self.pool.tiers))

    @classmethod
    def build(cls, pool: Any = None, *, datasets: Any = None, generators: Any = None, episode_ids: Any = None,
              lam: Any = 0.1, lambda_range: Any = None, budget: Any = None, cost_model: str = "p_tokens",
              n_max: Any = None, tiers: Any = None, selection: Any = None, order: str = "sequential",
              max_cost: Any = None, grouping: str = "pair", problem_features: Any = None) -> EnvConfig:
        """Resolve ``pool`` (see ``pools.default.resolve_pool``), restrict it and validate every argument.

        ``problem_features``: a fitted featurizer (``coba_env.featurizers``) whose features of each episode's problem
        start the observation; None (the default) leaves the observation as it is."""
        from coba_env.compiled import as_compiled

        try:
            by_grouping = getattr(cls, _BUILDERS[grouping])
        except (KeyError, TypeError):
            raise ValueError(f"unknown grouping {grouping!r}; expected one of {list(GROUPINGS)}") from None
        sub = episode_subset(as_compiled(pool), datasets, generators, episode_ids)
        config = by_grouping(sub, lam=lam, lambda_range=lambda_range, budget=budget, cost_model=cost_model,
                             n_max=n_max, tiers=tiers, selection=selection, order=order, max_cost=max_cost)
        return config if problem_features is None else config.with_problem_features(problem_features)

    def with_problem_features(self, featurizer: Any) -> EnvConfig:
        """This configuration with ``featurizer``'s features of each episode's problem in front of the observation."""
        from coba_env.problem_features import problem_block

        block = problem_block(featurizer, self.pool)
        return replace(self, problem=block, features=replace(self.features, problem=block.table))

    def check_grouping(self, grouping: str | None) -> None:
        """Refuse a ``grouping=`` argument that contradicts this configuration's (None: not given)."""
        if grouping not in (None, self.grouping):
            raise ValueError(f"grouping={grouping!r} but the configuration groups episodes by {self.grouping!r}")

    @classmethod
    def _by_item(cls, replay: CompiledPool, *, n_max: Any = None, budget: Any = None, cost_model: str = "p_tokens",
                 **kwargs: Any) -> EnvConfig:
        """The "item" grouping over ``replay``'s (item, generator) episodes: one episode per item.

        ``n_max`` is per generator (default: the pool's N); the default budget B is the pair grouping's on the same
        pool (the mean cost of drawing ``n_max`` candidates from one generator), so a policy that samples one
        generator only is charged as the pair grouping charges it.
        """
        from coba_env.route_pool import compile_route_pool

        n_max_g = replay.n_candidates if n_max is None else check_int("n_max", n_max, low=1, high=replay.n_candidates)
        route = compile_route_pool(replay)
        b = default_budget(replay, cost_model, n_max_g) if budget is None else budget
        return cls.for_route(route, n_max_g, budget=b, cost_model=cost_model, **kwargs)

    @classmethod
    def for_route(cls, route: Any, n_max_per_generator: int, **kwargs: Any) -> EnvConfig:
        """The "item" grouping over the episodes of ``route`` (a ``coba_env.route_pool.RoutePool``) as they are:
        ``n_max_per_generator`` candidates per generator, the other arguments as ``for_pool``'s (B required)."""
        config = cls.for_pool(route.pool, n_max=route.n_generators * n_max_per_generator, **kwargs)
        return replace(config, grouping="item", route=route, n_max_per_generator=n_max_per_generator,
                       sample_caps=np.minimum(route.counts, n_max_per_generator),
                       features=replace(config.features, generators=route.generators))

    @classmethod
    def for_pool(cls, pool: CompiledPool, *, lam: Any = 0.1, lambda_range: Any = None, budget: Any = None,
                 cost_model: str = "p_tokens", n_max: Any = None, tiers: Any = None, selection: Any = None,
                 order: str = "sequential", max_cost: Any = None) -> EnvConfig:
        """The configuration over ``pool`` as it is (no episode restriction)."""
        k = cost_index(cost_model)
        check_cost_model_priced(pool, cost_model)
        n_cand = pool.n_candidates
        n = n_cand if n_max is None else check_int("n_max", n_max, low=1, high=n_cand)
        axis = pool.tiers
        tier_list = list(axis) if tiers is None else as_names("tiers", tiers) or []  # None: every verifier
        unknown = [t for t in tier_list if t not in axis]
        if unknown:
            raise ValueError(f"unknown tier(s) {unknown}; expected a subset of the pool's verifiers {list(axis)}")
        if order not in ORDERS:
            raise ValueError(f"unknown episode order {order!r}; expected one of {list(ORDERS)}")
        if lambda_range is not None:
            lo, hi = _pair("lambda_range", lambda_range)
            if not lo <= hi:
                raise ValueError(f"lambda_range must be (low, high) with 0 <= low <= high, got {lambda_range}")
            lambda_range = (lo, hi)
        b = default_budget(pool, cost_model, n) if budget is None else \
            check_number("budget", budget, low=BUDGET_MIN, high=BUDGET_MAX)
        cap = math.inf if max_cost is None else check_number("max_cost", max_cost, allow_inf=True)
        enabled = tuple(t for t in axis if t in tier_list and t in pool.tiers_present)
        tier_on = tuple(t in enabled for t in axis)
        # The role map decides which slot a rule's tier and each fusion weight apply to (identity on the
        # paper's pools); coba_env.rules.roles states the rule.
        roles = map_roles(pool.verifier_roles, pool.verifier_models, tier_on, axis)
        rule = roles.resolve(SelectionRule.from_spec(selection))
        return cls(pool=pool, cost_model=cost_model, cost_k=k, n_max=n, lam=check_lam("lam", lam),
                   lambda_range=lambda_range, budget=b, max_cost=cap, selection=rule, weights=rule.weight_vector(),
                   enabled_tiers=enabled, tier_on=tier_on, order=order, max_steps=n * (1 + len(axis)) + 1,
                   roles=roles, features=feature_layout(axis, pool.verifier_roles),
                   sample_caps=pair_caps(pool, n))


def _pair(name: str, value: Any) -> tuple[float, float]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be (low, high), got {value!r}") from None
    return check_lam(f"{name}[0]", lo), check_lam(f"{name}[1]", hi)
