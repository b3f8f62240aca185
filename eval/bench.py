"""``coba bench``: every policy on one pool, with the paper's metrics, statistics, tables and figures.

``run_bench`` resolves the pool and the policies (``eval.policy_selection``), replays every policy on every
episode (``eval.runner``) of either grouping (``--env replay``: one episode per (problem, generator); ``--env
route``: one per problem with all its generators), aggregates and tests them (``eval.analysis``: metrics, paired
bootstrap, Pareto analysis), adds the routing section when the episodes hold several generators
(``eval.route_analysis``), and hands everything to ``eval.report``, which writes the report, tables, figures,
``results.json`` and the per-episode records. It returns the ``results.json`` content.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from agents.base import Policy
from agents.sampling import fit_to_pool, sampling_note
from coba_env.compiled import CompiledPool, Labels, compile_pool
from coba_env.costs import COST_MEASURES, cost_model_or_default
from coba_env.rules.config import EnvConfig, check_cost_model_priced
from eval import bootstrap, report
from eval.analysis import analyse
from eval.cost_notes import cost_estimates, estimated_tokens
from eval.dataset_scope import in_sample_warnings, restrict_datasets
from eval.envs import ENV_GROUPING
from eval.episode_files import EpisodePieces
from eval.policy_selection import (  # noqa: F401  (BenchInputError re-exported: callers catch eval.bench's)
    BenchInputError,
    grouping_problem,
    is_policy_set,
    resolve_policy_objects,
)
from eval.records import RecordLayout
from eval.route_analysis import routing_section, with_each_generator
from eval.runner import REPLAY_MODES, BenchRun, run_policies
from eval.short_episodes import short_episode_notes
from pools.atomic_write import scratch_dir
from pools.default import pool_directory, pool_label, resolve_pool
from pools.store import Pool
from pools.verifier_quality import verifier_diagnostics

#: What the terminal and the report say instead of a column of zero dollars.
NO_PRICES_NOTE = ("usd: no dollar cost, the pool has no prices (import with --price MODEL=IN[,OUT]; "
                  "docs/POOLS.md, 'Prices')")
#: ``--env`` values (``eval.envs.ENV_GROUPING``: the episode grouping each one replays).
BENCH_ENVS = tuple(ENV_GROUPING)
#: Whether a bench of each episode grouping compiles and replays a stored pool a chunk of episodes at a time
#: (``eval.chunked_replay``: an item's generators lie apart in the episode order, so "item" compiles it whole).
CHUNKED: dict[str, bool] = {"pair": True, "item": False}
#: How ``--ray-address`` cuts the work (``eval.ray_bench``): (item, generator) episodes into shards with every
#: policy; item-grouped episodes one task per policy (a shard of pair episodes could cut an item apart).
RAY_SPLIT: dict[str, str] = {"pair": "episodes", "item": "policies"}


@dataclasses.dataclass
class PreparedPool:
    """The pool a bench reports on (manifest and items), its compiled episodes, cost estimates and notes."""

    pool: Pool
    compiled: CompiledPool
    label: str | None
    estimates: Any
    notes: list[str]
    #: ``time.perf_counter()`` when the pool was resolved (the bench's pool_s / compile_s timings).
    resolved_at: float
    #: How good each verifier is on the benched episodes (``pools.verifier_quality``), for the report's pool section.
    verifiers: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The cost measure of the run: the one given, else ``coba_env.costs.default_cost_model``'s.
    cost_model: str = "p_tokens"
    #: The stored pool's light pass when its episodes are compiled and replayed a chunk at a time
    #: (``eval.chunked_replay``; ``compiled`` then holds the episode columns only), else None.
    scan: Any = None

    @property
    def budget(self) -> float | None:
        """The run's budget B when the pool is replayed in chunks (the whole compile's default), else None."""
        return None if self.scan is None else self.scan.budget(self.cost_model)


def run_bench(pool_spec: str | Pool | None = None, policies: str | Sequence[str | Policy] | None = None,
              cost_model: str | None = None, seed: int = 0, out_dir: str | Path = "bench-out",
              progress: bool = True, *, figures: bool = True, workers: int | None = None,
              specs: str | Path | None = None, unit: str = "item", resamples: int = bootstrap.RESAMPLES,
              pool_seed: int = 0, quiet: bool = False, datasets: Sequence[str] | None = None,
              replay: str = "batched", ray_address: str | None = None, env: str = "replay",
              reference: str | None = None) -> dict[str, Any]:
    """Benchmark ``policies`` on the pool ``pool_spec`` and write the full report to ``out_dir``.

    ``pool_spec``: None (the simulated paper pool), a profile name such as "tiny", a pool directory, or a
    ``Pool``; ``pool_seed`` seeds a simulated pool. ``seed`` seeds the bootstrap and any stochastic policy.
    ``policies``: None / "all" (every non-learned registered policy written for ``env``), "main" (the paper's main
    table), or a comma-separated mix of names, YAML spec files, ``FILE.py:Class`` / ``module:Class`` references
    and checkpoints (``PATH[@LAMBDA]``, SB3 ``.zip``); or a list of such items / ``Policy`` objects. Returns the
    content of ``results.json``. Prints a summary table unless ``quiet``. ``datasets`` restricts the replay to
    those datasets; a learned policy evaluated on datasets it was trained on gets a warning line on stderr.
    ``replay`` "batched" (default) replays policies with a batched form through ``CoBaVectorEnv``; "single"
    replays every policy one episode at a time (the reference; same records).
    ``ray_address`` spreads episode shards over that Ray cluster (``eval.ray_bench``; same results).
    ``env`` "replay" (default: one episode per (problem, generator)) or "route" (``coba/Route-v0``: one episode
    per problem, the routing policies; the report adds the routing section, ``eval.route_analysis``).
    ``reference``: the policy the paired bootstrap tests every other one against (default: CoBa-Routed-Strong,
    when it runs); it must be one of the selected policies.
    """
    t0 = time.perf_counter()
    out = check_bench_out(out_dir, [pool_spec if isinstance(pool_spec, str | Path) else None])  # before any work
    _check_options(cost_model=cost_model, unit=unit, mode=replay, env=env, ray_address=ray_address)
    grouping = ENV_GROUPING[env]
    # Policies are resolved before the pool so that a typo fails fast, before any pool is built.
    policy_objs = resolve_policy_objects(policies, specs, grouping)
    problem = grouping_problem(policy_objs, grouping)
    if problem:
        raise BenchInputError(problem)
    if reference is not None and reference not in [p.name for p in policy_objs]:
        raise BenchInputError(f"--reference {reference!r} is not among the selected policies; expected one of "
                              f"{', '.join(p.name for p in policy_objs)}")
    chunked = CHUNKED[grouping] and datasets is None
    prepared = _prepare_pool(pool_spec, pool_seed, datasets, cost_model, chunked=chunked)
    cost_model = prepared.cost_model  # the one given, or the default the pool supports
    policy_objs = fit_to_pool(policy_objs, prepared.compiled.n_candidates, add_best_of_n=is_policy_set(policies))
    policy_objs = with_each_generator(policy_objs, prepared.compiled, grouping, default_set=is_policy_set(policies))
    for line in [*in_sample_warnings(policy_objs, list(dict.fromkeys(prepared.compiled.dataset.tolist()))),
                 *capped_notes(policy_objs, prepared.compiled.n_candidates)]:
        print(line, file=sys.stderr)
    t_compile = time.perf_counter()
    with episode_pieces(out, prepared) as pieces:
        return _replay_and_report(policy_objs, prepared, out, pieces, grouping=grouping, cost_model=cost_model,
                                  seed=seed, progress=progress, workers=workers, replay=replay,
                                  ray_address=ray_address, unit=unit, resamples=resamples, reference=reference,
                                  env=env, figures=figures, quiet=quiet, times=(t0, t_compile))


def _replay_and_report(policy_objs: list[Policy], prepared: PreparedPool, out: Path, pieces: EpisodePieces | None, *,
                       grouping: str, cost_model: str, seed: int, progress: bool, workers: int | None, replay: str,
                       ray_address: str | None, unit: str, resamples: int, reference: str | None, env: str,
                       figures: bool, quiet: bool, times: tuple[float, float]) -> dict[str, Any]:
    """The replay, the analysis and the report of ``run_bench`` (``pieces``: where a streamed replay writes the
    episode files' pieces, ``episode_pieces``)."""
    t0, t_compile = times
    _test_interrupt("replay")
    run = _replay(policy_objs, prepared, grouping=grouping, cost_model=cost_model, seed=seed,
                  progress=progress, workers=workers, replay=replay, ray_address=ray_address, pieces=pieces)
    if not any(r.applicable for r in run.runs):  # nothing to report: one line, exit 2, no folder written
        reasons = "; ".join(f"{name}: {why}" for name, why in run.not_applicable.items())
        raise BenchInputError(f"no requested policy can run on this pool ({reasons})")
    _test_interrupt("analyse")
    episodes = EnvConfig.build(prepared.compiled, grouping=grouping, cost_model=cost_model, budget=prepared.budget)
    # Policies defined by n candidates on episodes holding fewer: one line each in the terminal table and report.
    short = short_episode_notes(policy_objs, run, episodes.sample_caps)
    if grouping == "pair":  # the report reads the episodes' columns only: the candidate arrays go before it
        prepared.compiled = episode_columns_only(prepared.compiled)
        episodes = dataclasses.replace(episodes, pool=prepared.compiled)
    data = analyse(prepared.pool, episodes.pool, run, cost_model=cost_model, seed=seed, pool_spec=prepared.label,
                   unit=unit, resamples=resamples, estimates=prepared.estimates, notes=[*prepared.notes, *short],
                   reference=reference, grouping=grouping)
    data.env, data.requested_reference, data.verifiers = env, reference, prepared.verifiers
    data.pool_generators = list(dict.fromkeys(prepared.compiled.generator.tolist()))
    data.pair_counts = prepared.compiled.n_available if prepared.compiled.ragged else None
    data.routing = routing_section(data, episodes, prepared.compiled, policy_objs)
    data.timings.update(pool_s=prepared.resolved_at - t0, compile_s=t_compile - prepared.resolved_at)
    data.episode_pieces = pieces
    results = write_bench_folder(out, lambda tmp: report.write_all(data, tmp, figures=figures, t0=t0,
                                                                   progress=progress))
    if not quiet:
        print(report.terminal_summary(data, out))
    return results


@contextlib.contextmanager
def episode_pieces(out: Path, prepared: PreparedPool) -> Iterator[EpisodePieces | None]:
    """Where a streamed replay (``prepared.scan``) writes the pieces of the episode files as it goes
    (``eval.episode_files.EpisodePieces``): a temporary folder beside ``out``, removed at the end (after a
    ``kill -9``, by the next run for ``out``: ``pools.atomic_write.scratch_dir``); None otherwise."""
    if prepared.scan is None:
        yield None
        return
    with scratch_dir(out) as folder:
        yield EpisodePieces(folder, RecordLayout.of(prepared.compiled))


def episode_columns_only(compiled: CompiledPool) -> CompiledPool:
    """``compiled`` without its per-candidate arrays (no candidate axis) and caches: what a replay-env report reads
    after the replay (episode ids, datasets, generators, counts, verifier axis, label presence). A read of a
    candidate array then finds none (an IndexError) instead of stale values; at 100k episodes they are ~0.4 GB."""
    e, n_tiers, k = compiled.n_episodes, len(compiled.tiers), compiled.gen_cost.shape[-1]
    graded = compiled.labels.graded
    labels = Labels(correct=np.zeros((e, 0), dtype=bool), gold_cluster=compiled.labels.gold_cluster,
                    graded=None if graded is None else np.zeros((e, 0)))
    return dataclasses.replace(
        compiled, cluster=np.zeros((e, 0), dtype=np.int32), answer=np.zeros((e, 0), dtype=object),
        output_tokens=np.zeros((e, 0)), cap_hit=np.zeros((e, 0), dtype=bool), gen_cost=np.zeros((e, 0, k)),
        has_score=np.zeros((e, 0, n_tiers), dtype=bool), score=np.zeros((e, 0, n_tiers)),
        ver_cost=np.zeros((e, 0, n_tiers, k)), labels=labels, _episode_rows=None, _episode_meta=None,
        _vector_tables=None, _cost_table=None, _record_columns=None)


def capped_notes(policies: Sequence[Policy], n_candidates: int) -> list[str]:
    """One line per policy whose ``n_max`` the user set above the pool's N candidates per episode: it runs capped
    at N (the built-in specs' own n_max, e.g. CoBa-Strong's 8 on a smaller pool, are the paper's and not noted)."""
    from agents.registry import load_specs

    builtin = load_specs()
    out = []
    for p in policies:
        n_max = (getattr(p, "params", None) or {}).get("n_max")
        paper = (builtin.get(p.name, {}).get("params") or {}).get("n_max")
        if isinstance(n_max, int) and n_max > n_candidates and n_max != paper:
            out.append(f"note: policy {p.name!r} has n_max={n_max}, above the pool's {n_candidates} candidates per "
                       f"episode; it runs as n_max={n_candidates}")
    return out


def _check_options(*, cost_model: str, unit: str, mode: str, env: str, ray_address: str | None) -> None:
    """Refuse an unknown cost model, bootstrap unit, replay mode or env."""
    if cost_model is not None and cost_model not in COST_MEASURES:
        raise BenchInputError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}")
    if unit not in ("item", "episode"):
        raise BenchInputError(f"unknown bootstrap unit {unit!r}; expected 'item' or 'episode'")
    if mode not in REPLAY_MODES:
        raise BenchInputError(f"unknown replay mode {mode!r}; expected one of {list(REPLAY_MODES)}")
    if env not in BENCH_ENVS:
        raise BenchInputError(f"unknown bench env {env!r}; expected one of {list(BENCH_ENVS)}")


