"""CoBa routing (paper Algorithm 1 with the fixed routing specification of Table "routing-spec")."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal, supports_top_mean, top_share, top_tier_mean
from agents.configured import ConfiguredPolicy, can, register
from coba_env.evidence import Evidence
from coba_env.rules.selection import default_fusion_weights
from pools.limits import MAX_CANDIDATES


@register("coba")
class CoBaPolicy(ConfiguredPolicy):
    """CoBa-Routed: warm-up, cheap judging of every candidate, stable-answer stop, top-K strong routing.

    One episode, exactly Algorithm 1:

    1. SAMPLE ``warmup_k`` candidates (never more than ``n_max``).
    2. VERIFY_V1 until no revealed candidate is left unjudged (the V0 answer frequency is free).
    3. If ``use_v2``: VERIFY_V2 on the warm-up candidates while the pool holds V2 calls for them; V2 is
       never applied to candidates drawn later (paper Appendix A).
    4. While fewer than ``n_max`` candidates are revealed and SAMPLE is legal (the budget is not spent):
       stop expanding when the top answer is *stable*, i.e. its share of revealed candidates is at least
       ``share_min`` and its cheap-judge score is at least ``s1_min``; otherwise SAMPLE one more candidate
       and VERIFY_V1 it. The cheap-judge score of the top answer is the mean V1 score over the top
       cluster's judged candidates (``Evidence.top_tier_mean(V1)``, the observation's ``top_v1_mean``);
       a top cluster without a usable V1 score is never stable.
    5. Route the top ``strong_routes`` (K) candidates to V3: VERIFY_V3 K times (fewer when fewer candidates
       can be verified). The env's VERIFY_V3 target is the unverified candidate with the highest current
       fusion rank; before any V3 score that is "rank by cheap score and answer frequency", and a V3 score
       changes only its own candidate's rank, so K calls verify exactly the top K of the pre-V3 ranking.
    6. STOP; the env selects argmax R(c) = .20 f + .30 s1 + .15 s2 + .45 s3 with missing scores renormalized.

    Light (``n_max`` = 2 = ``warmup_k``, K = 0) therefore never expands and never calls V3.

    V1, V2 and V3 are roles (cheap judge, process judge, strong verifier), served by the pool's verifiers
    through the env's role map (``coba_env.rules.roles``): CoBa needs a cheap judge (a reward model or
    strong verifier stands in when the pool has none); V2 and V3 are optional. Without a strong verifier no
    candidate is routed; when one verifier serves both V1 and V3 every candidate is already scored by it,
    so the env offers no route either.

    ``skip_unanimous_routes`` (default False, i.e. literal Algorithm 1) skips step 5 when the revealed
    candidates hold at most one distinct answer: V3 scores can then change which candidate is selected but
    never the selected answer, so accuracy is identical at a lower cost (see docs/POLICIES.md for why the
    paper's call counts suggest its implementation did this).
    """

    group: ClassVar[str] = "coba"
    defaults: ClassVar[dict[str, Any]] = {
        "warmup_k": 2, "n_max": 4, "strong_routes": 2, "share_min": 0.6, "s1_min": 0.7, "use_v2": True,
        "fusion_weights": None, "skip_unanimous_routes": False,
    }
    compares_answers: ClassVar[bool] = True
    ranges: ClassVar[dict[str, tuple[float, float]]] = {
        "warmup_k": (1, MAX_CANDIDATES), "n_max": (1, MAX_CANDIDATES), "strong_routes": (0, MAX_CANDIDATES),
        "share_min": (0.0, 1.0), "s1_min": (0.0, 1.0)}
    warmup_k: int
    n_max: int
    strong_routes: int
    share_min: float
    s1_min: float
    use_v2: bool
    fusion_weights: dict[str, float] | None
    skip_unanimous_routes: bool

    def configure(self) -> None:
        """Check the routing parameters; V3 is required only when candidates are routed to it."""
        if self.warmup_k < 1 or self.n_max < 1:
            raise ValueError(f"warmup_k and n_max must be >= 1, got {self.warmup_k} and {self.n_max}")
        if self.strong_routes < 0:
            raise ValueError(f"strong_routes must be >= 0, got {self.strong_routes}")
        self.requires_tiers = ("V1", "V3") if self.strong_routes > 0 else ("V1",)
        # Routing is the expensive half of Algorithm 1; without a strong verifier CoBa still runs its
        # cheap-judged, stability-stopped sampling and routes nothing.
        self.optional_tiers = ("V3",)
        weights = dict(self.fusion_weights) if self.fusion_weights is not None else default_fusion_weights()
        self.selection = {"rule": "fusion", "weights": weights}

    def start_episode(self) -> None:
        """New episode: expansion not yet finished, nothing routed."""
        self._expanding = True
        self._routed = 0

    def is_stable(self, evidence: Evidence) -> bool:
        """The stop criterion: top-answer share >= share_min and its mean cheap-judge score >= s1_min."""
        slot = self.roles.slot("V1")
        s1 = None if slot is None else evidence.top_tier_mean(slot)
        return evidence.top_share() >= self.share_min and s1 is not None and s1 >= self.s1_min

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """The next action of Algorithm 1 given what has been revealed and done so far."""
        self.track(evidence)
        n = evidence.n_revealed
        warmup = min(self.warmup_k, self.n_max)
        if n < warmup and can(action_mask, self.sample_id):
            return self.sample_id
        cheap, process, strong = self.verify_for("V1"), self.verify_for("V2"), self.verify_for("V3")
        if cheap is not None and can(action_mask, cheap):
            return cheap
        if self.use_v2 and n <= warmup and process is not None and can(action_mask, process):
            return process
        if self._expanding:
            if n < self.n_max and can(action_mask, self.sample_id) and not self.is_stable(evidence):
                return self.sample_id
            self._expanding = False
            if self.skip_unanimous_routes and evidence.n_distinct <= 1:
                self._routed = self.strong_routes
        if self._routed < self.strong_routes and strong is not None and can(action_mask, strong):
            self._routed += 1
            return strong
        return self.stop_id

    # -- the same rule for a batch of episodes (``CoBaVectorEnv``) ----------------------------------------
    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def supports_batch(self, venv: Any) -> bool:
        """The vector env keeps the top cluster's V1 and V3 statistics; a cheap judge on V2 replays one by one."""
        return supports_top_mean(venv, venv.config.roles.slot("V1"))

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Per row: whether expansion is still open and how many candidates were routed."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_expanding = np.ones(venv.num_envs, dtype=bool)
            self._b_routed = np.zeros(venv.num_envs, dtype=np.int64)
        else:
            self._b_expanding[rows] = True
            self._b_routed[rows] = 0

    def is_stable_batch(self, venv: Any) -> np.ndarray:
        """``is_stable`` for every row of ``venv``."""
        s1, has = top_tier_mean(venv, self.roles.slot("V1"))
        return (top_share(venv) >= self.share_min) & has & (s1 >= self.s1_min)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: each branch of Algorithm 1 claims the rows it applies to, in ``act``'s order."""
        n = venv.n
        warmup = min(self.warmup_k, self.n_max)
        can_sample = legal(action_masks, self.sample_id)
        cheap, process, strong = self.verify_for("V1"), self.verify_for("V2"), self.verify_for("V3")
        out = np.full(len(n), self.stop_id, dtype=np.int64)
        todo = np.ones(len(n), dtype=bool)

        def claim(rows: np.ndarray, action: int) -> None:  # rows: a bool mask (masked copies: no index arrays)
            np.copyto(out, action, where=rows)
            np.logical_and(todo, ~rows, out=todo)

        claim(todo & (n < warmup) & can_sample, self.sample_id)
        if cheap is not None:
            claim(todo & legal(action_masks, cheap), cheap)
        if self.use_v2 and process is not None:
            claim(todo & (n <= warmup) & legal(action_masks, process), process)
        expanding = todo & self._b_expanding
        if expanding.any():
            claim(expanding & (n < self.n_max) & can_sample & ~self.is_stable_batch(venv), self.sample_id)
            ended = expanding & todo
            self._b_expanding[ended] = False
            if self.skip_unanimous_routes:
                self._b_routed[ended & (venv.n_distinct <= 1)] = self.strong_routes
        if strong is not None:
            route = todo & (self._b_routed < self.strong_routes) & legal(action_masks, strong)
            self._b_routed[route] += 1
            claim(route, strong)
        return out
