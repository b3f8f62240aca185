"""The learned MLP controller: a small torch MLP on the label-free observation, lambda-conditioned.

The network reads ``controller_features``: the env's observation features (``coba_env.rules.features``) with
three entries recomputed by ``coba_env.rules.features.rescaled`` in the controller's own units (budget used against the training budget B,
mean length against the training pool's longest output, lambda = the controller's lambda), followed by the
5-bit action mask. It outputs one score per action (an estimate of the oracle's return after that action,
or a logit, depending on how it was trained); the policy plays the argmax over legal actions, so it is
deterministic and never reads a label.

A checkpoint is a directory with ``controller.json`` (``"kind": "mlp"``, the architecture, the feature
normalization, the training budget and configuration) and ``model.pt`` (the torch ``state_dict``).

The same controller acts on either env: its network has the size of the layout it was trained on, and
controller.json's ``env`` says which (``agents.checkpoint.TrainedEnv``). On the route env (``env: "route"``,
one episode per problem, a SAMPLE per generator) the observation's pooled tail carries budget_used,
mean_length and lambda at the same offsets from the end, so the features are rescaled alike; its
per-generator block is not rescaled, so the controller asks for the env it was trained in, its budget B and
N_max per generator (``env_kwargs``), and is a route policy (``routes``).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.base import Policy
from agents.checkpoint import CONFIG_FILE, TrainedEnv, read_config
from coba_env.costs import COST_MEASURES, cost_index
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence
from coba_env.rules.config import LAM_MAX
from coba_env.rules.features import BUDGET_FROM_END, LAMBDA_FROM_END, MEAN_LEN_FROM_END, rescaled
from pools.atomic_write import atomic_write_bytes, atomic_write_text
from pools.limits import MAX_HIDDEN_UNITS

WEIGHTS_FILE = "model.pt"
#: Most hidden layers a checkpoint may ask for.
MAX_LAYERS = 64


def build_network(hidden: tuple[int, ...], n_features: int, n_actions: int) -> nn.Sequential:
    """The controller MLP: ``n_features + n_actions`` inputs (observation, mask) -> hidden layers with tanh ->
    one output per action (the sizes of the layout it is trained on)."""
    layers: list[nn.Module] = []
    width = n_features + n_actions
    for h in hidden:
        layers += [nn.Linear(width, h), nn.Tanh()]
        width = h
    layers.append(nn.Linear(width, n_actions))
    return nn.Sequential(*layers)


def numpy_layers(network: nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every ``nn.Linear`` of ``network`` as float64 (weight transposed, bias), for ``tanh_forward``."""
    return [(m.weight.detach().numpy().T.astype(np.float64), m.bias.detach().numpy().astype(np.float64))
            for m in network if isinstance(m, nn.Linear)]


