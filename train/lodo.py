"""Leave-one-dataset-out: train on four datasets, evaluate on the held-out one beside CoBa and the baselines.

For every split of ``coba_env.splits.leave_one_dataset_out`` each requested controller kind (``mlp``, ``ppo``)
is trained on the other datasets' episodes, then the held-out episodes are replayed by the learned controller
at every evaluation lambda, by the named anchors (CoBa-Routed-Light/Balanced/Strong, greedy, best-of-N) and by
the fixed sweep families, all on the same episodes. Records of the five held-out folds are stacked, so every
episode of the pool is evaluated exactly once per policy, by a controller that never trained on its dataset.

Written to ``out_dir``: ``episodes.csv`` (every record), ``per_dataset.{csv,md}`` (accuracy and p_tokens per
held-out dataset), ``macro.{csv,md}``, ``bootstrap.{csv,md}`` (paired bootstrap, every learned point against
every anchor, per held-out dataset, over all items pooled and of the macro accuracy), ``action_mix.{csv,md}`` (actions per episode and share
of single-sample STOPs of every learned point per held-out dataset), ``frontier.{csv,md}`` and ``verdict.md``
(is a learned controller not dominated by CoBa-Routed-Strong?), plus the checkpoints under ``checkpoints/``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.checkpoint import KINDS
from coba_env.env import as_compiled, default_budget
from coba_env.splits import leave_one_dataset_out
from eval import bootstrap, metrics
from eval.runner import run_policies
from pools.atomic_write import atomic_write_text
from pools.strict_json import strict_dumps
from train import sweep
from train.imitation import DEFAULT_LAMBDAS

REFERENCE = "coba_strong"


def train_kind(kind: str, compiled: Any, out_dir: str | Path, *, episode_ids: np.ndarray | None = None,
               lambdas: Sequence[float] | None, cost_model: str, seed: int, progress: bool,
               budget: float | None = None, options: dict[str, Any]) -> Path:
    """Train one controller of ``kind`` on ``episode_ids`` (None: every episode); returns its checkpoint directory.

    ``lambdas`` None: each trainer's default (MLP: ``DEFAULT_LAMBDAS``; PPO: its own ``lambda_range``).
    ``budget`` (MLP only) None: the MLP trainer's default budget."""
    ids = None if episode_ids is None else episode_ids.tolist()
    if kind == "mlp":
        from train.imitation import train_mlp

        return train_mlp(compiled, out_dir, episode_ids=ids, lambdas=lambdas or DEFAULT_LAMBDAS,
                         cost_model=cost_model, seed=seed, progress=progress, budget=budget, **options)
    if kind == "ppo":
        from train.ppo import train_ppo

        if lambdas:
            options = {**options, "lambda_range": (float(min(lambdas)), float(max(lambdas)))}
        return train_ppo(compiled, out_dir, episode_ids=ids, cost_model=cost_model, seed=seed,
                         progress=progress, **options)
    raise ValueError(f"unknown controller kind {kind!r}; expected one of {list(KINDS)}")


