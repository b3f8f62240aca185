"""A minimal replay loop for one policy (tests, quick checks); the benchmark runner is ``eval/runner.py``."""

from __future__ import annotations

from typing import Any

from agents.base import Policy
from agents.policy_calls import CONTAINED, PolicyCodeError, action_id, code_failure, contained_call
from coba_env.compiled import CompiledPool
from coba_env.env import CoBaEnv
from coba_env.rules.selection import SelectionRule
from pools.store import Pool


class NotApplicable(ValueError):
    """Raised by ``replay`` when a policy cannot run on the env's pool (the message says why)."""


def make_env(policy: Policy, pool: Pool | CompiledPool | str | None, **env_kwargs: Any) -> CoBaEnv:
    """A ``CoBaEnv`` over ``pool`` configured for ``policy`` (its selection rule), plus ``env_kwargs``."""
    return CoBaEnv(pool, **{**env_kwargs, **policy.env_kwargs()})


def check_selection(policy: Policy, env: CoBaEnv) -> None:
    """Raise ValueError when ``env`` would select with a different rule than the one ``policy`` needs."""
    wanted = env.roles.resolve(SelectionRule.from_spec(policy.env_kwargs().get("selection")))
    if env.selection != wanted:
        raise ValueError(f"policy {policy.name!r} needs selection {wanted}, "
                         f"but the env uses {env.selection}; "
                         f"build the env with make_env() or CoBaEnv(**policy.env_kwargs())")


def run_episode(env: CoBaEnv, policy: Policy, episode: int, *, record: bool = False,
                place: str | None = None) -> dict[str, Any]:
    """Play episode index ``episode`` to STOP: the env's final info plus ``action_ids`` and ``return``.

    With ``record=True`` it also holds ``observations`` and ``masks``: every one the policy was shown. The
    policy's own code is contained (``agents.policy_calls``): an exception, ``sys.exit`` or a return value that is
    not a legal action id raises one ``PolicyCodeError`` naming ``place`` (default: "episode N").
    """
    place = place or f"episode {episode}"
    obs, info = env.reset(options={"episode": episode})
    contained_call(policy, "reset", place, policy.reset, env)
    evidence = env.evidence
    mask = info["action_mask"]
    actions: list[int] = []
    observations, masks = [], []
    total = 0.0
    while True:
        if record:
            observations.append(obs.copy())
            masks.append(mask.copy())
        try:
            action = policy.act(obs, mask, evidence)
        except CONTAINED as exc:
            raise code_failure(policy, "act", place, exc) from None
        action = action_id(policy, action, place, env.layout.n_actions)
        actions.append(action)
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except ValueError as exc:
            if 0 <= action < len(mask) and mask[action]:  # a legal action: the env's own error, not the policy's
                raise
            raise PolicyCodeError(f"policy {policy.name!r} on {place}: act() returned an illegal action: {exc}") \
                from None
        total += reward
        if terminated or truncated:
            break
        mask = info["action_mask"]
    out = dict(info)
    out.update(action_ids=actions, **{"return": total})
    if record:
        out.update(observations=observations, masks=masks)
    return out


def replay(policy: Policy, env: CoBaEnv, *, record: bool = False) -> list[dict[str, Any]]:
    """``run_episode`` over every episode of ``env`` in order; raises ``NotApplicable`` when the policy
    cannot run on the env's pool and ValueError when the env's selection rule is not the policy's."""
    ok, reason = policy.applicable(env)
    if not ok:
        raise NotApplicable(f"policy {policy.name!r} is not applicable: {reason}")
    check_selection(policy, env)
    return [run_episode(env, policy, i, record=record) for i in range(env.n_episodes)]
