"""``coba bench``: every policy on one pool, with the paper's metrics, statistics, tables and figures.

``run_bench`` resolves the pool and the policies, replays every policy on every episode
(``eval.runner``), aggregates (``eval.metrics``), runs the paired bootstrap (``eval.bootstrap``) and the
Pareto analysis (``eval.pareto``), and hands everything to ``eval.report``, which writes the report, tables,
figures, ``results.json`` and the per-episode records. It returns the ``results.json`` content.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from agents.base import Policy
from agents.sampling import fit_to_pool, sampling_note
from coba_env.compiled import CompiledPool, compile_pool
from coba_env.costs import COST_MEASURES
from coba_env.rules.config import check_cost_model_priced
from eval import bootstrap, metrics, pareto, report
from eval.bench_data import COST_METRIC, BenchData
from eval.cost_notes import CostEstimates, cost_estimates
from eval.dataset_scope import in_sample_warnings, restrict_datasets
from eval.runner import REPLAY_MODES, BenchRun, run_policies
from eval.tables import ORACLE_GROUP, REFERENCE, PolicyInfo
from pools.default import pool_label, resolve_pool
from pools.store import Pool

#: What the terminal and the report say instead of a column of zero dollars.
NO_PRICES_NOTE = ("usd: no dollar cost, the pool has no prices (import with --price MODEL=IN[,OUT]; "
                  "docs/POOLS.md, 'Prices')")

#: ``--policies`` keywords: "all" (every non-learned policy, the default) and "main" (paper main table).
POLICY_SETS = ("all", "main")
#: ``--env``: "replay" (``coba/Replay-v0``, the default) or "route" (``coba/Route-v0``: routing policies).
BENCH_ENVS = ("replay", "route")


class BenchInputError(ValueError):
    """Bad bench input (unknown policy, empty selection, unknown cost model); the CLI exits 2 on it."""


def _is_spec_file(text: str) -> bool:
    """A YAML spec file: only a name ending in .yaml / .yml is read as YAML (a .zip alone is a model)."""
    return text.endswith((".yaml", ".yml"))


def _spec_file_names(text: str) -> list[str]:
    """The policy names a YAML spec file defines (its policies are run)."""
    if not Path(text).is_file():
        raise BenchInputError(f"policy spec file {text!r} does not exist")
    import yaml

    from pools.strict_yaml import load_yaml

    try:
        data = load_yaml(Path(text).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise BenchInputError(f"cannot parse policy spec file {text!r}: {' '.join(str(exc).split())}") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        from pools.parse_boundary import parse_problem

        raise BenchInputError(f"cannot parse policy spec file {text!r}: {parse_problem(exc)}") from None
    if isinstance(data, dict) and "policies" in data:
        data = data["policies"]
    if not isinstance(data, dict) or not data:
        raise BenchInputError(f"policy spec file {text!r} names no policies")
    _check_policy_names(data, text)
    return [str(k) for k in data]


def parse_policies(value: str | Sequence[str] | None) -> tuple[list[str] | None, list[str]]:
    """Split ``--policies`` into (selection, YAML spec files). The selection mixes names, 'all', 'main',
    ``FILE.py:Class`` / ``module:Class`` references and checkpoints; a YAML file contributes its names."""
    if value is None:
        return None, []
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    names: list[str] = []
    files: list[str] = []
    for text in (p.strip() for p in parts):
        if not text:
            continue
        if _is_spec_file(text):
            names.extend(_spec_file_names(text))
            files.append(text)
        elif text.endswith(".py"):
            raise BenchInputError(f"policy {text!r}: a Python file; name the class in it as {text}:ClassName")
        else:
            names.append(text)
    if not names:
        raise BenchInputError("no policy named; give comma-separated names, 'all', 'main', YAML spec files, "
                              "FILE.py:Class or checkpoints")
    return list(dict.fromkeys(names)), files  # a repeated name runs once


def _check_policy_names(data: dict, source: str) -> None:
    """Policy names go into the report's tables and file names: printable text on one line."""
    from pools.safe_names import MAX_NAME_CHARS, control_character

    for name in data:
        bad = control_character(str(name))
        if not isinstance(name, str) or bad is not None or not name.strip() or len(name) > MAX_NAME_CHARS:
            why = f"holds the control character {bad}" if bad else "is not a name"
            raise BenchInputError(f"policy spec file {source!r}: the policy name {str(name)[:60]!r} {why}; expected "
                                  f"printable text on one line, at most {MAX_NAME_CHARS} characters")


