"""The state arrays of ``CoBaVectorEnv``: their layout, their allocation and their reset row by row (a mixin).

State is laid out feature-major: the integer counters are one [K, B] block and the float sums one [3, B] block,
each named array a contiguous row (the cost sums are row-major [B, K], like the cost rows a step adds); the
per-slot fusion terms, each slot's cluster count, the slots VERIFY may still pick and R are slot-major
([N, B], [N, B * T]), so the fusion arithmetic, VERIFY's target choice and the STOP selection read whole rows
(and only the first few slots for the rows that revealed few candidates; R of later slots is computed only
where revealed). Per answer cluster it keeps only the score statistics that the observation reads (one
40-byte record per row and cluster), plus a copy of each row's top-answer record rewritten when it changes. A
reset zeroes the counters with one multiply and writes a few rows, a slot's terms are written when it is
revealed, and a reset only marks the revealed slots unrevealed again (fnum = -inf); the answer counts and
per-cluster statistics are zeroed lazily, when a cluster first appears in an episode (a per-candidate table of
the pool says which candidate that is). The item grouping adds each generator's evidence (``_alloc_generators``).
"""

from __future__ import annotations

import numpy as np

from coba_env.costs import COST_MEASURES
from coba_env.row_items import row_items, zero_item
from coba_env.rules.features import batch_fresh_block

__all__ = ["VectorState"]


