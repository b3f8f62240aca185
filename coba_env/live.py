"""Live routing: ``CoBaEnv`` fed by an evidence source instead of a cached pool, under hard per-problem budgets.

``LiveEnv`` is a ``CoBaEnv`` that composes a ``LiveGate`` (``coba_env.gate.ActionGate``): each episode is a
blank one-episode ``LiveEpisode``, which the env replays through ``CoBaEnv.use_pool``; before the env applies
SAMPLE (VERIFY_l) the gate fetches that candidate (the score of ``verify_target(l)``) from its
``EvidenceSource`` and reveals it in the episode. A source with one generator gives the pair grouping (N_max
candidate slots, ``SAMPLE``); one with several named generators the item grouping (``G * N_max`` slots,
generator-major as ``coba_env.route_pool`` lays item episodes out; ``SAMPLE_<name>`` reveals that generator's
next candidate in its next slot, and the env places it in the episode's next slot exactly as in replay).
Everything else (pooled and per-generator evidence, features, masks, costs, STOP selection, trace) is
``CoBaEnv``'s own code on the rules of ``coba_env.rules``, so a policy sees exactly what it would see in replay.

Sources: ``coba_env.endpoint_source.EndpointSource`` calls OpenAI-compatible servers (one generator or several
named ones, and a judge endpoint per verifier); ``coba_env.live_sources.PoolReplaySource`` replays a cached pool's episodes
(one generator's, or every generator's of an item), so a live run can be checked action for action against
``CoBaEnv`` replay.

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
from coba_env.costs import CALLS, COST_MEASURES, LATENCY, TOKENS, cost_record
from coba_env.endpoint_source import EndpointSource
from coba_env.env import CoBaEnv
from coba_env.episode_data import EpisodeData
from coba_env.gate import ActionGate
from coba_env.live_sources import (
    CallBound,
    CallInterrupted,
    EvidenceSource,
    LiveEndpointError,
    PoolReplaySource,
    Revealed,
    Scored,
)
from coba_env.route_pool import RoutePool
from coba_env.rules.actions import ActionLayout
from coba_env.rules.config import EnvConfig, check_int, check_number
from coba_env.rules.masks import stop_bit
from coba_env.rules.roles import declared_roles
from coba_env.rules.selection import SelectionRule
from pools.limits import MAX_TOKENS

__all__ = ["CallBound", "CallInterrupted", "EndpointSource", "EvidenceSource", "LiveEndpointError", "LiveEnv",
           "LiveEpisode", "LiveGate", "Limits", "PoolReplaySource", "replay_normalizers"]

#: Seconds below which no new call is started (it could not finish anyway).
MIN_CALL_SECONDS = 0.01
#: Seconds of a time budget kept back from a call's timeout for the bookkeeping around it (so that an
#: abandoned call still leaves the episode within its budget).
SECONDS_MARGIN = 0.05


def _calls_mask(layout: ActionLayout) -> int:
    """The mask bits of every action but STOP (the model calls)."""
    return stop_bit(layout) - 1


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

    def text(self) -> str:
        """The limits as ``name=value`` pairs ("none" when unlimited)."""
        return ", ".join(f"{k}={v:g}" for k, v in asdict(self).items() if v is not None) or "none"


def replay_normalizers(compiled: CompiledPool, cost_model: str = "p_tokens", n_max: int | None = None) -> dict:
    """``n_max``, ``budget`` and ``max_output_tokens`` of a ``CoBaEnv`` over ``compiled`` (for a LiveEnv that
    must show a policy the same features as that replay env, e.g. a controller trained on it)."""
    config = EnvConfig.for_pool(compiled, cost_model=cost_model, n_max=n_max)  # validated: n_max=0 is refused
    return {"n_max": config.n_max, "budget": config.budget, "max_output_tokens": float(compiled.max_output_tokens)}


class LiveEpisode:
    """One live episode as a one-episode pool whose candidates and scores are revealed as the source sends them.

    ``row`` is the ``EpisodeData`` ``CoBaEnv`` reads (as ``CompiledPool.episode_rows`` gives them); it starts all
    unrevealed and is filled by ``reveal_candidate`` / ``reveal_score`` before the env applies the action.
    """

    def __init__(self, n: int, ep: int, meta: dict[str, Any], verifiers: tuple[str, ...],
                 tiers_present: tuple[str, ...], max_output_tokens: float, *,
                 verifier_roles: tuple[str, ...] | None = None) -> None:
        t, k = len(verifiers), len(COST_MEASURES)
        labels = meta.get("labels")
        correct = np.zeros((1, n), dtype=bool)
        if labels is not None:
            correct[0, :] = np.asarray(labels[:n], dtype=bool)
        obj = lambda v: np.array([v], dtype=object)  # noqa: E731
        self.pool = CompiledPool(
            n_candidates=n, tiers=tuple(verifiers), episode_ids=np.array([ep], dtype=np.int64),
            dataset=obj(meta.get("dataset")), generator=obj(meta.get("generator")), item_id=obj(meta.get("item_id")),
            cluster=np.full((1, n), -1, dtype=np.int32), answer=np.full((1, n), None, dtype=object),
            output_tokens=np.zeros((1, n)), cap_hit=np.zeros((1, n), dtype=bool), gen_cost=np.zeros((1, n, k)),
            has_score=np.zeros((1, n, t), dtype=bool), score=np.full((1, n, t), np.nan),
            ver_cost=np.zeros((1, n, t, k)), max_output_tokens=max_output_tokens,
            labels=Labels(correct=correct, gold_cluster=np.full(1, -1, dtype=np.int32)),
            tiers_present=tiers_present, verifier_models=("",) * t,
            verifier_roles=declared_roles(None, verifiers) if verifier_roles is None else tuple(verifier_roles))
        # Up to n answer clusters (the blank pool's arrays do not know how many the source will reveal).
        self.row = EpisodeData.blank(n, t, k, n)

    def reveal_candidate(self, c: int, got: Revealed) -> None:
        """Candidate ``c`` as the source sent it."""
        row = self.row
        row.cluster[c], row.output_tokens[c], row.cap_hit[c] = got.cluster, got.output_tokens, got.cap_hit
        row.gen_cost[c], row.has_score[c] = list(got.cost), [bool(h) for h in got.has_tiers]
        self.pool.answer[0, c] = got.answer
        self.pool.cluster[0, c] = got.cluster

    def reveal_score(self, c: int, t: int, got: Scored) -> None:
        """Candidate ``c``'s tier-``t`` score as the source sent it."""
        self.row.score[c][t], self.row.ver_cost[c][t] = got.score, list(got.cost)


