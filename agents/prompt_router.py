"""A prompt-aware router: reads the problem's features at reset, picks (generator, samples), samples, stops.

The route env's observation starts with the problem features when the env option asks for them
(``coba_env.problem_features``); the router asks for them itself (``env_kwargs``: its own fitted featurizer),
reads them off the first observation, predicts each option's success (``agents.router_predictors``: an option
is a generator and a number of samples) and takes the option of highest ``P[o] - lambda * cost[o] / B``:
``cost[o]`` is the option's mean cost per problem over the training items and B the training budget, both in
the training cost model. Lambda is the operating point: 0 takes the most likely option whatever it costs, a
large lambda the cheapest; on two generators the rule routes to the strong one when ``P_strong - P_weak >=
lambda (cost_strong - cost_weak) / B``, a threshold on RouteLLM's "strong win" score. The chosen generator is
sampled that many times; STOP then selects by the router's rule (majority). An option whose generator the
problem has no candidates of is never taken. The router never reads a label.

A checkpoint is a directory: ``controller.json`` (``kind``: the controller kind, ``env``: ``route``, the options,
their costs, B, the cost model, the predictor's fields, what it was trained on), ``predictor.npz`` and the
featurizer (``featurizer.json`` / ``featurizer.npz``). ``coba train knn_router`` (and the other router kinds,
``agents/controllers.yaml``) writes one; ``coba bench --env route --policies DIR@LAMBDA`` loads it.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Policy
from agents.checkpoint import CONFIG_FILE, read_config
from agents.router_predictors import Predictor, predictor_from_state
from agents.routing_base import route_or_reason
from coba_env.featurizer_files import load_featurizer

PREDICTOR_FILE = "predictor.npz"


class PromptRouter(Policy):
    """A fitted prompt-aware router acting at a fixed lambda (see the module docstring)."""

    group = "learned"
    #: Runs on the route env (``agents.routing_base.is_route_policy``).
    routes = True
    #: The parameter that sets its operating point (``coba calibrate``).
    operating_parameter = "lam"

    def __init__(self, featurizer: Any, predictor: Predictor, config: dict[str, Any], *,
                 lam: float | None = None) -> None:
        self.featurizer, self.predictor, self.config = featurizer, predictor, config
        self.lam = float(config.get("default_lambda", 0.0) if lam is None else lam)
        if not (math.isfinite(self.lam) and self.lam >= 0):
            raise ValueError(f"lambda must be a finite number >= 0, got {lam!r}")
        self.options = [(str(g), int(k)) for g, k in config["options"]]
        self.option_cost = np.asarray(config["option_cost"], dtype=np.float64)
        self.budget = float(config["budget"])
        self.selection = str(config.get("selection", "majority"))
        self.n_features = len(featurizer.names)
        self.name = f"{config.get('name', config['kind'])}@{self.lam:g}"
        self.label = f"{config.get('label', config['kind'])} (lambda={self.lam:g})"

    def at(self, lam: float) -> PromptRouter:
        """The same router acting at ``lam``."""
        return PromptRouter(self.featurizer, self.predictor, self.config, lam=lam)

    def env_kwargs(self) -> dict[str, Any]:
        """Its problem features (the env option) and its STOP rule."""
        return {"problem_features": self.featurizer, "selection": self.selection}

    def applicable(self, env: Any) -> tuple[bool, str]:
        """A route env whose observation starts with its problem features and which has its options' generators
        with enough candidates each."""
        route, why = route_or_reason(env)
        if why:
            return False, why
        names = tuple(getattr(env.unwrapped, "feature_names", ()))[:self.n_features]
        if names != tuple(self.featurizer.names):
            return False, "the env's observation does not start with the router's problem features"
        missing = sorted({g for g, _ in self.options} - set(route.generators))
        if missing:
            return False, f"routes to {missing}, which the pool does not have (it has {list(route.generators)})"
        most = max(k for _, k in self.options)
        if env.unwrapped.n_max_per_generator < most:
            return False, f"takes up to {most} samples of a generator; the env allows {env.unwrapped.n_max_per_generator}"
        return True, ""

    def use_layout(self, layout: Any, env: Any = None) -> None:
        """The SAMPLE action of each option's generator in ``layout``."""
        super().use_layout(layout, env)
        index = {g: i for i, g in enumerate(layout.generators)}
        self._option_action = np.array([layout.sample_action(index.get(g, 0)) for g, _ in self.options])
        self._option_count = np.array([k for _, k in self.options], dtype=np.int64)
        self._plans: dict[int, tuple[int, int]] = {}

    def scores(self, features: np.ndarray) -> np.ndarray:
        """Predicted success of every option [n, O] from problem features [n, D]."""
        return self.predictor.predict(np.asarray(features, dtype=np.float64))

    def choose(self, features: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """The option index per row of highest ``P - lambda * cost / B`` among options whose generator can be
        sampled now (-1 when none can)."""
        utility = self.scores(features) - self.lam * self.option_cost / self.budget
        legal = np.take_along_axis(np.asarray(action_masks) > 0, np.broadcast_to(self._option_action,
                                                                                  (len(utility), len(self.options))),
                                   axis=1)
        utility = np.where(legal, utility, -np.inf)
        best = utility.argmax(axis=1)
        return np.where(legal.any(axis=1), best, -1)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Any) -> int:
        """On the first step choose the option; SAMPLE its generator until its count is revealed; STOP."""
        key = id(evidence)
        if evidence.n_revealed == 0 or key not in self._plans:
            o = int(self.choose(np.asarray(observation)[None, :self.n_features], np.asarray(action_mask)[None])[0])
            self._plans = {key: (int(self._option_action[o]), int(self._option_count[o])) if o >= 0 else (-1, 0)}
        action, count = self._plans[key]
        if action >= 0 and evidence.n_revealed < count and action_mask[action]:
            return action
        return self.stop_id

    batched = True

    def start_batch(self, venv: Any, rows: np.ndarray | None) -> None:
        """Forget the plans of the rows starting new episodes."""
        super().start_batch(venv, rows)
        if rows is None:
            self._b_action = np.full(venv.num_envs, -1, dtype=np.int64)
            self._b_count = np.zeros(venv.num_envs, dtype=np.int64)
            self._b_fresh = np.ones(venv.num_envs, dtype=bool)
        else:
            self._b_fresh[rows] = True

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row: fresh rows choose their option from their observation's problem features."""
        fresh = np.flatnonzero(self._b_fresh)
        if len(fresh):
            o = self.choose(observations[fresh, :self.n_features], action_masks[fresh])
            self._b_action[fresh] = np.where(o >= 0, self._option_action[np.maximum(o, 0)], -1)
            self._b_count[fresh] = np.where(o >= 0, self._option_count[np.maximum(o, 0)], 0)
            self._b_fresh[fresh] = False
        action = self._b_action
        ok = (action >= 0) & (venv.n < self._b_count)
        ok &= np.take_along_axis(action_masks, np.maximum(action, 0)[:, None], axis=1)[:, 0] > 0
        return np.where(ok, action, self.stop_id).astype(np.int64)

    def describe(self) -> dict[str, Any]:
        """Name, label, group, kind, lambda, options and training summary."""
        return {"name": self.name, "label": self.label, "group": self.group, "kind": self.config["kind"],
                "lambda": self.lam, "options": [list(o) for o in self.options],
                "train": {k: v for k, v in self.config.items() if k not in ("option_cost",)}}


