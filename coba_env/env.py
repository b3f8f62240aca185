"""CoBaEnv: a candidate pool replayed as a Gymnasium environment in which a policy allocates compute.

One class for both episode groupings (``coba_env.rules.config.GROUPINGS``; the class docstring says what each
is). The class holds the Gymnasium API and the transition (``reset``, ``step``, the masks); the episode order is
``coba_env.episode_stream.EpisodeStream``, the final info, illegal-action messages and rendering are
``coba_env.episode_report.EpisodeReport``, the float32 observation arrays ``coba_env.observation_packing``, an
item episode's slots filled generator by generator ``coba_env.generator_slots.GeneratorSlots`` (mixins), the
action-id check ``coba_env.action_input.as_action``. The step loop stays in one method because each call it
saves is measured against CartPole (scripts/bench_env.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from coba_env.action_input import as_action
from coba_env.compiled import CompiledPool, as_compiled
from coba_env.episode_report import EpisodeReport
from coba_env.episode_stream import ORDERS, EpisodeStream
from coba_env.evidence import Evidence
from coba_env.gate import ActionGate
from coba_env.generator_slots import GeneratorSlots
from coba_env.observation_packing import ObservationPacking
from coba_env.rules.actions import action_names
from coba_env.rules.config import EnvConfig, default_budget
from coba_env.rules.features import clogc_table, first_observation, log_table, observe, patch_after_verify
from coba_env.rules.fusion import refresh_rank, refresh_rank_of
from coba_env.rules.masks import mask_bits, mask_table, stop_bit, tier_bits
from coba_env.rules.selection import SelectionRule
from coba_env.rules.verify import verify_target
from coba_env.spaces import MaskedDiscrete
from coba_env.step_order import StepBeforeReset
from pools.store import Pool

# Re-exported: CoBaEnv's module is where users and the training code look for them.
__all__ = ["ORDERS", "CoBaEnv", "action_names", "as_action", "as_compiled", "default_budget"]


class CoBaEnv(EpisodeStream, EpisodeReport, ObservationPacking, GeneratorSlots, gym.Env):
    """
    ## Description

    Test-time scaling as compute allocation (the CoBa paper, Sections 3-4), with routing between generators as
    the same decision. A candidate pool caches, for every (item, generator) pair, N solutions with their
    extracted answers, verifier scores and the cost of every call. An episode is one item's evidence, grouped
    by the ``grouping`` argument:

    - ``"pair"`` (``coba/Replay-v0``, the default): one (item, generator) pair, its N candidates;
    - ``"item"`` (``coba/Route-v0``): one item with every generator's candidates (answers clustered across
      generators when the pool is compiled, ``coba_env.route_pool``); the agent also chooses which generator
      to sample from. A pair episode is an item episode with one generator.

    The agent reveals evidence one action at a time and pays for what it reveals; STOP selects a final answer
    with the fusion rank of paper Eq. 3 (or another configured selection rule) among every revealed candidate.
    Correctness labels never enter an observation or a mask.

    ## Action Space

    ``Discrete(G + V + 1)`` from the action layout ``env.layout`` (``coba_env.rules.actions.ActionLayout``),
    generated from the pool: one SAMPLE per generator (G = 1 with the pair grouping: the episode's own, named
    plain ``SAMPLE``; ``SAMPLE_<g>`` per generator of the pool with the item grouping, in order of first
    appearance), one ``VERIFY_<v>`` per verifier of the pool (V; on the paper's pools V1, V2, V3), ``STOP``.
    The paper pool's pair layout:

    | Num | Action    | Effect                                                                        |
    |-----|-----------|-------------------------------------------------------------------------------|
    | 0   | SAMPLE    | reveal the next candidate in sampling order (answer, length, cap hit)          |
    | 1   | VERIFY_V1 | cheap judge on the target candidate (below)                                    |
    | 2   | VERIFY_V2 | process/step judge on the target candidate (often no usable score)             |
    | 3   | VERIFY_V3 | strong verifier on the target candidate                                        |
    | 4   | STOP      | select the answer and end the episode                                          |

    ``SAMPLE_<g>`` reveals generator g's next candidate and is charged at g's own cost. Target of VERIFY_v: the
    revealed, answered, not yet v-verified candidate with a v call of highest fusion rank R, whatever its
    generator (``coba_env.rules.verify``). ``action_masks()`` and ``info["action_mask"]`` forbid: SAMPLE past
    N_max (per generator with the item grouping) or the pool, or from a generator the item has no candidates
    of; VERIFY_v when nothing is left to verify at v or the verifier is disabled or absent from the pool;
    everything but STOP once the hard budget ``max_cost`` is spent; STOP before the first candidate (unless
    nothing else is possible). A forbidden action raises ``ValueError``; ``step()`` after the episode ended
    raises ``RuntimeError``.

    ## Observation Space

    ``Box(shape=(G * (4 + V) + 18 + V,), dtype=float32)`` with the item grouping, ``Box(shape=(18 + V,))`` with
    the pair grouping (21 on the paper's pools); in [0, 1] but for each spend, budget_used and lambda (unbounded
    above); all values derive from revealed evidence only. The features, in index order, are the feature table
    of ``coba_env.rules.feature_table`` (``env.feature_names``; printed in ``docs/ENV.md``): with the item
    grouping first, per generator g, revealed / N_max, remaining / N_max, agreement (its largest answer's
    share), its mean score per verifier and its generation spend / B; then the pooled features over every
    revealed candidate: answer-cluster statistics, the top cluster's V1/V3 scores, the share verified at each
    verifier, budget used, mean length, cap hits, answer flips, step fraction, lambda (``env.lambda_index``)
    and the fusion rank R of the candidate STOP would select now. With the option ``problem_features`` the
    observation starts with the episode's problem features (D more, any finite value, fixed for the episode).

    ## Rewards

    Each action costs ``-lambda * c / B`` where c is its cost in the chosen cost model (``tokens``: prompt +
    output tokens; ``p_tokens``: tokens x model parameters in billions; ``calls``: 1 per model call;
    ``latency``: seconds; ``usd``: dollars on a priced pool; ``coba_env.costs.COST_TABLE``). STOP adds ``1`` if
    the selected answer is correct. The episode return is therefore exactly ``1[correct] - lambda * C / B``.
    Every cost measure is accumulated whatever the model.

    ## Starting State

    No candidate revealed. The episode is the next one of the subset in ``order`` ("sequential" cycles in
    pool order, "shuffle" permutes each pass, "random" draws with replacement); ``reset(options={"episode":
    i})`` picks subset index i. A seeded reset restarts the episode stream.

    ## Episode End

    Terminated on STOP. Never truncated (an episode has at most N_max * (1 + V) + 1 actions, N_max counting
    every generator's). The final ``info`` holds ``trace`` (each action, its target, cost in every measure and
    revealed evidence), ``selected_candidate``, ``selected_answer``, ``correct``, ``costs`` (every measure) and
    the episode's ids; with the item grouping also ``samples_by_generator``, ``spend_by_generator`` (every
    measure) and ``selected_generator``.

    ## Arguments

    ``gymnasium.make("coba/Replay-v0", pool=None, datasets=None, generators=None, episode_ids=None,
    lam=0.1, lambda_range=None, budget=None, cost_model="p_tokens", n_max=None, tiers=None,
    selection=None, order="sequential", max_cost=None)``; ``gymnasium.make("coba/Route-v0", ...)`` is the same
    with ``grouping="item"``.

    - pool: a pool directory, a simulator profile name, a ``Pool``/``CompiledPool``, or None (the embedded
      ``paper`` simulator pool).
    - grouping: ``"pair"`` (default) or ``"item"`` (above).
    - datasets / generators / episode_ids: restrict the episodes (the item grouping routes between the
      generators kept: at least one).
    - lam, lambda_range: fixed lambda, or (low, high) to draw lambda uniformly per episode.
    - budget: B in the reward (default: mean cost of drawing N_max candidates of one generator in the cost
      model, so an item episode that samples one generator only is charged as a pair episode is).
    - cost_model: one of ``coba_env.costs.COST_MEASURES``.
    - n_max: most candidates an episode may draw from a generator (default: the pool's N).
    - tiers: verifiers that exist for the agent (others are masked).
    - selection: the STOP rule (``SelectionRule`` or spec; default fusion with the paper's weights).
    - max_cost: hard per-episode budget in cost-model units; once spent only STOP is allowed.
    - problem_features: a fitted featurizer (``coba_env.featurizers``): its features of the episode's problem start
      every observation (``coba_env.problem_features``; off by default).
    - config: an ``EnvConfig`` already validated (instead of the arguments above).

    ## Version History

    - v0: first version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        pool: Pool | CompiledPool | str | None = None,
        *,
        datasets: Sequence[str] | str | None = None,
        generators: Sequence[str] | str | None = None,
        episode_ids: Sequence[int] | int | None = None,
        lam: float = 0.1,
        lambda_range: tuple[float, float] | None = None,
        budget: float | None = None,
        cost_model: str = "p_tokens",
        n_max: int | None = None,
        tiers: Sequence[str] | None = None,
        selection: SelectionRule | dict | str | None = None,
        order: str = "sequential",
        max_cost: float | None = None,
        render_mode: str | None = None,
        config: EnvConfig | None = None,
        gate: ActionGate | None = None,
        grouping: str | None = None,
        problem_features: Any = None,
    ) -> None:
        if config is None:
            config = EnvConfig.build(pool, datasets=datasets, generators=generators, episode_ids=episode_ids,
                                     lam=lam, lambda_range=lambda_range, budget=budget, cost_model=cost_model,
                                     n_max=n_max, tiers=tiers, selection=selection, order=order, max_cost=max_cost,
                                     grouping=grouping or "pair", problem_features=problem_features)
        elif pool is not None or problem_features is not None:
            raise ValueError("pass either config= or a pool with its arguments, not both")
        config.check_grouping(grouping)
        #: The composed gate (``coba_env.gate.ActionGate``), e.g. a live env's evidence fetching; None in replay.
        self.gate = gate
        self.config = config
        self.pool = config.pool
        self.cost_model, self._cost_k, self.n_max = config.cost_model, config.cost_k, config.n_max
        self.lam, self.lambda_range, self.budget = config.lam, config.lambda_range, config.budget
        self.max_cost, self.selection, self._weights = config.max_cost, config.selection, config.weights
        self._fusion_stop = self.selection.rule == "fusion"  # STOP reads ``Evidence.best``
        # The verifier axis is the pool's (``coba_env.compiled.verifier_axis``: V1..V3 on every pool of
        # paper-named verifiers, so their action ids are stable); a disabled or absent tier is never legal.
        self.tiers, self.n_tiers = config.pool.tiers, len(config.pool.tiers)
        #: The feature table (``coba_env.rules.feature_table.FeatureLayout``), generated from the verifiers (and the
        #: item grouping's generators: ``observation`` is the whole vector, ``features`` its pooled part).
        self.features = fl = config.features
        self.enabled_tiers, self._tier_on = config.enabled_tiers, list(config.tier_on)
        #: Which tier slot serves each role a policy asks for (``coba_env.rules.roles``).
        self.roles = config.roles
        #: The item grouping's episodes (``coba_env.route_pool.RoutePool``) and N_max per generator; None with pairs.
        self.route, self.n_max_per_generator = config.route, config.n_max_per_generator
        #: The action ids and names (``coba_env.rules.actions.ActionLayout``); the step reads ids through it.
        self.layout = layout = config.layout
        self._n_gen, self._stop = layout.n_generators, layout.stop_action
        #: Whether SAMPLE puts a chosen generator's candidate into the next slot (``_place``; the item grouping).
        self._places = config.route is not None
        #: Mask bit of each tier's VERIFY action, 0 for a disabled tier.
        self._tier_bits = tier_bits(self._tier_on, layout)
        self._stop_bit = stop_bit(layout)
        self._tier_index_bits = tuple(enumerate(self._tier_bits))
        self.actions = list(layout.names)
        self.SAMPLE, self.STOP = layout.sample_action(), layout.stop_action
        self.action_space = MaskedDiscrete(layout.n_actions, mask_provider=self._current_mask)
        low, high = fl.observation_bounds()
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self._init_packing(len(low), block=bool(fl.block), problem=config.problem)
        self.order = config.order
        self.render_mode = render_mode
        self.max_steps = config.max_steps
        self._rows: list | None = None  # the pool's episode rows, on the first reset: a probe env never steps
        self._mask_table = mask_table(layout.n_actions)
        self._clogc = clogc_table(self.pool.n_candidates)
        self._logs = log_table(self.pool.n_candidates)
        self._init_episode_state()
        #: Pairs: the most candidates SAMPLE may reveal per episode (``EnvConfig.sample_caps``), ``_n_cap`` the current.
        self._pair_caps = None if self._places else config.sample_caps.tolist()
        self._n_cap = self.n_max
        if self._places:
            self._init_generator_slots(config.route, config.n_max_per_generator)

    def _init_episode_state(self) -> None:
        """The state ``reset`` starts from, before the first reset."""
        fl = self.features
        self._cursor = 0
        self._perm: np.ndarray | None = None
        self._ep = -1
        self._ev: Evidence | None = None
        self._done = True
        self._trace: list[tuple[int, int]] = []
        #: ``_pending[t]`` counts the revealed candidates with an answer and a tier-t call not yet verified at t;
        #: ``_verify_bits`` is the OR of the bits of the tiers with ``_pending[t] > 0``, kept up to date by ``step``
        #: (read by ``_compute_mask``).
        self._pending = [0] * self.n_tiers
        self._verify_bits = 0
        #: The legal SAMPLE actions' bits with the item grouping (``GeneratorSlots``); -1 with one generator, whose
        #: SAMPLE is legal while fewer than N_max candidates are revealed (``rules.masks.mask_bits``).
        self._sample_bits = -1
        #: Cost spent in the cost model (``Evidence.cost[cost_k]``, kept apart: masks and rewards read it).
        self._spent_k = 0.0
        #: has_score of each revealed slot (VERIFY's target reads it); item grouping: the pool candidate of each slot.
        self._slot_has: list[list[bool]] = []
        self._slot_cand: list[int] = []
        #: Index of lambda in the pooled features (``self._obs``) and in the observation array.
        self._lam_index, self._lam_at, self._step_index = fl.lam, fl.lambda_index, fl.step
        #: The current observation as Python floats: SAMPLE and reset rebuild it, VERIFY and STOP patch it; the
        #: item grouping's per-generator block (``_block``, empty with one generator) comes first in the array.
        self._obs: list[float] = [0.0] * fl.n_features
        self._block: list[float] = []
        self._first_list = first_observation(0.0, fl)
        #: The first observation array, lambda aside (read-only; the item grouping's depends on the episode).
        self._first = np.zeros(len(fl.observation), dtype=np.float32)
        self._first.flags.writeable = False

    @classmethod
    def from_config(cls, config: EnvConfig, render_mode: str | None = None) -> CoBaEnv:
        """The env of an already validated configuration."""
        return cls(config=config, render_mode=render_mode)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The observation's feature names, in index order (generated from the verifiers and generators)."""
        return self.features.observation_names

    @property
    def lambda_index(self) -> int:
        """Index of lambda in the observation."""
        return self._lam_at

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start the next episode (or ``options["episode"]``; ``options["lam"]`` fixes lambda)."""
        if seed is not None:  # a seeded reset restarts the episode stream, so it is reproducible
            super().reset(seed=seed)  # gymnasium.Env.reset only seeds ``self.np_random``
            self._cursor, self._perm = 0, None
        if self._rows is None:
            self._rows = self.pool.episode_rows()  # 1.4 GB of Python lists at 100,000 items x 30 generators
        ep, lam = self._episode_and_lambda(options)
        self._ep = ep
        # The ``EpisodeData`` step reads for episode ``ep``, by pool candidate (``_place`` maps slots to them).
        row = self._row = self._rows[ep]
        if self._places:
            self._ev = self._start_generators(self.n_max, row.n_clusters, lam)
        else:  # slot = pool candidate: VERIFY's target reads the row's own has_score
            self._slot_has = row.has_score
            self._n_cap = self._pair_caps[ep]
            self._ev = Evidence(self.n_max, self.n_tiers, row.n_clusters, lam, self._weights, self.features.strong)
        self._pending = [0] * self.n_tiers
        self._verify_bits = 0
        self._spent_k = 0.0
        self._done = False
        self._trace = []
        self._mask = self._compute_mask()
        obs = self._obs = self._first_list.copy()  # ``first_observation(lam)``: every feature 0 but lambda
        obs[self._lam_index] = lam
        first = self._first.copy()
        first[self._lam_at] = lam
        if self._problem_rows is not None:  # the env option ``problem_features``: they start the observation
            self._put_problem(first, ep)
        return first, {"action_mask": self._mask.copy(), "episode": ep}

    # -- masks ---------------------------------------------------------------------------------------
    def _compute_mask(self) -> np.ndarray:
        # Masks come from a table of read-only arrays keyed by a bit pattern: no array is built per step.
        ev = self._ev
        spent = self._spent_k >= self.max_cost
        bits = mask_bits(ev.n_revealed, self._n_cap, self._verify_bits, spent, stop_bit=self._stop_bit,
                         sample_bits=self._sample_bits)
        if self.gate is not None:
            blocked = self.gate.blocked(self, bits & ~self._stop_bit)
            if blocked:
                bits = mask_bits(ev.n_revealed, self._n_cap, self._verify_bits, spent, blocked,
                                 stop_bit=self._stop_bit, sample_bits=self._sample_bits)
        self._bits = bits
        return self._mask_table[bits]

    def _current_mask(self) -> np.ndarray | None:
        return None if self._done else self._mask

    def action_masks(self) -> np.ndarray:
        """Boolean mask of legal actions (sb3-contrib MaskablePPO reads this); refused before the first reset."""
        if self._ev is None:
            raise StepBeforeReset("action_masks() called before reset(); call reset() first")
        return self._mask.astype(bool)

    # -- stepping ------------------------------------------------------------------------------------
    def verify_target(self, tier: int) -> int:
        """The candidate VERIFY at ``tier`` would score now, or -1 when there is none."""
        ev = self._ev
        return verify_target(ev.rank, ev.clusters, self._slot_has, ev.scores, tier)

    def step(self, action: int):
        """Apply ``action``; see the class docstring for effects, reward and the final ``info``."""
        if self._done:
            if self._ev is None:
                raise StepBeforeReset("step() called before reset(); call reset() first")
            raise RuntimeError("step() called after the episode ended; call reset() first")
        a = action if type(action) is int else as_action(action)
        if a < 0 or not (self._bits >> a) & 1:
            raise ValueError(self._illegal_reason(a))
        if self.gate is not None and a != self._stop:
            applied = self.gate.before(self, a)  # e.g. a live env fetches the evidence of ``a`` now
            if applied != a:  # the gate ended the episode's calls: only STOP is left
                self._mask = self._compute_mask()
                a = applied
        ev = self._ev
        ev.steps += 1
        row = self._row
        n_gen = self._n_gen
        if a < n_gen:  # SAMPLE (from generator a)
            c = ev.n_revealed
            # p: the pool candidate revealed into slot c (an item episode's chosen generator's next one)
            p = self._place(a, c) if self._places else c
            cluster = row.cluster[p]
            cost = row.gen_cost[p]
            ev.add_candidate(cluster, row.output_tokens[p], row.cap_hit[p], self._clogc)
            if cluster >= 0:  # a candidate without an answer can never be selected: never worth judging
                pending, bits, has = self._pending, self._verify_bits, row.has_score[p]
                for t, bit in self._tier_index_bits:
                    if has[t]:
                        pending[t] += 1
                        bits |= bit
                self._verify_bits = bits
            refresh_rank(ev)
        elif a == self._stop:
            return self._stop_step()
        else:
            t = a - n_gen  # VERIFY at tier t
            c = verify_target(ev.rank, ev.clusters, self._slot_has, ev.scores, t)
            p = self._slot_cand[c] if self._places else c
            cost = row.ver_cost[p][t]
            score = row.score[p][t]
            ev.add_score(c, t, score)
            if self._places:
                self._after_verify(c, t, score)
            self._pending[t] -= 1
            if not self._pending[t]:
                self._verify_bits &= ~self._tier_bits[t]
            refresh_rank_of(ev, c)
        ev.cost_rows.append(cost)  # every measure: ``Evidence.cost`` adds them up on read
        k, budget = self._cost_k, self.budget
        spent_k = self._spent_k = self._spent_k + cost[k]
        reward = -ev.lam * cost[k] / budget
        self._trace.append((a, c))
        if a < n_gen:
            obs = self._obs = observe(ev, spent_k / budget, self.max_steps, self.pool.max_output_tokens, self._logs,
                                      ev.best_r, self.features)
        else:
            obs = self._obs
            patch_after_verify(obs, ev, t, c, score, spent_k / budget, self.max_steps, self.features)
        self._mask = self._compute_mask()
        return self._as_observation(obs), reward, False, False, {"action_mask": self._mask.copy()}
