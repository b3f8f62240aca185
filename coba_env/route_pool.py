"""A compiled pool read as route episodes: one episode per (dataset, item), candidates from every generator.

``compile_route_pool`` joins the replay episodes of each item. Route episode e has ``G * N`` candidate slots,
generator-major: slot ``g * N + k`` holds generator g's k-th candidate (all-missing when the item has no
episode of g). Answer clusters are joined ACROSS generators here, at compile time, with the project's one
grading code (``pools.grading.AnswerClusterer``: the first answer of each of an episode's clusters is compared
with the heads of the clusters found so far), so ``step()`` never parses or compares an answer. Every
candidate keeps its own generation cost (tokens x its generator's parameters), so a SAMPLE from g is charged
at g's own cost; correctness labels stay in ``CompiledPool.labels``, apart from everything a policy reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coba_env.compiled import CompiledPool, Labels, gold_clusters
from coba_env.costs import P_TOKENS, TOKENS
from pools.grading import AnswerClusterer


@dataclass(frozen=True)
class RoutePool:
    """Route episodes over E items, G generators and N candidates per generator (label-free but ``pool.labels``)."""

    #: The route episodes as a compiled pool: E items, ``G * N`` candidate slots each (generator-major).
    pool: CompiledPool
    #: Generator names, in the action layout's order (order of first appearance in the pool).
    generators: tuple[str, ...]
    #: Candidates per generator (the replay pool's N).
    n_per_generator: int
    #: available[e, g]: item e has generator g's candidates (bool [E, G]).
    available: np.ndarray
    #: The replay pool's row (episode index) of each (item, generator), -1 when absent (int64 [E, G]).
    source_episode: np.ndarray
    #: Each generator's parameters in billions (p_tokens / tokens of its candidates): label-free, a priori.
    generator_params: tuple[float, ...]
    #: counts[e, g]: how many candidates item e holds from generator g, its slots ``g * N .. g * N + count - 1``
    #: (int64 [E, G]; 0 where absent, at most N: a pool may hold fewer for some pairs). None: N wherever available.
    counts: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.counts is None:
            object.__setattr__(self, "counts", np.where(self.available, self.n_per_generator, 0).astype(np.int64))

    @property
    def n_generators(self) -> int:
        """Number of generators G."""
        return len(self.generators)

    def generator_of_slot(self, slot: int) -> int:
        """The generator index of candidate slot ``slot``."""
        return slot // self.n_per_generator


def compile_route_pool(replay: CompiledPool) -> RoutePool:
    """Join ``replay``'s episodes by (dataset, item id) into route episodes; clusters joined across generators."""
    cached = getattr(replay, "_route_pool", None)
    if cached is not None:
        return cached
    gens = tuple(dict.fromkeys(str(g) for g in replay.generator))
    g_index = {g: k for k, g in enumerate(gens)}
    n, n_gen = replay.n_candidates, len(gens)
    keys = list(dict.fromkeys(zip(replay.dataset.tolist(), replay.item_id.tolist(), strict=True)))
    item_index = {k: i for i, k in enumerate(keys)}
    e_count = len(keys)
    source = np.full((e_count, n_gen), -1, dtype=np.int64)
    for e, (d, i, g) in enumerate(zip(replay.dataset.tolist(), replay.item_id.tolist(), replay.generator.tolist(),
                                      strict=True)):
        source[item_index[(d, i)], g_index[str(g)]] = e
    available = source >= 0
    counts = np.where(available, replay.n_available[np.maximum(source, 0)], 0).astype(np.int64)
    slots = n_gen * n
    t, m = len(replay.tiers), replay.gen_cost.shape[2]

    def gather(array: np.ndarray, fill) -> np.ndarray:
        """[E, G * N, ...] from the replay's [E_replay, N, ...], ``fill`` where the item lacks the generator."""
        out = np.full((e_count, n_gen, *array.shape[1:]), fill, dtype=array.dtype)
        out[available] = array[source[available]]
        return out.reshape(e_count, slots, *array.shape[2:])

    cluster = _joined_clusters(replay, source)
    correct = gather(replay.labels.correct, False)
    graded = None if replay.labels.graded is None else gather(replay.labels.graded, 0.0)
    eps = np.arange(e_count)
    pool = CompiledPool(
        n_candidates=slots,
        episode_ids=eps.astype(np.int64),
        dataset=np.array([k[0] for k in keys], dtype=object),
        generator=np.array(["+".join(g for g, on in zip(gens, row, strict=True) if on) for row in available],
                           dtype=object),
        item_id=np.array([k[1] for k in keys], dtype=object),
        cluster=cluster,
        answer=gather(replay.answer, None),
        output_tokens=gather(replay.output_tokens, 0.0),
        cap_hit=gather(replay.cap_hit, False),
        gen_cost=gather(replay.gen_cost, 0.0),
        has_score=gather(replay.has_score, False),
        score=gather(replay.score, np.nan),
        ver_cost=gather(replay.ver_cost, 0.0),
        labels=Labels(correct=correct, gold_cluster=gold_clusters(correct, cluster), graded=graded),
        n_available=counts.sum(axis=1),  # real candidates over the item's slots (``counts`` says which)
        **replay.pool_wide(),
    )
    assert pool.ver_cost.shape[2:] == (t, m)
    route = RoutePool(pool=pool, generators=gens, n_per_generator=n, available=available, source_episode=source,
                      generator_params=_generator_params(replay, gens), counts=counts)
    replay.__dict__["_route_pool"] = route  # built once per compiled pool (the envs of one pool share it)
    return route


def _joined_clusters(replay: CompiledPool, source: np.ndarray) -> np.ndarray:
    """Cluster ids [E, G * N] joined across generators: ids in order of first appearance in slot order."""
    e_count, n_gen = source.shape
    n = replay.n_candidates
    if len(replay.answerless_generators) == n_gen:  # no answers to compare: every candidate is its own answer
        slots = np.repeat(source >= 0, n, axis=1)
        return np.where(slots, np.cumsum(slots, axis=1) - 1, -1).astype(np.int32)
    out = np.full((e_count, n_gen * n), -1, dtype=np.int32)
    for e in range(e_count):
        clusterer = AnswerClusterer()
        for g in range(n_gen):
            src = source[e, g]
            if src < 0:
                continue
            local = replay.cluster[src]
            answers = replay.answer[src]
            joined: dict[int, int] = {}
            for k in range(n):
                c = int(local[k])
                if c < 0:
                    continue
                if c not in joined:
                    head = answers[k]
                    # An answered candidate always has its raw answer in a pool; if a foreign pool left it out,
                    # the cluster stays its own (never merged on a missing answer).
                    text = str(head) if head is not None else f"(no stored answer: generator {g}, cluster {c})"
                    joined[c] = clusterer.add(text)
                out[e, g * n + k] = joined[c]
    return out


def _generator_params(replay: CompiledPool, gens: tuple[str, ...]) -> tuple[float, ...]:
    """Each generator's parameters (billions): its candidates' p_tokens / tokens (the compiled cost model)."""
    out = []
    for g in gens:
        rows = replay.generator == g
        tokens = replay.gen_cost[rows, :, TOKENS]
        weighted = replay.gen_cost[rows, :, P_TOKENS]
        has = tokens > 0
        out.append(float(np.median(weighted[has] / tokens[has])) if has.any() else 0.0)
    return tuple(out)
