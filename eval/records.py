"""The episode record: one row per (policy, episode), its columns declared once, here.

A record says what the policy did (its ``actions`` string and action counts), what it selected, whether that
was correct, what it cost in every measure, and ``oracle_available``: whether the pool held a correct
candidate at all. That last field is evaluator-side (read from ``CompiledPool.labels``) and exists only to split
errors into allocation and generation errors; no policy ever sees it.

Columns, in order (``RecordLayout.columns``):

- ``policy, episode_id, dataset, generator, item_id`` (an item-grouped episode's ``generator`` joins its
  generators with "+"), ``actions``, ``n_actions`` (non-STOP actions), ``n_samples``;
- one call count per verifier of the pool, in the pool's verifier order (``verifier_column``: ``n_`` and the
  verifier's name in lower case, so the paper's V1, V2, V3 give ``n_v1, n_v2, n_v3``);
- ``selected_candidate, selected_answer, correct``, every cost measure of ``coba_env.costs.COST_MEASURES`` but
  dollars, ``reward, oracle_available``; then ``usd`` when the pool prices every model (``CompiledPool.usd_priced``);
  then ``graded_score`` when the pool holds graded scores (the selected candidate's, evaluator side like ``correct``;
  0 when nothing was selected).

Episodes over several generators also carry, per generator g, ``samples:<g>`` (candidates drawn from g) and
``gen_cost:<g>`` (their generation cost in the run's cost measure), unless the replay asks for none (a bench: two
columns per generator are 48 MB per policy at 30 generators x 100,000 items); they are never written
to the episode files. What the routing analyses read of them (``eval.route_analysis``) is summed per policy in
``GeneratorUse``, which a replay of such episodes always returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from coba_env.compiled import CompiledPool
from coba_env.costs import COST_MEASURES, COST_TABLE
from coba_env.rules.actions import ActionLayout
from coba_env.rules.roles import primary_slots

#: The measures a record holds only on a priced pool (last columns), and the measures every record holds.
PRICED_MEASURES = tuple(m.name for m in COST_TABLE if m.needs_prices)
MEASURES = tuple(m.name for m in COST_TABLE if not m.needs_prices)
#: The column of a pool with graded scores: the selected candidate's graded score (``Labels.graded``).
GRADED_COLUMN = "graded_score"
#: The columns before the verifier counts and after them (the cost measures in ``COST_MEASURES`` order).
HEAD = ("policy", "episode_id", "dataset", "generator", "item_id", "actions", "n_actions", "n_samples")
TAIL = ("selected_candidate", "selected_answer", "correct", *MEASURES, "reward", "oracle_available")
#: The kind of each column that is not text (the verifier counts are "int" too); ``eval.episode_files`` maps
#: the kinds to Arrow types, ``records_frame`` to numpy ones.
KINDS: dict[str, str] = {"episode_id": "int", "n_actions": "int", "n_samples": "int", "selected_candidate": "int",
                         "correct": "bool", "oracle_available": "bool", "reward": "float",
                         GRADED_COLUMN: "float", **{m: "float" for m in COST_MEASURES}}
#: The compact code of an action of the one-generator layout in the ``actions`` string ("S S V1 V3 STOP").
ACTION_CODES: dict[str, str] = {"SAMPLE": "S", "STOP": "STOP"}


def verifier_column(name: str, taken: Sequence[str] = ()) -> str:
    """The record column counting calls of verifier ``name``: ``n_`` + ``name`` in lower case (V1 -> ``n_v1``),
    or ``n_VERIFY_<name>`` (its action's name) when that is already in ``taken`` (a fixed column such as
    ``n_samples`` for a verifier named "samples", or a verifier whose name differs only in case)."""
    column = f"n_{name.lower()}"
    return f"n_VERIFY_{name}" if column in taken else column


def samples_column(generator: str) -> str:
    """The record column counting the candidates drawn from ``generator``."""
    return f"samples:{generator}"


def cost_column(generator: str) -> str:
    """The record column holding the generation cost spent on ``generator`` (the run's cost measure)."""
    return f"gen_cost:{generator}"


def action_codes(layout: ActionLayout) -> list[str]:
    """Each action's code in the ``actions`` string: on one generator compact (SAMPLE -> S, VERIFY_<v> -> <v>,
    STOP); on several the action names (``SAMPLE_<g> VERIFY_<v> STOP``), which say which generator sampled."""
    if layout.n_generators > 1:
        return list(layout.names)
    return [ACTION_CODES.get(a, a.removeprefix("VERIFY_")) for a in layout.names]


@dataclass(frozen=True)
class RecordLayout:
    """The record columns of one pool: its verifiers (names and declared roles) and whether it has prices."""

    verifiers: tuple[str, ...]
    roles: tuple[str, ...]
    priced: bool = False
    graded: bool = False

    @classmethod
    def of(cls, pool: CompiledPool) -> RecordLayout:
        """The record layout of ``pool``: its verifier axis (the env's VERIFY actions), roles, prices, graded scores."""
        return cls(tuple(pool.tiers), tuple(pool.verifier_roles), bool(pool.usd_priced),
                   pool.labels.graded is not None)

    @property
    def counts(self) -> dict[str, str]:
        """Verifier name -> the record column counting its calls (``verifier_column``), in verifier order."""
        out: dict[str, str] = {}
        for name in self.verifiers:
            out[name] = verifier_column(name, [*HEAD, *out.values()])
        return out

    @property
    def columns(self) -> tuple[str, ...]:
        """Every record column, in order."""
        return (*HEAD, *self.counts.values(), *TAIL, *(PRICED_MEASURES if self.priced else ()),
                *((GRADED_COLUMN,) if self.graded else ()))

    @property
    def kinds(self) -> dict[str, str]:
        """Column -> "int", "float", "bool" or "str", for every column."""
        counts = dict.fromkeys(self.counts.values(), "int")
        return {c: KINDS.get(c, counts.get(c, "str")) for c in self.columns}

    def standing_for(self, tier: int) -> str | None:
        """The verifier standing for the paper's tier ``tier`` (0: V1 cheap judge, 1: V2 process judge, 2: V3
        strong verifier) by declared role (``coba_env.rules.roles.primary_slots``), or None."""
        slot = primary_slots(self.roles)[tier]
        return self.verifiers[slot] if slot >= 0 else None

    @property
    def strong(self) -> str | None:
        """The count column of the verifier standing for the strong verifier V3, or None."""
        name = self.standing_for(2)
        return None if name is None else self.counts[name]


@dataclass
class PlayedEpisodes:
    """What one policy did on every episode of a run, by episode index (the replays' common result)."""

    #: The ``actions`` string of each episode: an object array, or already a text column (``text_column``).
    actions: np.ndarray | pd.Series
    #: Action counts [E, n_actions] (action ids of the env's layout).
    counts: np.ndarray
    #: The selected slot (-1: none), its answer (None: none), whether it was correct.
    selected: np.ndarray
    answers: np.ndarray
    correct: np.ndarray
    #: Every cost measure [E, K] (``COST_MEASURES`` order) and the summed reward.
    costs: np.ndarray
    reward: np.ndarray
    #: The selected candidate's graded score (0 when none was selected); None on a pool without graded scores.
    graded: np.ndarray | None = None


@dataclass(frozen=True)
class GeneratorUse:
    """What one policy drew from each generator of its episodes, summed over them (``generator_columns``' sums)."""

    generators: tuple[str, ...]
    #: Per generator: candidates drawn, their generation cost (the run's cost measure), episodes that drew any.
    samples: np.ndarray
    cost: np.ndarray
    called: np.ndarray
    #: The episodes summed over.
    episodes: int

    @classmethod
    def of(cls, columns: dict[str, np.ndarray], generators: Sequence[str], episodes: int) -> GeneratorUse:
        """The sums of ``generator_columns``' columns for ``generators`` over ``episodes`` episodes."""
        drawn = [columns[samples_column(g)] for g in generators]
        return cls(tuple(generators), np.array([d.sum() for d in drawn], dtype=np.int64),
                   np.array([columns[cost_column(g)].sum() for g in generators], dtype=np.float64),
                   np.array([np.count_nonzero(d > 0) for d in drawn], dtype=np.int64), int(episodes))

    def called_share(self, generator: str) -> float:
        """The share of the episodes that drew at least one candidate from ``generator``."""
        return float(self.called[self.generators.index(generator)] / max(self.episodes, 1))


def empty_records(layout: RecordLayout) -> pd.DataFrame:
    """An episode-records frame with no rows and every column."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in layout.columns})


def text_column(values: np.ndarray) -> pd.Series:
    """``values`` (None: missing) as a text column of Arrow strings: each value's ``str``, None a missing one.

    Strings and None go to Arrow in one conversion (several times faster than a Series of ``str`` results per
    value); any other object (a NaN answer) takes the per-value path, which gives the same column.
    """
    values = np.asarray(values, dtype=object)
    try:
        # Refuses anything but str, None and UTF-8 bytes (taken as their text, where str() would give "b'...'": a
        # pool's answers are text, never bytes).
        strings = pa.array(values, type=pa.large_string(), from_pandas=False)
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pd.Series([None if v is None else str(v) for v in values], dtype="str")
    return pd.Series(pd.array(strings, dtype="str"))


def records_frame(name: str, pool: CompiledPool, played: PlayedEpisodes, actions: ActionLayout, *,
                  cost_k: int, per_generator: bool = True) -> pd.DataFrame:
    """The records of policy ``name`` on the episodes of ``pool`` (``RecordLayout.of(pool)``), from what it did
    (counts by the env's ``actions`` layout); per-generator columns when the layout has several generators and
    ``per_generator``."""
    layout = RecordLayout.of(pool)
    counts = played.counts
    verifier_calls = {col: counts[:, actions.verify_action(k)] for k, col in enumerate(layout.counts.values())}
    samples = counts[:, [actions.sample_action(g) for g in range(actions.n_generators)]]
    as_int = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
    as_float = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    frame = pd.DataFrame({
        "policy": pd.Series(name, index=pd.RangeIndex(pool.n_episodes), dtype="str"),  # grouped on: Arrow strings
        **pool.record_columns(),
        # Text columns as Arrow strings, not one Python object per record (a bench holds every policy's records).
        "actions": played.actions if isinstance(played.actions, pd.Series) else text_column(played.actions),
        "n_actions": as_int(counts.sum(axis=1) - counts[:, actions.stop_action]),
        "n_samples": as_int(samples.sum(axis=1)),
        **{col: as_int(v) for col, v in verifier_calls.items()},
        "selected_candidate": as_int(played.selected),
        "selected_answer": text_column(played.answers),
        "correct": np.asarray(played.correct, dtype=bool),
        **{m: as_float(played.costs[:, k]) for k, m in enumerate(COST_MEASURES)},
        "reward": as_float(played.reward),
        "oracle_available": pool.labels.correct.any(axis=1).astype(bool),
        **({GRADED_COLUMN: as_float(played.graded)} if layout.graded else {}),
    })[list(layout.columns)]
    if actions.n_generators > 1 and per_generator:
        frame = pd.concat([frame, pd.DataFrame(generator_columns(pool, actions, samples, cost_k))], axis=1)
    return frame


def generator_use(pool: CompiledPool, played: PlayedEpisodes, actions: ActionLayout, *,
                  cost_k: int) -> GeneratorUse | None:
    """What the policy that ``played`` the episodes of ``pool`` drew from each generator (None: one generator)."""
    if actions.n_generators < 2:
        return None
    samples = played.counts[:, [actions.sample_action(g) for g in range(actions.n_generators)]]
    return GeneratorUse.of(generator_columns(pool, actions, samples, cost_k), actions.generators, pool.n_episodes)


def generator_columns(pool: CompiledPool, actions: ActionLayout, samples: np.ndarray,
                      cost_k: int) -> dict[str, np.ndarray]:
    """``samples:<g>`` and ``gen_cost:<g>`` for every generator g: its draws take g's candidates in order, so the
    spend is the prefix sum of their generation cost (slots generator-major, ``coba_env.route_pool``)."""
    n_gen, rows = actions.n_generators, np.arange(pool.n_episodes)
    n_per = pool.n_candidates // n_gen
    prefix = np.cumsum(pool.gen_cost[:, :, cost_k].reshape(pool.n_episodes, n_gen, n_per), axis=2)
    out: dict[str, np.ndarray] = {}
    for g, name in enumerate(actions.generators):
        drawn = samples[:, g].astype(np.int64)
        out[samples_column(name)] = drawn
        out[cost_column(name)] = np.where(drawn > 0, prefix[rows, g, np.maximum(drawn - 1, 0)], 0.0)
    return out
