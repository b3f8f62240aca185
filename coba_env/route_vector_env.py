"""RouteVectorEnv: many route episodes stepped at once with numpy (the batched twin of ``RouteEnv``).

It is ``CoBaVectorEnv``'s state machine over the route episodes' candidate slots (``coba_env.route_pool``),
with three differences, each a hook of ``CoBaVectorEnv``: a SAMPLE reveals the chosen generator's next
candidate into the next slot (``slot_candidate`` records which pool candidate each revealed slot holds, and
every gather of a slot's pool data goes through it); answer counts are zeroed on reset (candidates are not
revealed in pool order); and each generator's evidence is kept beside the pooled one, feature-major [G, B]:
``gen_revealed``, ``gen_cap``, ``gen_top_count``, ``gen_score_sum`` / ``gen_score_count`` [G, T, B] and
``gen_spend`` (cost model). For the same actions it returns what ``RouteEnv`` returns, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coba_env.env import CoBaEnv
from coba_env.row_items import row_items, zero_item
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig, check_int
from coba_env.rules.features import (
    batch_fresh_block,
    batch_observe,
    batch_patch_block_after_sample,
    batch_patch_block_after_verify,
)
from coba_env.rules.masks import batch_masks
from coba_env.vector_env import CoBaVectorEnv

__all__ = ["RouteVectorEnv"]


class RouteVectorEnv(CoBaVectorEnv):
    """``num_envs`` route episodes stepped together; takes the same keyword arguments as ``RouteEnv``."""

    _pool_order = False
    _few_slots = 8  # route episodes reveal more slots (see ``VectorEvidence._slot_groups``)

    def __init__(self, num_envs: int, pool: Any = None, *, config: Any = None, render_mode: str | None = None,
                 **env_kwargs: Any) -> None:
        num_envs = check_int("num_envs", num_envs, low=1, high=1 << 30)
        env_kwargs.pop("grouping", None)
        if config is None:
            config = EnvConfig.build(pool, grouping="item", **env_kwargs)
            route, n_max_g = config.route, config.n_max_per_generator
        elif pool is not None or env_kwargs:
            raise ValueError("pass either config= or the pool and env arguments, not both")
        else:
            route, n_max_g = config.route, config.n_max_per_generator
        #: The route episodes (``coba_env.route_pool.RoutePool``).
        self.route = route
        #: Most candidates one generator may reveal per episode.
        self.n_max_per_generator = n_max_g
        self.n_generators = route.n_generators
        self._caps = np.where(route.available, n_max_g, 0).astype(np.int64)  # [E, G]
        self._single_route: CoBaEnv | None = None
        super().__init__(num_envs, config=config, render_mode=render_mode)

    def _action_layout(self) -> ActionLayout:
        return ActionLayout(generators=self.route.generators, verifiers=tuple(self.tiers))

    def _observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.features.observation_bounds()

    def _lambda_index(self) -> int:
        return self.features.lambda_index

    @property
    def single(self) -> CoBaEnv:
        """A one-episode ``CoBaEnv`` of the same configuration (built on use)."""
        if self._single_route is None:
            self._single_route = CoBaEnv.from_config(self.config)
        return self._single_route

    # -- state ---------------------------------------------------------------------------------------
    def _alloc(self) -> None:
        super()._alloc()
        g, t, b, s = self.n_generators, self.n_tiers, self.num_envs, self.pool.n_candidates
        # The counters a SAMPLE changes, feature-major (integers revealed, top_count [2G, B]; floats spend [G, B]) so
        # that the masks and the block patches read contiguous rows; a reset is one scatter per block.
        self._gen_ints, self._gen_floats = np.zeros((2 * g, b), dtype=np.int64), np.zeros((g, b))
        self.gen_revealed, self.gen_top_count = self._gen_ints[:g], self._gen_ints[g:]
        self.gen_spend = self._gen_floats
        self.gen_cap = np.zeros((g, b), dtype=np.int64)
        # VERIFY's per-(generator, tier) sums and counts, row-major [B, G * T]: only VERIFY (one entry per row) reads
        # them, and a reset zeroes a row's as one item; the [G, T, B] names are views.
        self._score_count, self._score_sum = np.zeros((b, g * t), dtype=np.int64), np.zeros((b, g * t))
        self.gen_score_count = self._score_count.reshape(b, g, t).transpose(1, 2, 0)
        self.gen_score_sum = self._score_sum.reshape(b, g, t).transpose(1, 2, 0)
        if t:
            self._score_items = (row_items(self._score_count), row_items(self._score_sum))
            self._zero_scores = zero_item(g * t)  # all-zero bytes: zero counts and zero sums alike
        #: The per-generator features of the current state [B, G * (4 + T)], patched where a step changes them
        #: (``coba_env.rules.features``: the rows that sampled, verified or reset) instead of recomputed.
        self.generator_block = np.zeros((b, g * self.features.block_size), dtype=np.float32)
        #: Answers per (row, generator, pooled cluster), flat [B * G * (C + 1)] (<= S: the dtype of ``counts``).
        self._gen_counts = np.zeros(b * g * (self.n_clusters + 1), dtype=self.counts.dtype)
        #: The pool candidate of each revealed slot, slot-major [S, B] (stale beyond n), small so that SAMPLE's
        #: scatter and the gathers stay in cache; its generator is candidate // N (``_slot_generator``).
        self.slot_candidate = np.zeros((s, b), dtype=np.int8 if s < 127 else np.int64)
        self._gen_b = np.arange(g) * b
        self._gen_ints_b = np.arange(len(self._gen_ints)) * b
        self._caps_t = np.ascontiguousarray(self._caps.T)  # [G, E]

    def _clear_slots(self, at: np.ndarray, row: np.ndarray) -> None:
        super()._clear_slots(at, row)
        # Only the clusters of the revealed slots hold counts: zero those (the statistics are zeroed when the cluster
        # first appears, as the base class does).
        cl = self.cluster_t.ravel().take(at).astype(np.int64)
        answered = cl >= 0
        row, cl = row[answered], cl[answered]
        g = self._slot_generator(at[answered])
        c1 = self.n_clusters + 1
        at = row * c1 + cl
        self.counts.ravel()[at] = 0
        self._gen_counts[(row * self.n_generators + g) * c1 + cl] = 0

    def _reset_rows(self, rows: np.ndarray, episodes: np.ndarray) -> None:
        super()._reset_rows(rows, episodes)
        # Row-major blocks written through flat indices: one plain 1-D scatter per array.
        self._gen_ints.ravel()[self._gen_ints_b[:, None] + rows] = 0
        self._gen_floats.ravel()[self._gen_b[:, None] + rows] = 0.0
        if self.n_tiers:
            for items in self._score_items:
                items[rows] = self._zero_scores
        self.gen_cap.ravel()[self._gen_b[:, None] + rows] = self._caps_t.take(episodes, axis=1)
        batch_fresh_block(self.generator_block, self, rows)

    @property
    def slot_generator(self) -> np.ndarray:
        """The generator of each revealed slot, slot-major [S, B] int64 (stale beyond each row's n)."""
        return np.floor_divide(self.slot_candidate, self.route.n_per_generator, dtype=np.int64)

    def _slot_generator(self, at: np.ndarray) -> np.ndarray:
        """The generator of the revealed slots at flat [S, B] indices ``at``."""
        return np.floor_divide(self.slot_candidate.ravel().take(at), self.route.n_per_generator, dtype=np.int64)

    def _pool_flat(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.ep.take(rows) * self.n_cand + self.slot_candidate.ravel().take(slots * self.num_envs + rows)

    def _sample_flat(self, rows: np.ndarray, actions: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b, g_n = self.num_envs, self.n_generators
        g = self.layout.generator_of(actions)
        at_gen = g * b + rows  # flat [G, B]
        revealed = self.gen_revealed.ravel()
        k = revealed.take(at_gen)
        p = g * self.route.n_per_generator + k
        at_slot = slots * b + rows
        self.slot_candidate.ravel()[at_slot] = p
        k += 1
        revealed[at_gen] = k
        flat = self.ep.take(rows) * self.n_cand + p
        # A 1-D gather from the flat cost table (cheaper than 2-D fancy indexing): column cost_k
        spend = self.gen_spend.ravel()
        new_spend = spend.take(at_gen) + self.cost_rows.ravel().take(flat * self.cost_rows.shape[1] + self.cost_k)
        spend[at_gen] = new_spend
        table = self.sample_int.take(flat, axis=0)
        cl = table[:, 0]
        answered = np.flatnonzero(cl >= 0)
        if len(answered):
            ra, ga = rows[answered], g[answered]
            at = (ra * g_n + ga) * (self.n_clusters + 1) + cl[answered]
            count = self._gen_counts.take(at) + 1
            self._gen_counts[at] = count
            top = self.gen_top_count.ravel()
            at_top = ga * b + ra
            top[at_top] = np.maximum(top.take(at_top), count)
        batch_patch_block_after_sample(self.generator_block, self, rows, g, at_gen, k, new_spend)
        return flat, table

    def _verify(self, rows: np.ndarray, a: np.ndarray, cost_at: np.ndarray):
        c, t, s = super()._verify(rows, a, cost_at)
        usable = ~np.isnan(s)
        ru, tu = rows[usable], t[usable]
        g = self._slot_generator(c[usable] * self.num_envs + ru)
        at = ru * self._score_sum.shape[1] + g * self.n_tiers + tu  # (row, g, tier) in the row-major [B, G * T]
        sums, counts = self._score_sum.ravel(), self._score_count.ravel()
        new_sums, new_counts = sums.take(at) + s[usable], counts.take(at) + 1
        sums[at], counts[at] = new_sums, new_counts
        batch_patch_block_after_verify(self.generator_block, self, ru, g, tu, new_sums, new_counts)
        return c, t, s

    def _masks(self) -> np.ndarray:
        return batch_masks(self.n, self.n_max, self._pending, self.tier_on, self._cost[self.cost_k] >= self.max_cost,
                           can_sample=self.gen_revealed < self.gen_cap)

    def _observations(self) -> np.ndarray:
        k = self.generator_block.shape[1]
        out = np.empty((self.num_envs, self.n_obs), dtype=np.float32)
        out[:, :k] = self.generator_block  # kept current by the steps (see ``_alloc``)
        batch_observe(self, self._obs_t, self.features, out=out[:, k:])  # the pooled table, written in place
        return out

    def _fresh_rows(self, fresh: np.ndarray, rows: np.ndarray) -> None:
        super()._fresh_rows(fresh, rows)
        fresh[:, :self.generator_block.shape[1]] = self.generator_block.take(rows, axis=0)  # fresh since reset

    # -- slot-order reads (the base class reads pool order) -------------------------------------------
    def _slot_table(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``table``'s [E, S, ...] values of each revealed slot of ``rows`` [R, S, ...] (stale beyond n)."""
        flat = self.ep[rows, None] * self.n_cand + self.slot_candidate[:, rows].T
        return table.reshape(-1, *table.shape[2:])[flat]

    def _verified(self, t: int, rows: np.ndarray) -> np.ndarray:
        revealed = np.arange(self.n_cand)[None, :] < self.n[rows, None]
        has = self._slot_table(self.pool.has_score[:, :, t], rows) & (self._slot_table(self.pool.cluster, rows) >= 0)
        return has & ~self.open_t[:, rows * self.n_tiers + t].T & revealed

    @property
    def scores(self) -> np.ndarray:
        """Revealed scores [B, S, T] in reveal order: NaN where not verified (or without a usable score)."""
        return np.where(self.verified.transpose(1, 2, 0), self._slot_table(self.pool.score, self.rows), np.nan)

    def _select(self, rows: np.ndarray) -> np.ndarray:
        if self.selection.rule == "fusion":
            return super()._select(rows)
        from coba_env.rules.selection import select_by_rule, tier_columns

        rule = self.selection
        none = self.n_answered[rows] == 0
        tier_scores = tier_verified = None
        if rule.rule in ("max_score", "weighted_vote"):
            tier_scores, tier_verified = tier_columns(rule, self._slot_table(self.pool.score, rows),
                                                      lambda t: self._verified(t, rows))
        cluster = self._slot_table(self.pool.cluster, rows)
        sel = select_by_rule(rule, cluster, self.n[rows], self.top[rows], tier_scores, tier_verified)
        return np.where(none, -1, sel)
