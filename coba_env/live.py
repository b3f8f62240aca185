"""Live routing: ``CoBaEnv`` fed by an evidence source instead of a cached pool, under hard per-problem budgets.

``LiveEnv`` is a subclass of ``CoBaEnv``: each episode starts as a blank one-episode row of N_max
candidates; before the base class applies SAMPLE (VERIFY_l) it fetches that candidate (the score of
``verify_target(l)``) from its ``EvidenceSource`` and writes it into the row. Everything else (evidence,
features, masks, costs, STOP selection, trace) is the base class's own code, so a policy sees exactly what
it would see in replay.

Sources (``coba_env.live_sources``): ``EndpointSource`` calls OpenAI-compatible servers (generator, V1
judge, V2 step judge, V3 verifier); ``PoolReplaySource`` replays a cached pool's episodes, so a live run
can be checked action for action against ``CoBaEnv`` replay.

Hard budgets (``Limits``: tokens, calls, seconds per problem) are checked before every call: an action
whose call could exceed a limit is masked (its token bound is the prompt's bound plus the request's
``max_tokens``), and a call runs with the remaining seconds as its timeout. When nothing but STOP is
left the policy must stop; when the time runs out during a call, the call is abandoned and the episode
stops. ``info["live"]`` says what was spent and why the episode stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from coba_env.compiled import CompiledPool, Labels
from coba_env.costs import COST_MEASURES
from coba_env.env import CoBaEnv
from coba_env.live_sources import (
    CallBound,
    CallInterrupted,
    EndpointSource,
    EvidenceSource,
    LiveEndpointError,
    PoolReplaySource,
)
from coba_env.rules.selection import SelectionRule
from pools.schema import TIERS

__all__ = ["CallBound", "CallInterrupted", "EndpointSource", "EvidenceSource", "LiveEndpointError", "LiveEnv",
           "Limits", "PoolReplaySource", "replay_normalizers"]

#: Seconds below which no new call is started (it could not finish anyway).
MIN_CALL_SECONDS = 0.01
#: Seconds of a time budget kept back from a call's timeout for the bookkeeping around it (so that an
#: abandoned call still leaves the episode within its budget).
SECONDS_MARGIN = 0.05


@dataclass(frozen=True)
class Limits:
    """Hard per-problem budgets; None = unlimited. Never exceeded (see the module docstring)."""

    tokens: float | None = None
    calls: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "calls", "seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"budget {name} must be > 0, got {value}")


def replay_normalizers(compiled: CompiledPool, cost_model: str = "p_tokens", n_max: int | None = None) -> dict:
    """``n_max``, ``budget`` and ``max_output_tokens`` of a ``CoBaEnv`` over ``compiled`` (for a LiveEnv that
    must show a policy the same features as that replay env, e.g. a controller trained on it)."""
    from coba_env.env import default_budget

    n = int(n_max or compiled.n_candidates)
    return {"n_max": n, "budget": default_budget(compiled, cost_model, n),
            "max_output_tokens": float(compiled.max_output_tokens)}


class LiveEnv(CoBaEnv):
    """``CoBaEnv`` whose episodes are revealed online by ``source`` (see the module docstring).

    Arguments as ``CoBaEnv``, plus: ``source``; ``n_max`` (most candidates per problem); ``budget`` (B of the
    reward and of the ``budget_used`` feature) and ``max_output_tokens`` (normalizer of ``mean_length``),
    which a learned controller needs equal to its training env's (``replay_normalizers``); ``limits``.
    Episode i is the source's task i (a problem, or a cached episode); ``info["correct"]`` is None unless
    the source knows the labels (only ``PoolReplaySource`` does).
    """

    def __init__(self, source: EvidenceSource, *, n_max: int, budget: float, max_output_tokens: float,
                 limits: Limits | None = None, lam: float = 0.1, lambda_range: tuple[float, float] | None = None,
                 cost_model: str = "p_tokens", tiers: tuple[str, ...] = TIERS,
                 selection: SelectionRule | dict | str | None = None, max_cost: float | None = None,
                 render_mode: str | None = None) -> None:
        if n_max < 1 or n_max > source.max_candidates:
            raise ValueError(f"n_max must be in 1..{source.max_candidates} for this source, got {n_max}")
        if not max_output_tokens > 0:
            raise ValueError(f"max_output_tokens must be > 0, got {max_output_tokens}")
        self.source = source
        self.limits = limits or Limits()
        self._live_max_output_tokens = float(max_output_tokens)
        self._live_n = int(n_max)
        self._live_cursor = 0
        self._live_ep = -1
        super().__init__(self._live_blank_pool(0, {}), lam=lam, lambda_range=lambda_range, budget=budget,
                         cost_model=cost_model, n_max=n_max, tiers=tiers, selection=selection, max_cost=max_cost,
                         render_mode=render_mode)

    # -- the per-episode blank pool and row ---------------------------------------------------------------
    def _live_blank_pool(self, ep: int, meta: dict[str, Any]) -> CompiledPool:
        n, t, k = self._live_n, len(TIERS), len(COST_MEASURES)
        labels = meta.get("labels")
        correct = np.zeros((1, n), dtype=bool)
        if labels is not None:
            correct[0, :] = np.asarray(labels[:n], dtype=bool)
        obj = lambda v: np.array([v], dtype=object)  # noqa: E731
        return CompiledPool(
            n_candidates=n, tiers=TIERS, episode_ids=np.array([ep], dtype=np.int64),
            dataset=obj(meta.get("dataset")), generator=obj(meta.get("generator")), item_id=obj(meta.get("item_id")),
            cluster=np.full((1, n), -1, dtype=np.int32), answer=np.full((1, n), None, dtype=object),
            output_tokens=np.zeros((1, n)), cap_hit=np.zeros((1, n), dtype=bool), gen_cost=np.zeros((1, n, k)),
            has_score=np.zeros((1, n, t), dtype=bool), score=np.full((1, n, t), np.nan),
            ver_cost=np.zeros((1, n, t, k)), max_output_tokens=self._live_max_output_tokens,
            labels=Labels(correct=correct, gold_cluster=np.full(1, -1, dtype=np.int32)),
            tiers_present=tuple(self.source.tiers))

    def _live_blank_row(self) -> tuple:
        """The episode row ``CoBaEnv.step`` reads (layout of ``CompiledPool.episode_rows``), all unrevealed."""
        n, t, k = self._live_n, len(TIERS), len(COST_MEASURES)
        return ([-1] * n, [0.0] * n, [False] * n, [[0.0] * k for _ in range(n)], [[False] * t for _ in range(n)],
                [[math.nan] * t for _ in range(n)], [[[0.0] * k for _ in range(t)] for _ in range(n)], n)

    # -- episodes -----------------------------------------------------------------------------------
    @property
    def n_episodes(self) -> int:
        """Tasks the source holds (problems, or cached episodes)."""
        return self.source.n_episodes

    @property
    def episode_index(self) -> int:
        """The source's task index of the current episode; -1 before the first reset."""
        return self._live_ep

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start task ``options["episode"]`` of the source (default: the next one in order)."""
        options = dict(options or {})
        if seed is not None:
            self._live_cursor = 0
        ep = options.pop("episode", None)
        if ep is None:
            ep = self._live_cursor % self.source.n_episodes
            self._live_cursor += 1
        ep = int(ep)
        if not 0 <= ep < self.source.n_episodes:
            raise ValueError(f"episode index {ep} out of range 0..{self.source.n_episodes - 1}")
        meta = self.source.begin(ep)
        self._live_task = meta
        self.pool = self._live_blank_pool(ep, meta)
        self._rows = [self._live_blank_row()]
        self._live_ep = ep
        self._live_calls: list[dict[str, Any]] = []
        self._live_abandoned = [0.0, 0.0, 0.0]  # tokens (bound), calls, seconds of calls cut by the time budget
        self._live_interrupted: str | None = None
        self._live_t0 = time.monotonic()
        obs, info = super().reset(seed=seed, options={**options, "episode": 0})
        info["episode"] = ep
        return obs, info

    # -- budgets ------------------------------------------------------------------------------------
    def spent(self) -> dict[str, float]:
        """What this episode has used against ``limits`` (abandoned calls included, at their bound)."""
        cost = self._ev.cost if self._ev is not None else [0.0] * 4
        if self.source.simulated_time:
            seconds = cost[3] + self._live_abandoned[2]
        else:
            seconds = time.monotonic() - self._live_t0
        return {"tokens": cost[0] + self._live_abandoned[0], "calls": cost[2] + self._live_abandoned[1], "seconds": seconds}

    def _live_call_bound(self, action: int) -> CallBound:
        if action == self.SAMPLE:
            return self.source.sample_bound(self._ev.n_revealed)
        t = action - 1
        return self.source.verify_bound(self.verify_target(t), t)

    def _live_blocking_limit(self, bound: CallBound, spent: dict[str, float]) -> str | None:
        """The limit (tokens, calls, seconds) that a call with ``bound`` could exceed, or None."""
        lim = self.limits
        if lim.calls is not None and spent["calls"] + 1 > lim.calls:
            return "calls"
        if lim.tokens is not None and spent["tokens"] + bound.tokens > lim.tokens:
            return "tokens"
        if lim.seconds is not None:
            left = lim.seconds - spent["seconds"] - (0.0 if self.source.simulated_time else SECONDS_MARGIN)
            if (bound.seconds is not None and bound.seconds > left) or left < MIN_CALL_SECONDS:
                return "seconds"
        return None

    def _compute_mask(self) -> np.ndarray:
        # The base mask, minus every call that could break a hard budget; STOP becomes legal when nothing
        # else is (as in the base rule "STOP is legal once a candidate is revealed or nothing else is").
        super()._compute_mask()
        bits = self._bits
        self._live_blocked: dict[str, str] = {}
        stop = 1 << (self.n_tiers + 1)
        if self._live_interrupted is not None:
            bits = 0
        elif self.limits != Limits():
            spent = self.spent()
            for a in range(self.n_tiers + 1):
                if bits >> a & 1:
                    why = self._live_blocking_limit(self._live_call_bound(a), spent)
                    if why is not None:
                        bits &= ~(1 << a)
                        self._live_blocked[self.actions[a]] = why
        if not bits & ~stop:
            bits |= stop
        self._bits = bits
        return self._mask_table[bits]

    # -- stepping -----------------------------------------------------------------------------------
    def _illegal_reason(self, a: int) -> str:
        if 0 <= a <= self.n_tiers and self.actions[a] in self._live_blocked:
            return (f"action {a} ({self.actions[a]}) is not allowed now: its call could exceed the "
                    f"hard {self._live_blocked[self.actions[a]]} budget ({self._live_limit_text()})")
        return super()._illegal_reason(a)

    def step(self, action: int):
        """Fetch the evidence ``action`` reveals from the source, then let ``CoBaEnv.step`` apply it."""
        a = int(action)
        if not self._done and 0 <= a < len(self._mask) and (self._bits >> a) & 1 and a != self.STOP:
            try:
                self._live_fetch(a)
            except CallInterrupted as exc:
                self._live_interrupted = str(exc)
                self._mask = self._compute_mask()
                a = self.STOP
        stopping = a == self.STOP and not self._done
        stop_reason = self._live_stop_reason() if stopping else None
        spent = self.spent() if stopping else None  # taken when STOP is applied: the episode's final use
        obs, reward, terminated, truncated, info = super().step(a)
        if terminated:
            info["episode"] = self._live_ep
            if self._live_task.get("labels") is None:
                info["correct"] = None
            info["live"] = {"stop_reason": stop_reason, "interrupted": self._live_interrupted, "calls": self._live_calls,
                            "spent": spent, "limits": asdict(self.limits), "problem": self._live_task.get("problem")}
        return obs, reward, terminated, truncated, info

    def _live_fetch(self, a: int) -> None:
        """Call the source for the evidence of action ``a`` and write it into the episode row."""
        row = self._row
        timeout = None
        if self.limits.seconds is not None and not self.source.simulated_time:
            timeout = self.limits.seconds - self.spent()["seconds"] - SECONDS_MARGIN
            if timeout < MIN_CALL_SECONDS:
                raise CallInterrupted(f"the time budget of {self.limits.seconds:g} s ran out before the "
                                      f"{self.actions[a]} call")
        bound = self._live_call_bound(a)
        try:
            if a == self.SAMPLE:
                c = self._ev.n_revealed
                got = self.source.sample(c, timeout)
                row[0][c], row[1][c], row[2][c] = got.cluster, got.output_tokens, got.cap_hit
                row[3][c], row[4][c] = list(got.cost), [bool(h) for h in got.has_tiers]
                self.pool.answer[0, c] = got.answer
                self.pool.cluster[0, c] = got.cluster
                detail = got.detail
            else:
                t = a - 1
                c = self.verify_target(t)
                got = self.source.verify(c, t, timeout)
                row[5][c][t], row[6][c][t] = got.score, list(got.cost)
                detail = got.detail
        except CallInterrupted:
            self._live_abandoned[0] += bound.tokens if math.isfinite(bound.tokens) else 0.0
            self._live_abandoned[1] += 1
            self._live_abandoned[2] += timeout or 0.0
            self._live_calls.append({"action": self.actions[a], "abandoned": True, "token_bound": bound.tokens})
            raise
        self._live_calls.append({"action": self.actions[a], "candidate": c, "token_bound": bound.tokens,
                            **dict(zip(COST_MEASURES, got.cost, strict=True)), **detail})

    def _live_limit_text(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in asdict(self.limits).items() if v is not None) or "none"

    def _live_stop_reason(self) -> str:
        """Why the episode stops now (called just before STOP is applied)."""
        if self._live_interrupted is not None:
            return f"budget: {self._live_interrupted}"
        stop = 1 << (self.n_tiers + 1)
        if self._bits & ~stop:
            return "policy: chose STOP"
        if self._live_blocked:
            parts = ", ".join(f"{a} ({why})" for a, why in self._live_blocked.items())
            return f"budget: the next call could exceed a hard limit ({self._live_limit_text()}): {parts}"
        if self._ev.cost[self._cost_k] >= self.max_cost:
            return f"budget: max_cost={self.max_cost:g} ({self.cost_model}) is spent"
        return f"done: N_max={self.n_max} candidates revealed and nothing left to verify"
