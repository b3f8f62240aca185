"""Statistics, verdict and tables of the K-fold routing protocol (``train.protocol_kfold``; docs/ROUTING.md).

Per (seed, router): CPT(50%), CPT(80%) and APGR of the held-out routing curve with 95% percentile CIs from a
bootstrap over items (``RESAMPLES`` resamples drawn once from ``BOOTSTRAP_SEED`` and shared by every router, so
differences are paired), and APGR minus the prior router's on the same resample. Seed-mean: each resample also
draws the seeds with replacement (hierarchical, as ``train.protocol_stats``), so its interval carries the
seed-to-seed spread. Ties of a curve's scores are broken at random: the point estimate permutes the items with
the seed, a resample's order is random already.

The target (stated in advance): a router whose seed-mean APGR exceeds the prior router's by >= ``TARGET_MARGIN``
with the paired 95% CI's low end > 0. Every router is reported; since several are tried, the verdict also says
whether the target holds with Bonferroni-adjusted intervals (95% over the number of routers).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from eval.routing_metrics import (
    RANDOM_ROUTER_DRAWS,
    oracle_curve,
    random_router_curve,
    routing_summary,
    score_router_curve,
)

RESAMPLES = 2000
BOOTSTRAP_SEED = 0
TARGET_MARGIN = 0.05
LEVEL = 0.95
FIGURES = ("cpt50", "cpt80", "apgr")


def curve_figures(weak: np.ndarray, strong: np.ndarray, score: np.ndarray) -> tuple[float, float, float]:
    """(CPT(50%), CPT(80%), APGR) of the router that sends the highest ``score`` items to the strong model first."""
    s = routing_summary(score_router_curve(weak, strong, score))
    return s["cpt50"], s["cpt80"], s["apgr"]


def _interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(values, [tail, 100 - tail])
    return float(low), float(high)


def routing_stats(run: Any, *, resamples: int = RESAMPLES) -> pd.DataFrame:
    """One row per (router, seed or "mean"): each figure with its 95% CI, APGR minus the prior's with its 95%
    and Bonferroni CIs."""
    reference = run.reference
    o = run.outcomes
    weak, strong = o.weak_correct.astype(float), o.strong_correct.astype(float)
    n, seeds = len(weak), run.seeds
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    items = rng.integers(0, n, size=(resamples, n))
    seed_draws = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
    point, boot = {}, {}
    for (seed, kind), score in run.scores.items():
        perm = np.random.default_rng(seed).permutation(n)
        point[seed, kind] = np.array(curve_figures(weak[perm], strong[perm], score[perm]))
        boot[seed, kind] = np.array([curve_figures(weak[i], strong[i], score[i]) for i in items])  # [R, 3]
    routers = [k for k in run.kinds if k != reference] + [reference]
    bonferroni = 1 - (1 - LEVEL) / max(1, len(routers) - 1)
    rows = []
    for kind in routers:
        per_seed = [(str(s), point[s, kind], boot[s, kind], boot[s, kind][:, 2] - boot[s, reference][:, 2],
                     point[s, kind][2] - point[s, reference][2]) for s in seeds]
        stacked = np.stack([boot[s, kind] for s in seeds])  # [S, R, 3]
        ref = np.stack([boot[s, reference][:, 2] for s in seeds])
        pick = np.take_along_axis(stacked, seed_draws.T[:, :, None], axis=0).mean(axis=0)
        diff = (np.take_along_axis(stacked[:, :, 2], seed_draws.T, axis=0)
                - np.take_along_axis(ref, seed_draws.T, axis=0)).mean(axis=0)
        mean_point = np.mean([point[s, kind] for s in seeds], axis=0)
        mean_diff = float(np.mean([p[4] for p in per_seed]))
        for seed, pt, bt, df, d in [*per_seed, ("mean", mean_point, pick, diff, mean_diff)]:
            row: dict[str, Any] = {"router": kind, "seed": seed}
            for j, name in enumerate(FIGURES):
                row[name] = float(pt[j])
                row[f"{name}_low"], row[f"{name}_high"] = _interval(bt[:, j])
            if kind != reference:
                row["apgr_diff"] = float(d)
                row["diff_low"], row["diff_high"] = _interval(df)
                row["diff_low_bonferroni"], row["diff_high_bonferroni"] = _interval(df, bonferroni)
            rows.append(row)
    return pd.DataFrame(rows)


def references(run: Any) -> pd.DataFrame:
    """The simple baselines on the same items: random (mean of 200 routers), oracle, always-cheapest and
    always-largest (their accuracy and mean cost per problem)."""
    o = run.outcomes
    weak, strong = o.weak_correct.astype(float), o.strong_correct.astype(float)
    rows = []
    for name, curve in (("random router (200 draws, seed 0)", random_router_curve(weak, strong, 0,
                                                                                 draws=RANDOM_ROUTER_DRAWS)),
                        ("oracle", oracle_curve(weak, strong))):
        s = routing_summary(curve)
        rows.append({"reference": name, "cpt50": s["cpt50"], "cpt80": s["cpt80"], "apgr": s["apgr"],
                     "accuracy": math.nan, "mean_cost": math.nan})
    for name, correct, cost in ((f"always {o.weak} (weak)", weak, o.weak_cost),
                                (f"always {o.strong} (strong)", strong, o.strong_cost)):
        rows.append({"reference": name, "cpt50": math.nan, "cpt80": math.nan, "apgr": math.nan,
                     "accuracy": float(correct.mean()), "mean_cost": float(np.mean(cost))})
    return pd.DataFrame(rows)


def verdict(table: pd.DataFrame, run: Any, *, pool_name: str, k: int, full: bool) -> dict[str, Any]:
    """Whether a router reaches the stated target (seed-mean), per router and overall, with the run's scope
    (``full``: the protocol's seeds and K; else no claim)."""
    reference = run.reference
    mean = table[(table["seed"] == "mean") & (table["router"] != reference)]
    per_router = {}
    for row in mean.itertuples(index=False):
        reached = bool(row.apgr_diff >= TARGET_MARGIN and row.diff_low > 0)
        per_router[row.router] = {"apgr": row.apgr, "apgr_diff": row.apgr_diff, "diff_ci": [row.diff_low,
                                                                                            row.diff_high],
                                  "reached": reached,
                                  "reached_bonferroni": bool(reached and row.diff_low_bonferroni > 0)}
    reached = [r for r, v in per_router.items() if v["reached"]]
    text = (f"target (APGR - prior's >= {TARGET_MARGIN} with the paired 95% CI low end > 0, seed-mean): "
            + (f"reached by {', '.join(reached)}" if reached else "not reached by any router")
            + ("" if full else " (partial run: fewer seeds or another K; no claim)"))
    return {"pool": pool_name, "k": k, "seeds": list(run.seeds), "cost_model": run.cost_model,
            "strata": run.strata, "weak": run.outcomes.weak, "strong": run.outcomes.strong,
            "items": int(len(run.outcomes.weak_correct)), "scope": "full" if full else "partial",
            "routers": per_router, "reached": reached if full else [], "text": text, "seconds": run.seconds}


def stats_markdown(table: pd.DataFrame) -> str:
    """The stats table as Markdown: one row per (router, seed), each figure with its 95% CI."""
    def cell(row: Any, name: str) -> str:
        return f"{getattr(row, name):.3f} [{getattr(row, name + '_low'):.3f}, {getattr(row, name + '_high'):.3f}]"

    lines = ["| router | seed | CPT(50%) [95% CI] | CPT(80%) [95% CI] | APGR [95% CI] | APGR - prior [95% CI] |",
             "|---|---|---|---|---|---|"]
    for row in table.itertuples(index=False):
        diff = "" if pd.isna(getattr(row, "apgr_diff", math.nan)) else \
            f"{row.apgr_diff:+.3f} [{row.diff_low:+.3f}, {row.diff_high:+.3f}]"
        lines.append(f"| {row.router} | {row.seed} | {cell(row, 'cpt50')} | {cell(row, 'cpt80')} | "
                     f"{cell(row, 'apgr')} | {diff} |")
    return "\n".join(lines)


def references_markdown(refs: pd.DataFrame) -> str:
    """The references as Markdown."""
    def num(x: float, fmt: str) -> str:
        return "" if pd.isna(x) else format(x, fmt)

    lines = ["| reference | CPT(50%) | CPT(80%) | APGR | accuracy | mean cost per problem |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.reference} | {num(r.cpt50, '.3f')} | {num(r.cpt80, '.3f')} | {num(r.apgr, '.3f')} | "
              f"{num(r.accuracy, '.4f')} | {num(r.mean_cost, '.6g')} |" for r in refs.itertuples(index=False)]
    return "\n".join(lines)


def write_tables(run: Any, table: pd.DataFrame, result: dict[str, Any], out: Path) -> None:
    """stats.csv/md, references.csv/md, settings.csv, scores.csv (every held-out switch lambda), verdict.md and
    protocol.json into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "stats.csv", index=False)
    refs = references(run)
    refs.to_csv(out / "references.csv", index=False)
    run.settings.to_csv(out / "settings.csv", index=False)
    p = run.outcomes.problems
    frames = [pd.DataFrame({"seed": seed, "router": kind, "dataset": p["dataset"], "item_id": p["item_id"],
                            "switch_lambda": score}) for (seed, kind), score in run.scores.items()]
    pd.concat(frames, ignore_index=True).to_csv(out / "scores.csv", index=False)
    (out / "stats.md").write_text(stats_markdown(table) + "\n")
    (out / "references.md").write_text(references_markdown(refs) + "\n")
    (out / "verdict.md").write_text(f"{result['text']}\n\n{stats_markdown(table)}\n\n{references_markdown(refs)}\n")
    (out / "protocol.json").write_text(json.dumps(result, indent=2, default=float) + "\n")


__all__ = ["FIGURES", "RESAMPLES", "TARGET_MARGIN", "curve_figures", "references", "routing_stats", "verdict",
           "write_tables"]
