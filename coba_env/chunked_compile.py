"""A stored pool compiled a chunk of episodes at a time, each chunk equal to the whole compile's rows of it.

``scan_pool`` makes one light pass over a pool directory (a few columns of the candidate and verification tables,
read a slice at a time with pyarrow) for what ``compile_pool`` computes over the whole pool: the pool-wide fields
(``coba_env.compiled.POOL_WIDE_FIELDS``: verifier axis and models, priced, sized and answerless models, the
problem table, the token cap), whether any candidate has a graded score, and each episode's generation cost per
cost measure (the default budget B is their mean over every episode). ``compile_chunk`` then compiles the
episodes of one chunk (``pools.pool_chunks.read_pool_chunk``) with those fields fixed, so that it equals
``compile_pool(whole).select(rows of the chunk)`` field by field (tests/test_chunked_compile.py).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from coba_env.compiled import (
    CompiledPool,
    Labels,
    compile_pool,
    gold_clusters,
    outcome_clusters,
    verifier_axis,
)
from coba_env.cost_fill import fill_calls
from coba_env.costs import COST_MEASURES, cost_index
from coba_env.problems import problem_table
from coba_env.rules.roles import declared_roles
from pools.manifest_fields import ordered_tiers
from pools.pool_chunks import PER_EPISODE_TABLES, column_batches, read_manifest, read_rows, read_table
from pools.prices import PRICES_KEY
from pools.schema import OUTCOME_STATUS
from pools.store import Pool

#: Episodes per chunk of the light pass (the candidate columns of ~65k episodes x 16 candidates: ~60 MB).
SCAN_CHUNK = 1 << 16
#: The columns of the per-episode tables a chunk's compile reads (None: all): ``compile_pool``'s (the candidates'
#: texts and diagnostics stay on disk).
COMPILE_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "candidates": ("episode_id", "candidate", "raw_answer", "cluster", "correct", "prompt_tokens", "output_tokens",
                   "latency_s", "cap_hit", "extraction_status", "graded_score", "cost_usd")}
#: The candidate columns the light pass reads.
SCAN_COLUMNS = ("episode_id", "candidate", "prompt_tokens", "output_tokens", "latency_s", "cost_usd",
                "extraction_status", "graded_score", "cluster", "correct")


@dataclass
class PoolScan:
    """What a chunk's compile takes from its whole pool (``scan_pool``), and the pool's episodes in compile order."""

    path: Path
    manifest: dict
    items: pd.DataFrame
    models: pd.DataFrame
    #: The episodes table sorted by ``episode_id`` (the compiled pool's episode order).
    episodes: pd.DataFrame
    #: ``CompiledPool``'s pool-wide fields (``POOL_WIDE_FIELDS``) of the whole pool.
    wide: dict[str, Any]
    #: Whether any candidate of the pool has a graded score (the compiled labels then carry ``graded``).
    graded: bool
    #: float64 [K, E]: each episode's cost of drawing all its candidates, per cost measure (``COST_MEASURES``).
    generation_sums: np.ndarray
    #: int64 [E]: each episode's candidate count (``CompiledPool.n_available``).
    n_available: np.ndarray
    #: int32 [E]: each episode's correct answer cluster (``Labels.gold_cluster``; evaluator side).
    gold_cluster: np.ndarray

    @property
    def episode_ids(self) -> np.ndarray:
        """Every episode id, in the compiled pool's order."""
        return self.episodes["episode_id"].to_numpy(dtype=np.int64)

    def budget(self, cost_model: str) -> float:
        """``coba_env.rules.config.default_budget`` of the whole compiled pool at N_max = N (same float)."""
        value = float(self.generation_sums[cost_index(cost_model)].mean()) if len(self.episodes) else 1.0
        return value if value > 0 else 1.0

    def episode_columns(self) -> CompiledPool:
        """The whole pool compiled without its candidate axis: ``eval.bench.episode_columns_only`` of the whole
        compile (episode ids, datasets, generators, items, counts, gold clusters and the pool-wide fields)."""
        e, n_tiers, k = len(self.episodes), len(self.wide["tiers"]), len(COST_MEASURES)
        labels = Labels(correct=np.zeros((e, 0), dtype=bool), gold_cluster=self.gold_cluster,
                        graded=np.zeros((e, 0)) if self.graded else None)
        columns = {name: shared_strings(self.episodes[name]) for name in ("dataset", "generator", "item_id")}
        return CompiledPool(
            n_candidates=int(self.manifest["n_candidates"]), episode_ids=self.episode_ids, **columns,
            cluster=np.zeros((e, 0), dtype=np.int32), answer=np.zeros((e, 0), dtype=object),
            output_tokens=np.zeros((e, 0)), cap_hit=np.zeros((e, 0), dtype=bool), gen_cost=np.zeros((e, 0, k)),
            has_score=np.zeros((e, 0, n_tiers), dtype=bool), score=np.zeros((e, 0, n_tiers)),
            ver_cost=np.zeros((e, 0, n_tiers, k)), labels=labels, n_available=self.n_available, **self.wide)

    def chunks(self, size: int) -> list[np.ndarray]:
        """The episode ids cut into consecutive slices of at most ``size`` episodes, in compile order."""
        ids = self.episode_ids
        return [ids[a:a + size] for a in range(0, len(ids), max(1, int(size)))]


