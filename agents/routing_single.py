"""Always one generator: each model alone, the points every router is measured between.

RouteLLM's PGR, CPT and APGR run from the weak model's accuracy to the strong model's; with many models each one
alone is a point of the route front. ``coba bench --env route`` adds one such row per generator of the pool to
its default policies (``each_generator``: "Always <generator>"), so the front shows every generator even on a
pool where nothing else but the oracles runs (an outcome table without answers: no agreement to route on); the
kind ``route_single`` names one generator in a policy spec.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agents.base import Policy
from agents.batch_evidence import legal
from agents.configured import can, register
from agents.routing_base import RoutePolicy
from coba_env.evidence import Evidence


@register("route_single")
class SingleGeneratorRouter(RoutePolicy):
    """SAMPLE ``generator`` ``samples`` times (fewer when it has fewer candidates), then STOP; selection ``last``.

    ``generator``: "cheapest", "largest" or a generator's name. Needs no answer and no verifier.
    """

    defaults: ClassVar[dict[str, Any]] = {"generator": "cheapest", "samples": 1}
    generator_params: ClassVar[tuple[str, ...]] = ("generator",)
    #: The STOP rule over the generator's answers: ``last``, the one model's newest answer.
    selection_rule: ClassVar[str] = "last"
    generator: str
    samples: int

    def configure(self) -> None:
        """``samples`` >= 1; the selection ``selection_rule``."""
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        self.selection = self.selection_rule

    def act(self, observation: np.ndarray, action_mask: np.ndarray, evidence: Evidence) -> int:
        """SAMPLE the generator up to ``samples`` times, then STOP."""
        g = self.gen["generator"]
        sample = self.layout.sample_action(g)
        ev: Any = evidence
        return sample if ev.gen_revealed[g] < self.samples and can(action_mask, sample) else self.stop_id

    batched = True
    batch_reads_observations = False  # its act_batch reads the vector env's state

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray, venv: Any = None) -> np.ndarray:
        """``act`` for every row."""
        g = self.gen["generator"]
        sample = self.layout.sample_action(g)
        return np.where((venv.gen_revealed[g] < self.samples) & legal(action_masks, sample), sample, self.stop_id)


def each_generator(policies: list[Policy], generators: list[str] | tuple[str, ...]) -> list[Policy]:
    """``policies`` with one "Always <generator>" row per generator added after them (a row of that name kept)."""
    names = {p.name for p in policies}
    added = [SingleGeneratorRouter(name=f"always:{g}", label=f"Always {g}", generator=g) for g in generators
             if f"always:{g}" not in names]
    return [*policies, *added]
