"""CoBaVectorEnv: many episodes of the same pool stepped at once with numpy.

It runs the same state machine as ``CoBaEnv`` with the same incremental arithmetic (running sums added
in the same order, the same lookup tables), so for the same actions it returns the same observations,
masks, rewards and selections as the one-episode env, bit for bit. Terminated sub-envs reset in the
same step (SB3's convention): ``infos["final_observation"]`` and the final fields hold the finished
episode's values.

Speed: one ``step`` is a fixed number of numpy calls whatever ``num_envs`` is. It keeps the top answer and
runner-up counts incrementally (as ``Evidence`` does), computes the fusion rank R of every slot once per
step into a reused array (VERIFY targets read the previous step's, which is still current for them),
handles all VERIFY tiers in one pass, gathers with flat ``take`` indices, and keeps only the per-cluster
score statistics that the observation reads. Resetting the finished rows is a handful of row writes: the
integer counters and the float sums are one row-major block each (the named arrays are column views); the
answer counts and per-cluster statistics are zeroed lazily, when a cluster first appears in an episode (a
per-candidate table of the pool says which candidate that is); slots whose R is fixed (-2 without an answer,
-inf unrevealed) are encoded in the fusion terms (fnum, fden, and a constant -2 share column) instead of a mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from coba_env.env import CoBaEnv
from coba_env.evidence import FEATURE_NAMES, N_FEATURES
from coba_env.selection import _TIER_INDEX


class CoBaVectorEnv(VectorEnv):
    """``num_envs`` replay episodes stepped together; takes the same keyword arguments as ``CoBaEnv``."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, pool: Any = None, **env_kwargs: Any) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        # The single env validates the arguments and resolves defaults (budget, tiers, selection).
        self.single = CoBaEnv(pool, **env_kwargs)
        s = self.single
        p = s.pool
        self.num_envs = num_envs
        self.pool = p
        self.single_observation_space = s.observation_space
        self.single_action_space = s.action_space
        self.observation_space = spaces.Box(
            low=np.repeat(s.observation_space.low[None], num_envs, 0),
            high=np.repeat(s.observation_space.high[None], num_envs, 0), dtype=np.float32)
        self.action_space = spaces.MultiDiscrete(np.full(num_envs, s.action_space.n))
        self.n_max, self.n_tiers, self.max_steps = s.n_max, s.n_tiers, s.max_steps
        self.budget, self.max_cost, self.cost_k = s.budget, s.max_cost, s._cost_k
        self.order, self.lam, self.lambda_range = s.order, s.lam, s.lambda_range
        self.weights = np.array(s._weights)
        self.selection = s.selection
        self.tier_on = np.array(s._tier_on)
        self.clogc = np.array(s._clogc)
        self.logs = np.array(s._logs)
        self.n_clusters = int(max(p.cluster.max() + 1, 1))
        self.max_output_tokens = p.max_output_tokens
        self.lambda_index = FEATURE_NAMES.index("lambda")
        answered = p.cluster >= 0
        c = self.n_clusters
        # Column of each candidate's share in ``share`` [B, C + 1]; the last column (always -2) is "no answer".
        self.share_column = np.where(answered, p.cluster, c).astype(np.int64)
        # Whether a candidate is the first of its answer cluster in its episode: counts and statistics of a
        # cluster are zeroed when it first appears instead of on every reset.
        first = np.zeros(p.cluster.shape, dtype=bool)
        for e, row in enumerate(p.cluster):
            _, at = np.unique(row, return_index=True)
            first[e, at] = True
        first &= answered
        # fnum of a fresh episode [E, N] (fden is 1): fnum = -inf makes an unrevealed candidate's R -inf; a
        # candidate without an answer reads -2 from the last share column ((-2 + 0) / 1).
        self.fresh_fnum = np.where(answered, -np.inf, 0.0)
        #: has_score of candidates with an answer, [T, E, N] (contiguous candidate rows for the VERIFY gathers).
        self.has_score_tiers = np.ascontiguousarray((p.has_score & answered[:, :, None]).transpose(2, 0, 1))
        # Flat per-(episode, candidate) tables for the SAMPLE gathers: float (gen_cost[4], output_tokens) and
        # int (cluster, cap_hit, has_score with an answer [T], first of its cluster); and per-(episode,
        # candidate, tier) for VERIFY.
        n_cand = p.n_candidates
        self.sample_float = np.concatenate([p.gen_cost, p.output_tokens[:, :, None]], axis=2).reshape(-1, 5)
        self.sample_int = np.concatenate([p.cluster[:, :, None], p.cap_hit[:, :, None],
                                          p.has_score & answered[:, :, None], first[:, :, None]],
                                         axis=2).astype(np.int64)
        self.sample_int = self.sample_int.reshape(-1, self.sample_int.shape[2])
        self.cluster_flat = p.cluster.astype(np.int64).ravel()
        self.score_flat = p.score.ravel()
        self.ver_cost_flat = p.ver_cost.reshape(-1, p.ver_cost.shape[-1])
        self.n_cand = n_cand
        self._cursor = 0
        self._perm: np.ndarray | None = None
        self._alloc()

    # -- state ---------------------------------------------------------------------------------------
    def _alloc(self) -> None:
        b, n, t, c = self.num_envs, self.pool.n_candidates, self.n_tiers, self.n_clusters
        self.ep = np.zeros(b, dtype=np.int64)
        # Integer counters, one row per sub-env; the named arrays are column views (reset = one row write).
        # The order makes the observation's divisions a few block operations (see ``_observations``).
        int_names = ("n", "n_distinct", "flips", "steps", "top_count", "cap_count")
        k = len(int_names)
        self._ints = np.zeros((b, k + 2 * t + 3), dtype=np.int64)
        for i, name in enumerate(int_names):
            setattr(self, name, self._ints[:, i])
        self.n_verified = self._ints[:, k:k + t]
        self.pending = self._ints[:, k + t:k + 2 * t]
        # top: -1 before any answer; second: the largest count among the other answers
        self.n_answered, self.top, self.second = (self._ints[:, k + 2 * t + i] for i in range(3))
        self._column = {name: i for i, name in enumerate(
            (*int_names, "n_verified", *["_"] * (t - 1), "pending", *["_"] * (t - 1), "n_answered", "top", "second"))}
        self._ints_fresh = np.zeros(self._ints.shape[1], dtype=np.int64)
        self._ints_fresh[k + 2 * t + 1] = -1
        names = list(FEATURE_NAMES)
        self._counter_features = [names.index(f) for f in (
            "revealed_frac", "distinct_answers_frac", "answer_flips", "step_frac")]
        self._counter_scale = np.array([self.n_max, self.n_max, self.n_max, self.max_steps], dtype=np.float64)
        self._share_features = [names.index(f) for f in (
            "top_answer_share", "cap_hit_share", "v1_verified_frac", "v2_verified_frac", "v3_verified_frac")]
        # Float sums and statistics, one row per sub-env (fresh = all zeros): clogc_sum, best_v3, len_sum and,
        # per answer cluster, the usable-score statistics the observation reads (Evidence.tier_stats keeps all tiers): V1 sum,
        # count, max and V3 sum, count, adjacent so that the gathers hit one cache line.
        self._floats = np.zeros((b, 3))
        self.clogc_sum, self.best_v3, self.len_sum = self._floats[:, 0], self._floats[:, 1], self._floats[:, 2]
        # Zeroed when the cluster first appears in an episode (SAMPLE); cluster C stays 0 (read without a top).
        self.top_stats = np.zeros((b, c + 1, 5))
        self.cost = np.zeros((b, 4))  # contiguous: added to and copied whole every step
        # Answers per cluster (whole numbers, float64 for the fusion arithmetic); contiguous: _fusion reads it all.
        # Zeroed when the cluster first appears (older values of unrevealed clusters only meet fnum = -inf).
        self.counts = np.zeros((b, c + 1))
        # Fusion terms per candidate slot (see ``_fusion``); separate contiguous arrays: _fusion reads them whole.
        self.fnum = np.zeros((b, n))
        self.fden = np.ones((b, n))
        self.verified = np.zeros((t, b, n), dtype=bool)  # tier-major: verified[t][rows] is a contiguous gather
        self.lams = np.full(b, self.lam)
        self.rows = np.arange(b)
        # Flat index into ``share`` of each candidate's cluster share (row * (C + 1) + column).
        self.count_index = np.zeros((b, n), dtype=np.int64)
        # R of every candidate slot after the last step (see ``_fusion``): VERIFY targets are chosen on it.
        self.rank = np.full((b, n), -np.inf)
        # wf * count / n per sub-env and cluster [B, C], then one constant -2 read by candidates without an answer.
        self.share = np.full((b, c + 1), -2.0)

    def _next_episodes(self, k: int) -> np.ndarray:
        n = self.pool.n_episodes
        if self.order == "random":
            return self.np_random.integers(n, size=k)
        if self.order == "sequential":
            out = (self._cursor + np.arange(k)) % n
            self._cursor += k
            return out
        out = np.empty(k, dtype=np.int64)
        for i in range(k):
            if self.order == "shuffle":
                if self._perm is None or self._cursor >= n:
                    self._perm = self.np_random.permutation(n)
                    self._cursor = 0
                out[i] = self._perm[self._cursor]
            else:
                out[i] = self._cursor % n
            self._cursor += 1
        return out

    def _reset_rows(self, rows: np.ndarray, episodes: np.ndarray) -> None:
        self.ep[rows] = episodes
        self._ints[rows] = self._ints_fresh
        self._floats[rows] = 0.0
        self.cost[rows] = 0.0
        self.fnum[rows] = self.fresh_fnum[episodes]
        self.fden[rows] = 1.0
        self.count_index[rows] = self.share_column[episodes] + (rows * (self.n_clusters + 1))[:, None]
        self.verified[:, rows] = False
        # self.rank[rows] is stale until the next step's _fusion; a fresh row cannot VERIFY before then.
        if self.lambda_range is not None:
            self.lams[rows] = self.np_random.uniform(*self.lambda_range, size=len(rows))
        else:
            self.lams[rows] = self.lam

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; ``options["episodes"]`` (length num_envs) picks the episodes."""
        super().reset(seed=seed)
        if seed is not None:
            self._cursor, self._perm = 0, None
        rows = np.arange(self.num_envs)
        options = options or {}
        episodes = np.asarray(options["episodes"], dtype=np.int64) if "episodes" in options \
            else self._next_episodes(self.num_envs)
        self._reset_rows(rows, episodes)
        if "lams" in options:
            self.lams[:] = options["lams"]
        self._fusion()
        self._mask = self._masks()
        return self._observations(), {"action_mask": self._mask.copy(), "episode": self.ep.copy()}

    @property
    def scores(self) -> np.ndarray:
        """Revealed scores [B, N, T]: NaN where not verified (or verified without a usable score)."""
        return np.where(self.verified.transpose(1, 2, 0), self.pool.score[self.ep], np.nan)

    # -- evidence arithmetic (mirrors coba_env.evidence.Evidence) ------------------------------------
    def _fusion(self) -> np.ndarray:
        """Update and return ``self.rank``: R for every candidate slot [B, N]; -2 where the candidate has no answer; else -inf where unrevealed.

        (``Evidence.rank`` uses -1 for no answer; -2 here makes the row max the observation's top R exactly
        as before. VERIFY and STOP only read the R of revealed candidates with an answer.) A slot without an
        answer reads the constant -2 column of ``share`` with fnum 0 and fden 1; an unrevealed one has fnum -inf
        and fden 1; SAMPLE sets a revealed one's terms to 0 and wf, as ``Evidence.add_candidate`` does.
        """
        # wf * count / n per answer cluster, then per candidate (the same float operations as Evidence.fusion).
        share, r = self.share, self.rank  # written in place: nothing else holds these arrays
        np.multiply(self.weights[0], self.counts, out=share)
        share /= np.maximum(self.n, 1).astype(np.float64)[:, None]
        share[:, -1] = -2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            share.ravel().take(self.count_index, out=r)
            r += self.fnum
            r /= self.fden
        if self.weights[0] <= 0:
            r[self.fden <= 0] = 0.0
        return r

    def _masks(self) -> np.ndarray:
        t = self.n_tiers
        m = np.empty((self.num_envs, t + 2), dtype=np.int8)
        can_sample = self.n < self.n_max
        m[:, 0] = can_sample
        anything = can_sample.copy()
        for k in range(t):  # column by column: ``pending`` is a strided view
            if self.tier_on[k]:
                verify = self.pending[:, k] > 0
                m[:, 1 + k] = verify
                anything |= verify
            else:
                m[:, 1 + k] = 0
        m[:, t + 1] = (self.n > 0) | ~anything
        spent = self.cost[:, self.cost_k] >= self.max_cost
        if spent.any():
            m[spent] = 0
            m[spent, t + 1] = 1
        return m

    def _observations(self) -> np.ndarray:
        """Observations [B, N_FEATURES] of the current state (``self.rank`` must be current).

        Before the first candidate every count and sum is 0, and without an answer the top-cluster counts and
        statistics are 0, so dividing by max(n, 1) (or max(count, 1)) gives the single env's 0 features.
        """
        o = np.empty((self.num_envs, N_FEATURES), dtype=np.float32)  # column writes cast float64 -> float32
        n = self.n
        n_safe = np.maximum(n, 1).astype(np.float64)
        # Column by column: the counters are strided views, on which 2-D operations are slow.
        for k, column in enumerate(self._counter_features):  # n, n_distinct, flips, steps
            o[:, column] = self._ints[:, k] / self._counter_scale[k]
        for k, column in enumerate(self._share_features):  # top_count, cap_count, n_verified[T]
            o[:, column] = self._ints[:, 4 + k] / n_safe
        na = self.n_answered
        if self.n_max > 1:
            o[:, 3] = (self.logs[na] - self.clogc_sum / np.maximum(na, 1)) / self.logs[self.n_max]
        else:
            o[:, 3] = 0.0
        o[:, 4] = (self.top_count - self.second) / n_safe
        o[:, 5] = (n - na) / n_safe
        # The top cluster's V1 sum, count, max and V3 sum, count (all 0 without a top answer).
        at = self.rows * (self.n_clusters + 1) + np.where(self.top >= 0, self.top, self.n_clusters)
        stats = self.top_stats.reshape(-1, 5).take(at, axis=0)
        o[:, 6] = stats[:, 0] / np.maximum(stats[:, 1], 1.0)
        o[:, 7] = stats[:, 2]
        o[:, 8] = stats[:, 1] > 0
        o[:, 9] = self.best_v3
        o[:, 10] = stats[:, 3] / np.maximum(stats[:, 4], 1.0)
        o[:, 14] = self.cost[:, self.cost_k] / self.budget
        o[:, 15] = self.len_sum / n_safe / self.max_output_tokens
        o[:, 19] = self.lams
        # The row max of R: over the transposed copy, a reduction across contiguous rows, is far faster.
        o[:, 20] = np.where(na > 0, np.ascontiguousarray(self.rank.T).max(axis=0), 0.0)
        return o

    def _select(self, rows: np.ndarray, fusion: np.ndarray) -> np.ndarray:
        """The STOP selection for ``rows`` under the env's rule (mirrors selection.select_candidate)."""
        rule = self.selection
        n_cand = self.pool.n_candidates
        cl = self.pool.cluster[self.ep[rows]]
        revealed = np.arange(n_cand)[None, :] < self.n[rows, None]
        answered = revealed & (cl >= 0)
        none = self.n_answered[rows] == 0  # no revealed candidate has an answer
        if rule.rule in ("majority", "max_score"):
            first_of_top = np.argmax(answered & (cl == self.top[rows, None]), axis=1)
        if rule.rule == "fusion":
            r = np.where(answered, fusion[rows], -2.0)
            sel = np.argmax(r, axis=1)
        elif rule.rule == "majority":
            sel = first_of_top
        elif rule.rule == "last":
            sel = n_cand - 1 - np.argmax(answered[:, ::-1], axis=1)
        else:
            t = _TIER_INDEX[rule.tier]
            s = np.where(self.verified[t][rows], self.pool.score[self.ep[rows], :, t], np.nan)
            usable = answered & ~np.isnan(s)
            if rule.rule == "weighted_vote":
                vals = np.where(usable, s, rule.missing)
                sel = np.empty(len(rows), dtype=np.int64)
                for i in range(len(rows)):
                    totals: dict[int, float] = {}
                    for c in np.flatnonzero(answered[i]):
                        totals[int(cl[i, c])] = totals.get(int(cl[i, c]), 0.0) + float(vals[i, c])
                    if totals:
                        best = max(totals, key=lambda k, tt=totals: (tt[k], -k))
                        sel[i] = int(np.argmax(cl[i] == best))
                    else:
                        sel[i] = 0
            else:  # max_score
                masked = np.where(usable, s, -1.0)
                sel = np.where(usable.any(axis=1), np.argmax(masked, axis=1), first_of_top)
        return np.where(none, -1, sel)

    # -- stepping ------------------------------------------------------------------------------------
    def step(self, actions: Sequence[int] | np.ndarray):
        """Step every sub-env with its action; terminated ones reset in the same step."""
        a = np.asarray(actions, dtype=np.int64)
        b = self.num_envs
        if a.shape != (b,):
            raise ValueError(f"expected {b} actions, got shape {a.shape}")
        n_actions = self._mask.shape[1]
        bad = (a < 0) | (a >= n_actions)
        if not bad.any():
            bad = self._mask.ravel().take(self.rows * n_actions + a) == 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"sub-env {i}: action {int(a[i])} is not allowed now (mask {self._mask[i].tolist()})")
        p = self.pool
        t_n = self.n_tiers
        self.steps += 1
        step_cost = np.zeros((b, 4))  # every cost measure (0 for STOP), added to ``cost`` in one pass
        k_cost = self.cost_k
        w_f = self.weights[0]

        rows = np.flatnonzero(a == 0)
        if len(rows):
            col = self._column
            state = self._ints[rows]  # the rows' counters, updated here and written back in one go
            c = state[:, col["n"]].copy()
            flat = self.ep[rows] * self.n_cand + c
            gathered = self.sample_float.take(flat, axis=0)  # gen_cost[4], output_tokens
            table = self.sample_int.take(flat, axis=0)  # cluster, cap_hit, has_score with an answer [T], first
            step_cost[rows] = gathered[:, :4]
            cl = table[:, 0]
            state[:, col["n"]] += 1
            state[:, col["cap_count"]] += table[:, 1]
            state[:, col["pending"]:col["pending"] + t_n] += table[:, 2:2 + t_n]
            self.len_sum[rows] += gathered[:, 4]
            ans = np.flatnonzero(cl >= 0)
            if len(ans):
                r, cc = rows[ans], cl[ans]
                revealed = c[ans]  # its R is computed from now on (Evidence.add_candidate: fnum 0, fden wf)
                self.fnum[r, revealed] = 0.0
                self.fden[r, revealed] = w_f
                first = table[ans, 2 + t_n] > 0  # the cluster's first candidate in the episode
                old_f = self.counts[r, cc]
                old_f[first] = 0.0
                self.top_stats[r[first], cc[first]] = 0.0
                self.counts[r, cc] = old_f + 1.0
                old = old_f.astype(np.int64)
                new = old + 1
                self.clogc_sum[r] += self.clogc[new] - self.clogc[old]
                sub = state[ans]
                sub[:, col["n_distinct"]] += first
                sub[:, col["n_answered"]] += 1
                # The top answer and the runner-up's count, updated as Evidence.add_candidate does.
                top, top_count, second = sub[:, col["top"]], sub[:, col["top_count"]], sub[:, col["second"]]
                new_top = top < 0
                same = cc == top
                flip = ~new_top & ~same & ((new > top_count) | ((new == top_count) & (cc < top)))
                updated = (np.where(flip, top_count, np.where(~new_top & ~same & (new > second), new, second)),
                           np.where(new_top | same | flip, new, top_count), np.where(new_top | flip, cc, top))
                sub[:, col["second"]], sub[:, col["top_count"]], sub[:, col["top"]] = updated
                sub[:, col["flips"]] += flip
                state[ans] = sub
            self._ints[rows] = state

        rows = np.flatnonzero((a >= 1) & (a <= t_n))  # every VERIFY at once, each row with its own tier
        if len(rows):
            t = a[rows] - 1
            e = self.ep[rows]
            # VERIFY targets the highest R before this step's evidence (self.rank, from the last step).
            eligible = self.has_score_tiers[t, e] & ~self.verified[t, rows]
            c = np.argmax(np.where(eligible, self.rank[rows], -np.inf), axis=1)
            flat = (e * self.n_cand + c) * t_n + t
            s = self.score_flat.take(flat)
            ver_cost = self.ver_cost_flat.take(flat, axis=0)
            step_cost[rows] = ver_cost
            self.verified[t, rows, c] = True
            at = rows * self._ints.shape[1] + self._column["n_verified"] + t
            self._ints.ravel()[at] += 1  # n_verified[rows, t]
            self._ints.ravel()[at + t_n] -= 1  # pending[rows, t]
            usable = ~np.isnan(s)
            ru, cu, su, tu = rows[usable], c[usable], s[usable], t[usable]
            w = self.weights[tu + 1]
            self.fnum[ru, cu] += w * su
            self.fden[ru, cu] += w
            v3 = tu == 2
            self.best_v3[ru[v3]] = np.maximum(self.best_v3[ru[v3]], su[v3])
            cl = self.cluster_flat.take(e[usable] * self.n_cand + cu)  # >= 0: only answered ones are eligible
            stats = self.top_stats
            k = tu == 0  # V1: sum, count, max
            r1, c1, s1 = ru[k], cl[k], su[k]
            stats[r1, c1, 0] += s1
            stats[r1, c1, 1] += 1
            stats[r1, c1, 2] = np.maximum(stats[r1, c1, 2], s1)
            k = tu == 2  # V3: sum, count
            r3, c3 = ru[k], cl[k]
            stats[r3, c3, 3] += su[k]
            stats[r3, c3, 4] += 1

        moved = a != t_n + 1
        self.cost += step_cost
        reward = -self.lams * step_cost[:, k_cost] / self.budget
        reward[~moved] = 0.0

        stop_rows = np.flatnonzero(~moved)
        infos: dict[str, Any] = {}
        terminated = ~moved
        self._fusion()
        obs = self._observations()
        if len(stop_rows):
            sel = self._select(stop_rows, self.rank)
            correct = (sel >= 0) & p.labels.correct[self.ep[stop_rows], np.maximum(sel, 0)]
            reward[stop_rows] += correct
            full_final = np.zeros((b, N_FEATURES), dtype=np.float32)
            full_final[stop_rows] = obs[stop_rows]
            sel_full = np.full(b, -1, dtype=np.int64)
            sel_full[stop_rows] = sel
            corr_full = np.zeros(b, dtype=bool)
            corr_full[stop_rows] = correct
            infos.update({
                "final_observation": full_final, "_final_observation": terminated.copy(),
                "selected_candidate": sel_full, "correct": corr_full, "final_episode": self.ep.copy(),
                "final_costs": self.cost.copy(), "final_steps": self.steps.copy(),
            })
            self._reset_rows(stop_rows, self._next_episodes(len(stop_rows)))
            # A fresh episode has revealed nothing: every feature is 0 but lambda.
            obs[stop_rows] = 0.0
            obs[stop_rows, self.lambda_index] = self.lams[stop_rows]
        self._mask = self._masks()
        infos["action_mask"] = self._mask.copy()
        infos["episode"] = self.ep.copy()
        return obs, reward, terminated, np.zeros(b, dtype=bool), infos

    def action_masks(self) -> np.ndarray:
        """Legal actions per sub-env, bool [num_envs, n_actions]."""
        return self._mask.astype(bool)

