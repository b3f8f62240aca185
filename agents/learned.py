"""Load a trained controller checkpoint (MLP or PPO) or an SB3 model zip as a ``Policy``.

A checkpoint is a directory holding ``controller.json`` whose ``"kind"`` is ``"mlp"`` (``agents.learned_mlp``)
or ``"ppo"`` (``agents.learned_ppo``), with ``"env": "route"`` for the route env's controllers
(``agents.learned_route_mlp``, ``agents.learned_route_ppo``); any Stable-Baselines3 ``.zip`` is loaded by
``agents.learned_sb3``.
A spec may carry the lambda to act at: ``PATH@0.2``.
"""

from __future__ import annotations

from pathlib import Path

from agents.base import Policy
from agents.checkpoint import is_checkpoint as is_checkpoint_dir
from agents.checkpoint import read_config, split_spec


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
    route = config.get("env") == "route"  # a controller trained on the route env (issue 27, item 3)
    if config["kind"] == "mlp":
        if route:
            from agents import learned_route_mlp

            return learned_route_mlp.load_route(directory, lam=lam)
        from agents import learned_mlp  # torch is imported only when a checkpoint is loaded

        return learned_mlp.load(directory, lam=lam)
    if route:
        from agents import learned_route_ppo

        return learned_route_ppo.load(directory, lam=lam)
    from agents import learned_ppo

    return learned_ppo.load(directory, lam=lam)
