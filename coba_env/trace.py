"""The computation path of one episode: every action, its target, its cost and the evidence it revealed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coba_env.costs import COST_MEASURES, cost_record
from coba_env.episode_data import EpisodeData
from coba_env.rules.actions import REPLAY_LAYOUT, ActionLayout


class Trace(Sequence):
    """A list of step records, built on first access so that replaying many episodes stays cheap.

    ``row`` and ``answers`` hold the episode's data by pool candidate; ``slots`` maps each revealed slot (a
    step's ``candidate``) to its pool candidate (an item-grouped episode), None when they are the same (one generator).

    Each record: ``{"action", "candidate", "cost": {measure: value}, "evidence": {...}}``. SAMPLE reveals
    ``answer, cluster, output_tokens, cap_hit`` (and ``generator`` in an item-grouped episode); VERIFY reveals ``tier, score`` (None when unusable);
    STOP reveals ``selected_candidate``.
    """

    __slots__ = ("_steps", "_names", "_tiers", "_row", "_answers", "_selected", "_records", "_layout", "_slots")

    def __init__(self, steps: list[tuple[int, int]], action_names: Sequence[str], tiers: Sequence[str],
                 row: EpisodeData, answers: Sequence[Any], selected: int,
                 layout: ActionLayout = REPLAY_LAYOUT, slots: Sequence[int] | None = None) -> None:
        self._steps, self._names, self._tiers, self._layout = steps, action_names, tiers, layout
        self._row, self._answers, self._selected, self._slots = row, answers, selected, slots
        self._records: list[dict[str, Any]] | None = None

    def _build(self) -> list[dict[str, Any]]:
        if self._records is None:
            row, records, layout, slots = self._row, [], self._layout, self._slots
            generators = None if layout.generators == ("",) else layout.generators
            for a, c in self._steps:
                p = slots[c] if slots is not None and c >= 0 else c  # ``row`` and ``answers`` by pool candidate
                if layout.is_sample(a):
                    cost = row.gen_cost[p]
                    evidence = {"answer": self._answers[p], "cluster": row.cluster[p],
                                "output_tokens": row.output_tokens[p], "cap_hit": row.cap_hit[p]}
                    if generators is not None:
                        evidence["generator"] = layout.generators[layout.generator_of(a)]
                elif layout.is_stop(a):
                    cost = (0.0,) * len(COST_MEASURES)
                    evidence = {"selected_candidate": self._selected}
                else:
                    t = layout.verifier_of(a)
                    cost = row.ver_cost[p][t]
                    s = row.score[p][t]
                    evidence = {"tier": self._tiers[t], "score": None if s != s else s}
                records.append({"action": self._names[a], "candidate": int(c),
                                "cost": cost_record(cost), "evidence": evidence})
            self._records = records
        return self._records

    def __getitem__(self, index):  # type: ignore[override]
        return self._build()[index]

    def __len__(self) -> int:
        return len(self._steps)

    def to_list(self) -> list[dict[str, Any]]:
        """The records as a plain list (JSON-serializable)."""
        return list(self._build())

    def __repr__(self) -> str:
        return f"Trace({self.to_list()!r})"