class LiveGate(ActionGate):
    """Fetches each action's evidence from the source before the env applies it, and keeps the hard budgets."""

    def __init__(self, source: EvidenceSource, limits: Limits, n_max: int, max_output_tokens: float) -> None:
        self.source, self.limits = source, limits
        self.n_max, self.max_output_tokens = n_max, max_output_tokens
        self.begin(-1, {})

    def begin(self, ep: int, meta: dict[str, Any]) -> LiveEpisode:
        """Start episode ``ep`` (the source's task, described by ``meta``): a blank episode, nothing spent."""
        self.ep, self.task = ep, meta
        self.episode = LiveEpisode(self.n_max, max(ep, 0), meta, tuple(self.source.verifiers), tuple(self.source.tiers),
                                   self.max_output_tokens, verifier_roles=self.source.verifier_roles)
        self.calls: list[dict[str, Any]] = []
        self.abandoned = [0.0, 0.0, 0.0]  # tokens (bound), calls, seconds of calls cut by the time budget
        self.interrupted: str | None = None
        self.blocked_why: dict[str, str] = {}
        self.t0 = time.monotonic()
        return self.episode

    # -- budgets ------------------------------------------------------------------------------------
    def spent(self, env: CoBaEnv) -> dict[str, float]:
        """What this episode has used against ``limits`` (abandoned calls included, at their bound)."""
        try:
            cost = env.evidence.cost
        except RuntimeError:  # before the first reset
            cost = [0.0] * len(COST_MEASURES)
        seconds = cost[LATENCY] + self.abandoned[2] if self.source.simulated_time else time.monotonic() - self.t0
        return {"tokens": cost[TOKENS] + self.abandoned[0], "calls": cost[CALLS] + self.abandoned[1], "seconds": seconds}

    def call_bound(self, env: CoBaEnv, action: int) -> CallBound:
        """The most a call for ``action`` can use."""
        layout = env.layout
        if layout.is_sample(action):
            return self.source.sample_bound(env.evidence.n_revealed, layout.generator_of(action))
        t = layout.verifier_of(action)
        return self.source.verify_bound(env.verify_target(t), t)

    def blocking_limit(self, bound: CallBound, spent: dict[str, float]) -> str | None:
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

    # -- the gate's hooks ---------------------------------------------------------------------------
    def blocked(self, env: CoBaEnv, candidates: int) -> int:
        """Every call that could break a hard budget (every call once the time ran out during one)."""
        self.blocked_why = {}
        if self.interrupted is not None:
            return _calls_mask(env.layout)
        if self.limits == Limits():
            return 0
        spent, out = self.spent(env), 0
        for a in range(env.layout.stop_action):
            if candidates >> a & 1:
                why = self.blocking_limit(self.call_bound(env, a), spent)
                if why is not None:
                    out |= 1 << a
                    self.blocked_why[env.actions[a]] = why
        return out

    def illegal_reason(self, env: CoBaEnv, action: int) -> str | None:
        """The budget a blocked call could exceed, else None (the env's own reason applies)."""
        if 0 <= action < env.layout.stop_action and env.actions[action] in self.blocked_why:
            return (f"action {action} ({env.actions[action]}) is not allowed now: its call could exceed the "
                    f"hard {self.blocked_why[env.actions[action]]} budget ({self.limits.text()})")
        return None

    def before(self, env: CoBaEnv, action: int) -> int:
        """Fetch the evidence of ``action``; STOP instead when the time budget runs out during the call."""
        try:
            self.fetch(env, action)
        except CallInterrupted as exc:
            self.interrupted = str(exc)
            return env.layout.stop_action
        return action

    def on_stop(self, env: CoBaEnv, legal: int) -> dict[str, Any]:
        """The final info's live fields: the source's task index, what was spent and why the episode stops."""
        info: dict[str, Any] = {"episode": self.ep}
        if self.task.get("labels") is None:
            info["correct"] = None
        info["live"] = {"stop_reason": self.stop_reason(env, legal), "interrupted": self.interrupted,
                        "calls": self.calls, "spent": self.spent(env), "limits": asdict(self.limits),
                        "problem": self.task.get("problem")}
        return info

    def fetch(self, env: CoBaEnv, a: int) -> None:
        """Call the source for the evidence of action ``a`` and reveal it in the episode."""
        timeout = None
        if self.limits.seconds is not None and not self.source.simulated_time:
            timeout = self.limits.seconds - self.spent(env)["seconds"] - SECONDS_MARGIN
            if timeout < MIN_CALL_SECONDS:
                raise CallInterrupted(f"the time budget of {self.limits.seconds:g} s ran out before the "
                                      f"{env.actions[a]} call")
        bound = self.call_bound(env, a)
        layout = env.layout
        try:
            if layout.is_sample(a):
                c, g = env.evidence.n_revealed, layout.generator_of(a)
                got = self.source.sample(c, timeout, g)
                self.episode.reveal_candidate(env.slot_of_next_sample(g), got)
            else:
                t = layout.verifier_of(a)
                c = env.verify_target(t)
                got = self.source.verify(c, t, timeout)
                self.episode.reveal_score(env.slot_of_candidate(c), t, got)
        except CallInterrupted:
            self.abandoned[0] += bound.tokens if math.isfinite(bound.tokens) else 0.0
            self.abandoned[1] += 1
            self.abandoned[2] += timeout or 0.0
            self.calls.append({"action": env.actions[a], "abandoned": True, "token_bound": bound.tokens})
            raise
        self.calls.append({"action": env.actions[a], "candidate": c, "token_bound": bound.tokens,
                           **cost_record(got.cost), **got.detail})

    def stop_reason(self, env: CoBaEnv, legal: int) -> str:
        """Why the episode stops now, given the actions that were ``legal`` when STOP was chosen."""
        if self.interrupted is not None:
            return f"budget: {self.interrupted}"
        if legal & _calls_mask(env.layout):
            return "policy: chose STOP"
        if self.blocked_why:
            parts = ", ".join(f"{a} ({why})" for a, why in self.blocked_why.items())
            return f"budget: the next call could exceed a hard limit ({self.limits.text()}): {parts}"
        if env.evidence.cost[env.config.cost_k] >= env.max_cost:
            return f"budget: max_cost={env.max_cost:g} ({env.cost_model}) is spent"
        return f"done: N_max={env.n_max} candidates revealed and nothing left to verify"


