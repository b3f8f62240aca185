"""The consistency cascade with every setting open: the family ``coba train route_search`` searches over
(``train.coba_search``).

``route_cascade`` (``agents.routing_cascade``, Yue et al. 2024; this policy with two settings open) samples each
generator below the largest ``k`` times, smallest first, and stops at the first unanimous one. This policy keeps
that ladder and opens what the cascade fixes: how many samples each rung gets (0 skips it), how many agreeing samples accept a rung, whether a
rung is left as soon as it cannot reach them, the largest generator's samples, an optional cheap-judge check of
the first rung's first sample, and the answer rule. At ``k`` 2, ``votes`` 2, ``final_k`` 1, no judge, no early
escalation and answer ``last`` it takes the cascade's every decision (``tests/test_route_search.py``).
Every signal is label-free: answer agreement within a generator and the cheap judge's score.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal
from agents.configured import can, register
from agents.routing import route_of
from agents.routing_base import RoutePolicy, score_mean_batch, unanimous, unanimous_batch
from coba_env.evidence import Evidence


def top_rung_action(policy: Any, evidence: Any, action_mask: np.ndarray) -> int:
    """The cascade's last rung: SAMPLE the largest generator until it has ``policy.final_k`` candidates, then STOP."""
    top = policy.ladder[-1]
    sample = policy.layout.sample_action(top)
    if evidence.gen_revealed[top] < policy.final_k and can(action_mask, sample):
        return sample
    return policy.stop_id


def top_rung_batch(policy: Any, venv: Any, action_masks: np.ndarray, todo: np.ndarray, out: np.ndarray) -> None:
    """``top_rung_action`` for the rows ``todo`` still climbing: writes their SAMPLE into ``out`` (STOP stays)."""
    top = policy.ladder[-1]
    sample = policy.layout.sample_action(top)
    out[todo & (venv.gen_revealed[top] < policy.final_k) & legal(action_masks, sample)] = sample


#: The answer rules at STOP: the newest answered candidate (the cascade's) or the majority over every one.
ANSWERS = ("last", "majority")