def action_mix(records: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Per (policy, held-out dataset): mean actions of each type per episode and the share of episodes that
    stopped after one sample and no verification (a collapse to greedy shows as a share near 1)."""
    frame = records[records["policy"].isin(policies)].copy()
    frame["greedy_stop"] = (frame["n_samples"] == 1) & (frame[["n_v1", "n_v2", "n_v3"]].sum(axis=1) == 0)
    out = frame.groupby(["policy", "dataset"], sort=False).agg(
        samples=("n_samples", "mean"), v1=("n_v1", "mean"), v2=("n_v2", "mean"), v3=("n_v3", "mean"),
        greedy_stop_share=("greedy_stop", "mean"), acc=("correct", "mean"), p_tokens=("p_tokens", "mean"))
    out["acc"] *= 100.0
    return out.reset_index()


def macro_pairwise(records: pd.DataFrame, policies: Sequence[str], *, seed: int, resamples: int,
                   ci: float = bootstrap.CI) -> pd.DataFrame:
    """Paired bootstrap of the *macro* accuracy difference (mean over datasets of per-dataset accuracy):
    items are resampled within each dataset (stratified), so every resample keeps the datasets' weights."""
    data = bootstrap.paired_matrix(records, policies)
    values, datasets = data.values, data.units["dataset"].to_numpy()
    boots, points = [], []
    for i, ds in enumerate(dict.fromkeys(datasets)):
        idx = np.flatnonzero(datasets == ds)
        counts = bootstrap.resample_counts(len(idx), resamples, seed + i)
        boots.append(bootstrap.bootstrap_means(values[:, idx], counts))
        points.append(values[:, idx].mean(axis=1))
    boot, point = np.mean(boots, axis=0), np.mean(points, axis=0)
    rows = []
    for i, a in enumerate(data.policies):
        for j, b in enumerate(data.policies):
            if i != j:  # diff unrounded (bootstrap.summary rounds it to 1e-12), as this table has always had it
                rows.append({"a": a, "b": b, **bootstrap.summary(point[i] - point[j], boot[i] - boot[j], ci),
                             "diff": 100.0 * float(point[i] - point[j]), "n_units": values.shape[1]})
    return pd.DataFrame(rows)


def paired_tests(records: pd.DataFrame, learned: Sequence[str], anchors: Sequence[str], *, seed: int,
                 resamples: int) -> pd.DataFrame:
    """Paired bootstrap acc(learned) - acc(anchor): per held-out dataset, over all items pooled ("ALL") and
    of the macro accuracy ("MACRO", items resampled within datasets)."""
    macro_rows = macro_pairwise(records, [*learned, *anchors], seed=seed, resamples=resamples)
    macro_rows = macro_rows[macro_rows["a"].isin(learned) & macro_rows["b"].isin(anchors)].assign(held_out="MACRO")
    rows = [macro_rows]
    scopes = [("ALL", records)] + [(ds, g) for ds, g in records.groupby("dataset", sort=False)]
    for scope, frame in scopes:
        table = bootstrap.pairwise(frame, [*learned, *anchors], resamples=resamples, seed=seed)
        table = table[table["a"].isin(learned) & table["b"].isin(anchors)]
        rows.append(table.assign(held_out=scope))
    return pd.concat(rows, ignore_index=True)[["held_out", "a", "b", "diff", "ci_low", "ci_high", "p",
                                               "significant", "n_units"]]


def verdict(macro: pd.DataFrame, tests: pd.DataFrame, learned: Sequence[str], reference: str = REFERENCE) -> dict:
    """Whether some learned point is not dominated by ``reference``: its macro accuracy is within the bootstrap
    CI of the reference's (the macro-difference CI reaches 0 or above) at lower cost, or higher at <= cost."""
    ref_acc, ref_cost = float(macro.loc[reference, "acc"]), float(macro.loc[reference, "p_tokens"])
    rows = []
    for name in learned:
        t = tests[(tests["held_out"] == "MACRO") & (tests["a"] == name) & (tests["b"] == reference)]
        ci_high = float(t["ci_high"].iloc[0]) if len(t) else float("nan")
        acc, cost = float(macro.loc[name, "acc"]), float(macro.loc[name, "p_tokens"])
        within = ci_high >= 0
        ok = (within and cost < ref_cost) or (acc > ref_acc and cost <= ref_cost)
        rows.append({"policy": name, "acc": acc, "p_tokens": cost, "acc_minus_ref": acc - ref_acc,
                     "ci_high": ci_high, "cost_ratio": cost / ref_cost if ref_cost else float("nan"),
                     "not_dominated": bool(ok)})
    table = pd.DataFrame(rows)
    return {"reference": reference, "reference_acc": ref_acc, "reference_p_tokens": ref_cost,
            "met": bool(table["not_dominated"].any()) if len(table) else False, "points": table}


def _fold_bar(total: int, enabled: bool) -> Any:
    if not enabled or total <= 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="lodo", unit="fold", position=0, smoothing=0,
                bar_format="{desc} |{bar:12}| {n_fmt}/{total_fmt} folds [{elapsed} elapsed, ETA {remaining}]")


def _describe(bar: Any, text: str) -> None:
    if bar is not None:
        bar.set_description_str(f"lodo {text}")


