"""The learned MLP controller on the route env: ``MLPController`` acting over the route layout.

The same network and features as ``agents.learned_mlp`` (the route observation's pooled tail carries
budget_used, mean_length and lambda at the same offsets from the end, so ``controller_features`` and its
batched twin apply unchanged), trained by ``train.route_mlp_method`` on ``coba_env.route_env.RouteEnv``. What
the route adds: it is a route policy (``routes = True``) and carries the env it was trained in, the budget B
and N_max per generator, in ``env_kwargs`` (the route observation's per-generator spend is in units of the
env's B, so it runs only in an env with its own B). The checkpoint is an MLP checkpoint with ``"env":
"route"`` and ``"n_max_per_generator"`` in ``controller.json``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from agents.learned_mlp import MLPController, load
from agents.routing import route_of

#: The ``env`` field of a route checkpoint's ``controller.json``.
ROUTE_ENV = "route"


class RouteMLPController(MLPController):
    """A trained MLP routing controller over SAMPLE_<g>, VERIFY_<v>, STOP at a fixed lambda (route env only)."""

    name = "route_mlp"
    label = "Learned route MLP"
    #: Runs on the route env (``coba bench --env route``, ``eval.route_replay``).
    routes: ClassVar[bool] = True

    def __init__(self, network: nn.Module, config: dict[str, Any], *, lam: float | None = None) -> None:
        if config.get("env") != ROUTE_ENV:
            raise ValueError(f"controller config: field 'env' is {config.get('env')!r}; expected {ROUTE_ENV!r} "
                             "(a checkpoint trained on the route env)")
        n_max = config.get("n_max_per_generator")
        if not (isinstance(n_max, int) and not isinstance(n_max, bool) and n_max >= 1):
            raise ValueError(f"controller config: field 'n_max_per_generator' is {n_max!r}; expected an integer "
                             ">= 1")
        budget = config.get("budget")
        if not (isinstance(budget, (int, float)) and not isinstance(budget, bool) and math.isfinite(budget)
                and budget > 0):
            raise ValueError(f"controller config: field 'budget' is {budget!r}; expected a finite number > 0")
        super().__init__(network, config, lam=lam)
        #: Most candidates the controller draws from one generator (the env's N_max per generator).
        self.n_max_per_generator = n_max
        self.label = f"Learned route MLP (lambda={self.lam:g})"

    def env_kwargs(self) -> dict[str, Any]:
        """The route env it was trained in: budget B and N_max per generator."""
        return {"budget": self.budget, "n_max": self.n_max_per_generator}

    def applicable(self, env: Any) -> tuple[bool, str]:
        """A route env with its layout, N_max per generator and budget B."""
        if route_of(env) is None:
            return False, "needs a route env (coba/Route-v0): trained on the route layout"
        unwrapped = getattr(env, "unwrapped", env)
        if unwrapped.n_max_per_generator != self.n_max_per_generator:
            return False, (f"trained with N_max = {self.n_max_per_generator} per generator, the env has "
                           f"{unwrapped.n_max_per_generator}")
        if not math.isclose(float(unwrapped.budget), self.budget, rel_tol=1e-9):
            return False, f"trained with budget B = {self.budget:g}, the env has {float(unwrapped.budget):g}"
        return super().applicable(env)

    def describe(self) -> dict[str, Any]:
        """``MLPController.describe`` with the route kind."""
        return {**super().describe(), "kind": "route_mlp"}


def load_route(path: str | Path, *, lam: float | None = None) -> RouteMLPController:
    """Load a route MLP checkpoint directory as a policy acting at ``lam`` (refused when not a route one)."""
    controller = load(path, lam=lam, controller=RouteMLPController)
    assert isinstance(controller, RouteMLPController)
    return controller