def tanh_forward(x: np.ndarray, mean: np.ndarray, scale: np.ndarray,
                 layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """A tanh MLP's outputs in float64 numpy for rows ``x`` standardized by ``mean`` and ``scale``: inference is
    a few matrix products, one small forward per step with no torch threads."""
    h = (np.asarray(x, dtype=np.float64) - mean) / scale
    for i, (w, b) in enumerate(layers):
        h = h @ w + b
        if i < len(layers) - 1:
            h = np.tanh(h)
    return h


def controller_features(observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence, *, budget: float,
                        cost_model: str, max_output_tokens: float, lam: float) -> np.ndarray:
    """The network input for one state: the observation in the controller's units plus the action mask."""
    f = len(observation)
    x = np.empty(f + len(action_mask), dtype=np.float32)
    x[:f] = rescaled(observation, evidence, cost_k=cost_index(cost_model), budget=budget,
                     max_output_tokens=max_output_tokens, lam=lam)
    x[f:] = action_mask
    return x


def batch_controller_features(observations: np.ndarray, action_masks: np.ndarray, venv: Any, *, budget: float,
                              cost_model: str, max_output_tokens: float, lam: float) -> np.ndarray:
    """``controller_features`` for every row of the ``CoBaVectorEnv`` ``venv`` [B, F + A].

    budget_used and mean_length are recomputed from the vector env's cost and length sums (as ``rescaled`` does
    from ``Evidence``), lambda fixed, the mask appended.
    """
    f = observations.shape[1]
    x = np.empty((len(observations), f + action_masks.shape[1]), dtype=np.float32)
    x[:, :f] = observations
    x[:, f + BUDGET_FROM_END] = venv.cost[:, cost_index(cost_model)] / budget
    n = venv.n
    x[:, f + MEAN_LEN_FROM_END] = np.where(n > 0, venv.len_sum / np.maximum(n, 1) / max_output_tokens, 0.0)
    x[:, f + LAMBDA_FROM_END] = lam
    x[:, f:] = action_masks
    return x


class MLPController(Policy):
    """A trained MLP routing controller; plays the best-scored legal action at a fixed lambda."""

    #: It knows from its checkpoint which env it was trained on, and ``applicable`` says so (the runner asks it).
    checks_own_grouping = True

    name = "learned_mlp"
    label = "Learned MLP"
    group = "learned"

    def __init__(self, network: nn.Module, config: dict[str, Any], *, lam: float | None = None) -> None:
        self.config = config
        self.lam = float(config.get("default_lambda", 0.1) if lam is None else lam)
        if self.lam < 0:
            raise ValueError(f"lambda must be >= 0, got {self.lam}")
        self.budget = float(config["budget"])
        self.cost_model = str(config["cost_model"])
        self.max_output_tokens = float(config["max_output_tokens"])
        self.mean = np.asarray(config["feature_mean"], dtype=np.float32)
        self.scale = np.asarray(config["feature_scale"], dtype=np.float32)
        self._layers = numpy_layers(network)  # inference runs in numpy (``tanh_forward``)
        #: The env it was trained on; its action and feature names are its network's shape.
        self.trained = TrainedEnv.read(config, "controller config")
        self.actions, self.features = self.trained.actions, self.trained.features
        #: Runs on the route env (``agents.routing_base.is_route_policy``) when trained there.
        self.routes = self.trained.routes
        self.name = f"{config.get('name', 'mlp')}@{self.lam:g}"
        words = self.trained.on.prefix.replace("_", " ")
        self.label = f"Learned {words}MLP (lambda={self.lam:g})"

    def scores(self, features: np.ndarray) -> np.ndarray:
        """Network outputs for a batch of feature rows (normalized here)."""
        return tanh_forward(features, self.mean, self.scale, self._layers)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """Argmax of the network's scores over the legal actions."""
        x = controller_features(observation, action_mask, evidence, budget=self.budget,
                                cost_model=self.cost_model, max_output_tokens=self.max_output_tokens, lam=self.lam)
        s = self.scores(x[None])[0]
        s = np.where(np.asarray(action_mask) > 0, s, -np.inf)
        return int(np.argmax(s))

    batched = True

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row of the ``CoBaVectorEnv`` ``venv``: one forward pass for the whole batch."""
        if venv is None:
            raise ValueError(f"{self.name}: act_batch reads the vector env's cost and length sums; pass venv")
        x = batch_controller_features(observations, action_masks, venv, budget=self.budget,
                                      cost_model=self.cost_model, max_output_tokens=self.max_output_tokens,
                                      lam=self.lam)
        s = np.where(np.asarray(action_masks) > 0, self.scores(x), -np.inf)
        return s.argmax(axis=1)

    def env_kwargs(self) -> dict[str, Any]:
        """The env settings its observation needs beyond its own units (``TrainedEnv.fixed_env``)."""
        return self.trained.fixed_env()

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """The controller runs only on the grouping, layout and N_max it was trained with (its network's shape;
        its step and reveal fractions use N_max), and with per-generator features on its budget B."""
        why = self.trained.mismatch(env)
        return not why, why

    def describe(self) -> dict[str, Any]:
        """Name, label, group, lambda and the training configuration."""
        return {"name": self.name, "label": self.label, "group": self.group, "kind": f"{self.trained.on.prefix}mlp",
                "lambda": self.lam,
                "train": {k: v for k, v in self.config.items() if k not in ("feature_mean", "feature_scale")}}


def save(out_dir: str | Path, network: nn.Module, config: dict[str, Any]) -> Path:
    """Write ``controller.json`` and ``model.pt`` into ``out_dir`` (each through a temp file + rename)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = {**config, "kind": "mlp"}
    # Serialized in memory, written by Python: a full disk or a file-size limit is an OSError naming the file
    # (torch's own writer reports it as a RuntimeError without errno or path).
    buffer = io.BytesIO()
    torch.save(network.state_dict(), buffer)
    atomic_write_bytes(out / WEIGHTS_FILE, buffer.getvalue())
    atomic_write_text(out / CONFIG_FILE, json.dumps(config, indent=2, allow_nan=False))
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_scales(config: dict[str, Any], cfg_file: Path, n_inputs: int) -> None:
    """The fields that scale the network's input, checked on load so a damaged checkpoint is one line naming the
    field, never a broadcast error or NaN results: ``feature_mean`` (``n_inputs`` finite numbers),
    ``feature_scale`` (``n_inputs`` finite numbers > 0), ``max_output_tokens`` (> 0), ``cost_model`` (a measure of
    ``coba_env.costs``) and ``default_lambda`` (in the env's range)."""
    for key, positive in (("feature_mean", False), ("feature_scale", True)):
        values = config[key]
        if not isinstance(values, list) or len(values) != n_inputs:
            got = f"has {len(values)} values" if isinstance(values, list) else f"is {str(values)[:40]}"
            raise ValueError(f"{cfg_file}: field {key!r} {got}; expected {n_inputs} finite numbers"
                             + (" > 0" if positive else "") + " (one per network input)")
        bad = next((i for i, v in enumerate(values) if not _finite(v) or (positive and v <= 0)), None)
        if bad is not None:
            raise ValueError(f"{cfg_file}: field {key!r} holds {values[bad]!r} at index {bad}; expected {n_inputs} "
                             "finite numbers" + (" > 0" if positive else ""))
    cap = config["max_output_tokens"]
    if not (_finite(cap) and cap > 0):
        raise ValueError(f"{cfg_file}: field 'max_output_tokens' is {cap!r}; expected a finite number > 0")
    if config["cost_model"] not in COST_MEASURES:
        raise ValueError(f"{cfg_file}: field 'cost_model' is {str(config['cost_model'])[:40]!r}; expected one of "
                         f"{list(COST_MEASURES)}")
    lam = config.get("default_lambda", 0.1)
    if not (_finite(lam) and 0 <= lam <= LAM_MAX):
        raise ValueError(f"{cfg_file}: field 'default_lambda' is {lam!r}; expected a number from 0 to {LAM_MAX:g}")


def load(path: str | Path, *, lam: float | None = None) -> MLPController:
    """Load an MLP checkpoint directory (trained on either env) as a policy acting at ``lam`` (default: its
    ``default_lambda``)."""
    path = Path(path)
    cfg_file = path / CONFIG_FILE
    config = read_config(path, kind="mlp")
    for key in ("hidden", "budget", "cost_model", "max_output_tokens", "feature_mean", "feature_scale"):
        if key not in config:
            raise ValueError(f"{cfg_file}: missing field {key!r}")
    hidden = config["hidden"]
    if not (isinstance(hidden, list) and 0 < len(hidden) <= MAX_LAYERS
            and all(isinstance(h, int) and not isinstance(h, bool) and 0 < h <= MAX_HIDDEN_UNITS for h in hidden)):
        raise ValueError(f"{cfg_file}: field 'hidden' is {str(hidden)[:60]}; expected a list of 1 to {MAX_LAYERS} "
                         f"layer sizes, integers from 1 to {MAX_HIDDEN_UNITS}")
    trained = TrainedEnv.read(config, cfg_file)  # the env it was trained on, its layout: the network's shape
    check_scales(config, cfg_file, len(trained.features) + len(trained.actions))
    network = build_network(tuple(hidden), len(trained.features), len(trained.actions))
    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing the MLP weights file")
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds (UnpicklingError, RuntimeError, EOFError)
        # Never suggest weights_only=False: that would run whatever code a damaged or foreign file holds.
        raise ValueError(f"{weights}: not a readable MLP weights file ({type(exc).__name__}); the file is damaged "
                         "or was not written by `coba train mlp`: train the controller again") from None
    try:
        network.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{weights}: the weights do not fit the network of {cfg_file} ({first})") from None
    controller = MLPController(network, config, lam=lam)
    controller.trained = controller.trained.with_problem_features(path)  # its problem features (the env option)
    return controller