class VectorState:
    """Allocation and per-row reset of a ``CoBaVectorEnv``'s state arrays (the layout: module docstring)."""

    # Set by ``CoBaVectorEnv.__init__`` before ``_alloc``.
    num_envs: int
    n_tiers: int
    n_clusters: int
    _places: bool
    _open_flags: np.ndarray

    # -- state ---------------------------------------------------------------------------------------
    def _alloc(self) -> None:
        b, n, t, c = self.num_envs, self.pool.n_candidates, self.n_tiers, self.n_clusters
        self.ep = np.zeros(b, dtype=np.int64)
        # Integer counters, counter-major [K, B]: each named array is one contiguous row, so the observation,
        # the masks and the updates run over contiguous memory. The order makes the observation's divisions
        # two block operations (see ``_observations``).
        int_names = ("n", "n_distinct", "flips", "steps", "top_count", "cap_count")
        k = len(int_names)
        self._ints = np.zeros((k + 2 * t + 3, b), dtype=np.int64)
        self._ints_b = np.arange(len(self._ints)) * b  # the counter rows' starts in the flat block
        for i, name in enumerate(int_names):
            setattr(self, name, self._ints[i])
        self._verified_n, self._pending = self._ints[k:k + t], self._ints[k + t:k + 2 * t]  # [T, B]
        self.n_verified, self.pending = self._verified_n.T, self._pending.T  # [B, T] views
        # top: -1 before any answer; second: the largest count among the other answers
        self.n_answered, self.top, self.second = self._ints[k + 2 * t:]
        # Flat row starts of the counters a SAMPLE changes (n, cap_count, pending[T]), and of those an answer
        # changes (n_distinct, flips, top_count, n_answered, top, second): one gather and one scatter each.
        self._sampled_at = np.array([0, 5, *range(k + t, k + 2 * t)]) * b
        self._answered_at = np.array([1, 2, 4, k + 2 * t, k + 2 * t + 1, k + 2 * t + 2]) * b
        # Float sums, feature-major [3, B] (fresh = all zeros): clogc_sum, best_v3, len_sum.
        self._floats = np.zeros((3, b))
        self.clogc_sum, self.best_v3, self.len_sum = self._floats
        # The K cost measures, row-major [B, K] like a step's gathered cost rows (one contiguous add per step; a
        # reset zeroes a row as one item); ``_cost`` is the [K, B] view.
        k_costs = len(COST_MEASURES)
        self.cost = np.zeros((b, k_costs))
        self._cost = self.cost.T
        self._cost_items, self._zero_cost = row_items(self.cost), zero_item(k_costs)
        # Per answer cluster (Evidence.tier_stats keeps all tiers): the feature layout's cheap judge's sum, count,
        # max and strong verifier's sum, count, adjacent
        # so that a gather hits one cache line; zeroed when the cluster first appears in an episode (SAMPLE).
        self.top_stats = np.zeros((b, c + 1, 5))
        # A copy of the top answer's record per row (zeros without one), rewritten whenever the top answer or its
        # record changes (SAMPLE, VERIFY, reset), so that the observation reads it without a gather from all rows'
        # records; records are moved as single 40-byte items.
        self.top_record = np.zeros((b, 5))
        self._stats_items = row_items(self.top_stats.reshape(-1, 5))
        self._top_items = row_items(self.top_record)
        self._zero_stats = zero_item(5)
        # Answers per cluster (<= N: the small dtype of ``count_t``), zeroed when the cluster first appears in an
        # episode.
        self.counts = np.zeros((b, c + 1), dtype=np.int8 if n < 127 else np.int64)
        # Per candidate slot, slot-major [N, B] so that the fusion arithmetic and its row max run over
        # contiguous rows (see ``_fusion``): the fusion terms, the count of the slot's answer cluster (int8: a
        # count <= N, or a wrapped stale one) and the slot's cluster. They are written when the slot is revealed;
        # an unrevealed slot has fnum = -inf (set on reset) and stale values elsewhere, which never reach an R.
        self.fnum_t = np.full((n, b), -np.inf)
        self.fden_t = np.ones((n, b))
        self.count_t = np.zeros((n, b), dtype=np.int8 if n < 127 else np.int64)
        self.cluster_t = np.full((n, b), -1, dtype=self._cluster_dtype)
        self._added = np.full(b, -2, dtype=self._cluster_dtype)
        # Which slots VERIFY at tier t may still pick: answered, with a tier-t call in the pool, not verified at t.
        # Slot-major [N, B * T] (column row * T + t), like the R that VERIFY compares it with: written from the
        # pool when the slot is revealed, cleared when verified (stale for unrevealed slots, whose R is -inf).
        # A slot's T flags of one row are adjacent, so SAMPLE writes them as one T-byte item from ``_open_items``.
        self.open_t = np.zeros((n, b * t), dtype=bool)
        if t:
            self._open_view = row_items(self.open_t.reshape(n * b, t))  # [N * B] items, index slot * B + row
            self._open_items = row_items(self._open_flags)  # [E * N], built once per pool (``VectorTables``)
        self.lams = np.full(b, self.lam)
        self.rows = np.arange(b)
        self._mask_at = self.rows * self.layout.n_actions  # row starts in the flat [B, n_actions] mask
        # The observation's feature-major scratch [F, B] (see ``_observations``): float32 (the ufuncs round their
        # float64 results into it: half the memory traffic of a float64 scratch cast later), its rows one cache line
        # longer than B: with B a power of two the [B, F] copy would read F rows whose addresses share their cache
        # set (the transposed copy measured 2x slower at B = 16384).
        self._obs_t = np.empty((self.features.n_features, b + 16), dtype=np.float32)[:, :b]
        self._cost_at = np.empty(b, dtype=np.int64)  # see ``step``
        # R of every candidate slot after the last step, [N, B] (see ``_fusion``): VERIFY targets are chosen on it.
        self.rank_t = np.full((n, b), -np.inf)
        #: Each row's largest R after the last ``_fusion`` [B].
        self.top_rank = np.full(b, -np.inf)
        if self._places:
            self._alloc_generators()

    def _alloc_generators(self) -> None:
        """The item grouping's per-generator state (``Evidence.track_generators``'s, batched)."""
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
        # A reset zeroes a row's answer counts, pooled and per generator, as one item each (cheaper than finding
        # the clusters its revealed slots hold; the other clusters' counts are 0 already).
        gen_counts = self._gen_counts.reshape(b, -1)
        self._count_items = (row_items(self.counts), row_items(gen_counts))
        self._zero_counts = (zero_item(self.counts.shape[1], self.counts.dtype),
                             zero_item(gen_counts.shape[1], self.counts.dtype))
        #: The pool candidate of each revealed slot, slot-major [S, B] (stale beyond n), small so that SAMPLE's
        #: scatter and the gathers stay in cache; its generator is candidate // N (``slot_generator``).
        self.slot_candidate = np.zeros((s, b), dtype=np.int8 if s < 127 else np.int64)
        self._gen_b = np.arange(g) * b
        self._gen_ints_b = np.arange(len(self._gen_ints)) * b
        self._caps_t = np.ascontiguousarray(self._caps.T)  # [G, E]
        # Each candidate's generation cost in the env's cost measure [E * N]: a SAMPLE's gen_spend increment, read
        # from this column (a few hundred KiB) instead of the whole cost table.
        self._sample_cost = np.ascontiguousarray(self.cost_rows[:self._ver_cost_row0, self.cost_k])

    @property
    def rank(self) -> np.ndarray:
        """R of every candidate slot after the last step [B, N]."""
        return self._current_rank().T

    def _reset_rows(self, rows: np.ndarray, episodes: np.ndarray) -> None:
        b = self.num_envs
        # Only the revealed slots (slot < n) hold per-slot state: slots 0 .. k-1 of every row, k the most any row
        # revealed, as one rectangle of flat [N, B] indices (the rows' unrevealed slots among them are -inf already).
        k = int(self.n.take(rows).max(initial=0))  # before the counters are zeroed
        if k:
            self._clear_slots(((np.arange(k) * b)[:, None] + rows).ravel())
        self.ep[rows] = episodes
        if 4 * len(rows) < b:  # every counter 0 ... (few rows: a scatter; many: one multiply of the whole block)
            self._ints.ravel()[self._ints_b[:, None] + rows] = 0
        else:
            keep = np.ones(b, dtype=np.int64)
            keep[rows] = 0
            self._ints *= keep
        self.top[rows] = -1  # ... but top
        self.top_rank[rows] = -np.inf  # nothing revealed (``_fusion`` recomputes it every step)
        self._top_items[rows] = self._zero_stats
        # Row-major blocks written through flat indices: one plain 1-D scatter instead of a mixed [:, rows] one.
        self._floats.ravel()[(np.arange(len(self._floats)) * b)[:, None] + rows] = 0.0
        self._cost_items[rows] = self._zero_cost
        if self._reset_fden:
            self.fden_t[:, rows] = 1.0
        if self.lambda_range is not None:
            self.lams[rows] = self.np_random.uniform(*self.lambda_range, size=len(rows))
        else:
            self.lams[rows] = self.lam
        if self._places:  # row-major blocks written through flat indices: one plain 1-D scatter per array
            self._gen_ints.ravel()[self._gen_ints_b[:, None] + rows] = 0
            self._gen_floats.ravel()[self._gen_b[:, None] + rows] = 0.0
            if self.n_tiers:
                for items in self._score_items:
                    items[rows] = self._zero_scores
            self.gen_cap.ravel()[self._gen_b[:, None] + rows] = self._caps_t.take(episodes, axis=1)
            for items, zero in zip(self._count_items, self._zero_counts, strict=True):
                items[rows] = zero
            batch_fresh_block(self.generator_block, self, rows)

    def _clear_slots(self, at: np.ndarray) -> None:
        """Mark the slots at flat [N, B] indices ``at`` unrevealed (fnum and R -inf, as every unrevealed slot's), before
        a reset."""
        # Most episodes reveal a few of the N slots, so writing only the first few saves most writes, and
        # ``_fusion`` recomputes later slots only where revealed.
        self.fnum_t.ravel()[at] = -np.inf
        self.rank_t.ravel()[at] = -np.inf
