"""CoBaEnv: a candidate pool replayed as a Gymnasium environment in which a policy allocates compute."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from coba_env.compiled import CompiledPool, compile_pool
from coba_env.costs import COST_MEASURES, cost_index
from coba_env.evidence import FEATURE_NAMES, N_FEATURES, V1, V3, Evidence, clogc_table, log_table
from coba_env.selection import SelectionRule, select_candidate
from coba_env.spaces import MaskedDiscrete
from coba_env.trace import Trace
from pools.schema import TIERS
from pools.store import Pool

ORDERS = ("sequential", "shuffle", "random")
_TOKENS, _P_TOKENS, _CALLS, _LATENCY = COST_MEASURES  # info["costs"] keys, in ``ev.cost`` order

# Observation entries that VERIFY and STOP patch in place (SAMPLE and reset rebuild the whole list).
_V1_MEAN, _V1_MAX, _V1_AVAIL, _BEST_V3, _V3_MEAN, _V1_FRAC, _BUDGET, _STEP, _LAMBDA, _TOP_R = (
    FEATURE_NAMES.index(name) for name in (
        "top_v1_mean", "top_v1_max", "top_v1_available", "best_v3", "top_v3_mean", "v1_verified_frac",
        "budget_used", "step_frac", "lambda", "top_fusion_score"))


def action_names(tiers: Sequence[str] = TIERS) -> list[str]:
    """Names of the discrete actions: SAMPLE, VERIFY_<tier>..., STOP."""
    return ["SAMPLE", *[f"VERIFY_{t}" for t in tiers], "STOP"]


def as_compiled(pool: Pool | CompiledPool | str | None) -> CompiledPool:
    """Accept a compiled pool, a Pool, a pool path / profile name, or None (the embedded default pool)."""
    if isinstance(pool, CompiledPool):
        return pool
    if not isinstance(pool, Pool):
        from pools.default import resolve_pool

        pool = resolve_pool(pool)
    return compile_pool(pool)


def default_budget(compiled: CompiledPool, cost_model: str, n_max: int) -> float:
    """Default B: the mean cost of drawing ``n_max`` candidates, so C/B = 1 is 'best-of-N_max spending'."""
    k = cost_index(cost_model)
    value = float(compiled.gen_cost[:, :n_max, k].sum(axis=1).mean()) if compiled.n_episodes else 1.0
    return value if value > 0 else 1.0


class CoBaEnv(gym.Env):
    """
    ## Description

    Test-time scaling as compute allocation (the CoBa paper, Sections 3-4). Each episode is one
    (problem, generator) pair of a candidate pool: N cached solutions with their extracted answers,
    verifier scores and the cost of every call. The agent reveals evidence one action at a time and pays
    for what it reveals; STOP selects a final answer with the fusion rank of paper Eq. 3 (or another
    configured selection rule). Correctness labels never enter an observation or a mask.

    ## Action Space

    ``Discrete(2 + L)`` for the L verifier tiers (default V1, V2, V3, so 5 actions):

    | Num | Action    | Effect                                                                        |
    |-----|-----------|-------------------------------------------------------------------------------|
    | 0   | SAMPLE    | reveal the next candidate in sampling order (answer, length, cap hit)          |
    | 1   | VERIFY_V1 | cheap judge on the target candidate (below)                                    |
    | 2   | VERIFY_V2 | process/step judge on the target candidate (often no usable score)             |
    | 3   | VERIFY_V3 | strong verifier on the target candidate                                        |
    | 4   | STOP      | select the answer and end the episode                                          |

    Target of VERIFY_l: among revealed candidates with an extractable answer (one without can never be
    selected, so judging it is never useful) that the pool holds a tier-l call for and that are not yet
    verified at l, the one with the highest current fusion rank R (ties: earliest candidate); with
    the paper's weights, before any V3 score this is "rank by cheap score and answer frequency".
    ``action_masks()`` and ``info["action_mask"]`` forbid: SAMPLE past N_max or the pool; VERIFY_l when
    nothing is left to verify at l or the tier is disabled or absent from the pool; everything but STOP
    once the hard budget ``max_cost`` is spent; STOP before the first candidate (unless nothing else is
    possible). A forbidden action raises ``ValueError``; ``step()`` after the episode ended raises
    ``RuntimeError``.

    ## Observation Space

    ``Box(shape=(21,), dtype=float32)``; all values derive from revealed evidence only:

    | Num | Feature               | Meaning                                                            |
    |-----|-----------------------|--------------------------------------------------------------------|
    | 0   | revealed_frac         | candidates revealed / N_max                                        |
    | 1   | top_answer_share      | size of the largest answer cluster / candidates revealed           |
    | 2   | distinct_answers_frac | distinct answers / N_max                                           |
    | 3   | answer_entropy        | entropy of the answer distribution / log(N_max)                    |
    | 4   | top2_gap              | (largest - second answer cluster) / candidates revealed            |
    | 5   | no_answer_share       | share of candidates without an extractable answer                  |
    | 6   | top_v1_mean           | mean V1 score in the top cluster (0 if none)                       |
    | 7   | top_v1_max            | max V1 score in the top cluster (0 if none)                        |
    | 8   | top_v1_available      | 1 if the top cluster has a V1 score                                |
    | 9   | best_v3               | max V3 score so far (0 if none)                                    |
    | 10  | top_v3_mean           | mean V3 score in the top cluster (0 if none)                       |
    | 11  | v1_verified_frac      | verified at V1 / revealed                                          |
    | 12  | v2_verified_frac      | verified at V2 / revealed                                          |
    | 13  | v3_verified_frac      | verified at V3 / revealed                                          |
    | 14  | budget_used           | cost spent (cost model) / B                                        |
    | 15  | mean_length           | mean output tokens / the pool's max output tokens                  |
    | 16  | cap_hit_share         | share of candidates that hit the token cap                         |
    | 17  | answer_flips          | changes of the top answer after a new sample / N_max               |
    | 18  | step_frac             | actions taken / the most actions an episode can take               |
    | 19  | lambda                | the episode's cost weight (drawn per episode with lambda_range)    |
    | 20  | top_fusion_score      | fusion rank R of the candidate STOP would select now               |

    ## Rewards

    Each action costs ``-lambda * c / B`` where c is its cost in the chosen cost model (``tokens``: prompt +
    output tokens; ``p_tokens``: tokens x model parameters in billions; ``calls``: 1 per model call;
    ``latency``: seconds). STOP adds ``1`` if the selected answer is correct. The episode return is
    therefore exactly ``1[correct] - lambda * C / B``. Every cost measure is accumulated whatever the model.

    ## Starting State

    No candidate revealed. The episode is the next one of the subset in ``order`` ("sequential" cycles in
    pool order, "shuffle" permutes each pass, "random" draws with replacement); ``reset(options={"episode":
    i})`` picks subset index i. A seeded reset restarts the episode stream.

    ## Episode End

    Terminated on STOP. Never truncated (an episode has at most N_max * (1 + L) + 1 actions). The final
    ``info`` holds ``trace`` (each action, its target, cost in every measure and revealed evidence),
    ``selected_candidate``, ``selected_answer``, ``correct``, ``costs`` (every measure) and the episode's ids.

    ## Arguments

    ``gymnasium.make("coba/Replay-v0", pool=None, datasets=None, generators=None, episode_ids=None,
    lam=0.1, lambda_range=None, budget=None, cost_model="p_tokens", n_max=None, tiers=("V1", "V2", "V3"),
    selection=None, order="sequential", max_cost=None)``

    - pool: a pool directory, a simulator profile name, a ``Pool``/``CompiledPool``, or None (the embedded
      ``paper`` simulator pool).
    - datasets / generators / episode_ids: restrict the episodes.
    - lam, lambda_range: fixed lambda, or (low, high) to draw lambda uniformly per episode.
    - budget: B in the reward (default: mean cost of drawing N_max candidates in the cost model).
    - cost_model: one of ``tokens``, ``p_tokens``, ``calls``, ``latency``.
    - n_max: most candidates an episode may draw (default: the pool's N).
    - tiers: verifier tiers that exist for the agent (others are masked).
    - selection: the STOP rule (``SelectionRule`` or spec; default fusion with the paper's weights).
    - max_cost: hard per-episode budget in cost-model units; once spent only STOP is allowed.

    ## Version History

    - v0: first version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        pool: Pool | CompiledPool | str | None = None,
        *,
        datasets: Sequence[str] | None = None,
        generators: Sequence[str] | None = None,
        episode_ids: Sequence[int] | None = None,
        lam: float = 0.1,
        lambda_range: tuple[float, float] | None = None,
        budget: float | None = None,
        cost_model: str = "p_tokens",
        n_max: int | None = None,
        tiers: Sequence[str] = TIERS,
        selection: SelectionRule | dict | str | None = None,
        order: str = "sequential",
        max_cost: float | None = None,
        render_mode: str | None = None,
    ) -> None:
        full = as_compiled(pool)
        keep = np.ones(full.n_episodes, dtype=bool)
        if datasets is not None:
            _check_known("dataset", datasets, full.dataset)
            keep &= np.isin(full.dataset, list(datasets))
        if generators is not None:
            _check_known("generator", generators, full.generator)
            keep &= np.isin(full.generator, list(generators))
        if episode_ids is not None:
            _check_known("episode id", episode_ids, full.episode_ids)
            keep &= np.isin(full.episode_ids, list(episode_ids))
        if not keep.any():
            raise ValueError("the episode subset is empty")
        self.pool = full if keep.all() else full.select(keep)
        unknown_tiers = [t for t in tiers if t not in TIERS]
        if unknown_tiers:
            raise ValueError(f"unknown tier(s) {unknown_tiers}; expected a subset of {list(TIERS)}")
        if order not in ORDERS:
            raise ValueError(f"unknown episode order {order!r}; expected one of {list(ORDERS)}")
        self.cost_model = cost_model
        self._cost_k = cost_index(cost_model)
        self.n_max = int(n_max or self.pool.n_candidates)
        if not 1 <= self.n_max <= self.pool.n_candidates:
            raise ValueError(f"n_max must be in 1..{self.pool.n_candidates} (the pool's N), got {n_max}")
        if lambda_range is not None and not 0 <= lambda_range[0] <= lambda_range[1]:
            raise ValueError(f"lambda_range must be (low, high) with 0 <= low <= high, got {lambda_range}")
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        self.lam = float(lam)
        self.lambda_range = lambda_range
        self.budget = float(budget) if budget is not None else default_budget(self.pool, cost_model, self.n_max)
        if self.budget <= 0:
            raise ValueError(f"budget must be > 0, got {budget}")
        self.max_cost = float(max_cost) if max_cost is not None else float("inf")
        self.selection = SelectionRule.from_spec(selection)
        self._weights = self.selection.weight_vector()
        # Verifier tiers are always the full V1..V3 axis so that action ids are stable across pools;
        # a tier that is disabled or absent from the pool is simply never legal.
        self.tiers = TIERS
        self.enabled_tiers = tuple(t for t in TIERS if t in tiers and t in self.pool.tiers_present)
        self._tier_on = [t in self.enabled_tiers for t in TIERS]
        #: Mask bit of each tier's VERIFY action, 0 for a disabled tier. ``_pending[t]`` counts the revealed
        #: candidates with an answer and a tier-t call not yet verified at t; ``_verify_bits`` is the OR of the
        #: bits of the tiers with ``_pending[t] > 0``, kept up to date by ``step`` (read by ``_compute_mask``).
        self._tier_bits = [2 << t if on else 0 for t, on in enumerate(self._tier_on)]
        self._tier_index_bits = tuple(enumerate(self._tier_bits))
        self.n_tiers = len(TIERS)
        self.actions = action_names(TIERS)
        self.SAMPLE, self.STOP = 0, self.n_tiers + 1
        self.action_space = MaskedDiscrete(self.n_tiers + 2, mask_provider=self._current_mask)
        high = np.ones(N_FEATURES, dtype=np.float32)
        high[FEATURE_NAMES.index("budget_used")] = np.inf
        high[FEATURE_NAMES.index("lambda")] = np.inf
        self.observation_space = spaces.Box(low=np.zeros(N_FEATURES, dtype=np.float32), high=high,
                                            dtype=np.float32)
        self.order = order
        self.render_mode = render_mode
        self.max_steps = self.n_max * (1 + self.n_tiers) + 1
        self._rows = self.pool.episode_rows()
        n_actions = self.n_tiers + 2
        self._mask_table = []
        for bits in range(1 << n_actions):
            m = np.array([(bits >> a) & 1 for a in range(n_actions)], dtype=np.int8)
            m.flags.writeable = False
            self._mask_table.append(m)
        self._clogc = clogc_table(self.pool.n_candidates)
        self._logs = log_table(self.pool.n_candidates)
        self._cursor = 0
        self._perm: np.ndarray | None = None
        self._ep = -1
        self._ev: Evidence | None = None
        self._done = True
        self._trace: list[tuple[int, int]] = []
        self._pending = [0] * self.n_tiers
        self._verify_bits = 0
        self._zero_obs = np.zeros(N_FEATURES, dtype=np.float32)
        #: The current observation as Python floats: SAMPLE and reset rebuild it, VERIFY and STOP patch it.
        self._obs: list[float] = [0.0] * N_FEATURES

    # -- episode bookkeeping -------------------------------------------------------------------------
    @property
    def n_episodes(self) -> int:
        """Episodes in this env's subset."""
        return self.pool.n_episodes

    @property
    def episode_index(self) -> int:
        """Index (within this env's subset) of the current episode; -1 before the first reset."""
        return self._ep

    @property
    def evidence(self) -> Evidence:
        """The current episode's revealed evidence, label-free; policies read it and must not modify it."""
        if self._ev is None:
            raise RuntimeError("call reset() first")
        return self._ev

    def _next_episode(self) -> int:
        if self.order == "sequential":
            ep = self._cursor % len(self._rows)  # one row per episode of the pool
            self._cursor += 1
            return ep
        n = self.pool.n_episodes
        if self.order == "random":
            return int(self.np_random.integers(n))
        if self._perm is None or self._cursor >= n:  # "shuffle"
            self._perm = self.np_random.permutation(n)
            self._cursor = 0
        ep = int(self._perm[self._cursor])
        self._cursor += 1
        return ep

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start the next episode (or ``options["episode"]``; ``options["lam"]`` fixes lambda)."""
        super().reset(seed=seed)
        if seed is not None:  # a seeded reset restarts the episode stream, so it is reproducible
            self._cursor, self._perm = 0, None
        options = options or {}
        if "episode" in options:
            ep = int(options["episode"])
            if not 0 <= ep < self.pool.n_episodes:
                raise ValueError(f"episode index {ep} out of range 0..{self.pool.n_episodes - 1}")
        else:
            ep = self._next_episode()
        if "lam" in options:
            lam = float(options["lam"])
        elif self.lambda_range is not None:
            lam = float(self.np_random.uniform(*self.lambda_range))
        else:
            lam = self.lam
        self._ep = ep
        self._row = self._rows[ep]
        self._ev = Evidence(self.n_max, self.n_tiers, self._row[7], lam, self._weights)
        self._pending = [0] * self.n_tiers
        self._verify_bits = 0
        self._done = False
        self._trace = []
        self._mask = self._compute_mask()
        # Nothing is revealed yet: every feature is 0 but lambda (what ``Evidence.feature_list`` gives).
        obs = [0.0] * N_FEATURES
        obs[_LAMBDA] = lam
        self._obs = obs
        first = self._zero_obs.copy()
        first[_LAMBDA] = lam
        return first, {"action_mask": self._mask.copy(), "episode": ep}

    # -- masks ---------------------------------------------------------------------------------------
    def _compute_mask(self) -> np.ndarray:
        # Masks come from a table of read-only arrays keyed by a bit pattern: no array is built per step.
        ev = self._ev
        n = ev.n_revealed
        if ev.cost[self._cost_k] >= self.max_cost:
            self._bits = 1 << (self.n_tiers + 1)
            return self._mask_table[self._bits]
        bits = (1 if n < self.n_max else 0) | self._verify_bits
        if n > 0 or not bits:
            bits |= 1 << (self.n_tiers + 1)
        self._bits = bits
        return self._mask_table[bits]

    def _current_mask(self) -> np.ndarray | None:
        return None if self._done else self._mask

    def action_masks(self) -> np.ndarray:
        """Boolean mask of legal actions (sb3-contrib MaskablePPO reads this)."""
        return self._mask.astype(bool)

    # -- stepping ------------------------------------------------------------------------------------
    def verify_target(self, tier: int) -> int:
        """The candidate VERIFY at ``tier`` would score now, or -1 when there is none."""
        ev = self._ev
        has = self._row[4]
        best, best_r = -1, -3.0
        for c, (r, cluster, score, has_c) in enumerate(zip(ev.rank, ev.clusters, ev.scores, has)):  # noqa: B905
            if r > best_r and cluster >= 0 and has_c[tier] and score[tier] is None:
                best, best_r = c, r
        return best

    def step(self, action: int):
        """Apply ``action``; see the class docstring for effects, reward and the final ``info``."""
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        a = int(action)
        if a < 0 or not (self._bits >> a) & 1:
            raise ValueError(self._illegal_reason(a))
        ev = self._ev
        row = self._row
        ev.steps += 1
        obs = self._obs
        if a == self.STOP:
            self._trace.append((a, -1))
            self._done = True
            if self.selection.rule == "fusion" and (ev.n_answered == 0 or ev.best_r >= 0.0):
                selected = ev.best  # refresh_rank keeps it current: the earliest candidate of highest R
            else:
                selected = select_candidate(ev, self.selection)
            correct = bool(selected >= 0 and self.pool.labels.correct[self._ep, selected])
            self._mask, self._bits = self._mask_table[0], 0
            obs[_STEP] = ev.steps / self.max_steps
            return (np.fromiter(obs, np.float32, N_FEATURES), 1.0 if correct else 0.0, True, False,
                    self._final_info(selected, correct))
        if a == self.SAMPLE:
            c = ev.n_revealed
            cluster = row[0][c]
            cost = row[3][c]
            ev.add_candidate(cluster, row[1][c], row[2][c], self._clogc)
            if cluster >= 0:  # a candidate without an answer can never be selected: never worth judging
                pending, bits, has = self._pending, self._verify_bits, row[4][c]
                for t, bit in self._tier_index_bits:
                    if has[t]:
                        pending[t] += 1
                        bits |= bit
                self._verify_bits = bits
            ev.refresh_rank()
        else:
            t = a - 1
            c = self.verify_target(t)
            cost = row[6][c][t]
            score = row[5][c][t]
            ev.add_score(c, t, score)
            self._pending[t] -= 1
            if not self._pending[t]:
                self._verify_bits &= ~self._tier_bits[t]
            ev.refresh_rank_of(c)
        acc = ev.cost
        acc[0] += cost[0]
        acc[1] += cost[1]
        acc[2] += cost[2]
        acc[3] += cost[3]
        reward = -ev.lam * cost[self._cost_k] / self.budget
        self._trace.append((a, c))
        if a == self.SAMPLE:
            obs = self._obs = ev.feature_list(acc[self._cost_k] / self.budget, self.max_steps,
                                              self.pool.max_output_tokens, self._logs, ev.best_r)
        else:  # only the verified tier's entries, the budget, the step count and the top R change
            obs[_V1_FRAC + t] = ev.n_verified[t] / ev.n_revealed
            if score == score:
                cluster = ev.clusters[c]
                top = ev.top
                if t == V1 and cluster == top:
                    stats = ev.tier_stats[(V1, top)]
                    obs[_V1_MEAN], obs[_V1_MAX], obs[_V1_AVAIL] = stats[0] / stats[1], stats[2], 1.0
                elif t == V3:
                    obs[_BEST_V3] = ev.best_v3
                    if cluster == top:
                        stats = ev.tier_stats[(V3, top)]
                        obs[_V3_MEAN] = stats[0] / stats[1]
            obs[_BUDGET] = acc[self._cost_k] / self.budget
            obs[_STEP] = ev.steps / self.max_steps
            obs[_TOP_R] = ev.best_r
        self._mask = self._compute_mask()
        return np.fromiter(obs, np.float32, N_FEATURES), reward, False, False, {"action_mask": self._mask.copy()}

    def _observation(self) -> np.ndarray:
        """The observation rebuilt from the evidence (``step`` keeps ``self._obs`` equal to it, cheaper)."""
        ev = self._ev
        return ev.features(ev.cost[self._cost_k] / self.budget, self.max_steps, self.pool.max_output_tokens,
                           self._logs, ev.best_r)

    def _illegal_reason(self, a: int) -> str:
        if not 0 <= a < len(self._mask):
            return f"action {a} is outside the action space 0..{len(self._mask) - 1}"
        name = self.actions[a]
        ev = self._ev
        if ev.cost[self._cost_k] >= self.max_cost:
            why = f"the hard budget max_cost={self.max_cost:g} ({self.cost_model}) is spent; only STOP is allowed"
        elif a == self.SAMPLE:
            why = f"N_max={self.n_max} candidates are already revealed"
        elif a == self.STOP:
            why = "no candidate has been revealed yet (SAMPLE first)"
        else:
            tier = self.tiers[a - 1]
            if tier not in self.enabled_tiers:
                why = f"tier {tier} is disabled or absent from the pool"
            else:
                why = f"no revealed candidate is left to verify at {tier}"
        return f"action {a} ({name}) is not allowed now: {why}"

    def _final_info(self, selected: int, correct: bool) -> dict[str, Any]:
        ev, ep = self._ev, self._ep
        ids, datasets, generators, items = self.pool.episode_meta()
        answers = self.pool.answer[ep]
        names, cost = self.actions, ev.cost
        return {
            "action_mask": self._mask.copy(),
            "episode": ep,
            "episode_id": ids[ep],
            "dataset": datasets[ep],
            "generator": generators[ep],
            "item_id": items[ep],
            "lambda": ev.lam,
            "trace": Trace(self._trace, self.actions, self.tiers, self._row, answers, selected),
            "actions": [names[a] for a, _ in self._trace],
            "selected_candidate": selected,
            "selected_answer": answers[selected] if selected >= 0 else None,
            "correct": correct,
            "costs": {_TOKENS: cost[0], _P_TOKENS: cost[1], _CALLS: cost[2], _LATENCY: cost[3]},
        }

    def render(self) -> str | None:
        """ANSI text of the current evidence (render_mode="ansi")."""
        if self.render_mode != "ansi" or self._ev is None:
            return None
        ev = self._ev
        return (f"episode {self._ep}: revealed {ev.n_revealed}/{self.n_max}, clusters {ev.clusters}, "
                f"top share {ev.top_share():.2f}, cost {ev.cost[self._cost_k]:.4g} {self.cost_model}")


def _check_known(what: str, wanted: Sequence, present: np.ndarray) -> None:
    known = set(present.tolist())
    missing = [w for w in wanted if w not in known]
    if missing:
        raise ValueError(f"unknown {what}(s) {missing}; the pool has {sorted(map(str, known))[:20]}")