def _md(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    return frame.to_markdown(index=False, floatfmt=floatfmt) + "\n"


def run_lodo(pool: Any, out_dir: str | Path, *, kinds: Sequence[str] = ("mlp",),
             lambdas: Sequence[float] | None = None,
             eval_lambdas: Sequence[float] = sweep.DEFAULT_EVAL_LAMBDAS, cost_model: str = "p_tokens",
             seed: int = 0, progress: bool = True, anchors: Sequence[str] = sweep.ANCHORS,
             families: Sequence[str] = sweep.FIXED_FAMILIES, resamples: int = bootstrap.RESAMPLES,
             train_options: dict[str, dict[str, Any]] | None = None, held_out: Sequence[str] | None = None
             ) -> dict[str, Any]:
    """Run leave-one-dataset-out for ``kinds`` on ``pool`` and write every table to ``out_dir``."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown controller kind(s) {unknown}; expected some of {list(KINDS)}")
    if "ppo" in kinds:  # one small policy forward per step: extra torch threads only contend
        import torch

        torch.set_num_threads(1)
    compiled = as_compiled(pool)
    budget = default_budget(compiled, cost_model, compiled.n_candidates)
    splits = leave_one_dataset_out(compiled)
    if held_out is not None:
        splits = [s for s in splits if s.held_out in held_out]
    fixed = [p for fam in families for p in sweep.fixed_points(fam)]
    anchor_pts = sweep.anchor_points(anchors)
    frames, timings, learned_names = [], {}, []
    # One bar over the folds (name and stage in its description, overall ETA from the folds done so far); the
    # trainers' and the replay's own bars run beneath it and are cleared when they finish.
    folds = _fold_bar(len(splits), progress)
    family_of: dict[str, str] = {p.name: p.family for p in [*fixed, *anchor_pts]}
    param_of: dict[str, str] = {p.name: p.param for p in [*fixed, *anchor_pts]}
    from agents.learned import load_checkpoint

    for k, split in enumerate(splits):
        points = list(anchor_pts) + [p for p in fixed if p.name not in {a.name for a in anchor_pts}]
        for kind in kinds:
            _describe(folds, f"fold {k + 1}/{len(splits)} (held out: {split.held_out}): training {kind}")
            t = time.perf_counter()
            ckpt = train_kind(kind, compiled, out / "checkpoints" / kind / split.held_out,
                              episode_ids=split.train_episode_ids, lambdas=lambdas, cost_model=cost_model, seed=seed,
                              progress=progress, budget=budget, options=(train_options or {}).get(kind, {}))
            timings[f"train_{kind}_{split.held_out}_s"] = time.perf_counter() - t
            pts = sweep.learned_points(lambda lam, c=ckpt: load_checkpoint(c, lam=lam), kind, eval_lambdas)
            points += pts
            for p in pts:
                family_of[p.name], param_of[p.name] = p.family, p.param
                if p.name not in learned_names:
                    learned_names.append(p.name)
        held = compiled.select(compiled.dataset == split.held_out)
        _describe(folds, f"fold {k + 1}/{len(splits)} (held out: {split.held_out}): evaluating {len(points)} policies")
        t = time.perf_counter()
        # Forked replay workers deadlock in torch after a PPO model has run in the parent: one process then.
        run = run_policies([p.make() for p in points], held, cost_model=cost_model, progress=progress, seed=seed,
                           workers=1 if "ppo" in kinds else None)
        timings[f"eval_{split.held_out}_s"] = time.perf_counter() - t
        frames.append(run.records)
        if folds is not None:
            folds.update(1)
    if folds is not None:
        folds.set_description_str(f"lodo: {len(splits)} folds done, writing tables")
        folds.close()
    records = pd.concat(frames, ignore_index=True)
    records.to_csv(out / "episodes.csv", index=False)
    # -- tables
    mac = metrics.macro(records)
    per_ds = metrics.per_dataset(records).reset_index()
    anchors_ran = [a for a in anchors if a in set(records["policy"])]
    tests = paired_tests(records, learned_names, anchors_ran, seed=seed, resamples=resamples)
    mix = action_mix(records, learned_names + [a for a in anchors_ran if a.startswith("coba")])
    table = sweep.frontier_points(records, family_of, param_of, cost=cost_model)
    summary = sweep.frontier_summary(table)
    sweep.write_frontier(table, summary, out)
    result: dict[str, Any] = {"splits": [s.held_out for s in splits], "kinds": list(kinds),
                              "learned": learned_names, "timings": timings}
    if REFERENCE in mac.index:
        v = verdict(mac, tests, learned_names)
        (out / "verdict.md").write_text(
            f"Reference {REFERENCE}: macro acc {v['reference_acc']:.2f}%, p_tokens {v['reference_p_tokens']:.4g}\n\n"
            f"Target met: {v['met']}\n\n" + _md(v["points"]))
        result["verdict"] = {**v, "points": v["points"].to_dict("records")}
    for stem, frame in (("macro", mac.reset_index()), ("per_dataset", per_ds), ("bootstrap", tests),
                        ("action_mix", mix)):
        frame.to_csv(out / f"{stem}.csv", index=False)
        (out / f"{stem}.md").write_text(_md(frame))
    result["seconds"] = time.perf_counter() - t0
    result["frontier"] = {"families": summary["families"], "comparisons": summary["comparisons"],
                          "global_front": summary["global_front"]}
    atomic_write_text(out / "lodo.json", strict_dumps(result, indent=2, default=str))
    return result