def select_policies(names: Sequence[str] | None, specs: dict[str, dict], env: str = "replay") -> list[str]:
    """Resolve the policy selection against ``specs``: None/"all" -> every non-learned policy of ``env`` (the
    routing policies and route oracles run on route envs only), "main" -> the paper's main table (on a route
    env: every routing policy); unknown names raise ``BenchInputError`` listing the known ones."""
    from agents.registry import default_bench_policies, list_policies

    if env == "route" and (names is None or list(names) in (["all"], ["main"])):
        return [n for n in list_policies(specs=specs) if _route_only(specs[n])]
    if names is None or list(names) == ["all"]:
        main = default_bench_policies(specs=specs)
        rest = [n for n in list_policies(specs=specs) if n not in main and specs[n]["group"] != "learned"
                and not _route_only(specs[n])]
        return main + rest
    if list(names) == ["main"]:
        return default_bench_policies(specs=specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise BenchInputError(f"unknown polic{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                              f"known policies: {', '.join(specs)} (or 'all', 'main')")
    return list(dict.fromkeys(names))


def _route_only(spec: dict[str, Any]) -> bool:
    """Whether a policy spec runs on the route env only (a routing policy or a route oracle)."""
    from agents.configured import POLICY_CLASSES
    from agents.routing_base import is_route_policy

    return spec["group"] == "routing" or is_route_policy(POLICY_CLASSES[spec["kind"]])


def policy_info(run: BenchRun) -> dict[str, PolicyInfo]:
    """Label and group of every policy in ``run``."""
    return {r.name: PolicyInfo(label=r.label, group=r.group) for r in run.runs}


def analyse(pool: Pool, compiled: CompiledPool, run: BenchRun, *, cost_model: str = "p_tokens", seed: int = 0,
            pool_spec: str | None = None, unit: str = "item", resamples: int = bootstrap.RESAMPLES,
            estimates: CostEstimates | None = None, notes: Sequence[str] = ()) -> BenchData:
    """Aggregate a finished ``BenchRun``: metrics, allocation, oracle gap, bootstrap and Pareto analysis."""
    start = time.perf_counter()
    records = run.records
    run.share_records(records)  # each policy's records become a slice of the whole: one copy in memory
    info = policy_info(run)
    datasets = list(dict.fromkeys(compiled.dataset.tolist()))
    generators = list(dict.fromkeys(compiled.generator.tolist()))
    if len(records):
        mac, poo = metrics.macro(records), metrics.pooled(records)
        dset, gen = metrics.per_dataset(records), metrics.per_generator(records)
        alloc, alloc_all = metrics.allocation(records), metrics.allocation_overall(records)
        gap, gap_ds = metrics.oracle_gap(records, None), metrics.oracle_gap(records, "dataset")
        summary = metrics.summarize(records, dict(macro=mac, pooled=poo, per_dataset=dset, per_generator=gen,
                                                  allocation=alloc, allocation_overall=alloc_all, gap=gap,
                                                  gap_by_dataset=gap_ds))
    else:
        mac = poo = dset = gen = alloc = alloc_all = gap = gap_ds = pd.DataFrame()
        summary = {}
    t_metrics = time.perf_counter()
    ran = [r.name for r in run.runs if r.applicable]
    if len(ran) >= 2:
        pw = bootstrap.pairwise(records, ran, unit=unit, resamples=resamples, seed=seed)
    else:
        pw = pd.DataFrame(columns=["a", "b", "diff", "ci_low", "ci_high", "p", "significant", "n_units"])
    reference = REFERENCE if REFERENCE in ran else None
    vs = pw[pw["a"] == reference].reset_index(drop=True) if reference else pw.iloc[0:0]
    vs.attrs.update(pw.attrs)
    t_boot = time.perf_counter()
    front = _pareto(mac, dset, info, COST_METRIC[cost_model], datasets) if len(mac) else {}
    data = BenchData(pool=pool, compiled=compiled, pool_spec=pool_spec, run=run, records=records, info=info,
                     cost_model=cost_model, seed=seed, datasets=datasets, generators=generators, macro=mac,
                     pooled=poo, per_dataset=dset, per_generator=gen, allocation=alloc,
                     allocation_overall=alloc_all, gap=gap, gap_by_dataset=gap_ds, summary=summary, pairwise=pw,
                     versus=vs, pareto=front, bootstrap_unit=unit, resamples=resamples,
                     cost_estimates=estimates if estimates is not None else cost_estimates(pool), notes=list(notes))
    data.timings.update(replay_s=run.seconds, metrics_s=t_metrics - start, bootstrap_s=t_boot - t_metrics)
    return data


def _pareto(mac: pd.DataFrame, dset: pd.DataFrame, info: dict[str, PolicyInfo], cost: str,
            datasets: Sequence[str]) -> dict[str, Any]:
    def analyse_plane(frame: pd.DataFrame) -> dict[str, Any]:
        deployable = [n for n in frame.index if info.get(n, PolicyInfo(n, "")).group != ORACLE_GROUP]
        pts = {n: (float(frame.loc[n, cost]), float(frame.loc[n, "acc"])) for n in deployable}
        front = pareto.pareto_front(pts)
        positive = {n: v for n, v in pts.items() if v[0] > 0}
        span = pareto.cost_span(positive)
        # Mean best-reachable accuracy over the front's own cost range (log10 cost): one number per plane.
        mean_acc = pareto.mean_front_accuracy(positive, *span) if span else None
        return {"front": [p.name for p in front], "dominates": pareto.dominance(pts),
                "dominated_by": pareto.dominated_by(pts), "front_cost_range": span, "front_mean_acc": mean_acc,
                "excluded_upper_bounds": [n for n in frame.index if n not in deployable]}

    out = {"cost": cost, **analyse_plane(mac)}
    out["per_dataset"] = {ds: analyse_plane(dset.xs(ds, level="dataset")) for ds in datasets
                          if ds in dset.index.get_level_values("dataset")}
    return out


def run_bench(pool_spec: str | Pool | None = None, policies: str | Sequence[str | Policy] | None = None,
              cost_model: str = "p_tokens", seed: int = 0, out_dir: str | Path = "bench-out",
              progress: bool = True, *, figures: bool = True, workers: int | None = None,
              specs: str | Path | None = None, unit: str = "item", resamples: int = bootstrap.RESAMPLES,
              pool_seed: int = 0, quiet: bool = False, datasets: Sequence[str] | None = None,
              replay: str = "batched", ray_address: str | None = None, env: str = "replay") -> dict[str, Any]:
    """Benchmark ``policies`` on the pool ``pool_spec`` and write the full report to ``out_dir``.

    ``pool_spec``: None (the simulated paper pool), a profile name such as "tiny", a pool directory, or a
    ``Pool``; ``pool_seed`` seeds a simulated pool. ``seed`` seeds the bootstrap and any stochastic policy.
    ``policies``: None / "all" (every non-learned registered policy), "main" (the paper's main
    table), or a comma-separated mix of names, YAML spec files, ``FILE.py:Class`` / ``module:Class`` references
    and checkpoints (``PATH[@LAMBDA]``, SB3 ``.zip``); or a list of such items / ``Policy`` objects. Returns the
    content of ``results.json``. Prints a summary table unless ``quiet``. ``datasets`` restricts the replay to
    those datasets; a learned policy evaluated on datasets it was trained on gets a warning line on stderr.
    ``replay`` "batched" (default) replays policies with a batched form through ``CoBaVectorEnv``; "single"
    replays every policy one episode at a time (the reference; same records).
    ``ray_address`` spreads episode shards over that Ray cluster (``eval.ray_bench``; same results).
    ``env`` "replay" (default: one episode per (problem, generator)) or "route" (``coba/Route-v0``: one episode
    per problem, the routing policies; the report adds the routing sections, ``eval.route_bench``).
    """
    t0 = time.perf_counter()
    out = check_bench_out(out_dir, [pool_spec if isinstance(pool_spec, str | Path) else None])  # before any work
    if cost_model not in COST_MEASURES:
        raise BenchInputError(f"unknown cost model {cost_model!r}; expected one of {list(COST_MEASURES)}")
    if unit not in ("item", "episode"):
        raise BenchInputError(f"unknown bootstrap unit {unit!r}; expected 'item' or 'episode'")
    if replay not in REPLAY_MODES:
        raise BenchInputError(f"unknown replay mode {replay!r}; expected one of {list(REPLAY_MODES)}")
    if env not in BENCH_ENVS:
        raise BenchInputError(f"unknown bench env {env!r}; expected one of {list(BENCH_ENVS)}")
    if env == "route" and ray_address is not None:
        raise BenchInputError("--ray-address replays replay-env shards; a route bench runs locally")
    # Policies are resolved before the pool so that a typo fails fast, before any pool is built.
    policy_objs = _resolve_policy_objects(policies, specs, env)
    if env == "route":
        from eval.route_bench import route_selection_problem

        problem = route_selection_problem(policy_objs)  # before the pool is built
        if problem:
            raise BenchInputError(problem)
    pool, spec_text = resolve_pool(pool_spec, seed=pool_seed), pool_label(pool_spec)
    t_pool = time.perf_counter()
    try:
        compiled = restrict_datasets(compile_pool(pool), datasets)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None
    _check_cost_model(pool, compiled, cost_model)
    estimates = cost_estimates(pool, compiled.called_models)  # before the candidate table is dropped below
    default_set = policies is None or (isinstance(policies, str) and policies.strip() in POLICY_SETS)
    policy_objs = fit_to_pool(policy_objs, compiled.n_candidates, add_best_of_n=default_set)
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
    for line in in_sample_warnings(policy_objs, kept):
        print(line, file=sys.stderr)
    t_compile = time.perf_counter()
    _test_interrupt("replay")
    analysed = compiled
    if env == "route":
        from eval.route_bench import run_route_bench

        run, analysed = run_route_bench(compiled, policy_objs, cost_model=cost_model, seed=seed, progress=progress,
                                        replay=replay)
    elif ray_address is None:
        run = run_policies(policy_objs, compiled, cost_model=cost_model, progress=progress, workers=workers, seed=seed,
                           replay=replay)
    else:
        from eval.ray_bench import run_policies_on_ray

        run = run_policies_on_ray(policy_objs, compiled, ray_address=ray_address, cost_model=cost_model,
                                  progress=progress, seed=seed, replay=replay)
    _test_interrupt("analyse")
    data = analyse(pool, analysed, run, cost_model=cost_model, seed=seed, pool_spec=spec_text, unit=unit,
                   resamples=resamples, estimates=estimates, notes=notes)
    if env == "route":
        from eval.route_bench import routing_section

        data.env, data.routing = env, routing_section(data, compiled, policy_objs)
    data.timings.update(pool_s=t_pool - t0, compile_s=t_compile - t_pool)
    results = write_bench_folder(out, lambda tmp: report.write_all(data, tmp, figures=figures, t0=t0,
                                                                   progress=progress))
    if not quiet:
        print(report.terminal_summary(data, out))
    return results


def _check_cost_model(pool: Pool, compiled: CompiledPool, cost_model: str) -> None:
    """Refuse a cost model the pool cannot price: p_tokens with a model of size 0 (free), usd without prices."""
    used = compiled.called_models
    sizes = dict(zip(pool.models["name"], pool.models["params_b"].astype(float), strict=True))
    if cost_model == "p_tokens":
        free = sorted(m for m in used if not sizes.get(m, 0.0) > 0)
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
#: (the previous folder moved aside, the new one not yet in place). For the interruption tests only.
INTERRUPT_ENV = "COBA_TEST_INTERRUPT_AT"


def _test_interrupt(stage: str) -> None:
    if os.environ.get(INTERRUPT_ENV) == stage:
        raise KeyboardInterrupt(f"{INTERRUPT_ENV}={stage}")


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


def _resolve_policy_objects(policies: str | Sequence[str | Policy] | None,
                            specs: str | Path | None, env: str = "replay") -> list[Policy]:
    from agents.learned import is_checkpoint
    from agents.plugins import is_class_ref
    from agents.registry import load_specs, make_policy

    spec_files: list[str | Path] = [] if specs is None else [specs]
    items: list[str | Policy]
    if policies is None or isinstance(policies, str):
        names, from_files = parse_policies(policies)
        spec_files += from_files
        items = list(names) if names is not None else ["all"]
    else:
        items = list(policies)
    try:
        table = load_specs(spec_files)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from exc

    def outside_table(text: str) -> bool:  # a checkpoint or the user's own class, built by make_policy
        return is_checkpoint(text) or (text not in table and is_class_ref(text))

    unknown = [str(i).strip() for i in items
               if isinstance(i, str) and str(i).strip() not in table and str(i).strip() not in POLICY_SETS
               and not outside_table(str(i).strip())]
    if unknown:
        select_policies(unknown, table, env)  # raises BenchInputError naming every unknown policy and the known ones
    objs: list[Policy] = []
    chosen: set[str] = set()
    # Keep the caller's order; "all" / "main" expand in place; a name already chosen runs once.
    for item in items:
        if isinstance(item, Policy):
            objs.append(item)
            continue
        item = str(item).strip()
        single = outside_table(item)
        for name in [item] if single else select_policies([item], table, env):
            if name in chosen:
                continue
            chosen.add(name)
            try:
                objs.append(make_policy(name, specs=table))
            except (ValueError, FileNotFoundError, TypeError) as exc:
                what = "checkpoint" if is_checkpoint(name) else "policy"
                raise BenchInputError(str(exc) if str(exc).startswith(f"policy {name!r}") else
                                      f"{what} {name!r}: {' '.join(str(exc).split())}") from exc
            if is_checkpoint(name) and "@" not in name and getattr(objs[-1], "lam", None) is not None:
                print(f"note: checkpoint {name} runs at lambda {objs[-1].lam:g} (its training default); "
                      f"give {name}@LAMBDA to choose", file=sys.stderr)
    if not objs:
        raise BenchInputError("no policy selected")
    names = [p.name for p in objs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BenchInputError(f"policy names must be unique; repeated: {', '.join(dupes)}")
    return objs
