"""RouteEnv: one episode per problem; the agent chooses which generator to sample from, when to verify, when to stop.

The transition is ``CoBaEnv``'s own (``step`` of the replay env): a route episode only adds that a SAMPLE puts
the chosen generator's next candidate into the next slot of the episode's data first (``_place``), and keeps
each generator's evidence beside the pooled one (``coba_env.evidence.Evidence.track_generators``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES, cost_record
from coba_env.env import CoBaEnv
from coba_env.episode_data import EpisodeData
from coba_env.evidence import Evidence
from coba_env.route_pool import RoutePool
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig
from coba_env.rules.features import generator_block, patch_block_after_sample, patch_block_after_verify
from coba_env.rules.masks import mask_bits
from pools.store import Pool

__all__ = ["RouteEnv", "route_config"]


class FreshEpisode(NamedTuple):
    """What a route episode starts from, the same for every problem with the same generator caps."""

    #: The per-generator features before anything is revealed (copied per episode: SAMPLE and VERIFY patch it).
    block: list[float]
    #: The mask bits of the SAMPLE actions of the generators the problem has candidates from.
    sample_bits: int
    #: The first observation, lambda aside (read-only; ``_first_observation`` copies it and writes lambda).
    observation: np.ndarray


def route_config(pool: Pool | CompiledPool | str | None = None, **kwargs: Any) -> tuple[RoutePool, int, EnvConfig]:
    """(route pool, N_max per generator, validated config over the route episodes) of a route env's arguments."""
    config = EnvConfig.build(pool, grouping="item", **kwargs)
    return config.route, config.n_max_per_generator, config