def _prepare_pool(pool_spec: str | Pool | None, pool_seed: int, datasets: Sequence[str] | None,
                  cost_model: str | None, *, chunked: bool = False) -> PreparedPool:
    """Resolve and compile the pool, restrict its datasets, check the cost model, note what the report says.

    ``chunked``: a stored pool is not compiled whole but scanned (``coba_env.chunked_compile.scan_pool``), to be
    compiled and replayed a chunk of episodes at a time; ``compiled`` then holds its episode columns only."""
    stored = _stored_pool(pool_spec, pool_seed) if chunked else None
    pool = stored.pool if stored is not None else resolve_pool(pool_spec, seed=pool_seed)
    spec_text, t_pool = pool_label(pool_spec), time.perf_counter()
    # What reads the candidate table runs before the compile, which drops it when this bench loaded the pool
    # (a ``Pool`` given by the caller stays whole): the pool's tables and the compiled arrays then never all
    # coexist (at 1M episodes the candidate table is ~3 GB).
    ids = None if datasets is None else pool.episodes.loc[pool.episodes["dataset"].isin(
        [str(d).strip() for d in datasets]), "episode_id"].to_numpy()
    verifiers, estimated = (stored.verifiers, stored.estimated) if stored is not None else (
        verifier_diagnostics(pool, ids), estimated_tokens(pool))
    directory = pool_directory(pool_spec, seed=pool_seed) if chunked else None
    scan = None if directory is None else _scan(pool, directory, stored)
    try:
        compiled = scan.episode_columns() if scan is not None else \
            restrict_datasets(compile_pool(pool, release=not isinstance(pool_spec, Pool)), datasets)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None
    cost_model = cost_model_or_default(compiled, cost_model)
    _check_cost_model(compiled, cost_model)
    estimates = cost_estimates(pool, compiled.called_models, estimated=estimated)
    notes = [note for note in (sampling_note(compiled.n_candidates),) if note]
    if not compiled.usd_priced:
        notes.append(NO_PRICES_NOTE)
    kept = list(dict.fromkeys(compiled.dataset.tolist()))
    if datasets is not None:  # the report's item count covers the evaluated datasets only
        pool = dataclasses.replace(pool, items=pool.items[pool.items["dataset"].isin(kept)])
    # The report reads only the manifest and items; the compiled pool holds the rest (at 100k episodes the
    # candidate and verification tables are ~0.5 GB that would otherwise stay alive for the whole run).
    pool = dataclasses.replace(pool, candidates=pool.candidates.iloc[0:0], verifications=pool.verifications.iloc[0:0])
    pa.default_memory_pool().release_unused()  # Arrow keeps freed table buffers for reuse unless told
    return PreparedPool(pool=pool, compiled=compiled, label=spec_text, estimates=estimates, notes=notes,
                        resolved_at=t_pool, verifiers=verifiers, cost_model=cost_model, scan=scan)