def shared_strings(column: pd.Series) -> np.ndarray:
    """``column`` as an object array whose equal values are one Python string (at 1M episodes a string object per
    row of a few distinct datasets and generators is ~0.2 GB for the three key columns)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return np.asarray(uniques, dtype=object)[codes]


def compile_chunk(scan: PoolScan, episode_ids: np.ndarray) -> CompiledPool:
    """The compiled episodes ``episode_ids`` of the scanned pool: the whole pool's compile of those rows."""
    tables = {name: read_rows(scan.path, name, episode_ids, columns=COMPILE_COLUMNS.get(name))
              for name in PER_EPISODE_TABLES}
    # compile_pool's problem table of the chunk's items is replaced by the whole pool's (``scan.wide``): no items
    pool = Pool(manifest=scan.manifest, items=scan.items.iloc[0:0], models=scan.models, **tables)
    compiled = compile_pool(pool, release=True, tiers=scan.wide["tiers"])
    labels = compiled.labels
    if scan.graded and labels.graded is None:  # a chunk without graded scores in a pool with some
        labels = dataclasses.replace(labels, graded=labels.correct.astype(np.float64))
    return dataclasses.replace(compiled, labels=labels, **scan.wide)


def scan_pool(path: str | os.PathLike[str], chunk: int = SCAN_CHUNK, *,
              verifier_pairs: tuple[list[str], list[tuple[str, str]]] | None = None) -> PoolScan:
    """One light pass over the pool directory ``path`` (checked by the caller): see the module docstring.
    ``verifier_pairs``: the verifier names and (name, model) pairs in order of first appearance, when the caller's
    own pass over the verification table found them (``pools.stored_validation``); else read here."""
    from pools.embeddings import load_embeddings

    path = Path(path)
    manifest, items, models = read_manifest(path), read_table(path, "items"), read_table(path, "models")
    episodes = read_table(path, "episodes").sort_values("episode_id").reset_index(drop=True)
    params = dict(zip(models["name"], models["params_b"].astype(float), strict=True))
    totals = _scan_candidates(path, episodes, params, manifest.get(PRICES_KEY) or {}, int(manifest["n_candidates"]),
                              chunk)
    present, pairs = _verifier_pairs(path) if verifier_pairs is None else verifier_pairs
    tiers = verifier_axis(ordered_tiers(present, manifest.get("tiers")))
    prices = manifest.get(PRICES_KEY) or {}
    # compile_pool's self-priced generators: every call's dollars recorded (none when no call has any)
    recorded = [g for g, every in totals["recorded_all"].items() if every and totals["recorded_any"]]
    wide = dict(
        tiers=tiers, max_output_tokens=_max_tokens(manifest, totals["max_tokens"]),
        tiers_present=tuple(t for t in tiers if t in present),
        verifier_roles=declared_roles(manifest.get("verifier_roles"), tiers),
        verifier_models=tuple("+".join(str(m) for t, m in pairs if t == tier) for tier in tiers),
        priced_models=frozenset(map(str, prices)) | frozenset(map(str, recorded)),
        sized_models=frozenset(str(m) for m, size in params.items() if size > 0),
        answerless_generators=_answerless(episodes, totals["outcomes"], int(manifest["n_candidates"])),
        problems=problem_table(items, episodes, totals["prompt_sums"] / np.maximum(totals["counts"], 1),
                               load_embeddings(path, items)),
    )
    return PoolScan(path=path, manifest=manifest, items=items, models=models, episodes=episodes, wide=wide,
                    graded=totals["graded"], generation_sums=totals["sums"], n_available=totals["counts"],
                    gold_cluster=totals["gold"])