def save_router(out_dir: str | Path, config: dict[str, Any], predictor: Predictor, featurizer: Any) -> Path:
    """Write a router checkpoint (``controller.json``, ``predictor.npz``, the featurizer) into ``out_dir``."""
    from coba_env.featurizer_files import save_featurizer
    from pools.atomic_write import atomic_write, atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fields, arrays = predictor.state()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    atomic_write(out / PREDICTOR_FILE, write)
    save_featurizer(featurizer, out)
    atomic_write_text(out / CONFIG_FILE, json.dumps({**config, "predictor": fields}, indent=2, allow_nan=False))
    return out


def _check_config(config: dict[str, Any], where: Path) -> None:
    """Every field the router reads, or a ValueError naming the file and the field."""
    options = config.get("options")
    if not (isinstance(options, list) and options and all(
            isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], int)
            and not isinstance(o[1], bool) and o[1] >= 1 for o in options)):
        raise ValueError(f"{where}: field 'options' is {str(options)[:60]}; expected a list of [generator, samples]")
    cost = config.get("option_cost")
    if not (isinstance(cost, list) and len(cost) == len(options) and all(
            isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c) and c >= 0 for c in cost)):
        raise ValueError(f"{where}: field 'option_cost' is {str(cost)[:60]}; expected one cost >= 0 per option")
    budget = config.get("budget")
    if not (isinstance(budget, int | float) and not isinstance(budget, bool) and math.isfinite(budget) and budget > 0):
        raise ValueError(f"{where}: field 'budget' is {budget!r}; expected a finite number > 0")
    if not isinstance(config.get("predictor"), dict):
        raise ValueError(f"{where}: field 'predictor' is missing; expected the predictor's fields")


def load(path: str | Path, *, lam: float | None = None) -> PromptRouter:
    """Load a router checkpoint directory as a policy acting at ``lam`` (default: its ``default_lambda``)."""
    path = Path(path)
    config = read_config(path)
    _check_config(config, path / CONFIG_FILE)
    featurizer = load_featurizer(path)
    arrays_file = path / PREDICTOR_FILE
    try:
        with np.load(arrays_file, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{arrays_file}: not a readable predictor arrays file ({type(exc).__name__})") from None
    predictor = predictor_from_state(config["predictor"], arrays, len(featurizer.names), len(config["options"]),
                                     str(arrays_file))
    return PromptRouter(featurizer, predictor, config, lam=lam)
