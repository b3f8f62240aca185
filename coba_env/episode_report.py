"""How a one-episode env's episode ends and what it reports: STOP's selection and final info, illegal-action
messages, rendering.

A mixin of ``CoBaEnv`` (it reads the env's state). The correctness label is read here, at STOP only, never for
an observation or a mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coba_env.costs import cost_record
from coba_env.rules.features import observe
from coba_env.rules.masks import illegal_reason
from coba_env.rules.selection import select_candidate
from coba_env.trace import Trace

__all__ = ["EpisodeReport"]


class EpisodeReport:
    """STOP and the final ``info`` of an episode, the reason an action is illegal, the ANSI rendering (``CoBaEnv``'s)."""

    # The attributes read here are set by ``CoBaEnv.__init__`` / ``reset`` / ``step``.
    _ev: Any
    _ep: int
    _mask: np.ndarray
    _trace: list[tuple[int, int]]

    def _stop_step(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """STOP: select the answer, end the episode, and return the final step's outputs."""
        ev = self._ev
        self._trace.append((self._stop, -1))
        self._done = True
        if self._fusion_stop and (ev.n_answered == 0 or ev.best_r >= 0.0):
            selected = ev.best  # refresh_rank keeps it current: the earliest candidate of highest R
        else:
            selected = select_candidate(ev, self.selection)
        correct = self._is_correct(selected)
        extra = self.gate.on_stop(self, self._bits) if self.gate is not None else None
        self._mask, self._bits = self._mask_table[0], 0
        obs = self._obs
        obs[self._step_index] = ev.steps / self.max_steps
        info = self._final_info(selected, correct)
        if extra:
            info.update(extra)
        return self._as_observation(obs), 1.0 if correct else 0.0, True, False, info

    def _observation(self) -> np.ndarray:
        """The observation rebuilt from the evidence (``step`` keeps ``self._obs`` equal to it, cheaper)."""
        ev = self._ev
        return np.array(observe(ev, ev.cost[self._cost_k] / self.budget, self.max_steps,
                                self.pool.max_output_tokens, self._logs, ev.best_r, self.features),
                        dtype=np.float32)

    def _illegal_reason(self, a: int) -> str:
        if self.gate is not None:
            why = self.gate.illegal_reason(self, a)
            if why:
                return why
        ev = self._ev
        return illegal_reason(a, n_actions=self.layout.n_actions, names=self.actions, tiers=self.tiers,
                              enabled_tiers=self.enabled_tiers, spent=ev.cost[self._cost_k] >= self.max_cost,
                              n_max=self.n_max, max_cost=self.max_cost, cost_model=self.cost_model,
                              layout=self.layout, n_cap=self._n_cap)

    def _is_correct(self, selected: int) -> bool:
        """Whether revealed slot ``selected`` holds a correct candidate (evaluator side: the labels, at STOP only)."""
        return bool(selected >= 0 and self.pool.labels.correct[self._ep, self._candidate(selected)])

    def _slots(self) -> list[int] | None:
        """The pool candidate of each revealed slot (an item episode's), or None when slot = candidate (one generator)."""
        return self._slot_cand if self._places else None

    def _candidate(self, slot: int) -> int:
        """The pool candidate revealed into ``slot`` (``_slots``)."""
        slots = self._slots()
        return slot if slots is None else slots[slot]

    def _final_info(self, selected: int, correct: bool) -> dict[str, Any]:
        ev, ep = self._ev, self._ep
        ids, datasets, generators, items = self.pool.episode_meta()
        answers = self.pool.answer[ep]  # by pool candidate
        slots = self._slots()
        names, cost = self.actions, ev.cost
        info = {
            "action_mask": self._mask.copy(),
            "episode": ep,
            "episode_id": ids[ep],
            "dataset": datasets[ep],
            "generator": generators[ep],
            "item_id": items[ep],
            "lambda": ev.lam,
            "trace": Trace(self._trace, names, self.tiers, self._row, answers, selected, self.layout, slots),
            "actions": [names[a] for a, _ in self._trace],
            "selected_candidate": selected,
            "selected_answer": None if selected < 0 else answers[self._candidate(selected)],
            "correct": correct,
            # every measure by construction (Evidence.cost); usd is 0 on a pool without prices
            "costs": cost_record(cost),
        }
        graded = self.pool.labels.graded  # evaluator side, like "correct": read at STOP only
        if graded is not None:
            info["graded_score"] = float(graded[ep, self._candidate(selected)]) if selected >= 0 else 0.0
        if self._places:
            self._generator_info(info, selected)
        return info

    def render(self) -> str | None:
        """ANSI text of the current evidence (render_mode="ansi")."""
        if self.render_mode != "ansi" or self._ev is None:
            return None
        ev = self._ev
        return (f"episode {self._ep}: revealed {ev.n_revealed}/{self.n_max}, clusters {ev.clusters}, "
                f"top share {ev.top_share():.2f}, cost {ev.cost[self._cost_k]:.4g} {self.cost_model}")
