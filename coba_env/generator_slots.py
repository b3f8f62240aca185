"""An item episode's slots, filled generator by generator (a mixin of ``CoBaEnv`` for the item grouping).

With the item grouping an episode holds every generator's cached candidates of one item (``coba_env.route_pool``:
``G * N`` candidate slots, generator-major). ``SAMPLE_<g>`` reveals g's next candidate into the episode's next
revealed slot, so the env keeps which pool candidate each revealed slot holds (``_slot_cand``; every read of a
slot's data goes through it), each generator's own evidence (``Evidence.track_generators``), the per-generator
block of the observation (``coba_env.rules.features.generator_block``, patched by SAMPLE and VERIFY) and which
SAMPLE actions are still legal. ``CoBaEnv.step`` calls ``_place`` and ``_after_verify`` only when ``_places``
is set, so a one-generator episode does none of this work.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from coba_env.costs import COST_MEASURES, cost_record
from coba_env.evidence import Evidence
from coba_env.rules.features import generator_block, patch_block_after_sample, patch_block_after_verify

__all__ = ["FreshEpisode", "GeneratorSlots"]


class FreshEpisode(NamedTuple):
    """What an item episode starts from, the same for every item with the same generator caps."""

    #: The per-generator features before anything is revealed (copied per episode: SAMPLE and VERIFY patch it).
    block: list[float]
    #: The mask bits of the SAMPLE actions of the generators the item has candidates from.
    sample_bits: int
    #: The first observation, lambda aside (read-only; ``reset`` copies it and writes lambda).
    observation: np.ndarray


class GeneratorSlots:
    """The item grouping's part of ``CoBaEnv``: SAMPLE from a chosen generator, per-generator state and block."""

    # Set by ``CoBaEnv.__init__`` / ``reset`` / ``step``.
    _ev: Evidence
    _ep: int
    _row: Any
    _n_obs: int
    _first_list: list[float]
    _cost_k: int
    budget: float
    n_tiers: int
    _weights: tuple[float, ...]
    config: Any

    def _init_generator_slots(self, route: Any, n_max_per_generator: int) -> None:
        """Serve the item episodes of ``route`` (a ``coba_env.route_pool.RoutePool``), ``n_max_per_generator`` each."""
        self._n_per_gen = route.n_per_generator
        # Per episode, the most candidates each generator can reveal (``EnvConfig.sample_caps``, the rule both envs read).
        self._caps = [tuple(caps) for caps in self.config.sample_caps.tolist()]
        #: Per caps pattern: the first per-generator block, the legal SAMPLE bits and the first observation (lambda
        #: written per episode; read-only, ``reset`` copies it), built once.
        self._fresh: dict[tuple[int, ...], FreshEpisode] = {}
        self._no_spend = dict.fromkeys(COST_MEASURES, 0.0)

    def _start_generators(self, n_max: int, n_clusters: int, lam: float) -> Evidence:
        """A fresh item episode's evidence (pooled and per generator); sets its block, SAMPLE bits, first observation.

        The item's row is read by pool candidate: SAMPLE maps the next slot to the chosen generator's next candidate
        (``_place``), VERIFY reads the targeted slot's candidate through ``_slot_cand``.
        """
        caps = self._caps[self._ep]
        ev = Evidence(n_max, self.n_tiers, n_clusters, lam, self._weights, self.features.strong)
        ev.track_generators(caps)
        self._slot_cand = []
        self._slot_has = []
        fresh = self._fresh.get(caps)
        if fresh is None:  # a fresh episode's block, SAMPLE bits and observation depend on the caps only
            block = generator_block(ev, self.n_max_per_generator, self._cost_k, self.budget)
            first = np.empty(self._n_obs, np.float32)
            # lambda is written per episode, and so are the problem features (zeros here) when the env has them
            self._pack_observation(first, 0, *[0.0] * len(self.features.problem), *block, *self._first_list)
            first.flags.writeable = False
            fresh = self._fresh[caps] = FreshEpisode(block, sum(1 << g for g, cap in enumerate(caps) if cap > 0), first)
        #: The per-generator features as Python floats, patched by SAMPLE and VERIFY; every observation is this
        #: block, then the pooled features ``self._obs`` (``_as_observation``).
        self._block = fresh.block.copy()
        self._sample_bits = fresh.sample_bits
        self._first = fresh.observation
        return ev

    def _place(self, action: int, slot: int) -> int:
        """The pool candidate SAMPLE ``action`` reveals into ``slot``, recorded in ``_slot_cand``."""
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
        """What the per-generator state adds after revealed slot ``slot`` was verified at ``tier`` with ``score``."""
        ev = self._ev
        ev.add_generator_score(slot, tier, score)
        patch_block_after_verify(self._block, ev, ev.slot_generator[slot], tier)

    def _generator_info(self, info: dict[str, Any], selected: int) -> None:
        """Add the final info's per-generator keys: samples and spend (every measure) by generator, the selected
        candidate's generator."""
        ev, gens = self._ev, self.layout.generators
        # The lists have one entry per generator and per cost measure by construction (no strict zip needed).
        info["samples_by_generator"] = dict(zip(gens, ev.gen_revealed))  # noqa: B905
        zero = self._no_spend  # a generator never sampled spent nothing: a copy of the zero record
        info["spend_by_generator"] = {g: cost_record(s) if k else zero.copy()
                                      for g, k, s in zip(gens, ev.gen_revealed, ev.gen_spend)}  # noqa: B905
        info["selected_generator"] = gens[ev.slot_generator[selected]] if selected >= 0 else None
