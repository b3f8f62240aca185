"""Problem features: a per-item vector known at reset, prepended to the observation when the env asks for it.

The env option ``problem_features`` (``EnvConfig.build(..., problem_features=featurizer)``, off by default) takes a
*fitted* featurizer (``coba_env.featurizers.Featurizer``, or any object with ``names``, ``meanings`` and
``transform(problem_table) -> [n, D]``). The configuration computes each episode's vector once
(``problem_block``) from the pool's label-free problem table (``coba_env.problems``); the envs copy it in front of
the observation at reset, and it never changes within an episode. With the option off nothing of this module runs
and every output is what it was before the option existed.

The featurizer is fitted by the caller on training items only (``coba_env.featurizers.fit_featurizer`` over
``coba_env.problems.problems_of(training episodes)``): the env never fits anything, so an evaluation env cannot
see its own items while fitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coba_env.problems import episode_problem_rows, problems_of


@dataclass(frozen=True)
class ProblemBlock:
    """The problem features of every episode of a configuration: names, meanings and values float32 [E, D]."""

    names: tuple[str, ...]
    meanings: tuple[str, ...]
    values: np.ndarray
    #: The fitted featurizer the values come from (a trained controller saves it with its checkpoint).
    featurizer: Any = None

    @property
    def table(self) -> tuple[tuple[str, str], ...]:
        """(name, meaning) of each feature, in order (the feature table's problem part)."""
        return tuple(zip(self.names, self.meanings, strict=True))


def problem_block(featurizer: Any, pool: Any) -> ProblemBlock:
    """Each episode's problem features under ``featurizer`` over the items of ``pool`` (a ``CompiledPool``; an
    item-grouped configuration's route episodes are its items); a ValueError for a featurizer that is not one or
    values that are not finite."""
    for attribute in ("names", "meanings", "transform"):
        if not hasattr(featurizer, attribute):
            raise ValueError(f"problem_features must be a fitted featurizer (coba_env.featurizers.fit_featurizer or "
                             f"load_featurizer); got {type(featurizer).__name__}, which has no {attribute!r}")
    names, meanings = tuple(map(str, featurizer.names)), tuple(map(str, featurizer.meanings))
    if len(names) != len(meanings) or not names:
        raise ValueError(f"problem_features: expected one meaning per feature name and at least one feature, got "
                         f"{len(names)} names and {len(meanings)} meanings")
    problems = problems_of(pool)
    values = np.asarray(featurizer.transform(problems), dtype=np.float32)
    if values.shape != (len(problems), len(names)):
        raise ValueError(f"problem_features: the featurizer gave shape {values.shape}; expected "
                         f"({len(problems)}, {len(names)})")
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"problem_features: feature {names[col]!r} of item {problems['dataset'].iloc[row]}/"
                         f"{problems['item_id'].iloc[row]} is {values[row, col]}; expected a finite number")
    per_episode = values[episode_problem_rows(pool, problems)]
    per_episode.flags.writeable = False
    return ProblemBlock(names=names, meanings=meanings, values=per_episode, featurizer=featurizer)
