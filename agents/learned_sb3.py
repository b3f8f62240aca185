"""Any Stable-Baselines3 model ``.zip`` as a ``Policy`` (``coba bench --policies main,model.zip@0.1``).

No configuration file is needed. The zip's own policy network acts (any SB3 algorithm: an actor-critic policy
such as PPO, A2C or MaskablePPO plays its most probable legal action, a DQN policy its highest-valued legal
action); the algorithm itself is not rebuilt, and nothing in the zip is unpickled (``agents.sb3_zip``), so a
crafted zip cannot run code.
The model must have been trained on a coba env: ``coba/Replay-v0`` (on the paper pool observation ``Box(21,)``
and action ``Discrete(5)``; in general the replay observation of its verifiers) or ``coba/Route-v0`` (one
episode per problem, a SAMPLE per generator: a longer observation, a block per generator first). A zip whose
observation fits neither for its action count is refused when loaded, naming both; one trained on the route
env is a route policy (``routes``: ``coba bench --env route`` runs it), and either is not applicable to an env
whose observation or action count differs (``applicable``). The env is built with its defaults (budget B = mean
cost of N_max candidates under the bench's cost model, fusion-rank selection), as ``CoBaSB3VecEnv`` /
``gym.make`` build it for training on the same pool: train and bench on pools with the same B, or the
``budget_used`` feature and lambda's scale change. ``PATH@LAMBDA`` writes LAMBDA into the observation's lambda feature (the bench replays
at lambda 0); without it the model reads the env's lambda. A zip inside a ``coba train ppo`` checkpoint
directory is loaded with that checkpoint's ``controller.json`` instead (``agents.learned_ppo``).

Acting never reads labels: the inputs are the observation and the action mask only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agents.base import Policy
from agents.policy_spec import names_saved, split_at_lambda
from agents.sb3_scoring import action_scores, best_legal_actions
from coba_env.env import CoBaEnv
from coba_env.evidence import Evidence
from coba_env.rules.actions import REPLAY_LAYOUT
from coba_env.rules.features import PAPER_FEATURE_LAYOUT, FeatureLayout


def _is_zip_file(path: str) -> bool:
    """Whether ``path`` is an existing ``.zip`` file."""
    return path.endswith(".zip") and Path(path).is_file()


def split_zip_spec(spec: str | Path) -> tuple[Path, float | None] | None:
    """``"m.zip@0.2"`` -> (m.zip, 0.2), ``"m.zip"`` -> (m.zip, None); None when ``spec`` names no ``.zip`` file
    (``agents.policy_spec``). A bad lambda after '@' raises ``ValueError``."""
    return split_at_lambda(spec, _is_zip_file, "model spec")


def is_sb3_zip(spec: str | Path) -> bool:
    """Whether ``spec`` names an existing ``.zip`` file (optionally ``PATH@LAMBDA``; the lambda is not parsed)."""
    return names_saved(spec, _is_zip_file)


class SB3Controller(Policy):
    """A loaded SB3 policy network choosing its best legal action (deterministic)."""

    #: It knows from its checkpoint which env it was trained on, and ``applicable`` says so (the runner asks it).
    checks_own_grouping = True

    group: ClassVar[str] = "learned"

    def __init__(self, net: Any, *, lam: float | None = None, source: str = "", n_features: int,
                 n_actions: int) -> None:
        import torch

        #: The observation length and action count of the model (its stored spaces).
        self.n_features, self.n_actions = n_features, n_actions
        #: Trained on the route env: its observation is not the replay layout's of its action count.
        self.routes = n_features != replay_features(n_actions)
        self._torch = torch
        self._net = net
        self.lam = None if lam is None else float(lam)
        self.source = source
        stem = Path(source).stem or "sb3"
        self.name = f"{stem}@{self.lam:g}" if self.lam is not None else stem
        self.label = f"SB3 {stem} (lambda={self.lam:g})" if self.lam is not None else f"SB3 {stem} (env lambda)"
        self.selection = None
        self.requires_tiers = ()

    def applicable(self, env: CoBaEnv) -> tuple[bool, str]:
        """Not applicable when the env's observation or action count differs from the model's."""
        if env.observation_space.shape != (self.n_features,) or int(env.action_space.n) != self.n_actions:
            return False, (f"the env has observation {env.observation_space.shape} and {env.action_space.n} "
                           f"actions, the model expects ({self.n_features},) and {self.n_actions}")
        return True, ""

    batched = True  # reads only observations and masks: one forward pass for a whole batch of episodes

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """The best legal action for each row of ``observations`` [B, 21] under ``action_masks`` [B, A]."""
        scores = action_scores(self._torch, self._net, np.atleast_2d(observations), self.lam)
        return best_legal_actions(scores, action_masks)

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """The best legal action for this observation (lambda replaced when the policy fixes it)."""
        return int(self.act_batch(observation[None, :], action_mask[None, :])[0])

    def describe(self) -> dict[str, Any]:
        """Name, group, lambda and the model file."""
        return {"name": self.name, "label": self.label, "group": self.group, "kind": "sb3",
                "params": {"lam": self.lam, "model": self.source}}


def load(path: str | Path, *, lam: float | None = None) -> Policy:
    """The SB3 model saved at ``path`` (``PATH@LAMBDA`` accepted) as a policy acting at ``lam`` if given."""
    parsed = split_zip_spec(path)
    if parsed is None:
        raise FileNotFoundError(f"{path}: no such SB3 model .zip file")
    model_file, spec_lam = parsed
    lam = spec_lam if lam is None else lam
    if lam is not None and not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")
    from agents.checkpoint import CONFIG_FILE

    owner = model_file.parent.parent if model_file.parent.name == "checkpoints" else model_file.parent
    if (owner / CONFIG_FILE).is_file():  # a `coba train ppo` checkpoint's own model or snapshot
        from agents import learned_ppo

        return learned_ppo.load(model_file, lam=lam)
    net, n_features, n_actions = _read_policy(model_file)
    return SB3Controller(net, lam=lam, source=str(model_file), n_features=n_features, n_actions=n_actions)


def replay_features(n_actions: int) -> int:
    """The observation length of the replay layout with ``n_actions`` actions (V + 2: SAMPLE, V verifiers, STOP):
    the feature table of ``coba_env.rules.features`` for V verifiers."""
    return FeatureLayout(tuple(f"v{k}" for k in range(max(n_actions - 2, 0))), -1, -1).n_features


def fitting_features(n_actions: int, observed: int | None) -> int:
    """The observation length a zip with ``n_actions`` actions and an ``observed``-long observation may have: the
    replay layout's, or its own when longer than every replay observation with no more verifiers (a route layout's:
    a block per generator, then the replay table of its verifiers; the env it runs in checks it exactly)."""
    if observed is not None and observed > replay_features(2) and observed != replay_features(n_actions):
        return observed
    return replay_features(n_actions)


def _read_policy(model_file: Path) -> tuple[Any, int, int]:
    """(policy network, observation length, action count) of an SB3 zip, read without unpickling
    (``agents.sb3_zip``: a model file never runs code); its spaces must be a coba env's."""
    from agents.sb3_zip import read_sb3_model

    paper = f"Box({PAPER_FEATURE_LAYOUT.n_features},) with Discrete({REPLAY_LAYOUT.n_actions})"
    note = (" for its {n_actions} actions (coba/Replay-v0's with that many actions; the paper's pool: " + paper
            + f"; a coba/Route-v0 observation is longer than Box({replay_features(2)},))")
    model = read_sb3_model(model_file, n_features=fitting_features, observation_note=note)
    return model.policy, int(model.observation_space.shape[0]), int(model.action_space.n)
