"""A trained PPO routing controller (``train/ppo.py``) as a ``Policy``: deterministic, optionally at a fixed lambda.

The checkpoint directory's ``controller.json`` says how the model was trained (cost model, budget B, N_max,
selection rule, lambda range); the policy asks the env for the same budget and selection (``env_kwargs()``)
and reports itself as not applicable to an env with a different cost model, N_max or observation, because
the ``budget_used`` and ``*_frac`` features would then mean something else than in training.

Lambda: the model reads lambda from the second-to-last observation feature (index -2, counted from the end:
``coba_env.rules.features.LAMBDA_FROM_END``). ``load(path, lam=0.3)`` fixes it (the policy writes
0.3 into the observations it is shown, whatever lambda the env was built with, so ``coba bench``, which
replays at lam=0, evaluates the controller at 0.3); ``lam=None`` acts on the env's own lambda.

Example::

    from agents.learned_ppo import load
    from agents.runner import make_env, replay

    policy = load(Path("runs/ppo-paper"), lam=0.2)
    records = replay(policy, make_env(policy, "paper"))

Acting never reads labels: the inputs are the observation and the action mask only, in one forward pass per
batch of episodes, so the batched and the one-episode forms take the same actions.

A checkpoint trained on the route env (``controller.json`` field ``env: "route"``: one episode per problem, a
SAMPLE per generator) loads the same way: it is a route policy (``routes``, so ``coba bench --env route`` runs
it), named ``route_ppo``, its env settings add the N_max per generator it was trained with, and it is not
applicable to an env whose generators, verifiers, observation features or N_max per generator differ from
training (``agents.checkpoint.TrainedEnv``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agents.base import Policy
from agents.checkpoint import CONFIG_FILE, TrainedEnv, read_config
from agents.sb3_scoring import action_scores, best_legal_actions
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence

SUPPORTED_FORMATS = (1,)


class PPOController(Policy):
    """A MaskablePPO actor network choosing the most probable legal action (deterministic)."""

    #: It knows from its checkpoint which env it was trained on, and ``applicable`` says so (the runner asks it).
    checks_own_grouping = True

    group: ClassVar[str] = "learned"

    def __init__(self, model: Any, meta: dict[str, Any], *, lam: float | None = None, source: str = "") -> None:
        import torch

        self._torch = torch
        self.model = model
        self.meta = meta
        self.lam = None if lam is None else float(lam)
        self.source = source
        #: The env it was trained on (its grouping, layout, N_max); a route-env controller is a route policy.
        self.trained = TrainedEnv.read(meta, "controller config")
        self.routes = self.trained.routes
        prefix = self.trained.on.prefix
        suffix = "" if self.lam is None else f"@{self.lam:g}"
        self.name = f"{prefix}ppo{suffix}"
        words = prefix.replace("_", " ").capitalize()
        self.label = f"{words}PPO (lambda={self.lam:g})" if self.lam is not None else f"{words}PPO (env lambda)"
        self.selection = meta.get("selection")
        self.requires_tiers = ()
        self._net = model.policy
        self._net.set_training_mode(False)

    def env_kwargs(self) -> dict[str, Any]:
        """The training budget B and selection rule, so observations are scaled as in training (and on the route
        env its N_max per generator)."""
        out: dict[str, Any] = {"budget": float(self.meta["budget"])}
        if self.selection is not None:
            out["selection"] = self.selection
        return {**out, **self.trained.fixed_env()}

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Not applicable when the env's cost model, grouping, actions, observation or N_max differs from training."""
        meta = self.meta
        if env.cost_model != meta["cost_model"]:
            return False, (f"trained with cost model {meta['cost_model']!r}, the env uses {env.cost_model!r} "
                           f"(run with --cost-model {meta['cost_model']})")
        why = self.trained.mismatch(env)
        return not why, why

    batched = True  # reads only observations and masks: one forward pass for a whole batch of episodes

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """The deterministic action for each row of ``observations`` [B, 21] under ``action_masks`` [B, A]."""
        return best_legal_actions(self.logits(np.atleast_2d(observations)), action_masks)

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """The actor's logits [B, A] for ``observations`` [B, 21] (lambda replaced when the policy fixes it)."""
        return action_scores(self._torch, self._net, observations, self.lam)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """The most probable legal action for this observation (lambda replaced when the policy fixes it)."""
        return int(self.act_batch(observation[None, :], action_mask[None, :])[0])

    def describe(self) -> dict[str, Any]:
        """Name, group, lambda and the checkpoint's training summary."""
        meta = self.meta
        params = {"lam": self.lam, "checkpoint": self.source, "cost_model": meta.get("cost_model"),
                  "lambda_range": meta.get("lambda_range"), "timesteps": meta.get("timesteps"),
                  "seed": meta.get("seed"), "train_datasets": meta.get("train_datasets")}
        if "generators" in meta:
            params["generators"] = meta["generators"]
        return {"name": self.name, "label": self.label, "group": self.group, "kind": f"{self.trained.on.prefix}ppo",
                "params": params}


