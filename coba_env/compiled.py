"""A pool compiled into dense numpy arrays (episodes x candidates [x tiers]) holding all that ``step()`` needs.

Compilation does every lookup, join and parse once. Correctness labels are kept apart in
``CompiledPool.labels`` so that nothing that builds observations or masks ever reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from coba_env.cost_fill import FILL_CHUNK, fill_calls
from coba_env.costs import COST_MEASURES
from coba_env.episode_data import EpisodeData
from coba_env.problems import problem_table
from coba_env.rules.roles import declared_roles
from pools.prices import PRICES_KEY
from pools.schema import OUTCOME_STATUS, PAPER_TIER_ROLES, TIERS
from pools.store import Pool


@dataclass
class Labels:
    """Evaluator-side ground truth. Read only to score a finished episode, never to build evidence."""

    correct: np.ndarray  # bool [E, N]
    gold_cluster: np.ndarray  # int32 [E]; the correct answer's cluster id, -1 when no candidate is correct
    #: float64 [E, N]: each candidate's graded score in [0, 1] (the 0/1 label where the source graded none);
    #: None on a pool without graded scores.
    graded: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> Labels:
        """The labels of episodes ``rows`` (an index array)."""
        return Labels(correct=self.correct[rows], gold_cluster=self.gold_cluster[rows],
                      graded=None if self.graded is None else self.graded[rows])


#: ``CompiledPool``'s per-episode arrays (first axis E): a subset of episodes takes their rows.
PER_EPISODE_FIELDS: tuple[str, ...] = ("episode_ids", "dataset", "generator", "item_id", "cluster", "answer",
                                       "output_tokens", "cap_hit", "gen_cost", "has_score", "score", "ver_cost",
                                       "n_available")
#: ``CompiledPool``'s pool-wide fields: a subset of episodes, or the route pool over the same items, keeps them as
#: they are (a new pool-wide field is added here once, not at every place a compiled pool is derived).
POOL_WIDE_FIELDS: tuple[str, ...] = ("tiers", "max_output_tokens", "tiers_present", "verifier_roles",
                                     "verifier_models", "priced_models", "sized_models", "answerless_generators",
                                     "problems")


@dataclass
class CompiledPool:
    """Dense arrays over E episodes, N candidates and T verifier slots ``tiers`` (``verifier_axis``; the paper's
    V1..V3 on the paper's pools; a slot with no rows is all-missing)."""

    n_candidates: int
    tiers: tuple[str, ...]
    episode_ids: np.ndarray  # int64 [E], the pool's episode_id
    dataset: np.ndarray  # object [E]
    generator: np.ndarray  # object [E]
    item_id: np.ndarray  # object [E]
    cluster: np.ndarray  # int32 [E, N]; -1 = no extractable answer
    answer: np.ndarray  # object [E, N]; the raw extracted answer or None
    output_tokens: np.ndarray  # float64 [E, N]
    cap_hit: np.ndarray  # bool [E, N]
    gen_cost: np.ndarray  # float64 [E, N, K] in COST_MEASURES order
    has_score: np.ndarray  # bool [E, N, T]; a verification call is stored for this candidate and tier
    score: np.ndarray  # float64 [E, N, T]; NaN when missing or unparsed
    ver_cost: np.ndarray  # float64 [E, N, T, K]
    max_output_tokens: float
    labels: Labels
    tiers_present: tuple[str, ...] = ()
    #: Declared role of each tier slot's verifier (``coba_env.rules.roles``; default: the paper tiers' roles).
    verifier_roles: tuple[str, ...] = tuple(PAPER_TIER_ROLES[t] for t in TIERS)
    #: The verifier model of each tier slot ("" when the slot holds no calls; names joined by "+" if several).
    verifier_models: tuple[str, ...] = ("",) * len(TIERS)
    #: The models the pool prices: the manifest's ``prices_usd_per_million_tokens``, and every generator whose
    #: every call has its dollars recorded by the source (``candidates.cost_usd``); usd is 0 for any other's calls.
    priced_models: frozenset[str] = frozenset()
    #: The models the pool gives a size (``models.params_b`` > 0); p_tokens counts any other's calls as free.
    sized_models: frozenset[str] = frozenset()
    #: Generators none of whose candidates has an answer (outcome tables: ``pools.schema.OUTCOME_STATUS``), in
    #: pool order: a policy that compares answers cannot run on their episodes (``agents.base.Policy``).
    answerless_generators: tuple[str, ...] = ()
    #: The pool's label-free problem table (``coba_env.problems``: text, categories, prompt tokens, embeddings; no
    #: gold), one row per item of the whole pool; None for a pool compiled without one.
    problems: pd.DataFrame | None = None
    #: int64 [E]: how many candidates each episode holds (candidates 0..k-1; N, ``n_candidates``, is the most any
    #: episode holds, and the slots past k are padding that no observation, mask or feature reads; a route pool's
    #: episode counts its generators' candidates, ``RoutePool.counts`` says which slots). None at construction
    #: means every episode holds N.
    n_available: np.ndarray | None = None
    _episode_rows: list | None = field(default=None, repr=False)
    _episode_meta: tuple | None = field(default=None, repr=False)
    _vector_tables: Any = field(default=None, repr=False)
    _cost_table: np.ndarray | None = field(default=None, repr=False)
    _record_columns: dict | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.n_available is None:
            self.n_available = np.full(len(self.episode_ids), self.n_candidates, dtype=np.int64)

    @property
    def ragged(self) -> bool:
        """Whether some episode holds fewer than N candidates (on a route pool, an item without some generator's
        candidates too: ``RoutePool.counts`` says which)."""
        return bool(len(self.n_available)) and int(self.n_available.min()) < self.n_candidates

    @property
    def called_models(self) -> list[str]:
        """The models these episodes call: their generators and every verifier slot's model(s), sorted.

        A route pool's episode names its problem's generators joined by "+" (``coba_env.route_pool``), as a
        verifier slot names several models; a name that is itself priced is taken whole."""
        def models(names: Any) -> set[str]:
            out: set[str] = set()
            for name in map(str, names):
                out.update([name] if name in self.priced_models else [m for m in name.split("+") if m])
            return out

        return sorted(models(set(self.generator.tolist())) | models(self.verifier_models))

    def unpriced_models(self) -> list[str]:
        """The called models without a price: the usd measure is real only when there is none (``usd_priced``)."""
        return [m for m in self.called_models if m not in self.priced_models]

    def unsized_models(self) -> list[str]:
        """The called models without a size: p_tokens weighs their calls by 0 (``costs.default_cost_model``)."""
        return [m for m in self.called_models if m not in self.sized_models]

    @property
    def usd_priced(self) -> bool:
        """Whether every model these episodes call is priced, so that the usd measure is the dollars spent."""
        return bool(self.priced_models) and not self.unpriced_models()

    @property
    def n_episodes(self) -> int:
        """Number of episodes E."""
        return int(self.cluster.shape[0])

    def select(self, mask: np.ndarray) -> CompiledPool:
        """A new compiled pool holding only the episodes where ``mask`` (bool [E] or index array) is set."""
        idx = np.flatnonzero(mask) if np.asarray(mask).dtype == bool else np.asarray(mask, dtype=np.int64)
        return CompiledPool(n_candidates=self.n_candidates, labels=self.labels.take(idx),
                            **{f: getattr(self, f)[idx] for f in PER_EPISODE_FIELDS}, **self.pool_wide())

    def pool_wide(self) -> dict[str, Any]:
        """The pool-wide fields (``POOL_WIDE_FIELDS``) by name, for a compiled pool derived from this one."""
        return {f: getattr(self, f) for f in POOL_WIDE_FIELDS}

    def episode_rows(self) -> list[EpisodeData]:
        """Per-episode ``EpisodeData`` of plain Python lists, for the one-episode env's pure-Python step (built once)."""
        if self._episode_rows is None:
            rows = []
            cl = self.cluster.tolist()
            out = self.output_tokens.tolist()
            cap = self.cap_hit.tolist()
            gc = self.gen_cost.tolist()
            hs = self.has_score.tolist()
            sc = self.score.tolist()
            vc = self.ver_cost.tolist()
            for e in range(self.n_episodes):
                rows.append(EpisodeData(cluster=cl[e], output_tokens=out[e], cap_hit=cap[e], gen_cost=gc[e],
                                        has_score=hs[e], score=sc[e], ver_cost=vc[e],
                                        n_clusters=int(self.cluster[e].max()) + 1))
            self._episode_rows = rows
        return self._episode_rows

    def record_columns(self) -> dict[str, pd.Series]:
        """The per-episode columns of an episode-records frame (episode_id, dataset, generator, item_id), built
        once per pool: every policy's records repeat them, and converting 100k strings per policy adds up."""
        if self._record_columns is None:
            self._record_columns = {
                "episode_id": pd.Series(self.episode_ids.astype(np.int64)),
                **{name: pd.Series(getattr(self, name).astype(str), dtype="str")
                   for name in ("dataset", "generator", "item_id")},
            }
        return self._record_columns

    def cost_rows(self) -> np.ndarray:
        """Every cost a step can add, [E * N + E * N * T + 1, K]: generation rows, verification rows, a zero row.

        The compiled table itself when ``gen_cost`` and ``ver_cost`` are still its views, else a new one.
        """
        table = self._cost_table
        if table is not None and self.gen_cost.base is table and self.ver_cost.base is table:
            return table
        k = len(COST_MEASURES)
        return np.concatenate([self.gen_cost.reshape(-1, k), self.ver_cost.reshape(-1, k), np.zeros((1, k))])

    def vector_tables(self) -> Any:
        """The flat lookup tables ``CoBaVectorEnv`` gathers from (``coba_env.vector_tables``), built once per pool."""
        if self._vector_tables is None:
            from coba_env.vector_tables import VectorTables

            self._vector_tables = VectorTables.build(self)
        return self._vector_tables

    def episode_meta(self) -> tuple[list, list, list, list]:
        """(episode ids, datasets, generators, item ids) as plain Python lists, for per-episode infos (built once)."""
        if self._episode_meta is None:
            self._episode_meta = (self.episode_ids.tolist(), list(self.dataset), list(self.generator),
                                  list(self.item_id))
        return self._episode_meta


def as_compiled(pool: Pool | CompiledPool | str | None) -> CompiledPool:
    """A compiled pool from any pool spec: a ``CompiledPool`` as is, else ``pools.default.resolve_pool`` compiled."""
    if isinstance(pool, CompiledPool):
        return pool
    from pools.default import resolve_pool  # the simulator is imported only when a spec needs resolving

    return compile_pool(resolve_pool(pool))


def compile_pool(pool: Pool, *, release: bool = False, tiers: tuple[str, ...] | None = None) -> CompiledPool:
    """Compile a validated ``Pool`` into dense arrays (one pass, vectorized); ``release``: empty ``pool.candidates``
    once read (a caller that needs it no more: ~3 GB at 1M episodes, freed before the verifications fill);
    ``tiers``: the verifier axis of the whole pool a chunk of episodes belongs to (default: this pool's)."""
    episodes = pool.episodes.sort_values("episode_id").reset_index(drop=True)
    n = pool.n_candidates
    e_count = len(episodes)
    row_of = {int(eid): i for i, eid in enumerate(episodes["episode_id"].to_numpy())}
    params = dict(zip(pool.models["name"], pool.models["params_b"].astype(float), strict=True))
    prices = pool.manifest.get(PRICES_KEY) or {}
    cand = pool.candidates
    ei = _lookup(cand["episode_id"], row_of, np.int64)
    ci = cand["candidate"].to_numpy(dtype=np.int64)

    def per_candidate(column: str, fill: Any, dtype: Any) -> np.ndarray:
        out = np.full((e_count, n), fill, dtype=dtype)
        out[ei, ci] = cand[column].to_numpy(dtype=dtype)
        return out

    outcome = per_candidate("extraction_status", "", object) == OUTCOME_STATUS  # no answer, an outcome
    cluster = outcome_clusters(per_candidate("cluster", -1, np.int32), outcome)
    answer = per_candidate("raw_answer", None, object)
    out_tok = per_candidate("output_tokens", 0.0, np.float64)
    cap_hit = per_candidate("cap_hit", False, bool)
    labels = per_candidate_labels(cand, ei, ci, (e_count, n))

    # Generation and verification costs are views of one table laid out as ``CoBaVectorEnv`` gathers it
    # (``cost_rows``): the vector env then uses it as is instead of a second copy (0.2 GB at 100k episodes).
    # Every measure of ``coba_env.costs.COST_TABLE`` is filled by its own rule from the calls' columns.
    tiers = verifier_axis(pool.tiers) if tiers is None else tiers
    n_measures, n_tiers, en = len(COST_MEASURES), len(tiers), e_count * n
    cost_table = np.zeros((en * (1 + n_tiers) + 1, n_measures))
    gen_cost = cost_table[:en].reshape(e_count, n, n_measures)
    gen_model = episodes["generator"].to_numpy(dtype=object)[ei]
    recorded = cand["cost_usd"].to_numpy(dtype=np.float64)
    fill_calls(gen_cost, (ei, ci), cand, episodes["generator"].map(params).to_numpy(dtype=np.float64)[ei],
                gen_model, prices, recorded)
    prompt_tokens, self_priced = _episode_prompt_tokens(ei, cand, e_count), _recorded_dollars(gen_model, recorded)
    if release:  # ``recorded`` and ``ci`` may be views of the table's blocks: they go with it
        pool.candidates = cand = cand.iloc[0:0]
        del recorded, ci

    has_score = np.zeros((e_count, n, n_tiers), dtype=bool)
    score = np.full((e_count, n, n_tiers), np.nan)
    ver_cost = cost_table[en:en * (1 + n_tiers)].reshape(e_count, n, n_tiers, n_measures)
    ver = pool.verifications
    slot_of = {t: k for k, t in enumerate(tiers)}
    for a in range(0, len(ver), FILL_CHUNK):  # a slice of calls at a time: its index arrays, not 37M rows' at once
        part = ver.iloc[a:a + FILL_CHUNK]
        at = (_lookup(part["episode_id"], row_of, np.int64), part["candidate"].to_numpy(dtype=np.int64),
              _lookup(part["tier"], slot_of, np.int64))
        has_score[at] = True
        score[at] = part["score"].to_numpy(dtype=np.float64)
        fill_calls(ver_cost, at, part, _lookup(part["model"], params, np.float64),
                   part["model"].to_numpy(dtype=object), prices)

    max_tokens = pool.manifest.get("generation", {}).get("max_output_tokens") or \
        (float(out_tok.max()) if out_tok.size else 1.0)
    return CompiledPool(
        n_candidates=n,
        tiers=tiers,
        episode_ids=episodes["episode_id"].to_numpy(dtype=np.int64),
        dataset=episodes["dataset"].to_numpy(dtype=object),
        generator=episodes["generator"].to_numpy(dtype=object),
        item_id=episodes["item_id"].to_numpy(dtype=object),
        cluster=cluster, answer=answer, output_tokens=out_tok, cap_hit=cap_hit,
        gen_cost=gen_cost, has_score=has_score, score=score, ver_cost=ver_cost,
        max_output_tokens=float(max(max_tokens, 1.0)),
        labels=Labels(correct=labels.correct, gold_cluster=gold_clusters(labels.correct, cluster),
                      graded=labels.graded),
        tiers_present=tuple(t for k, t in enumerate(tiers) if has_score[:, :, k].any()),
        verifier_roles=declared_roles(pool.manifest.get("verifier_roles"), tiers),
        verifier_models=_tier_models(ver, tiers),
        priced_models=frozenset(map(str, prices)) | self_priced,
        sized_models=frozenset(str(m) for m, size in params.items() if size > 0),
        answerless_generators=_answerless(episodes["generator"].to_numpy(dtype=object), outcome),
        problems=problem_table(pool.items, episodes, prompt_tokens, getattr(pool, "embeddings", None)),
        n_available=np.bincount(ei, minlength=e_count).astype(np.int64),
        _cost_table=cost_table,
    )


def _episode_prompt_tokens(ei: np.ndarray, cand: pd.DataFrame, e_count: int) -> np.ndarray:
    """Each episode's mean prompt tokens over its candidates (0 for an episode without any)."""
    counts = np.bincount(ei, minlength=e_count)
    sums = np.bincount(ei, weights=cand["prompt_tokens"].to_numpy(dtype=np.float64), minlength=e_count)
    return sums / np.maximum(counts, 1)


def gold_clusters(correct: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """Each episode's correct answer cluster, int32 [E]: the cluster of its first correct candidate, -1 without one
    (evaluator side: read from the labels)."""
    gold = np.full(len(correct), -1, dtype=np.int32)
    any_correct = correct.any(axis=1)
    first = correct.argmax(axis=1)
    gold[any_correct] = cluster[np.flatnonzero(any_correct), first[any_correct]]
    return gold


def outcome_clusters(cluster: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """``cluster`` [E, N] with every outcome-only candidate (``outcome``: its source recorded no answer) given an
    answer cluster of its own, ids renumbered 0.. by first appearance in each episode: such a candidate can be
    selected (its outcome is known) and never agrees with another."""
    rows = np.flatnonzero(outcome.any(axis=1))
    if not len(rows):
        return cluster
    n = cluster.shape[1]
    label = np.where(outcome[rows], n + np.arange(n)[None, :], cluster[rows])
    first = np.argmax(label[:, :, None] == label[:, None, :], axis=2)  # first position holding each label
    ids = np.cumsum(first == np.arange(n)[None, :], axis=1) - 1
    joined = np.take_along_axis(ids, first, axis=1).astype(cluster.dtype)
    joined[label < 0] = -1
    out = cluster.copy()
    out[rows] = joined
    return out


def per_candidate_labels(cand: pd.DataFrame, ei: np.ndarray, ci: np.ndarray, shape: tuple[int, int]) -> Labels:
    """The candidates' correctness [E, N] and graded scores [E, N] (the 0/1 label where a candidate has no graded
    score; None when the pool has none at all); the gold clusters are left empty for the caller."""
    correct = np.zeros(shape, dtype=bool)
    correct[ei, ci] = cand["correct"].fillna(False).to_numpy(dtype=bool)
    scores = cand["graded_score"].to_numpy(dtype=np.float64)
    graded = None
    if np.isfinite(scores).any():
        graded = correct.astype(np.float64)
        graded[ei, ci] = np.where(np.isfinite(scores), scores, graded[ei, ci])
    return Labels(correct=correct, gold_cluster=np.zeros(0, dtype=np.int32), graded=graded)


def _recorded_dollars(models: np.ndarray, recorded: np.ndarray) -> frozenset[str]:
    """The generators whose every call has its dollars recorded (they price themselves)."""
    if not np.isfinite(recorded).any():
        return frozenset()
    frame = pd.DataFrame({"model": models, "has": np.isfinite(recorded)})
    every = frame.groupby("model", sort=False)["has"].all()
    return frozenset(str(m) for m in every.index[every.to_numpy()])


def _answerless(generators: np.ndarray, outcome: np.ndarray) -> tuple[str, ...]:
    """The generators all of whose candidates are outcome-only (no answer), in pool order."""
    if not outcome.any():
        return ()
    frame = pd.DataFrame({"generator": generators, "all": outcome.all(axis=1)})
    every = frame.groupby("generator", sort=False)["all"].all()
    return tuple(str(g) for g in every.index[every.to_numpy()])


def verifier_axis(pool_verifiers: Sequence[str]) -> tuple[str, ...]:
    """The compiled tier axis (one slot per verifier, the env's VERIFY actions): the pool's verifiers.

    A pool whose verifiers all carry the paper's names keeps the paper's whole axis V1, V2, V3, so the replay
    env's action ids are 0..4 on every such pool (a verifier it lacks is never legal); any other pool's axis
    is its own verifier list in the pool's order (``pools.store.Pool.tiers``), possibly empty.
    """
    names = tuple(pool_verifiers)
    return TIERS if names and set(names) <= set(TIERS) else names


def _tier_models(ver: pd.DataFrame, tiers: Sequence[str]) -> tuple[str, ...]:
    """The verifier model(s) of each tier slot, "+"-joined in order of first appearance ("" = no calls)."""
    return tuple("+".join(str(m) for m in pd.unique(ver.loc[ver["tier"] == t, "model"])) for t in tiers)


def _lookup(column: pd.Series, table: dict, dtype: type) -> np.ndarray:
    """``column.map(table)`` as a ``dtype`` array (NaN for a float key the table lacks), looking each distinct
    value up once: a 3M-row map on Arrow strings otherwise spends seconds per call."""
    codes, uniques = pd.factorize(column)
    missing = np.nan if np.dtype(dtype).kind == "f" else None
    values = np.array([table.get(u.item() if hasattr(u, "item") else u, missing) for u in uniques], dtype=dtype)
    return values[codes] if len(codes) else np.zeros(0, dtype=dtype)