def _stored_pool(pool_spec: str | Pool | None, pool_seed: int) -> Any:
    """A stored pool (a pool directory, or a simulated pool's cache entry) validated a batch of rows at a time
    (``pools.stored_validation``: its tables are never whole in memory), else None (a ``Pool``, a pool not yet
    stored or a damaged cache entry: ``resolve_pool`` reads, builds or rebuilds it whole)."""
    from pools.errors import PoolError
    from pools.stored_validation import read_stored_pool

    if isinstance(pool_spec, str) and not pool_spec.strip():  # resolve_pool names the empty spec
        return None
    try:
        directory = pool_directory(pool_spec, seed=pool_seed)
    except (PoolError, ValueError, OSError):  # not a pool nor a profile: resolve_pool says what it is
        return None
    if directory is None or Path(os.fspath(pool_spec or "")) == directory:  # the user's pool: a problem is theirs
        return None if directory is None else read_stored_pool(directory)
    try:
        return read_stored_pool(directory)
    except PoolError:  # a damaged cache entry: resolve_pool rebuilds it
        return None


def _scan(pool: Pool, directory: Path, stored: Any = None) -> Any:
    """The light pass over the stored pool (``scan_pool``; the verifier pairs from the validation pass when it
    ran), its tables in memory dropped first (the report reads its manifest and items only)."""
    from coba_env.chunked_compile import scan_pool

    pool.candidates, pool.verifications = pool.candidates.iloc[0:0], pool.verifications.iloc[0:0]
    pa.default_memory_pool().release_unused()
    return scan_pool(directory, verifier_pairs=None if stored is None else stored.verifier_pairs)