def _scan_candidates(path: Path, episodes: pd.DataFrame, params: dict, prices: dict, n: int,
                     chunk: int) -> dict[str, Any]:
    """Per-episode sums and counts over the candidate rows, ``chunk`` episodes at a time (see ``scan_pool``)."""
    ids, e_count, k_count = episodes["episode_id"].to_numpy(dtype=np.int64), len(episodes), len(COST_MEASURES)
    generator = episodes["generator"].to_numpy(dtype=object)
    codes, names = pd.factorize(generator, use_na_sentinel=False)  # per-call model lookups as array indexing
    sizes = np.array([params.get(m, np.nan) for m in names], dtype=np.float64)
    totals: dict[str, Any] = dict(sums=np.zeros((k_count, e_count)), counts=np.zeros(e_count, dtype=np.int64),
                                  prompt_sums=np.zeros(e_count), outcomes=np.zeros(e_count, dtype=np.int64),
                                  max_tokens=-np.inf, graded=False, recorded_any=False, recorded_all={},
                                  gold=np.full(e_count, -1, dtype=np.int32))
    for a in range(0, e_count, chunk):
        part = ids[a:a + chunk]
        cand = read_rows(path, "candidates", part, columns=SCAN_COLUMNS)
        local = np.searchsorted(part, cand["episode_id"].to_numpy(dtype=np.int64))
        rows, models = a + local, generator[a + local]
        gen = np.zeros((len(part), n, k_count))
        recorded = cand["cost_usd"].to_numpy(dtype=np.float64)
        fill_calls(gen, (local, cand["candidate"].to_numpy(dtype=np.int64)), cand, sizes[codes[rows]], models, prices,
                   recorded)
        for k in range(k_count):  # the same reduction default_budget makes over the whole compiled table
            totals["sums"][k, a:a + len(part)] = gen[:, :n, k].sum(axis=1)
        totals["counts"] += np.bincount(rows, minlength=e_count)
        totals["prompt_sums"] += np.bincount(rows, weights=cand["prompt_tokens"].to_numpy(dtype=np.float64),
                                             minlength=e_count)
        outcome = (cand["extraction_status"] == OUTCOME_STATUS).to_numpy(dtype=bool)
        totals["outcomes"] += np.bincount(rows[outcome], minlength=e_count)
        totals["gold"][a:a + len(part)] = _gold(cand, local, outcome, (len(part), n))
        tokens = cand["output_tokens"].to_numpy(dtype=np.float64)
        totals["max_tokens"] = max(totals["max_tokens"], float(tokens.max()) if len(tokens) else -np.inf)
        totals["graded"] |= bool(np.isfinite(cand["graded_score"].to_numpy(dtype=np.float64)).any())
        finite = np.isfinite(recorded)
        totals["recorded_any"] |= bool(finite.any())
        every = np.bincount(codes[rows], weights=~finite, minlength=len(names)) == 0  # per model: all recorded
        for code in np.unique(codes[rows]).tolist():
            totals["recorded_all"][names[code]] = totals["recorded_all"].get(names[code], True) and bool(every[code])
    return totals


def _gold(cand: pd.DataFrame, local: np.ndarray, outcome: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The episodes' gold clusters as ``compile_pool`` finds them (outcome-only candidates get clusters of their
    own first), from the candidate rows of a slice of episodes (``local``: each row's episode in the slice)."""
    at = (local, cand["candidate"].to_numpy(dtype=np.int64))
    cluster, is_outcome, correct = np.full(shape, -1, dtype=np.int32), np.zeros(shape, dtype=bool), np.zeros(shape, bool)
    cluster[at], is_outcome[at] = cand["cluster"].to_numpy(dtype=np.int32), outcome
    correct[at] = cand["correct"].fillna(False).to_numpy(dtype=bool)
    return gold_clusters(correct, outcome_clusters(cluster, is_outcome))


def _verifier_pairs(path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The verifier names in order of first appearance, and the (tier, model) pairs in order of first appearance."""
    tiers: list[str] = []
    pairs: list[tuple[str, str]] = []
    for batch in column_batches(path, "verifications", ("tier", "model")):
        frame = batch.to_pandas()
        for t, m in frame.drop_duplicates().itertuples(index=False):
            if (t, m) not in pairs:
                pairs.append((t, m))
            if t not in tiers:
                tiers.append(t)
    return tiers, pairs


def _max_tokens(manifest: dict, observed: float) -> float:
    """``compile_pool``'s ``max_output_tokens``: the manifest's cap, else the largest output (0 for padding)."""
    cap = manifest.get("generation", {}).get("max_output_tokens")
    return float(max(cap or max(observed, 0.0), 1.0))


def _answerless(episodes: pd.DataFrame, outcomes: np.ndarray, n: int) -> tuple[str, ...]:
    """``compile_pool``'s answerless generators: those every episode of which holds N outcome-only candidates."""
    if not outcomes.any():
        return ()
    every = pd.Series(outcomes == n).groupby(episodes["generator"].to_numpy(dtype=object), sort=False).all()
    return tuple(str(g) for g in every.index[every.to_numpy()])
