"""A PPO controller trained on the route env (``train_ppo(..., route=True)``) as a route policy.

The replay PPO controller (``agents.learned_ppo.PPOController``) with three route-env differences: it runs on
``coba/Route-v0`` only (``routes = True``, so ``coba bench --env route`` and ``eval.route_replay`` run it and a
replay bench leaves it out); its env settings (``env_kwargs()``) add the N_max per generator it was trained
with to the budget B and the selection rule; and it is not applicable to a route env whose generators, verifiers
(the action layout), observation features or N_max per generator differ from training (``controller.json``
records them), because its actions and features would then mean something else.

Acting reads the observation and the action mask only (never labels), in one forward pass per batch of
episodes, so the batched and the one-episode forms take the same actions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from agents.learned_ppo import PPOController, load_model
from coba_env.env import CoBaEnv


class RoutePPOController(PPOController):
    """A route-env MaskablePPO actor choosing the most probable legal action (deterministic)."""

    #: Runs on the route env only (``agents.routing_base.is_route_policy``).
    routes: ClassVar[bool] = True

    def __init__(self, model: Any, meta: dict[str, Any], *, lam: float | None = None, source: str = "") -> None:
        super().__init__(model, meta, lam=lam, source=source)
        suffix = "" if self.lam is None else f"@{self.lam:g}"
        self.name = f"route_ppo{suffix}"
        self.label = f"Route PPO (lambda={self.lam:g})" if self.lam is not None else "Route PPO (env lambda)"

    def env_kwargs(self) -> dict[str, Any]:
        """The training budget B, selection rule and N_max per generator (the route env's ``n_max``)."""
        return {**super().env_kwargs(), "n_max": int(self.meta["n_max_per_generator"])}

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """A route env with the trained N_max per generator, cost model, actions and observation."""
        per_generator = getattr(env, "n_max_per_generator", None)
        if per_generator is None:
            return False, "trained on the route env (coba/Route-v0): needs one SAMPLE action per generator"
        if per_generator != int(self.meta["n_max_per_generator"]):
            return False, (f"trained with N_max={self.meta['n_max_per_generator']} per generator, the env has "
                           f"{per_generator}")
        return super().applicable(env)

    def describe(self) -> dict[str, Any]:
        """As the replay PPO controller's, with the route env's kind and generators."""
        out = super().describe()
        out["kind"] = "route_ppo"
        out["params"]["generators"] = self.meta.get("generators")
        return out


def load(path: Path, *, lam: float | None = None) -> RoutePPOController:
    """The route PPO controller saved at ``path`` (checkpoint directory or snapshot zip), acting at ``lam``."""
    model, meta, model_file = load_model(path, lam=lam)
    if meta.get("env") != "route":
        raise ValueError(f"{model_file}: not a route-env PPO checkpoint (controller.json field 'env' is "
                         f"{meta.get('env', 'replay')!r}; expected 'route')")
    return RoutePPOController(model, meta, lam=lam, source=str(model_file))
