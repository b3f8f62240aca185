"""The batched evidence arithmetic of ``CoBaVectorEnv``: SAMPLE, VERIFY, fusion rank and STOP selection over
the state arrays it allocates (``coba_env.vector_state``), mirroring ``coba_env.evidence.Evidence``.

A mixin: the state layout (flat slot-major arrays, counter rows, per-cluster records) is described in
``coba_env.vector_state``; the rules themselves live in ``coba_env.rules`` (batched forms). With the item
grouping a SAMPLE first places the chosen generator's next candidate into the next slot (``_place``, which also
keeps the per-generator evidence and block) and a VERIFY's usable score also counts for its generator
(``_verify_generators``); every read of a revealed slot's pool data goes through ``slot_candidate``
(``_pool_flat``, ``_slot_table``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coba_env.rules.features import batch_patch_block_after_sample, batch_patch_block_after_verify
from coba_env.rules.fusion import batch_best, batch_fusion
from coba_env.rules.selection import select_by_rule, tier_columns
from coba_env.rules.verify import batch_verify_target

__all__ = ["FEW_SLOTS", "FUSION_SLOTS", "ITEM_FEW_SLOTS", "VectorEvidence", "slot_spans"]

#: Candidate slots that VERIFY and STOP read for the rows with few revealed candidates (see ``_slot_groups``); an
#: item-grouped episode reveals more (``ITEM_FEW_SLOTS``).
FEW_SLOTS = 4
ITEM_FEW_SLOTS = 8
#: Candidate slots whose R ``_fusion`` computes for every row (later ones only where revealed).
FUSION_SLOTS = 8


def slot_spans(rows: np.ndarray, first: int, lengths: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat [N, B] indices of slots ``first`` .. ``first + lengths[i] - 1`` of each row ``rows[i]``, row after row;
    with the row of each index and where each row's run starts among them (``lengths`` sums to more than 0)."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    row = np.repeat(rows, lengths)
    return (np.arange(ends[-1]) - np.repeat(starts, lengths) + first) * b + row, row, starts


class VectorEvidence:
    """SAMPLE / VERIFY updates, the fusion rank and the STOP selection of a ``CoBaVectorEnv`` state (batched)."""

    #: The split of ``_slot_groups`` (``ITEM_FEW_SLOTS`` with the item grouping).
    _few_slots = FEW_SLOTS
    #: Whether SAMPLE places a chosen generator's candidate (the item grouping; set by ``CoBaVectorEnv.__init__``).
    _places = False
    # Set by ``CoBaVectorEnv.__init__`` / ``_alloc`` (the state layout is described there).
    num_envs: int
    n: np.ndarray
    ep: np.ndarray
    rank_t: np.ndarray
    #: Whether the env builds observations (``CoBaVectorEnv.observe``); without, the sums only they read are not kept.
    observe = True
    #: Whether ``rank_t`` is R of the current state (``_fusion`` sets it, a step's evidence clears it).
    _rank_current = False

    def _slot_table(self, table: np.ndarray, rows: np.ndarray, k: int | None = None) -> np.ndarray:
        """``table``'s [E, N, ...] values of each revealed slot of ``rows``, [R, N, ...] (stale beyond n); with ``k``
        only the first k slots, [R, k, ...]."""
        if not self._places:  # slot = pool candidate
            return table[self.ep[rows]] if k is None else table[self.ep[rows], :k]
        flat = self.ep[rows, None] * self.n_cand + self.slot_candidate[:k, rows].T
        return table.reshape(-1, *table.shape[2:])[flat]

    def _verified(self, t: int, rows: np.ndarray) -> np.ndarray:
        """Whether each revealed candidate of ``rows`` is verified at tier ``t`` [len(rows), N].

        Only a candidate with a tier-t call can be verified, so verified = revealed, has the call and not open.
        """
        revealed = np.arange(self.pool.n_candidates)[None, :] < self.n[rows, None]
        if self._places:
            has = self._slot_table(self.pool.has_score[:, :, t], rows) & (self._slot_table(self.pool.cluster, rows) >= 0)
        else:  # the pool's own table of answered candidates with a tier-t call, in slot order
            has = self.has_t[:, t * self.pool.n_episodes + self.ep[rows]].T
        return has & ~self.open_t[:, rows * self.n_tiers + t].T & revealed

    @property
    def verified(self) -> np.ndarray:
        """Whether each revealed candidate is verified, [T, B, N]."""
        return np.stack([self._verified(t, self.rows) for t in range(self.n_tiers)])

    @property
    def scores(self) -> np.ndarray:
        """Revealed scores [B, N, T] in reveal order: NaN where not verified (or without a usable score)."""
        return np.where(self.verified.transpose(1, 2, 0), self._slot_table(self.pool.score, self.rows), np.nan)

    def _pool_flat(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Flat pool index ``episode * N + candidate`` of revealed slot ``slots`` of each row of ``rows``."""
        if self._places:
            return self.ep.take(rows) * self.n_cand + self.slot_candidate.ravel().take(slots * self.num_envs + rows)
        return self.ep.take(rows) * self.n_cand + slots

    @property
    def slot_generator(self) -> np.ndarray:
        """The generator of each revealed slot (item grouping), slot-major [S, B] int64 (stale beyond each row's n)."""
        return np.floor_divide(self.slot_candidate, self.route.n_per_generator, dtype=np.int64)

    def _slot_generator(self, at: np.ndarray) -> np.ndarray:
        """The generator of the revealed slots at flat [S, B] indices ``at`` (item grouping)."""
        return np.floor_divide(self.slot_candidate.ravel().take(at), self.route.n_per_generator, dtype=np.int64)

    # -- evidence arithmetic (mirrors coba_env.evidence.Evidence) ------------------------------------
    def _fusion(self) -> np.ndarray:
        """Update and return ``self.rank_t``: R for every candidate slot [N, B]; -inf where unrevealed; -2 without an answer.

        (``Evidence.rank`` uses -1 for no answer; -2 here makes the row max the observation's top R exactly
        as before. VERIFY and STOP only read the R of revealed candidates with an answer.) SAMPLE sets a
        revealed slot's terms to count 0, fnum -2 and fden 1 without an answer, else to its cluster's count,
        fnum 0 and fden wf, as ``Evidence.add_candidate`` does; the count follows its cluster's later answers.
        Also sets ``self.top_rank`` [B], each row's largest R (-inf before any candidate).
        """
        # The first FUSION_SLOTS slots of every row, as whole rows; the later slots only where revealed (few rows
        # reveal that many), through flat indices. Unrevealed slots keep R = -inf: written on reset.
        n, b, wf = self.n, self.num_envs, self.weights[0]
        # Slots at or past every row's n are unrevealed everywhere: their R is -inf already. While no row reveals
        # many more than FUSION_SLOTS, whole rows are cheaper than the flat indices' setup.
        k = max(min(self.n_cand, int(n.max()) if b else 0), 1)
        if k > FUSION_SLOTS + 4:
            k = FUSION_SLOTS
        top = batch_fusion(self.rank_t[:k], self.count_t[:k], n, self.fnum_t[:k], self.fden_t[:k], wf).max(axis=0)
        cols = np.flatnonzero(n > k)
        if len(cols):
            at, col, starts = slot_spans(cols, k, n.take(cols) - k, b)
            r = batch_fusion(np.empty(len(at)), self.count_t.ravel().take(at), n.take(col), self.fnum_t.ravel().take(at),
                             self.fden_t.ravel().take(at), wf)
            self.rank_t.ravel()[at] = r
            top[cols] = np.maximum(top.take(cols), np.maximum.reduceat(r, starts))
        self.top_rank = top
        self._rank_current = True
        return self.rank_t

    def _current_rank(self) -> np.ndarray:
        """``self.rank_t`` of the current state: R is a function of each row's state alone, so a step that builds no
        observation leaves it to the first reader (VERIFY's target choice, the fusion selection) instead."""
        return self.rank_t if self._rank_current else self._fusion()

    def _select(self, rows: np.ndarray) -> np.ndarray:
        """The STOP selection for ``rows`` under the env's rule (mirrors selection.select_candidate)."""
        rule = self.selection
        none = self.n_answered[rows] == 0  # no revealed candidate has an answer
        if rule.rule == "fusion":
            # R of revealed candidates with an answer; -2 for the others (unrevealed ones have -inf).
            sel = np.empty(len(rows), dtype=np.int64)
            rank_t = self._current_rank()
            for part, k in self._slot_groups(rows):  # slot-major [k, len(part)]
                sel[part] = batch_best(rank_t[:k].take(rows[part], axis=1), none[part],
                                       hidden=k < self.n_cand)
            return sel
        # The rules read revealed slots only, so the first k (the most any of ``rows`` revealed) decide, and the
        # selection is the same (rows without an answer are set to -1 below).
        n = self.n[rows]
        k = max(min(int(n.max()), self.n_cand), 1)
        tier_scores = tier_verified = None
        if rule.rule in ("max_score", "weighted_vote"):
            tier_scores, tier_verified = tier_columns(rule, self._slot_table(self.pool.score, rows, k),
                                                      lambda t: self._verified(t, rows)[:, :k])
        sel = select_by_rule(rule, self._slot_table(self.pool.cluster, rows, k), n, self.top[rows],
                             tier_scores, tier_verified)
        return np.where(none, -1, sel)

    def _slot_groups(self, rows: np.ndarray) -> list[tuple[Any, int]]:
        """``rows`` split as [(positions in rows, k)]: each group's revealed candidates are in its first k slots.

        Unrevealed slots have R = -inf, so VERIFY and STOP need only a group's first k slots; most episodes
        reveal few candidates (under random actions about 95% of pair-grouped rows have at most 4 and 91% of
        item-grouped rows at most 8; an item split at 4 measured about 25% slower for VERIFY's target choice).
        """
        k = min(self._few_slots, self.n_cand)
        n = self.n.take(rows)
        many = n > k
        if not many.any():
            return [(slice(None), k)]
        return [(np.flatnonzero(~many), k), (np.flatnonzero(many), int(n.max()))]

    # -- stepping ------------------------------------------------------------------------------------
    def _sample(self, rows: np.ndarray, a: np.ndarray, cost_at: np.ndarray) -> None:
        """SAMPLE for ``rows``: reveal each row's next candidate (Evidence.add_candidate)."""
        t_n = self.n_tiers
        b = self.num_envs
        c = self.n.take(rows)
        # table: cluster (-1: none), cap_hit, has_score with an answer [T], first
        if self._places:  # the chosen generator's next candidate
            flat, table = self._place(rows, a, c)
        else:  # slot = pool candidate
            flat = self.ep.take(rows) * self.n_cand + c
            table = self.sample_int.take(flat, axis=0)
        cost_at[rows] = flat  # the generation cost's row of ``cost_rows``
        cl = table[:, 0]
        ints = self._ints.ravel()
        at_ints = self._sampled_at[:, None] + rows
        counters = ints.take(at_ints)  # n, cap_count, pending[T] of each row
        counters[0] = c + 1
        counters[1] += table[:, 1]
        counters[2:] += table[:, 2:2 + t_n].T
        ints[at_ints] = counters
        if self.observe:  # a sum only the observation reads
            self.len_sum[rows] += self.output_tokens.take(flat)
        slot = c * b + rows  # the revealed slot in the flat [N, B] arrays
        if t_n:  # the revealed slot is open at each tier whose call the pool holds
            self._open_view[slot] = self._open_items.take(flat)
        answered = cl >= 0
        # The revealed slot's fusion terms: count 0, fnum -2, fden 1 without an answer (R = -2).
        self.fnum_t.ravel()[slot] = np.where(answered, 0.0, -2.0)
        self.fden_t.ravel()[slot] = np.where(answered, self.weights[0], 1.0)
        self.cluster_t.ravel()[slot] = cl
        count = np.zeros(len(rows), dtype=self.count_t.dtype)
        ans = np.flatnonzero(answered)
        if len(ans):
            r, cc = rows[ans], cl[ans]
            at = r * (self.n_clusters + 1) + cc  # flat (row, cluster) index
            counts = self.counts.ravel()
            old = counts.take(at)
            if self._places:  # counts were zeroed on reset
                first = old == 0
            else:
                first = table[ans, 2 + t_n] > 0  # the cluster's first candidate in the episode
                old[first] = 0
            self._stats_items[at[first]] = self._zero_stats  # one scatter of 40-byte items
            new = old + 1  # <= N: no wrap in the small dtype
            counts[at] = new
            count[ans] = new
            self._count_new_answers(r, cc, c.take(ans), min(int(c.max()) + 1, FUSION_SLOTS))
            if self.observe:  # a sum only the observation reads
                self.clogc_sum[r] += self.clogc[new] - self.clogc[old]
            at_ints = self._answered_at[:, None] + r
            counters = ints.take(at_ints)
            _, _, top_count, _, top, second = counters  # rows of ``counters``, read before they are rewritten
            # The top answer and the runner-up's count, updated as Evidence.add_candidate does.
            new_top = top < 0
            same = cc == top
            flip = ~new_top & ~same & ((new > top_count) | ((new == top_count) & (cc < top)))
            moved = new_top | flip  # the new answer's cluster is the top now
            counters[5] = np.where(flip, top_count, np.where(~new_top & ~same & (new > second), new, second))
            counters[2] = np.where(moved | same, new, top_count)
            counters[4] = np.where(moved, cc, top)
            counters[0] += first  # n_distinct
            counters[1] += flip
            counters[3] += 1  # n_answered
            ints[at_ints] = counters
            moved = np.flatnonzero(moved)
            self._top_items[r.take(moved)] = self._stats_items.take(at.take(moved))
        self.count_t.ravel()[slot] = count

    def _count_new_answers(self, rows: np.ndarray, clusters: np.ndarray, revealed: np.ndarray, k: int) -> None:
        """Every revealed slot of ``rows`` in the cluster of the answer just revealed (``clusters``) counts it;
        ``revealed``: each row's slots revealed before it; ``k``: the first slots, updated as whole rows.

        Stale unrevealed slots may count it too: the first k slots as whole rows (``_added`` is -2 outside the
        answering rows, never a cluster id), the later revealed ones of the rows that have them through flat
        indices. Slots at or past a row's n are unrevealed (their count is rewritten when revealed).
        """
        added = self._added
        added[rows] = clusters
        count_k = self.count_t[:k]
        np.add(count_k, self.cluster_t[:k] == added, out=count_k)
        added[rows] = -2
        deep = np.flatnonzero(revealed > k)
        if len(deep):
            m = revealed.take(deep) - k
            at_deep, _, _ = slot_spans(rows.take(deep), k, m, self.num_envs)
            at_deep = at_deep[self.cluster_t.ravel().take(at_deep) == np.repeat(clusters.take(deep), m)]
            count_t = self.count_t.ravel()
            count_t[at_deep] = count_t.take(at_deep) + 1

    def _verify(self, rows: np.ndarray, a: np.ndarray, cost_at: np.ndarray) -> None:
        """VERIFY for ``rows``, each at its own tier (Evidence.add_score on the highest-R eligible candidate)."""
        t_n = self.n_tiers
        b = self.num_envs
        t = self.layout.verifier_of(a)  # works on arrays too
        # VERIFY targets the highest R before this step's evidence (R of the state the last step left); unrevealed
        # slots have R = -inf and a revealed eligible one exists (pending > 0). All slot-major [N, len(rows)].
        at_open = rows * t_n + t  # columns of ``open_t``
        c = np.empty(len(rows), dtype=np.int64)
        rank_t = self._current_rank()  # the rows that verify have not changed in this step
        for part, k in self._slot_groups(rows):
            c[part] = batch_verify_target(self.open_t[:k].take(at_open[part], axis=1),
                                          rank_t[:k].take(rows[part], axis=1))
        flat = self._pool_flat(rows, c) * t_n + t
        s = self.score_flat.take(flat)
        cost_at[rows] = self._ver_cost_row0 + flat  # the verification cost's row of ``cost_rows``
        self.open_t.ravel()[c * (t_n * b) + at_open] = False
        at_tier = t * b + rows
        self._verified_n.ravel()[at_tier] += 1  # n_verified[t, rows] and pending[t, rows] (flat [T, B])
        self._pending.ravel()[at_tier] -= 1
        usable = ~np.isnan(s)
        ru, cu, su, tu = rows[usable], c[usable], s[usable], t[usable]
        w = self.weights[tu + 1]
        slot = cu * b + ru
        self.fnum_t.ravel()[slot] += w * su
        self.fden_t.ravel()[slot] += w
        cheap, strong = self.features.cheap, self.features.strong
        v3 = tu == strong
        r3 = ru[v3]
        self.best_v3[r3] = np.maximum(self.best_v3.take(r3), su[v3])
        cl = self.cluster_t.ravel().take(slot).astype(np.int64)  # >= 0: only answered ones are eligible
        at = ru * (self.n_clusters + 1) + cl  # flat (row, cluster) index of ``top_stats`` as [B * (C + 1), 5]
        stats = self.top_stats.ravel()
        k = tu == cheap  # the cheap judge: sum, count, max
        s1, a1 = su[k], at[k] * 5
        stats[a1] += s1
        stats[a1 + 1] += 1
        stats[a1 + 2] = np.maximum(stats.take(a1 + 2), s1)
        k = tu == strong  # the strong verifier: sum, count
        a3 = at[k] * 5
        stats[a3 + 3] += su[k]
        stats[a3 + 4] += 1
        on_top = np.flatnonzero(cl == self.top.take(ru))
        self._top_items[ru.take(on_top)] = self._stats_items.take(at.take(on_top))
        if self._places:
            self._verify_generators(ru, cu, su, tu)

    # -- the item grouping's per-generator evidence (Evidence.add_generator_candidate / add_generator_score) ------
    def _place(self, rows: np.ndarray, actions: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat pool index, ``sample_int`` row) of the chosen generator's next candidate, revealed into ``slots``
        of ``rows``: records it in ``slot_candidate`` and counts it for its generator (block patched)."""
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
        spend = self.gen_spend.ravel()
        new_spend = spend.take(at_gen) + self._sample_cost.take(flat)
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

    def _verify_generators(self, rows: np.ndarray, slots: np.ndarray, scores: np.ndarray, tiers: np.ndarray) -> None:
        """Count the usable ``scores`` of the verified ``slots`` of ``rows`` for their generators (block patched)."""
        g = self._slot_generator(slots * self.num_envs + rows)
        at = rows * self._score_sum.shape[1] + g * self.n_tiers + tiers  # (row, g, tier) in the row-major [B, G * T]
        sums, counts = self._score_sum.ravel(), self._score_count.ravel()
        new_sums, new_counts = sums.take(at) + scores, counts.take(at) + 1
        sums[at], counts[at] = new_sums, new_counts
        batch_patch_block_after_verify(self.generator_block, self, rows, g, tiers, new_sums, new_counts)
