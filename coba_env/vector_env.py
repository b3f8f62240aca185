"""CoBaVectorEnv: many episodes of the same pool stepped at once with numpy.

It runs the same state machine as ``CoBaEnv`` with the same incremental arithmetic (running sums added
in the same order, the same lookup tables), so for the same actions it returns the same observations,
masks, rewards and selections as the one-episode env, bit for bit. Terminated sub-envs reset in the
same step (SB3's convention): ``infos["final_observation"]`` and the final fields hold the finished
episode's values.
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
        self._cursor = 0
        self._perm: np.ndarray | None = None
        self._alloc()

    # -- state ---------------------------------------------------------------------------------------
    def _alloc(self) -> None:
        b, n, t, c = self.num_envs, self.pool.n_candidates, self.n_tiers, self.n_clusters
        self.ep = np.zeros(b, dtype=np.int64)
        self.n = np.zeros(b, dtype=np.int64)
        self.counts = np.zeros((b, c), dtype=np.int64)
        self.n_answered = np.zeros(b, dtype=np.int64)
        self.top = np.full(b, -1, dtype=np.int64)
        self.n_distinct = np.zeros(b, dtype=np.int64)
        self.clogc_sum = np.zeros(b)
        self.flips = np.zeros(b, dtype=np.int64)
        self.verified = np.zeros((b, n, t), dtype=bool)
        self.scores = np.full((b, n, t), np.nan)
        self.n_verified = np.zeros((b, t), dtype=np.int64)
        self.tier_sum = np.zeros((b, t, c))
        self.tier_cnt = np.zeros((b, t, c), dtype=np.int64)
        self.tier_max = np.zeros((b, t, c))
        self.best_v3 = np.zeros(b)
        self.len_sum = np.zeros(b)
        self.cap_count = np.zeros(b, dtype=np.int64)
        self.cost = np.zeros((b, 4))
        self.steps = np.zeros(b, dtype=np.int64)
        self.lams = np.full(b, self.lam)
        self.fnum = np.zeros((b, n))
        self.fden = np.zeros((b, n))
        self.pending = np.zeros((b, t), dtype=np.int64)
        self.rows = np.arange(b)
        self.slots = np.arange(n)
        self.cl = np.full((b, n), -1, dtype=np.int64)  # the current episodes' cluster ids
        self.safe_cl = np.zeros((b, n), dtype=np.int64)  # the same with -1 replaced by 0, for gathers

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
        cl = self.pool.cluster[episodes]
        self.cl[rows] = cl
        self.safe_cl[rows] = np.where(cl >= 0, cl, 0)
        for name in ("n", "n_answered", "n_distinct", "flips", "cap_count", "steps"):
            getattr(self, name)[rows] = 0
        self.top[rows] = -1
        for name in ("counts", "clogc_sum", "n_verified", "tier_sum", "tier_cnt", "tier_max", "best_v3",
                     "len_sum", "cost", "fnum", "pending", "verified"):
            getattr(self, name)[rows] = 0
        self.scores[rows] = np.nan
        self.fden[rows] = self.weights[0]
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
        self._mask = self._masks()
        return self._observations(), {"action_mask": self._mask.copy(), "episode": self.ep.copy()}

    # -- evidence arithmetic (mirrors coba_env.evidence.Evidence) ------------------------------------
    def _fusion(self) -> np.ndarray:
        """R for every candidate slot [B, N]; -1 where the candidate has no answer; -inf where unrevealed."""
        counts = self.counts[self.rows[:, None], self.safe_cl]
        n_rev = np.maximum(self.n, 1)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (self.weights[0] * counts / n_rev + self.fnum) / self.fden
        if self.weights[0] <= 0:
            r[self.fden <= 0] = 0.0
        r[self.cl < 0] = -1.0
        r[self.slots[None, :] >= self.n[:, None]] = -np.inf
        return r

    def _masks(self) -> np.ndarray:
        b, t = self.num_envs, self.n_tiers
        m = np.zeros((b, t + 2), dtype=np.int8)
        m[:, 0] = self.n < self.n_max
        m[:, 1:t + 1] = self.tier_on[None, :] & (self.pending > 0)
        m[:, t + 1] = (self.n > 0) | ~m[:, :t + 1].any(axis=1)
        spent = self.cost[:, self.cost_k] >= self.max_cost
        if spent.any():
            m[spent] = 0
            m[spent, t + 1] = 1
        return m

    def _observations(self, fusion: np.ndarray | None = None) -> np.ndarray:
        rows = self.rows
        n = self.n.astype(np.float64)
        top = self.top
        has_top = top >= 0
        safe_top = np.where(has_top, top, 0)
        nz = n > 0
        n_safe = np.where(nz, n, 1.0)
        top_count = self.counts[rows, safe_top].astype(np.float64)
        share = np.where(nz & has_top, top_count / n_safe, 0.0)
        others = self.counts.copy()
        others[rows, safe_top] = 0
        second = others.max(axis=1)
        gap = np.where(nz & has_top, (top_count - np.where(has_top, second, 0)) / n_safe, 0.0)
        no_answer = np.where(nz, (n - self.n_answered) / n_safe, 0.0)
        vf = np.where(nz[:, None], self.n_verified / n_safe[:, None], 0.0)
        mean_len = np.where(nz, self.len_sum / n_safe / self.max_output_tokens, 0.0)
        cap = np.where(nz, self.cap_count / n_safe, 0.0)
        na = self.n_answered
        na_safe = np.where(na > 1, na, 1)
        entropy = np.where((na > 1) & (self.n_max > 1),
                           (self.logs[na] - self.clogc_sum / na_safe) / self.logs[self.n_max], 0.0)
        cnt1 = self.tier_cnt[rows, 0, safe_top]
        ok1 = has_top & (cnt1 > 0)
        v1_mean = np.where(ok1, self.tier_sum[rows, 0, safe_top] / np.where(ok1, cnt1, 1), 0.0)
        v1_max = np.where(ok1, self.tier_max[rows, 0, safe_top], 0.0)
        cnt3 = self.tier_cnt[rows, 2, safe_top]
        ok3 = has_top & (cnt3 > 0)
        v3_mean = np.where(ok3, self.tier_sum[rows, 2, safe_top] / np.where(ok3, cnt3, 1), 0.0)
        r = self._fusion() if fusion is None else fusion
        best_r = np.where(self.cl >= 0, r, -2.0).max(axis=1)
        top_r = np.where(self.n_answered > 0, best_r, 0.0)
        obs = np.stack([
            n / self.n_max, share, self.n_distinct / self.n_max, entropy, gap, no_answer, v1_mean, v1_max,
            ok1.astype(np.float64), self.best_v3, v3_mean, vf[:, 0], vf[:, 1], vf[:, 2],
            self.cost[:, self.cost_k] / self.budget, mean_len, cap, self.flips / self.n_max,
            self.steps / self.max_steps, self.lams, top_r,
        ], axis=1)
        assert obs.shape[1] == N_FEATURES
        return obs.astype(np.float32)

    def _select(self, rows: np.ndarray, fusion: np.ndarray) -> np.ndarray:
        """The STOP selection for ``rows`` under the env's rule (mirrors selection.select_candidate)."""
        rule = self.selection
        n_cand = self.pool.n_candidates
        cl = self.cl[rows]
        revealed = np.arange(n_cand)[None, :] < self.n[rows, None]
        answered = revealed & (cl >= 0)
        none = ~answered.any(axis=1)
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
            s = self.scores[rows, :, t]
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
        rows_all = np.arange(b)
        if a.shape != (b,):
            raise ValueError(f"expected {b} actions, got shape {a.shape}")
        bad = (a < 0) | (a >= self._mask.shape[1])
        if not bad.any():
            bad = self._mask[rows_all, a] == 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"sub-env {i}: action {int(a[i])} is not allowed now (mask {self._mask[i].tolist()})")
        p = self.pool
        t_n = self.n_tiers
        reward = np.zeros(b)
        self.steps += 1
        step_cost = np.zeros((b, 4))

        rows = np.flatnonzero(a == 0)
        if len(rows):
            e, c = self.ep[rows], self.n[rows]
            step_cost[rows] = p.gen_cost[e, c]
            cl = p.cluster[e, c].astype(np.int64)
            self.n[rows] += 1
            self.len_sum[rows] += p.output_tokens[e, c]
            self.cap_count[rows] += p.cap_hit[e, c]
            self.pending[rows] += p.has_score[e, c] & (p.cluster[e, c] >= 0)[:, None]
            ans = cl >= 0
            r, cc = rows[ans], cl[ans]
            if len(r):
                old = self.counts[r, cc]
                self.n_distinct[r] += old == 0
                self.counts[r, cc] = old + 1
                self.clogc_sum[r] += self.clogc[old + 1] - self.clogc[old]
                self.n_answered[r] += 1
                top = self.top[r]
                top_count = self.counts[r, np.where(top >= 0, top, 0)]
                new_top = top < 0
                flip = (~new_top) & (cc != top) & ((old + 1 > top_count) | ((old + 1 == top_count) & (cc < top)))
                self.flips[r] += flip
                self.top[r] = np.where(new_top | flip, cc, top)

        verifying = (a >= 1) & (a <= t_n)
        pre_fusion = self._fusion() if verifying.any() else None
        for t in range(t_n):
            rows = np.flatnonzero(a == t + 1)
            if not len(rows):
                continue
            e = self.ep[rows]
            r_all = pre_fusion[rows]
            eligible = p.has_score[e, :, t] & ~self.verified[rows, :, t] & (self.cl[rows] >= 0)
            c = np.argmax(np.where(eligible, r_all, -np.inf), axis=1)
            s = p.score[e, c, t]
            step_cost[rows] = p.ver_cost[e, c, t]
            self.verified[rows, c, t] = True
            self.scores[rows, c, t] = s
            self.n_verified[rows, t] += 1
            self.pending[rows, t] -= 1
            usable = ~np.isnan(s)
            w = self.weights[t + 1]
            ru, cu, su = rows[usable], c[usable], s[usable]
            self.fnum[ru, cu] += w * su
            self.fden[ru, cu] += w
            if t == 2:
                self.best_v3[ru] = np.maximum(self.best_v3[ru], su)
            cl = p.cluster[self.ep[ru], cu].astype(np.int64)
            ok = cl >= 0
            ru, cl, su = ru[ok], cl[ok], su[ok]
            self.tier_sum[ru, t, cl] += su
            self.tier_cnt[ru, t, cl] += 1
            self.tier_max[ru, t, cl] = np.maximum(self.tier_max[ru, t, cl], su)

        moved = a != t_n + 1
        self.cost[moved] += step_cost[moved]
        reward[moved] = -self.lams[moved] * step_cost[moved, self.cost_k] / self.budget

        stop_rows = np.flatnonzero(~moved)
        infos: dict[str, Any] = {}
        terminated = ~moved
        post_fusion = self._fusion()
        obs = self._observations(post_fusion)
        if len(stop_rows):
            sel = self._select(stop_rows, post_fusion)
            correct = (sel >= 0) & p.labels.correct[self.ep[stop_rows], np.maximum(sel, 0)]
            reward[stop_rows] += correct
            final_obs = obs[stop_rows]
            full_final = np.zeros((b, N_FEATURES), dtype=np.float32)
            full_final[stop_rows] = final_obs
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
