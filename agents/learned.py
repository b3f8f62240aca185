"""Load a trained controller checkpoint (MLP or PPO) as a ``Policy``, dispatching on ``controller.json``.

A checkpoint is a directory holding ``controller.json`` whose ``"kind"`` is ``"mlp"`` (``agents.learned_mlp``)
or ``"ppo"`` (``agents.learned_ppo``). A checkpoint spec may carry the lambda to act at: ``PATH@0.2``.
"""

from __future__ import annotations

from pathlib import Path

from agents.base import Policy
from agents.checkpoint import (  # noqa: F401  (re-exported: checkpoint helpers' historical home)
    CONFIG_FILE,
    KINDS,
    LAMBDA_INDEX,
    checkpoint_kind,
    is_checkpoint,
    read_config,
    split_spec,
)


def load_checkpoint(path: str | Path, *, lam: float | None = None) -> Policy:
    """The policy stored in checkpoint directory ``path`` (``PATH@LAMBDA`` also accepted), acting at ``lam``."""
    directory, spec_lam = split_spec(path)
    if lam is None:
        lam = spec_lam
    kind = checkpoint_kind(directory)
    if kind == "mlp":
        from agents import learned_mlp  # torch is imported only when a checkpoint is loaded

        return learned_mlp.load(directory, lam=lam)
    from agents import learned_ppo

    return learned_ppo.load(directory, lam=lam)
