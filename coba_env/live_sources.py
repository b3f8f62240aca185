"""Evidence sources of ``LiveEnv``: the interface, and a cached pool replayed call by call (``PoolReplaySource``);
model endpoints are ``coba_env.endpoint_source.EndpointSource``.

A source holds tasks (problems, or cached episodes); ``begin(i)`` starts task i, ``sample(c, generator=g)``
reveals candidate c (from generator g, when the source has several: ``generator_names``), ``verify(c, t)``
scores candidate c with verifier slot t, and ``*_bound`` give an upper bound on what that
call can cost before it is made (for the hard budgets). Sources compute nothing the environment computes:
they return the raw evidence (answer cluster, tokens, cap hit, score, cost in every measure).

Verifiers are data, as in a pool: a source names its verifier axis (``verifiers``: one slot per verifier, the
env's VERIFY actions; ``coba_env.compiled.verifier_axis``, so the paper's names keep the axis V1, V2, V3), the
ones it can call (``tiers``) and each slot's declared role (``verifier_roles``), which the env maps onto the roles
policies ask for exactly as on a pool (``coba_env.rules.roles``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coba_env.compiled import CompiledPool
from coba_env.costs import LATENCY, TOKENS
from coba_env.episode_data import EpisodeData
from coba_env.route_pool import RoutePool
from pools.schema import TIERS


class CallInterrupted(RuntimeError):
    """The time budget ran out before or during a call; the call was abandoned."""


class LiveEndpointError(RuntimeError):
    """An endpoint could not be used (unreachable, bad model, server error after retries)."""


@dataclass(frozen=True)
class CallBound:
    """Upper bound on one call's cost before it is made: tokens (prompt + max output), seconds (None = unknown)."""

    tokens: float
    seconds: float | None = None


@dataclass
class Revealed:
    """A sampled candidate: answer cluster (-1 none), answer, output tokens, cap hit, cost, tiers it can get."""

    cluster: int
    answer: str | None
    output_tokens: float
    cap_hit: bool
    cost: Sequence[float]  # in COST_MEASURES order
    has_tiers: Sequence[bool]  # per slot of the source's verifiers: whether this candidate can be verified there
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scored:
    """A verification: score in [0, 1] (NaN = no usable score) and its cost."""

    score: float
    cost: Sequence[float]
    detail: dict[str, Any] = field(default_factory=dict)


class EvidenceSource(ABC):
    """Where a ``LiveEnv`` gets its evidence. ``simulated_time``: seconds are the calls' recorded latencies
    (a replay) instead of the wall clock."""

    #: The verifier axis: one slot per verifier, in the order of the env's VERIFY actions.
    verifiers: tuple[str, ...] = TIERS
    #: The verifiers the source can call, in axis order.
    tiers: tuple[str, ...] = ()
    #: Each axis slot's declared role (``pools.schema.VERIFIER_ROLES``); None: the paper names' roles.
    verifier_roles: tuple[str, ...] | None = None
    simulated_time: bool = False
    max_candidates: int = 1 << 30
    #: The generators SAMPLE can draw from, in action order (one: the replay layout's plain SAMPLE).
    generator_names: tuple[str, ...] = ("",)
    #: Each generator's parameters in billions, in ``generator_names`` order (label-free, a priori).
    generator_params: tuple[float, ...] = (0.0,)

    @property
    @abstractmethod
    def n_episodes(self) -> int:
        """Number of tasks."""

    @abstractmethod
    def begin(self, episode: int) -> dict[str, Any]:
        """Start task ``episode``; returns its metadata (dataset, item_id, generator, problem, labels or None)."""

    @abstractmethod
    def sample(self, candidate: int, timeout_s: float | None, generator: int = 0) -> Revealed:
        """Reveal candidate ``candidate`` (they come in order 0, 1, ...) from generator index ``generator``."""

    @abstractmethod
    def verify(self, candidate: int, tier: int, timeout_s: float | None) -> Scored:
        """Score a revealed candidate at tier index ``tier``."""

    @abstractmethod
    def sample_bound(self, candidate: int, generator: int = 0) -> CallBound:
        """Bound on what ``sample(candidate, generator=generator)`` can cost."""

    @abstractmethod
    def verify_bound(self, candidate: int, tier: int) -> CallBound:
        """Bound on what ``verify(candidate, tier)`` can cost."""