def checkpoint_directory(path: Path) -> Path:
    """The folder holding controller.json of a PPO checkpoint given as its directory or a model zip inside it."""
    if path.suffix == ".zip":
        return path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return path


def read_controller(path: Path) -> tuple[dict[str, Any], Path]:
    """``controller.json`` of a PPO checkpoint (its directory, or a zip inside it) and the model zip to load."""
    path = Path(path)
    if path.is_file() and path.suffix == ".zip":
        directory = checkpoint_directory(path)
        model_file: Path | None = path
    elif path.is_dir():
        directory, model_file = path, None
    else:
        raise FileNotFoundError(f"{path}: no such PPO checkpoint (expected a directory with {CONFIG_FILE} "
                                "or a model .zip inside one)")
    meta_file = directory / CONFIG_FILE
    meta = read_config(directory, kind="ppo")
    if meta.get("format_version") not in SUPPORTED_FORMATS:
        raise ValueError(f"{meta_file}: field 'format_version' is {meta.get('format_version')!r}; "
                         f"expected one of {list(SUPPORTED_FORMATS)}")
    for key in ("cost_model", "budget", "n_max", "observation", "model"):
        if key not in meta:
            raise ValueError(f"{meta_file}: missing field {key!r}")
    TrainedEnv.read(meta, meta_file)  # the env, N_max per generator and budget fields, named by file
    observation = meta["observation"]
    if not (isinstance(observation, list) and 0 < len(observation) <= 1024):
        raise ValueError(f"{meta_file}: field 'observation' is {str(observation)[:60]!r}; expected the list of "
                         "observation feature names")
    name = meta["model"]
    if not (isinstance(name, str) and name and Path(name).name == name and name not in (".", "..")):
        raise ValueError(f"{meta_file}: field 'model' is {str(name)[:60]!r}; expected the model file's name "
                         "inside the checkpoint folder (no folders, no '..')")
    if model_file is None:
        model_file = directory / name
    if not model_file.is_file():
        raise FileNotFoundError(f"{model_file}: model file named by {meta_file} ('model') is missing")
    return meta, model_file


def load(path: Path, *, lam: float | None = None) -> Policy:
    """The PPO controller saved at ``path`` (checkpoint directory or a snapshot zip), acting at ``lam`` if given."""
    model, meta, model_file = load_model(path, lam=lam)
    controller = PPOController(model, meta, lam=lam, source=str(model_file))
    # Its problem featurizer (the env option), saved beside controller.json when it was trained with one.
    controller.trained = controller.trained.with_problem_features(checkpoint_directory(Path(path)))
    return controller


def load_model(path: Path, *, lam: float | None = None) -> tuple[Any, dict[str, Any], Path]:
    """(network, controller.json, model file) of the PPO checkpoint at ``path``, read without unpickling."""
    if lam is not None and not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")
    meta, model_file = read_controller(Path(path))
    from agents.sb3_zip import read_sb3_model

    # Read without unpickling (a model file never runs code); the schedules are not needed to act. The action
    # count is the layout the controller was trained on (controller.json; older ones: the paper layout).
    actions = TrainedEnv.read(meta, model_file).actions
    model = read_sb3_model(model_file, n_features=len(meta["observation"]), n_actions=len(actions))
    expected = len(meta["observation"])
    if model.observation_space.shape != (expected,):
        raise ValueError(f"{model_file}: the model's observation shape {model.observation_space.shape} does not "
                         f"match controller.json's {expected} features")
    return model, meta, model_file