def _replay(policies: list[Policy], prepared: PreparedPool, *, grouping: str, cost_model: str, seed: int,
            progress: bool, workers: int | None, replay: str, ray_address: str | None,
            pieces: EpisodePieces | None = None) -> BenchRun:
    """Every policy on every episode, in this process (or forked workers) a chunk of episodes at a time
    (``prepared.scan``: the records written to ``pieces`` as they come, compact ones kept) or whole, or on a Ray
    cluster (``RAY_SPLIT``)."""
    if prepared.scan is not None and ray_address is not None:
        from eval.ray_bench import run_chunks_on_ray

        return run_chunks_on_ray(policies, prepared.scan, ray_address=ray_address, cost_model=cost_model, seed=seed,
                                 replay=replay, progress=progress, pieces=pieces)
    if prepared.scan is not None:
        from eval import chunked_replay

        return chunked_replay.replay_in_chunks(policies, prepared.scan, chunk_episodes=chunked_replay.CHUNK_EPISODES,
                                               cost_model=cost_model, seed=seed, replay=replay, progress=progress,
                                               workers=workers, pieces=pieces)
    compiled = prepared.compiled
    options = dict(cost_model=cost_model, progress=progress, seed=seed, replay=replay, grouping=grouping)
    if ray_address is None:  # the routing analyses read each policy's GeneratorUse, not per-generator columns
        return run_policies(policies, compiled, workers=workers, generator_columns=False, **options)
    from eval.ray_bench import run_policies_on_ray

    return run_policies_on_ray(policies, compiled, ray_address=ray_address, split=RAY_SPLIT[grouping], **options)