class RouteEnv(CoBaEnv):
    """
    ## Description

    Model routing and test-time scaling in one decision process. Each episode is one problem (dataset,
    item) of a candidate pool with several generators: the cached candidates of every generator of that
    item, answers clustered across generators. ``SAMPLE_<g>`` reveals generator g's next candidate and is
    charged at g's own cost; ``VERIFY_<v>`` scores the revealed candidate of highest fusion rank (whatever
    its generator) with verifier v; ``STOP`` selects among all revealed candidates with the fusion rank.

    ## Action Space

    ``Discrete(G + V + 1)`` from the layout (``self.layout``, ``coba_env.rules.actions.ActionLayout``):
    ``SAMPLE_<g>`` for the G generators of the pool (ids 0..G-1, in order of first appearance in the pool),
    ``VERIFY_<v>`` for the pool's V verifiers (ids G..G+V-1, in the pool's verifier order), ``STOP`` (id G+V). ``SAMPLE_<g>`` is legal
    while g has revealed fewer than ``n_max`` candidates and the item has candidates from g; the VERIFY and
    STOP rules are the replay env's (``coba_env.rules.masks``).

    ## Observation Space

    ``Box(shape=(G * (4 + V) + 18 + V,), float32)``: for each generator, revealed / N_max, remaining / N_max,
    agreement (its largest answer's share), its mean score per verifier and its generation spend / B; then the
    replay env's 18 + V pooled features (one verified share per verifier; budget used and lambda among them). The table with names per index is
    ``env.features.observation`` (``env.feature_names``), printed in docs/ENV.md.

    ## Rewards

    As the replay env: each action costs ``-lambda * c / B``; STOP adds 1 if the selected answer is correct.
    B defaults to the replay env's budget on the same pool (the mean cost of ``n_max`` candidates of one
    generator).

    ## Starting State, Episode End

    As the replay env; an episode has at most G * n_max * (1 + V) + 1 actions. The final info adds
    ``samples_by_generator`` and ``spend_by_generator`` (every cost measure) and ``selected_generator``.

    ## Arguments

    ``gymnasium.make("coba/Route-v0", pool=None, datasets=None, generators=None, lam=0.1, lambda_range=None,
    budget=None, cost_model="p_tokens", n_max=None, tiers=None, selection=None,
    order="sequential", max_cost=None)``: as ``coba/Replay-v0``; ``n_max`` is per generator; ``generators``
    restricts the generators routed between (at least one).

    ## Version History

    - v0: first version.
    """

    def __init__(self, pool: Pool | CompiledPool | str | None = None, *, datasets: Sequence[str] | str | None = None,
                 generators: Sequence[str] | str | None = None, lam: float = 0.1,
                 lambda_range: tuple[float, float] | None = None, budget: float | None = None,
                 cost_model: str = "p_tokens", n_max: int | None = None, tiers: Sequence[str] | None = None,
                 selection: Any = None, order: str = "sequential", max_cost: float | None = None,
                 render_mode: str | None = None, config: EnvConfig | None = None, grouping: str = "item") -> None:
        if config is None:
            route, n_max_g, config = route_config(pool, datasets=datasets, generators=generators, lam=lam,
                                                  lambda_range=lambda_range, budget=budget, cost_model=cost_model,
                                                  n_max=n_max, tiers=tiers, selection=selection, order=order,
                                                  max_cost=max_cost)
        elif pool is not None:
            raise ValueError("pass either config= or a pool with its arguments, not both")
        else:
            route, n_max_g = config.route, config.n_max_per_generator
        self._init_route(route, n_max_g)
        super().__init__(config=config, render_mode=render_mode)
        self._places = True

    def _init_route(self, route: RoutePool, n_max_per_generator: int) -> None:
        #: The route episodes (``coba_env.route_pool.RoutePool``): generators, availability, the compiled pool.
        self.route = route
        #: Most candidates one generator may reveal per episode.
        self.n_max_per_generator = n_max_per_generator
        self._n_per_gen = route.n_per_generator
        self._caps = [tuple(caps) for caps in np.where(route.available, n_max_per_generator, 0).tolist()]
        #: Per caps pattern: the first per-generator block, the legal SAMPLE bits and the first observation (lambda
        #: written per episode; read-only, ``_first_observation`` returns copies), built once.
        self._fresh: dict[tuple[int, ...], FreshEpisode] = {}
        self._slot_cand: list[int] = []
        self._no_spend = dict.fromkeys(COST_MEASURES, 0.0)

    @classmethod
    def from_route(cls, route: RoutePool, n_max_per_generator: int, config: EnvConfig,
                   render_mode: str | None = None) -> RouteEnv:
        """The env of an already built route pool and validated configuration (what the vector env uses)."""
        env = cls.__new__(cls)
        env._init_route(route, n_max_per_generator)
        CoBaEnv.__init__(env, config=config, render_mode=render_mode)
        env._places = True
        return env

    def _action_layout(self) -> ActionLayout:
        return ActionLayout(generators=self.route.generators, verifiers=tuple(self.tiers))

    def _observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low, high = self.features.observation_bounds()
        self._n_block = len(self.features.block)  # the per-generator features come first
        self._lam_at = self._n_block + self.features.lam
        return low, high

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The observation's feature names, in index order (generated from the layout)."""
        return self.features.observation_names

    # -- the route episode's data, filled slot by slot -----------------------------------------------
    def _episode_data(self, ep: int) -> EpisodeData:
        # The problem's row, read by pool candidate: SAMPLE maps the next slot to the chosen generator's next
        # candidate (``_place``), VERIFY reads the targeted slot's candidate through ``_slot_cand``.
        self._slot_cand = []
        self._slot_has = []
        return self._rows[ep]

    def _place(self, action: int, slot: int) -> int:
        g = action  # the layout's SAMPLE ids are the generator indices (ActionLayout.generator_of)
        ev = self._ev
        k = ev.gen_revealed[g]
        p = g * self._n_per_gen + k
        source = self._row
        self._slot_cand.append(p)
        self._slot_has.append(source.has_score[p])
        ev.add_generator_candidate(g, source.cluster[p], source.gen_cost[p])
        if k + 1 >= ev.gen_cap[g]:
            self._sample_bits &= ~(1 << g)
        patch_block_after_sample(self._block, ev, g, self.n_max_per_generator, self._cost_k, self.budget)
        return p

    def _after_verify(self, slot: int, tier: int, score: float) -> None:
        ev = self._ev
        ev.add_generator_score(slot, tier, score)
        patch_block_after_verify(self._block, ev, ev.slot_generator[slot], tier)

    def _slots(self) -> list[int]:
        return self._slot_cand

    def _compute_mask(self) -> np.ndarray:
        ev = self._ev
        bits = mask_bits(ev.n_revealed, 0, self._verify_bits, self._spent_k >= self.max_cost,
                         sample_bits=self._sample_bits, stop_bit=self._stop_bit)
        self._bits = bits
        return self._mask_table[bits]

    # -- reset and step: the replay env's, with the route observation -----------------------------
    def _new_evidence(self, n_max: int, n_clusters: int, lam: float) -> Evidence:
        caps = self._caps[self._ep]
        ev = Evidence(n_max, self.n_tiers, n_clusters, lam, self._weights, self.features.strong)
        ev.track_generators(caps)
        fresh = self._fresh.get(caps)
        if fresh is None:  # a fresh episode's per-generator block, SAMPLE bits and observation depend on the caps only
            block = generator_block(ev, self.n_max_per_generator, self._cost_k, self.budget)
            first = np.empty(self._n_obs, np.float32)
            self._pack_observation(first, 0, *block, *self._first_list)  # lambda is written per episode
            first.flags.writeable = False
            fresh = self._fresh[caps] = FreshEpisode(block, sum(1 << g for g, cap in enumerate(caps) if cap > 0), first)
        #: The per-generator features as Python floats, patched by SAMPLE and VERIFY (``rules.features``); every
        #: observation is this block, then the pooled features ``self._obs`` (``_as_observation``).
        self._block = fresh.block.copy()
        self._sample_bits = fresh.sample_bits
        self._first = fresh.observation
        return ev

    def _first_observation(self, lam: float) -> np.ndarray:
        first = self._first.copy()
        first[self._lam_at] = lam
        return first

    def _as_observation(self, obs: list[float]) -> np.ndarray:
        out = np.empty(self._n_obs, np.float32)
        self._pack_observation(out, 0, *self._block, *obs)
        return out

    def _final_info(self, selected: int, correct: bool) -> dict[str, Any]:
        info = super()._final_info(selected, correct)
        ev, gens = self._ev, self.layout.generators
        # The lists have one entry per generator and per cost measure by construction (no strict zip needed).
        info["samples_by_generator"] = dict(zip(gens, ev.gen_revealed))  # noqa: B905
        zero = self._no_spend  # a generator never sampled spent nothing: a copy of the zero record
        info["spend_by_generator"] = {g: cost_record(s) if k else zero.copy()
                                      for g, k, s in zip(gens, ev.gen_revealed, ev.gen_spend)}  # noqa: B905
        info["selected_generator"] = gens[ev.slot_generator[selected]] if selected >= 0 else None
        return info

    @property
    def lambda_index(self) -> int:
        """Index of lambda in the observation."""
        return self.features.lambda_index
