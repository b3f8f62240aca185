"""CoBaVectorEnv: many episodes of the same pool stepped at once with numpy, either grouping.

It runs the same state machine as ``CoBaEnv`` with the same incremental arithmetic (running sums added
in the same order, the same lookup tables), so for the same actions it returns the same observations,
masks, rewards and selections as the one-episode env, bit for bit. Terminated sub-envs reset in the
same step (SB3's convention): ``infos["final_observation"]`` and the final fields hold the finished
episode's values.

With the item grouping (``grouping="item"``, ``coba/Route-v0``) a SAMPLE reveals the chosen generator's next
candidate into the next slot (``slot_candidate`` records which pool candidate each revealed slot holds, and
every gather of a slot's pool data goes through it), answer counts are zeroed on reset (candidates are not
revealed in pool order), and each generator's evidence is kept beside the pooled one, feature-major [G, B]:
``gen_revealed``, ``gen_cap``, ``gen_top_count``, ``gen_score_sum`` / ``gen_score_count`` [G, T, B] and
``gen_spend`` (cost model), with the observation's per-generator block ``generator_block`` [B, G * (4 + T)].

Speed: one ``step`` is a fixed number of numpy calls whatever ``num_envs`` (B) is, and nearly all of them run
over contiguous memory. It keeps the top answer and runner-up counts incrementally (as ``Evidence`` does),
computes the fusion rank R of every slot at most once per step (VERIFY targets read the previous step's, which is
still current for them; without observations only when VERIFY or the fusion selection reads it), handles all VERIFY tiers in one pass and gathers with flat ``take`` indices. The
observation is built feature by feature in a float32 [F, B] buffer (rows padded off a power-of-two stride) and
copied into its [B, F] result in one transposed pass. A step's costs are one gather from a table of every cost a step can add. Per-step figures:
docs/PERFORMANCE.md and scripts/profile_vector_env.py.

The state arrays, their layout and their per-row reset are ``coba_env.vector_state.VectorState``; the batched
SAMPLE/VERIFY updates, the fusion rank and the STOP selection over them ``coba_env.vector_evidence.VectorEvidence``
(mixins); the rules themselves live in coba_env/rules/ (batched forms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv
from coba_env.row_items import row_items
from coba_env.rules.config import EnvConfig, check_int, check_lam, check_options
from coba_env.rules.features import (
    batch_observe,
    clogc_table,
    log_table,
)
from coba_env.rules.masks import batch_masks
from coba_env.spaces import MaskedDiscrete
from coba_env.step_order import StepBeforeReset
from coba_env.vector_evidence import FEW_SLOTS, ITEM_FEW_SLOTS, VectorEvidence
from coba_env.vector_state import VectorState
from coba_env.vector_tables import VectorTables

__all__ = ["FEW_SLOTS", "VECTOR_RESET_OPTIONS", "CoBaVectorEnv"]

#: Keys ``CoBaVectorEnv.reset(options=...)`` accepts.
VECTOR_RESET_OPTIONS = ("episodes", "lams")


class CoBaVectorEnv(VectorState, VectorEvidence, VectorEnv):
    """``num_envs`` episodes stepped together, either grouping; takes the same keyword arguments as ``CoBaEnv``."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, pool: Any = None, *, config: EnvConfig | None = None,
                 render_mode: str | None = None, observe: bool = True, **env_kwargs: Any) -> None:
        num_envs = check_int("num_envs", num_envs, low=1, high=1 << 30)
        grouping = env_kwargs.pop("grouping", None)
        if config is None:
            config = EnvConfig.build(pool, grouping=grouping or "pair", **env_kwargs)
        elif pool is not None or env_kwargs:
            raise ValueError("pass either config= or the pool and env arguments, not both")
        config.check_grouping(grouping)
        self.config = config
        p = config.pool
        #: The verifier names (the pool's axis) and the feature table generated from them.
        self.tiers, self.features = p.tiers, config.features
        self.num_envs = num_envs
        self.pool = p
        self.render_mode = render_mode
        #: Whether ``reset`` and ``step`` build observations. False (the batched replay of a policy that reads none,
        #: ``agents.base.Policy.observes_in_batch``) returns [B, 0] arrays instead, so that a read fails loudly,
        #: and leaves the sums only observations read (``len_sum``, ``clogc_sum``) at 0; the rest of the state,
        #: the masks, rewards and infos are the same.
        self.observe = observe
        #: The item grouping's episodes (``coba_env.route_pool.RoutePool``) and N_max per generator; None with pairs.
        self.route, self.n_max_per_generator = config.route, config.n_max_per_generator
        #: Whether SAMPLE puts a chosen generator's candidate into the next slot (the item grouping), so slots are
        #: not in pool order: ``slot_candidate`` maps them, and a cluster's first candidate in the pool need not be
        #: its first revealed one (the lazy zeroing of its counts relies on that; such counts are zeroed on reset).
        self._places = config.route is not None
        #: The action ids and names (``coba_env.rules.actions.ActionLayout``), as the one-episode env's.
        self.layout = layout = config.layout
        self._n_gen, self._stop = layout.n_generators, layout.stop_action
        low, high = self.features.observation_bounds()
        self.n_obs = len(low)
        self.single_observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.single_action_space = MaskedDiscrete(layout.n_actions)
        self.observation_space = spaces.Box(low=np.repeat(low[None], num_envs, 0),
                                            high=np.repeat(high[None], num_envs, 0), dtype=np.float32)
        self.action_space = spaces.MultiDiscrete(np.full(num_envs, layout.n_actions))
        self.n_max, self.n_tiers, self.max_steps = config.n_max, len(config.tier_on), config.max_steps
        self.budget, self.max_cost, self.cost_k = config.budget, config.max_cost, config.cost_k
        self.order, self.lam, self.lambda_range = config.order, config.lam, config.lambda_range
        self.weights = np.array(config.weights)
        self.selection = config.selection
        self.tier_on = np.array(config.tier_on)
        self.clogc = np.array(clogc_table(p.n_candidates))
        self.logs = np.array(log_table(p.n_candidates))
        tables = p.vector_tables() if isinstance(p, CompiledPool) else VectorTables.build(p)  # built once per pool
        self.n_clusters = tables.n_clusters
        self.output_tokens, self.sample_int = tables.output_tokens, tables.sample_int
        self.has_t = tables.has_slots  # [N, T * E]: ``_verified`` gathers columns
        self._open_flags = tables.open_flags  # [E * N, T]: ``VectorState._alloc`` views its rows as items
        self.score_flat, self.cost_rows = tables.score_flat, tables.cost_rows
        self._ver_cost_row0, self._no_cost_row = p.n_episodes * p.n_candidates, len(self.cost_rows) - 1
        self.max_output_tokens = p.max_output_tokens
        self._correct_flat = p.labels.correct.ravel()  # [E * N]: the STOP reward (never reaches an observation)
        self.lambda_index = self.features.lambda_index
        self.n_cand = p.n_candidates
        # Cluster ids per slot, small so that the per-step comparison is cheap (-1: no answer, -2: no SAMPLE).
        self._cluster_dtype = np.int8 if self.n_clusters < 127 else np.int64
        # Stale per-slot fusion terms of unrevealed slots are harmless (fnum = -inf) unless a weight can make
        # a stale denominator <= 0; then fden is reset too.
        self._reset_fden = bool(np.min(self.weights) <= 0)
        self._cursor = 0
        self._perm: np.ndarray | None = None
        if self._places:
            self.n_generators = config.route.n_generators
            self._caps = config.sample_caps.astype(np.int64)  # [E, G], the rule the single env reads too
            self._few_slots = ITEM_FEW_SLOTS
        #: Pairs on a pool where some episode holds fewer than N_max candidates: each episode's cap [E]
        #: (``EnvConfig.sample_caps``); None when every episode allows N_max (the mask then compares with it).
        caps = config.sample_caps
        self._pair_caps = caps if not self._places and len(caps) and caps.min() < self.n_max else None
        #: Each episode's problem features (the env option ``problem_features``; width 0 when off).
        self._problem = None if config.problem is None else config.problem.values
        self._n_problem = 0 if self._problem is None else self._problem.shape[1]
        self._single: CoBaEnv | None = None
        self._mask: np.ndarray | None = None  # set by reset: a step before it is refused as the single env's is
        self._alloc()

    @property
    def single(self) -> CoBaEnv:
        """A one-episode ``CoBaEnv`` of the same configuration (for its action names and helpers; built on use)."""
        if self._single is None:
            self._single = CoBaEnv.from_config(self.config)
        return self._single

    def _next_episodes(self, k: int) -> np.ndarray:
        n = self.pool.n_episodes
        if self.order == "random":
            return self.np_random.integers(n, size=k)
        if self.order == "sequential":
            out = (self._cursor + np.arange(k)) % n
            self._cursor += k
            return out
        out = np.empty(k, dtype=np.int64)  # "shuffle": the single env's stream, one episode at a time
        for i in range(k):
            if self._perm is None or self._cursor >= n:
                self._perm = self.np_random.permutation(n)
                self._cursor = 0
            out[i] = self._perm[self._cursor]
            self._cursor += 1
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; ``options["episodes"]`` (length num_envs) picks the episodes."""
        super().reset(seed=seed)
        if seed is not None:
            self._cursor, self._perm = 0, None
        rows = np.arange(self.num_envs)
        options = check_options(options, VECTOR_RESET_OPTIONS)
        if "episodes" in options:
            episodes = np.array([check_int(f"options['episodes'][{i}]", e, low=0, high=self.pool.n_episodes - 1)
                                 for i, e in enumerate(self._per_env("episodes", options["episodes"]))],
                                dtype=np.int64)
        else:
            episodes = self._next_episodes(self.num_envs)
        lams = None
        if "lams" in options:
            lams = [check_lam(f"options['lams'][{i}]", x) for i, x in enumerate(self._per_env("lams", options["lams"]))]
        self._reset_rows(rows, episodes)
        if lams is not None:
            self.lams[:] = lams
        self._fusion()
        self._mask = self._masks()
        return self._observations(), {"action_mask": self._mask.copy(), "episode": self.ep.copy()}

    def _per_env(self, name: str, values: Any) -> list:
        """A reset option with one value per sub-env, as a list."""
        items = np.asarray(values, dtype=object).reshape(-1).tolist()
        if np.ndim(values) != 1 or len(items) != self.num_envs:
            raise ValueError(f"options[{name!r}] must hold one value per sub-env ({self.num_envs}), got {values!r}")
        return items

    def _masks(self) -> np.ndarray:
        can_sample = self.gen_revealed < self.gen_cap if self._places else None  # one SAMPLE per generator
        cap = self.n_max if self._pair_caps is None else self._pair_caps.take(self.ep)
        return batch_masks(self.n, cap, self._pending, self.tier_on, self._cost[self.cost_k] >= self.max_cost,
                           can_sample=can_sample)

    def _observations(self) -> np.ndarray:
        """Observations [B, F] of the current state (``self._fusion`` must be current)."""
        p = self._n_problem
        if not self.observe:
            return np.empty((self.num_envs, 0), dtype=np.float32)
        if not self._places and not p:
            return batch_observe(self, self._obs_t, self.features)
        k = p + (self.generator_block.shape[1] if self._places else 0)
        out = np.empty((self.num_envs, self.n_obs), dtype=np.float32)
        if p:  # the episodes' problem features (the env option), first
            out[:, :p] = self._problem.take(self.ep, axis=0)
        if self._places:
            # kept current by the steps (``VectorState._alloc_generators``); rows copied as single items
            row_items(out[:, p:k])[:] = row_items(self.generator_block)
        batch_observe(self, self._obs_t, self.features, out=out[:, k:])  # the pooled table, written in place
        return out

    def _fresh_observations(self, obs: np.ndarray, rows: np.ndarray) -> None:
        """Write the first observation of the episodes ``rows`` just started into ``obs`` [B, F]."""
        if not self.observe:
            return
        fresh = np.zeros((len(rows), self.n_obs), dtype=np.float32)
        self._fresh_rows(fresh, rows)
        row_items(obs)[rows] = row_items(fresh)  # whole rows as single items

    def _fresh_rows(self, fresh: np.ndarray, rows: np.ndarray) -> None:
        """Fill the zeroed first observations ``fresh`` [len(rows), F] of the episodes ``rows`` just started."""
        fresh[:, self.lambda_index] = self.lams.take(rows)  # a fresh episode has revealed nothing: all 0 but lambda
        p = self._n_problem
        if p:  # ... but its problem features (the env option)
            fresh[:, :p] = self._problem.take(self.ep.take(rows), axis=0)
        if self._places:  # ... and the item grouping's block, fresh since the reset (rows moved as single items)
            row_items(fresh[:, p:p + self.generator_block.shape[1]])[:] = row_items(self.generator_block).take(rows)

    def step(self, actions: Sequence[int] | np.ndarray):
        """Step every sub-env with its action; terminated ones reset in the same step."""
        if self._mask is None:
            raise StepBeforeReset("step() called before reset(); call reset() first")
        a = np.asarray(actions)
        b = self.num_envs
        if a.shape != (b,):
            raise ValueError(f"expected {b} actions, got shape {a.shape}")
        if a.dtype.kind not in "iu":
            if a.dtype.kind != "f" or not np.array_equal(a, np.floor(a)):
                raise ValueError(f"actions must be integer action ids, got {actions!r}")
        a = a.astype(np.int64, copy=False)
        n_actions = self._mask.shape[1]
        # One pass each for the common case: a negative id is a huge unsigned one; then every mask entry is 1.
        if (a.view(np.uint64) >= n_actions).any() or not self._mask.ravel().take(self._mask_at + a).all():
            bad = (a < 0) | (a >= n_actions)
            if not bad.any():
                bad = self._mask.ravel().take(self._mask_at + a) == 0
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"sub-env {i}: action {int(a[i])} is not allowed now (mask {self._mask[i].tolist()})")
        t_n = self.n_tiers
        self.steps += 1
        # Each row's step cost as a row of ``cost_rows`` (the zero row for STOP), gathered in one pass below:
        # cheaper than scattering each measure into a [4, B] buffer.
        cost_at = self._cost_at
        cost_at.fill(self._no_cost_row)
        n_gen = self._n_gen
        rows = np.flatnonzero(a < n_gen)  # SAMPLE (from generator a)
        if len(rows):
            self._sample(rows, a.take(rows), cost_at)
        rows = np.flatnonzero((a >= n_gen) & (a < n_gen + t_n))  # every VERIFY at once, each row with its tier
        if len(rows):
            self._verify(rows, a[rows], cost_at)

        terminated = a == self._stop
        step_cost = self.cost_rows.take(cost_at, axis=0)  # [B, K]
        self.cost += step_cost
        reward = -self.lams * step_cost[:, self.cost_k] / self.budget
        stop_rows = np.flatnonzero(terminated)
        infos: dict[str, Any] = {}
        self._rank_current = False
        if self.observe:  # the observation reads each row's top R; else R is computed when read (``_current_rank``)
            self._fusion()
        obs = self._observations()
        if len(stop_rows):
            sel = self._select(stop_rows)
            correct = (sel >= 0) & self._correct_flat.take(self._pool_flat(stop_rows, np.maximum(sel, 0)))
            reward[stop_rows] = correct  # a STOP costs nothing: its reward is 0 + correct
            full_final = np.zeros((b, obs.shape[1]), dtype=np.float32)
            if self.observe:
                row_items(full_final)[stop_rows] = row_items(obs).take(stop_rows)  # row copies become memcpys
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
            self._fresh_observations(obs, stop_rows)
        self._mask = self._masks()
        infos["action_mask"] = self._mask.copy()
        infos["episode"] = self.ep.copy()
        return obs, reward, terminated, np.zeros(b, dtype=bool), infos

    def action_masks(self) -> np.ndarray:
        """Legal actions per sub-env, bool [num_envs, n_actions]; refused before the first reset, as the single env's."""
        if self._mask is None:
            raise StepBeforeReset("action_masks() called before reset(); call reset() first")
        return self._mask.astype(bool)