class LiveEnv(CoBaEnv):
    """``CoBaEnv`` whose episodes are revealed online by ``source`` (see the module docstring).

    Arguments as ``CoBaEnv`` (``tiers``: the source's verifiers the agent may call, default all of them), plus:
    ``source`` (its verifiers, by role, are the VERIFY actions; one generator: the pair grouping; several with distinct names:
    the item grouping, ``SAMPLE_<name>`` per ``source.generator_names`` in that order, ``self.route`` holding the
    generators' parameters, ``source.generator_params``, that routing policies choose by); ``n_max`` (most
    candidates per problem and generator); ``budget`` (B of the reward and of the ``budget_used`` feature) and
    ``max_output_tokens`` (normalizer of ``mean_length``), which a learned controller needs equal to its training
    env's (``replay_normalizers``); ``limits``. Episode i is the source's task i (a problem, or a cached
    episode); ``info["correct"]`` is None unless the source knows the labels (only ``PoolReplaySource`` does).
    """

    def __init__(self, source: EvidenceSource, *, n_max: int, budget: float, max_output_tokens: float,
                 limits: Limits | None = None, lam: float = 0.1, lambda_range: tuple[float, float] | None = None,
                 cost_model: str = "p_tokens", tiers: tuple[str, ...] | None = None,
                 selection: SelectionRule | dict | str | None = None, max_cost: float | None = None,
                 render_mode: str | None = None) -> None:
        names = tuple(source.generator_names)
        if len(names) > 1 and (len(set(names)) != len(names) or not all(names)):
            raise ValueError(f"routing needs generators with distinct non-empty names, got {list(names)}")
        n_max = check_int("n_max", n_max, low=1, high=source.max_candidates)
        # At least one token: the mean_length feature divides by it (a normalizer of 1e-300 would be inf).
        max_output_tokens = check_number("max_output_tokens", max_output_tokens, low=1.0, high=MAX_TOKENS)
        self.source = source
        self.limits = limits or Limits()
        self._live_cursor = 0
        gate = LiveGate(source, self.limits, len(names) * n_max, max_output_tokens)
        blank = gate.episode.pool
        rules = dict(lam=lam, lambda_range=lambda_range, budget=budget, cost_model=cost_model, tiers=tiers,
                     selection=selection, max_cost=max_cost)
        if len(names) > 1:  # the item grouping over one blank item with every generator
            g = len(names)
            route = RoutePool(pool=blank, generators=names, n_per_generator=n_max,
                              available=np.ones((1, g), dtype=bool), source_episode=np.full((1, g), -1, dtype=np.int64),
                              generator_params=tuple(float(p) for p in source.generator_params))
            config = EnvConfig.for_route(route, n_max, **rules)
        else:
            config = EnvConfig.for_pool(blank, n_max=n_max, **rules)
        super().__init__(config=config, gate=gate, render_mode=render_mode)

    @property
    def n_episodes(self) -> int:
        """Tasks the source holds (problems, or cached episodes)."""
        return self.source.n_episodes

    @property
    def episode_index(self) -> int:
        """The source's task index of the current episode; -1 before the first reset."""
        return self.gate.ep

    def spent(self) -> dict[str, float]:
        """What this episode has used against ``limits`` (abandoned calls included, at their bound)."""
        return self.gate.spent(self)

    def slot_of_next_sample(self, generator: int) -> int:
        """The slot of the episode's data that generator ``generator``'s next candidate is revealed into (with
        several generators its next slot, ``g * n_max + revealed from g``)."""
        ev = self.evidence
        if self._places:
            return generator * self.n_max_per_generator + ev.gen_revealed[generator]
        return ev.n_revealed

    def slot_of_candidate(self, candidate: int) -> int:
        """The slot of the episode's data holding revealed candidate ``candidate``."""
        return self._candidate(candidate)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start task ``options["episode"]`` of the source (default: the next one in order)."""
        options = dict(options or {})
        if seed is not None:
            self._live_cursor = 0
        ep = options.pop("episode", None)
        if ep is None:
            ep = self._live_cursor % self.source.n_episodes
            self._live_cursor += 1
        ep = check_int("options['episode']", ep, low=0, high=self.source.n_episodes - 1)
        episode = self.gate.begin(ep, self.source.begin(ep))
        self.use_pool(episode.pool, [episode.row])
        obs, info = super().reset(seed=seed, options={**options, "episode": 0})
        info["episode"] = ep
        return obs, info
