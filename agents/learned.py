"""Load a trained controller checkpoint or an SB3 model zip as a ``Policy``.

A checkpoint is a directory holding ``controller.json`` whose ``"kind"`` names a controller kind with a loader
(``agents/controllers.yaml``: ``"mlp"``, ``agents.learned_mlp``; ``"ppo"``, ``agents.learned_ppo``), trained on
either env (``"env": "route"`` for the route env's); any Stable-Baselines3 ``.zip`` is loaded by
``agents.learned_sb3``. A spec may carry the lambda to act at: ``PATH@0.2``.
"""

from __future__ import annotations

from pathlib import Path

from agents.base import Policy
from agents.checkpoint import is_checkpoint as is_checkpoint_dir
from agents.checkpoint import read_config, split_spec
from agents.controller_kinds import controller_kind


def is_checkpoint(spec: str | Path) -> bool:
    """Whether ``spec`` (optionally ``PATH@LAMBDA``) names a checkpoint directory or an SB3 model ``.zip``."""
    from agents.learned_sb3 import is_sb3_zip

    return is_checkpoint_dir(spec) or is_sb3_zip(spec)


def load_checkpoint(path: str | Path, *, lam: float | None = None) -> Policy:
    """The policy stored in checkpoint directory (or SB3 zip) ``path`` (``PATH@LAMBDA`` accepted), acting at ``lam``."""
    from agents.learned_sb3 import is_sb3_zip

    if is_sb3_zip(path) and not is_checkpoint_dir(path):
        from agents import learned_sb3

        return learned_sb3.load(path, lam=lam)
    directory, spec_lam = split_spec(path)
    if lam is None:
        lam = spec_lam
    config = read_config(directory)
    # The kind's loader (torch is imported only when a checkpoint is loaded).
    return controller_kind(config["kind"]).load(directory, lam=lam)