def _check_cost_model(compiled: CompiledPool, cost_model: str) -> None:
    """Refuse a cost model the pool cannot price: p_tokens with a model of size 0 (free), usd without prices."""
    if cost_model == "p_tokens":
        free = compiled.unsized_models()
        if free:
            raise BenchInputError(f"--cost p_tokens weighs tokens by model parameters, but the pool gives "
                                  f"{', '.join(free)} params_b 0 (every call free); re-import with the size, or "
                                  "choose --cost tokens, calls, latency or usd")
    try:
        check_cost_model_priced(compiled, cost_model)
    except ValueError as err:
        raise BenchInputError(f"--cost usd: {err}") from None


#: Environment variable naming a stage at which a bench raises KeyboardInterrupt, as Ctrl-C there would:
#: "replay", "analyse", "write" (the report written into the temporary folder, before the swap) or "swap"
#: (the previous folder moved aside, the new one not yet in place); "STAGE:wait" waits there instead for a real
#: signal (up to ``INTERRUPT_WAIT_S``), so that a test's SIGINT lands there whatever the machine's load. For the
#: interruption tests only.
INTERRUPT_ENV = "COBA_TEST_INTERRUPT_AT"
INTERRUPT_WAIT_S = 120.0


def _test_interrupt(stage: str) -> None:
    asked = os.environ.get(INTERRUPT_ENV)
    if asked == stage:
        raise KeyboardInterrupt(f"{INTERRUPT_ENV}={stage}")
    if asked == f"{stage}:wait":
        import time

        time.sleep(INTERRUPT_WAIT_S)


def check_bench_out(out_dir: str | Path, inputs: Sequence[Any] = ()) -> Path:
    """Check a bench ``--out`` before any work: a missing or empty folder, or a previous bench folder (which the
    new report replaces whole), in a writable place; raises ``BenchInputError`` otherwise."""
    from pools.output_paths import OutputPathError, check_output_dir

    try:
        return check_output_dir(out_dir, force=True, option="--out", kind="bench", inputs=inputs)
    except OutputPathError as exc:
        raise BenchInputError(str(exc)) from None


def write_bench_folder(out: Path, write: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Run ``write(tmp)`` on a temporary sibling of ``out`` and swap it into place: an interrupted or failed bench
    leaves the previous complete folder (or none), never a mix of old and new files."""
    from pools.atomic_write import atomic_dir

    def fill(tmp: Path) -> dict[str, Any]:
        results = write(tmp)
        _test_interrupt("write")
        return results

    return atomic_dir(out, fill, marker="bench", before_swap=lambda: _test_interrupt("swap"))