@register("route_ladder")
class LadderCascadePolicy(RoutePolicy):
    """A consistency cascade over the generators ordered by size, with per-rung settings.

    For each rung r (every generator but the largest, smallest first) with ``k_r`` samples (``rung_k[r]``, or
    ``k`` for every rung when ``rung_k`` is None; 0 skips the rung) and ``need_r`` = min(``votes``, ``k_r``):

    1. Judge (``judge`` on, first rung with ``k_r`` > 0 only): after its first sample, and before any other,
       VERIFY it with the cheap judge (V1 role). Its score s >= ``judge_accept``: STOP; s < ``judge_escalate``:
       leave the rung; otherwise (or with no usable score) go on as below.
    2. STOP once the rung's largest answer has ``need_r`` samples.
    3. SAMPLE the rung while it has fewer than ``k_r`` samples and can draw more; with ``early_escalate``,
       leave it instead as soon as ``need_r`` agreeing samples are out of reach.
    4. Otherwise STOP if the rung's samples are unanimous (all answered, one answer; a rung with fewer
       candidates than ``k_r``), else leave it for the next rung.

    The largest generator is sampled ``final_k`` times and the episode stops. Selection ``answer``: "last"
    (the newest answered candidate: the accepted rung's answer, or the largest's) or "majority" (over every
    revealed candidate, ties to the first seen).
    """

    defaults: ClassVar[dict[str, Any]] = {"k": 2, "rung_k": None, "votes": 2, "final_k": 1, "early_escalate": False,
                                          "judge": False, "judge_accept": 1.0, "judge_escalate": 0.0,
                                          "answer": "last"}
    compares_answers: ClassVar[bool] = True
    k: int
    rung_k: list[int] | None
    votes: int
    final_k: int
    early_escalate: bool
    judge: bool
    judge_accept: float
    judge_escalate: float
    answer: str

    def configure(self) -> None:
        """Check the counts, thresholds and answer rule; the judge requires the cheap-judge role."""
        if self.rung_k is not None:
            if isinstance(self.rung_k, str | bytes) or not all(_is_count(k) for k in self.rung_k):
                raise ValueError(f"rung_k must be a list of integers >= 0 (samples per rung), got {self.rung_k!r}")
            self.rung_k = [int(k) for k in self.rung_k]
        if not _is_count(self.k):
            raise ValueError(f"k must be an integer >= 0, got {self.k!r}")
        if self.votes < 2:
            raise ValueError(f"votes must be >= 2 (one sample always agrees with itself), got {self.votes}")
        if self.final_k < 1:
            raise ValueError(f"final_k must be >= 1, got {self.final_k}")
        if not 0.0 <= self.judge_escalate <= self.judge_accept <= 1.0:
            raise ValueError("need 0 <= judge_escalate <= judge_accept <= 1, got "
                             f"judge_escalate {self.judge_escalate} and judge_accept {self.judge_accept}")
        if self.answer not in ANSWERS:
            raise ValueError(f"answer must be one of {list(ANSWERS)}, got {self.answer!r}")
        self.requires_tiers = ("V1",) if self.judge else ()
        self.selection = self.answer

    def applicable(self, env: Any) -> tuple[bool, str]:
        """A route env whose ladder has one rung per ``rung_k`` entry below the largest generator."""
        ok, why = super().applicable(env)  # a route env first: then it has a route pool
        rungs = route_of(env).n_generators - 1 if ok else 0
        if ok and self.rung_k is not None and len(self.rung_k) != rungs:
            return False, f"rung_k has {len(self.rung_k)} entries; the pool's ladder has {rungs} rungs below its largest generator"
        return ok, why

    def rung_samples(self) -> list[int]:
        """``k_r`` for every rung below the largest generator (ladder order); needs the bound layout."""
        return list(self.rung_k) if self.rung_k is not None else [self.k] * (len(self.ladder) - 1)

    def judged_rung(self) -> int:
        """Index of the rung the judge checks (the first with samples), -1 without a judge."""
        if not self.judge:
            return -1
        return next((r for r, k in enumerate(self.rung_samples()) if k > 0), -1)

    def climbed_rungs(self) -> list[tuple[bool, Any, int]]:
        """(judged, generator, k_r) of every rung that samples (k_r > 0), smallest first: the rungs ``act`` and
        ``act_batch`` climb, the judged one (``judged_rung``) marked."""
        judged = self.judged_rung()
        return [(r == judged, g, k) for r, (g, k) in enumerate(zip(self.ladder[:-1], self.rung_samples(), strict=True))
                if k > 0]

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """The next action of the ladder: judge, SAMPLE the current rung, leave it, or STOP."""
        ev: Any = evidence
        for judged, g, k in self.climbed_rungs():
            if judged:
                verify = self.verify_for("V1")
                if ev.gen_revealed[g] == 1 and ev.n_revealed == 1 and verify is not None and can(action_mask, verify):
                    return verify
                s = ev.score_mean(g, self.roles.slot("V1"))
                if s is not None and s >= self.judge_accept:
                    return self.stop_id
                if s is not None and s < self.judge_escalate:
                    continue
            need, n, top_count = min(self.votes, k), ev.gen_revealed[g], ev.gen_top_count[g]
            if top_count >= need:
                return self.stop_id
            sample = self.layout.sample_action(g)
            if n < k and can(action_mask, sample):
                if self.early_escalate and top_count + (k - n) < need:
                    continue
                return sample
            if unanimous(ev, g):
                return self.stop_id
        return top_rung_action(self, ev, action_mask)

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: each rung claims the rows still climbing, step by step in ``act``'s order."""
        out = np.full(venv.num_envs, self.stop_id, dtype=np.int64)
        todo = np.ones(venv.num_envs, dtype=bool)  # rows not decided yet (STOP stays in ``out``)
        for judged, g, k in self.climbed_rungs():
            here = todo.copy()  # rows that work on this rung (the others leave it for the next)
            if judged:
                verify = self.verify_for("V1")
                call = here & (venv.gen_revealed[g] == 1) & (venv.n == 1) & legal(action_masks, verify)
                out[call] = verify
                todo &= ~call
                s, has = score_mean_batch(venv, g, self.roles.slot("V1"))
                accept = todo & has & (s >= self.judge_accept)
                todo &= ~accept
                here = todo & ~(has & (s < self.judge_escalate))
            need, n, top_count = min(self.votes, k), venv.gen_revealed[g], venv.gen_top_count[g]
            done = here & (top_count >= need)
            todo &= ~done
            here &= ~done
            can_draw = here & (n < k) & legal(action_masks, self.layout.sample_action(g))
            draw = can_draw & ~(top_count + (k - n) < need) if self.early_escalate else can_draw
            out[draw] = self.layout.sample_action(g)
            todo &= ~draw
            todo &= ~(here & ~can_draw & unanimous_batch(venv, g))
        top_rung_batch(self, venv, action_masks, todo, out)
        return out


def _is_count(value: Any) -> bool:
    """Whether ``value`` is an integer >= 0 (not a bool)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0
