"""Where the learning protocol replays its controllers: the env, the reference policy and the cost bound.

The protocol (``train.protocol``) is the same on every env; what differs is stated here, once, before any
held-out run (docs/LEARNING.md, "Protocol"):

- ``REPLAY``: the replay env (``coba/Replay-v0``, one generator per episode), judged against CoBa-Routed-Strong
  (``coba_strong``); the cost bound of the verdict and of the selection rule is 0.9 (issue 27, paper pool).
- ``ROUTE``: the route env (``coba/Route-v0``, one episode per problem, every generator of it), judged against
  the best hand-made routing policy, the consistency cascade (``route_cascade``: on the paper pool's route
  episodes the most accurate hand-made routing policy both item-pooled and macro, ``coba bench --env route``);
  the cost bound is 0.8 (issue 27: "cost ratio against the best hand-made routing policy < 0.8").

An arena's episodes are always given as replay-pool episode ids (``CompiledPool.episode_ids``): a dataset split
holds every generator of each of its problems, so the route arena replays the route episodes of exactly those
problems (``eval.runner.run_policies(grouping="item")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from agents.base import Policy
from coba_env.compiled import CompiledPool

__all__ = ["ARENAS", "REPLAY", "ROUTE", "Arena", "arena_named"]

#: The protocol's cost model (every arena).
COST_MODEL = "p_tokens"


@dataclass(frozen=True)
class Arena:
    """One env of the protocol: its name, the episode grouping of its env configuration, the reference policy (a
    registry name; also the teacher PPO's warm start clones there) and the cost ratio's bound.

    ``min_generators``: the generators a pool needs (routing needs two); above one, every dataset must have every
    generator, so each fold's episodes have the reference's action layout."""

    env: str
    grouping: str
    reference: str
    ratio_high_max: float
    min_generators: int = 1

    def check(self, compiled: CompiledPool) -> None:
        """A ValueError naming what the pool lacks for this arena, before any fit."""
        dataset, generator = compiled.dataset.tolist(), compiled.generator.tolist()
        everyone = sorted(set(generator))
        if len(everyone) < self.min_generators:
            raise ValueError(f"--env {self.env} routes between {self.min_generators} or more generators; the pool "
                             f"has {everyone}")
        if self.min_generators < 2:
            return  # one generator per episode: a dataset may have any of them
        for d in dict.fromkeys(dataset):
            missing = sorted(set(everyone) - {g for g, dd in zip(generator, dataset, strict=True) if dd == d})
            if missing:
                raise ValueError(f"--env {self.env} needs every generator in every dataset; dataset {d!r} has no "
                                 f"candidates of {missing}")

    def replay(self, policies: Sequence[Policy], episodes: CompiledPool, progress: bool) -> pd.DataFrame:
        """Records of the reference and ``policies`` on ``episodes`` (one process: models may hold threads)."""
        from agents.registry import make_policy
        from eval.runner import run_policies

        everything = [make_policy(self.reference), *policies]
        run = run_policies(everything, episodes, grouping=self.grouping, cost_model=COST_MODEL, progress=progress,
                           workers=1)
        if run.not_applicable:
            raise RuntimeError(f"policies not applicable on the fold ({self.env} env): {run.not_applicable}")
        return run.records


REPLAY = Arena(env="replay", grouping="pair", reference="coba_strong", ratio_high_max=0.9)
ROUTE = Arena(env="route", grouping="item", reference="route_cascade", ratio_high_max=0.8, min_generators=2)
ARENAS: dict[str, Arena] = {a.env: a for a in (REPLAY, ROUTE)}


def arena_named(env: str) -> Arena:
    """The arena of ``env`` ('replay' or 'route')."""
    try:
        return ARENAS[env]
    except KeyError:
        raise ValueError(f"unknown protocol env {env!r}; expected one of {list(ARENAS)}") from None


def arena_of(grouping: str) -> Arena:
    """The arena whose env groups episodes by ``grouping`` ('pair' or 'item')."""
    by_grouping = {a.grouping: a for a in ARENAS.values()}
    try:
        return by_grouping[grouping]
    except KeyError:
        raise ValueError(f"unknown grouping {grouping!r}; expected one of {list(by_grouping)}") from None
