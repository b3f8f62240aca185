"""Sampling-only baselines: greedy / fixed long, best-of-N majority, self-consistency, k-stable and
overthinking-aware early stopping, s1 budget-forcing replay. None of them calls a verifier."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.batch_evidence import legal, newest_cap_hit, newest_cluster
from agents.configured import ConfiguredPolicy, can, need_candidates, register
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence


def strict_leader(evidence: Evidence) -> int:
    """The top answer cluster if it is strictly more frequent than every other answer, else -1."""
    top = evidence.top
    if top < 0:
        return -1
    lead = evidence.counts[top]
    return top if all(c < lead for k, c in enumerate(evidence.counts) if k != top) else -1


@register("best_of_n")
class BestOfN(ConfiguredPolicy):
    """Best-of-N majority: SAMPLE the first ``n`` candidates, STOP; the most frequent answer wins, ties to
    the answer seen first, and candidates without an answer never win unless none has one (then nothing is
    selected). ``n = 1`` is greedy / fixed long (the first stored candidate); ``n = 16`` is self-consistency.
    """

    defaults: ClassVar[dict[str, Any]] = {"n": 4}
    n: int

    @property
    def compares_answers(self) -> bool:  # type: ignore[override]
        """A vote compares answers; the first candidate alone (greedy, n = 1) does not."""
        return self.n > 1

    def configure(self) -> None:
        """Majority selection; N must be at least 1."""
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        self.selection = "majority"

    def wanted_candidates(self) -> int:
        """``n``: an episode holding fewer is played with what it has (the bench notes how many)."""
        return self.n

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Not applicable when the env allows fewer than ``n`` candidates (e.g. N = 16 on an N = 8 pool)."""
        return need_candidates(env, self.n, self.label)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE until ``n`` candidates are revealed, then STOP."""
        if evidence.n_revealed < self.n and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        return np.where((venv.n < self.n) & legal(action_masks, self.sample_id), self.sample_id, self.stop_id)


@register("k_stable")
class KStableStop(ConfiguredPolicy):
    """k-stable stop: SAMPLE until the same answer has led after each of the last ``k`` samples, or
    ``max_samples`` are drawn; majority selection.

    ``leader`` says what leads. "top" (default, the paper's reading): the majority answer with App. C's
    tie rule (ties go to the answer seen first), the answer the vote would select; so three different
    answers in a row (7, 8, 9 keeps 7 on top) count as stable. "strict": an answer strictly more frequent
    than every other; a tie at the top is "no leader", which waits for real agreement (more samples, more
    accurate; docs/POLICIES.md)."""

    defaults: ClassVar[dict[str, Any]] = {"k": 3, "max_samples": 16, "leader": "top"}
    compares_answers: ClassVar[bool] = True
    k: int
    max_samples: int
    leader: str

    def configure(self) -> None:
        """Majority selection; k >= 1; leader "top" or "strict"."""
        if self.k < 1 or self.max_samples < 1:
            raise ValueError(f"k and max_samples must be >= 1, got {self.k} and {self.max_samples}")
        if self.leader not in ("top", "strict"):
            raise ValueError(f"leader must be 'top' or 'strict', got {self.leader!r}")
        self.selection = "majority"

    def start_episode(self) -> None:
        """New episode: no leader history."""
        self._leaders: list[int] = []

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE until the leader is unchanged over the last k samples (or the cap), then STOP."""
        self.track(evidence)
        while len(self._leaders) < evidence.n_revealed:
            self._leaders.append(strict_leader(evidence) if self.leader == "strict" else evidence.top)
        last = self._leaders[-self.k:]
        stable = len(last) == self.k and last[0] >= 0 and all(v == last[0] for v in last)
        if not stable and evidence.n_revealed < self.max_samples and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Per row: the newest leader, how many times in a row it led, and how many samples were seen."""
        super().start_batch(venv, rows)
        if rows is None:
            b = venv.num_envs
            self._b_last, self._b_run, self._b_seen = (np.zeros(b, dtype=np.int64) for _ in range(3))
            rows = slice(None)
        self._b_last[rows], self._b_run[rows], self._b_seen[rows] = -3, 0, 0  # -3: no leader recorded yet

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: the last k leaders are equal iff the newest one led k times in a row."""
        n = venv.n
        if self.leader == "strict":
            leader = np.where((venv.top >= 0) & (venv.top_count > venv.second), venv.top, -1)
        else:
            leader = venv.top
        new = n - self._b_seen  # samples since the last call, each recorded with the current leader
        grew = new > 0
        same = leader == self._b_last
        self._b_run = np.where(grew, np.where(same, self._b_run + new, new), self._b_run)
        self._b_last = np.where(grew, leader, self._b_last)
        self._b_seen = np.maximum(self._b_seen, n)
        stable = (self._b_run >= self.k) & (self._b_last >= 0)
        go = ~stable & (n < self.max_samples) & legal(action_masks, self.sample_id)
        return np.where(go, self.sample_id, self.stop_id)


@register("overthinking")
class OverthinkingStop(ConfiguredPolicy):
    """Overthinking-aware stop: SAMPLE until the top answer holds ``agree`` samples, or the newest sample
    hit the token cap while some answer is already in hand (more reasoning is being wasted), or
    ``max_samples`` are drawn; majority selection."""

    defaults: ClassVar[dict[str, Any]] = {"agree": 2, "stop_on_cap_hit": True, "max_samples": 16}
    compares_answers: ClassVar[bool] = True
    agree: int
    stop_on_cap_hit: bool
    max_samples: int

    def configure(self) -> None:
        """Majority selection; agree >= 1."""
        if self.agree < 1 or self.max_samples < 1:
            raise ValueError(f"agree and max_samples must be >= 1, got {self.agree} and {self.max_samples}")
        self.selection = "majority"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """STOP on agreement, on a cap hit with an answer in hand, or at the sample cap; else SAMPLE."""
        self.track(evidence)
        n = evidence.n_revealed
        agreed = evidence.top >= 0 and evidence.counts[evidence.top] >= self.agree
        overthinking = self.stop_on_cap_hit and n > 0 and evidence.cap_hits[-1] and evidence.n_answered > 0
        if n > 0 and (agreed or overthinking or n >= self.max_samples):
            return self.stop_id
        return self.sample_id if can(action_mask, self.sample_id) else self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        n = venv.n
        agreed = (venv.top >= 0) & (venv.top_count >= self.agree)
        overthinking = (n > 0) & newest_cap_hit(venv) & (venv.n_answered > 0) if self.stop_on_cap_hit else False
        stop = (n > 0) & (agreed | overthinking | (n >= self.max_samples))
        return np.where(~stop & legal(action_masks, self.sample_id), self.sample_id, self.stop_id)


@register("s1_budget_forcing")
class S1BudgetForcing(ConfiguredPolicy):
    """s1 budget-forcing replay: one candidate that "thinks longer". The pool holds no continuations, so a
    forced continuation ("Wait", keep reasoning) is replayed as the next stored candidate: SAMPLE, and while
    the newest candidate hit the token cap or has no answer, SAMPLE again, up to ``max_samples``; selection
    ``last`` (the newest candidate with an answer, i.e. the continued reasoning's answer)."""

    defaults: ClassVar[dict[str, Any]] = {"max_samples": 2}
    max_samples: int

    def configure(self) -> None:
        """Last-answer selection; max_samples >= 1."""
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {self.max_samples}")
        self.selection = "last"

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE once; SAMPLE again while the newest candidate is unfinished (cap hit or no answer)."""
        self.track(evidence)
        n = evidence.n_revealed
        unfinished = n == 0 or evidence.cap_hits[-1] or evidence.clusters[-1] < 0
        if unfinished and n < self.max_samples and can(action_mask, self.sample_id):
            return self.sample_id
        return self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of ``venv``."""
        n = venv.n
        unfinished = (n == 0) | newest_cap_hit(venv) | (newest_cluster(venv) < 0)
        return np.where(unfinished & (n < self.max_samples) & legal(action_masks, self.sample_id), self.sample_id, self.stop_id)


# ---------------------------------------------------------------- fitting the sampling baselines to a pool
def fit_to_pool(policies: list[Any], n_candidates: int, *, add_best_of_n: bool = True) -> list[Any]:
    """The policies with the sampling baselines fitted to a pool of ``n_candidates`` (N) per episode.

    A policy whose spec names parameters ``at_pool_n`` (self-consistency: ``n``) gets them set to N, named
    "<name>@N" and labelled "<label>@N" when that changes them. With ``add_best_of_n``, when some best-of-k in the list needs more
    candidates than the pool holds (best-of-8 and best-of-16 on a 5-sample pool), best-of-N is added after
    the largest best-of-k that fits, so the table keeps a best-of row at the pool's size.
    """
    out = []
    for policy in policies:
        names = [p for p in getattr(policy, "at_pool_n", ()) if getattr(policy, p, None) != n_candidates]
        if names and isinstance(policy, ConfiguredPolicy):
            fitted = type(policy)(name=f"{policy.name}@{n_candidates}", label=f"{policy.label}@{n_candidates}",
                                  **{**policy.params, **dict.fromkeys(names, n_candidates)})
            fitted.at_pool_n = policy.at_pool_n
            policy = fitted
        out.append(policy)
    best_of = [p for p in out if isinstance(p, BestOfN) and not getattr(p, "at_pool_n", ())]
    if not add_best_of_n or not any(p.n > n_candidates for p in best_of) or any(p.n == n_candidates for p in best_of):
        return out
    name = f"bon{n_candidates}_majority"
    if any(p.name == name for p in out):
        return out
    added = BestOfN(name=name, label=f"Best-of-{n_candidates} majority", n=n_candidates)
    fitting = [i for i, p in enumerate(out) if p in best_of and p.n < n_candidates]
    out.insert(fitting[-1] + 1 if fitting else len(out), added)
    return out


def sampling_note(n_candidates: int) -> str | None:
    """One line for a pool with one candidate per episode, where every sampling-only policy is the same."""
    if n_candidates != 1:
        return None
    return ("N = 1: the pool holds one candidate per episode, so the sampling policies (greedy, best-of-k, "
            "self-consistency, k-stable and overthinking stop, s1 budget forcing) all select it and coincide.")