class PoolReplaySource(EvidenceSource):
    """Reveals a compiled pool's cached episodes (costs, latencies and labels as stored), so a live run can be
    checked action for action against ``CoBaEnv`` replay.

    ``pool``: a ``CompiledPool`` (one generator per episode: ``sample(c)`` reveals its candidate c), or a
    ``coba_env.route_pool.RoutePool`` with several generators (``sample(c, generator=g)`` reveals g's next stored
    candidate, clusters joined across generators as the route pool holds them; every item must have every
    generator's candidates, and its labels are in the route pool's slot order, so run it with ``n_max`` = the
    pool's N per generator for ``info["correct"]``).
    """

    simulated_time = True

    def __init__(self, pool: CompiledPool | RoutePool) -> None:
        #: The detail each generator's revealed candidates carry (its name, when there are several).
        self._details: list[dict[str, Any]] = [{}]
        if isinstance(pool, RoutePool):  # every generator's candidates of an item, N per generator, generator-major
            if not pool.available.all() or (pool.counts < pool.n_per_generator).any():
                raise ValueError("some items lack a generator's candidates, or hold fewer than N of them; a live item "
                                 "episode has them all")
            self.generator_names, self.generator_params = tuple(pool.generators), tuple(pool.generator_params)
            self._details = [{"generator": g} for g in pool.generators]
            pool, self._per_generator = pool.pool, pool.n_per_generator
        else:
            if pool.ragged:  # a live source can always draw N_max: a replay of short episodes would reveal padding
                raise ValueError("some episodes hold fewer than N candidates; a live episode can draw all N")
            self._per_generator = pool.n_candidates
        self.compiled = compiled = pool
        self.verifiers, self.tiers = tuple(compiled.tiers), tuple(compiled.tiers_present)
        #: The pool's declared verifier roles, so a replay maps roles as ``CoBaEnv`` does on the pool.
        self.verifier_roles = compiled.verifier_roles
        #: Candidates per generator: the pool's N.
        self.max_candidates = self._per_generator
        self._rows = compiled.episode_rows()
        self._row: EpisodeData | None = None

    @property
    def n_episodes(self) -> int:
        """Episodes of the pool (items, with several generators)."""
        return self.compiled.n_episodes

    def begin(self, episode: int) -> dict[str, Any]:
        """Start pool episode ``episode``; its labels (slot order) come along for the evaluator-side ``correct``."""
        p, e = self.compiled, episode
        self._e, self._row = e, self._rows[e]
        self._drawn = [0] * len(self.generator_names)
        self._slots: list[int] = []  # the pool slot of each revealed candidate
        return {"dataset": p.dataset[e], "item_id": p.item_id[e], "generator": p.generator[e],
                "labels": p.labels.correct[e].tolist(), "problem": None}

    def _next_slot(self, generator: int) -> int:
        return generator * self._per_generator + self._drawn[generator]

    def sample(self, candidate: int, timeout_s: float | None, generator: int = 0) -> Revealed:
        """Generator ``generator``'s next stored candidate (with one generator: candidate ``candidate``)."""
        row, p = self._row, self._next_slot(generator)
        self._drawn[generator] += 1
        self._slots.append(p)
        return Revealed(row.cluster[p], self.compiled.answer[self._e, p], row.output_tokens[p], row.cap_hit[p],
                        row.gen_cost[p], row.has_score[p], dict(self._details[generator]))

    def verify(self, candidate: int, tier: int, timeout_s: float | None) -> Scored:
        """The stored score of revealed candidate ``candidate``."""
        p = self._slots[candidate]
        return Scored(self._row.score[p][tier], self._row.ver_cost[p][tier])

    def sample_bound(self, candidate: int, generator: int = 0) -> CallBound:
        """Exact: the stored cost."""
        cost = self._row.gen_cost[self._next_slot(generator)]
        return CallBound(cost[TOKENS], cost[LATENCY])

    def verify_bound(self, candidate: int, tier: int) -> CallBound:
        """Exact: the stored cost."""
        cost = self._row.ver_cost[self._slots[candidate]][tier]
        return CallBound(cost[TOKENS], cost[LATENCY])
