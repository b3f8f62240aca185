"""The data of one bench run (``BenchData``), shared by ``eval.bench`` (which computes it) and ``eval.report``
and ``eval.paper_comparison`` (which render it); its own module so that those three import it one way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from coba_env.compiled import CompiledPool
from coba_env.costs import COST_TABLE
from eval import bootstrap
from eval.cost_notes import CostEstimates
from eval.envs import ENV_GROUPING
from eval.intervals import Intervals
from eval.records import RecordLayout
from eval.runner import BenchRun
from eval.tables import PolicyInfo
from pools.store import Pool

#: Cost model (``CoBaEnv`` cost measure) -> the metric column that the frontier's x axis uses.
COST_METRIC: dict[str, str] = {m.name: m.metric for m in COST_TABLE}


@dataclass
class BenchData:
    """Everything a bench run computed; ``eval.report`` renders it."""

    pool: Pool
    compiled: CompiledPool
    pool_spec: str | None
    run: BenchRun
    records: pd.DataFrame
    info: dict[str, PolicyInfo]
    cost_model: str
    seed: int
    datasets: list[str]
    generators: list[str]
    macro: pd.DataFrame
    pooled: pd.DataFrame
    per_dataset: pd.DataFrame
    per_generator: pd.DataFrame
    allocation: pd.DataFrame
    allocation_overall: pd.DataFrame
    gap: pd.DataFrame
    gap_by_dataset: pd.DataFrame
    summary: dict[str, Any]
    pairwise: pd.DataFrame
    versus: pd.DataFrame
    pareto: dict[str, Any]
    bootstrap_unit: str = "item"
    resamples: int = bootstrap.RESAMPLES
    timings: dict[str, float] = field(default_factory=dict)
    #: Which cost metrics hold estimates and the footnote saying how (``eval.cost_notes``).
    cost_estimates: CostEstimates = field(default_factory=CostEstimates)
    #: One-line notes about the pool the report and the terminal print (e.g. N = 1 makes sampling policies coincide).
    notes: list[str] = field(default_factory=list)
    #: The routing sections of a route bench (``eval.route_bench``); None for a replay bench.
    routing: dict[str, Any] | None = None
    #: The env the policies ran in: "replay" (one episode per problem and generator) or "route" (one per problem).
    env: str = "replay"
    #: The policy the paired bootstrap compares every other one against (None: it did not run), and the one the
    #: user asked for (None: the default, ``eval.tables.REFERENCE``).
    reference: str | None = None
    requested_reference: str | None = None
    #: The 95% intervals of every macro (and per-dataset) accuracy and cost (``eval.intervals``); None: not computed.
    intervals: Intervals | None = None
    #: How good each verifier of the pool is on the benched episodes (``pools.verifier_quality``), by its name.
    verifiers: dict[str, Any] = field(default_factory=dict)
    #: The generators of the pool's (item, generator) episodes (``generators`` holds the episodes' own generator
    #: names: on item-grouped episodes, each item's generators joined by "+").
    pool_generators: list[str] = field(default_factory=list)
    #: The pieces of the episode files a streamed replay wrote (``eval.episode_files.EpisodePieces``), which the
    #: report joins; None: the report writes the files from ``run``'s records.
    episode_pieces: Any = None
    #: Candidates each (item, generator) pair holds (``CompiledPool.n_available`` of the pair episodes); None: every
    #: pair holds N or unknown.
    pair_counts: Any = None

    @property
    def grouping(self) -> str:
        """The episodes' grouping (``EnvConfig.grouping``): "pair" for the replay env, "item" for the route env."""
        return ENV_GROUPING[self.env]

    @property
    def candidates_per_generator(self) -> int:
        """N: the candidates an episode may draw from each of its generators."""
        per_episode = {"pair": 1, "item": len(self.pool_generators)}[self.grouping]
        return self.compiled.n_candidates // max(1, per_episode)

    @property
    def layout(self) -> RecordLayout:
        """The record columns of the run's episodes (``eval.records``)."""
        return RecordLayout.of(self.compiled)

    @property
    def cost_metric(self) -> str:
        """The metric column matching the cost model (frontier x axis)."""
        return COST_METRIC[self.cost_model]

    @property
    def is_paper_pool(self) -> bool:
        """Whether the run is comparable with the paper: the simulated ``paper`` profile (manifest provenance)
        replayed as the paper did, one episode per problem and generator (not a route bench)."""
        prov = self.pool.manifest.get("provenance") or {}
        return prov.get("profile") == "paper" and self.env == "replay"

    @property
    def ran(self) -> list[str]:
        """Names of the policies that ran, in bench order."""
        return [r.name for r in self.run.runs if r.applicable]
