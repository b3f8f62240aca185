"""The computation path of one episode: every action, its target, its cost and the evidence it revealed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coba_env.costs import COST_MEASURES
from coba_env.rules.actions import tier_of


class Trace(Sequence):
    """A list of step records, built on first access so that replaying many episodes stays cheap.

    Each record: ``{"action", "candidate", "cost": {measure: value}, "evidence": {...}}``. SAMPLE reveals
    ``answer, cluster, output_tokens, cap_hit``; VERIFY reveals ``tier, score`` (None when unusable);
    STOP reveals ``selected_candidate``.
    """

    __slots__ = ("_steps", "_names", "_tiers", "_row", "_answers", "_selected", "_records")

    def __init__(self, steps: list[tuple[int, int]], action_names: Sequence[str], tiers: Sequence[str],
                 row: tuple, answers: Sequence[Any], selected: int) -> None:
        self._steps, self._names, self._tiers = steps, action_names, tiers
        self._row, self._answers, self._selected = row, answers, selected
        self._records: list[dict[str, Any]] | None = None

    def _build(self) -> list[dict[str, Any]]:
        if self._records is None:
            row, records = self._row, []
            stop = len(self._names) - 1
            for a, c in self._steps:
                if a == 0:
                    cost = row[3][c]
                    evidence = {"answer": self._answers[c], "cluster": row[0][c], "output_tokens": row[1][c],
                                "cap_hit": row[2][c]}
                elif a == stop:
                    cost = (0.0,) * len(COST_MEASURES)
                    evidence = {"selected_candidate": self._selected}
                else:
                    t = tier_of(a)
                    cost = row[6][c][t]
                    s = row[5][c][t]
                    evidence = {"tier": self._tiers[t], "score": None if s != s else s}
                records.append({"action": self._names[a], "candidate": int(c),
                                "cost": dict(zip(COST_MEASURES, cost, strict=True)), "evidence": evidence})
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
