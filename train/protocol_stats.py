"""The protocol's statistics against the reference and its verdict (docs/LEARNING.md, "Protocol").

Unit: the item (dataset, item_id); a policy's per-item correctness and p_tokens are means over the item's
generators and, for the seed-mean, over seeds. Paired bootstrap over items (``eval.bootstrap`` resampling):

- ``ALL``: item-pooled accuracy difference (points) with its 95% CI, and the cost ratio mean p_tokens /
  the reference's with its 95% CI (ratio of the resampled means);
- ``MACRO``: macro accuracy difference (mean over datasets), items resampled within each dataset, and the
  ratio of the macro mean costs;
- one row per dataset.

``VERDICT_RULE``: on the seed-mean, the item-pooled difference >= 0 with the CI's lower end >= -0.5 points,
the macro difference >= 0, and the item-pooled cost ratio's CI upper end < 0.9.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from eval.bootstrap import CI, RESAMPLES, bootstrap_means, resample_counts, summary
from pools.atomic_write import atomic_write_text
from pools.strict_json import strict_dumps

ITEM_CI_LOW_MIN = -0.5  # points
COST_RATIO_CI_HIGH_MAX = 0.9
#: Fewer seeds than this make a run partial: its verdict is never "beats".
MIN_SEEDS = 3
VERDICT_RULE = (f"beats the reference iff, over at least {MIN_SEEDS} seeds, on the seed-mean: item-pooled accuracy "
                f"difference >= 0 and its 95% CI lower end >= {ITEM_CI_LOW_MIN} points, macro difference >= 0, and "
                f"the item-pooled p_tokens ratio's 95% CI upper end < {COST_RATIO_CI_HIGH_MAX}")


def item_means(records: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """Per item (index dataset, item_id): mean ``correct`` and ``p_tokens`` of every policy (columns
    (metric, policy)); only items every policy covers."""
    frame = records[records["policy"].isin(policies)]
    frame = frame.assign(correct=frame["correct"].astype(float))
    wide = frame.groupby(["dataset", "item_id", "policy"], sort=False)[["correct", "p_tokens"]].mean()
    wide = wide.unstack("policy").dropna()
    return wide.reindex(columns=pd.MultiIndex.from_product([["correct", "p_tokens"], list(policies)]))


def _row(scope: str, acc: np.ndarray, ref: np.ndarray, cost: np.ndarray, ref_cost: np.ndarray,
         boot: np.ndarray, ci: float) -> dict[str, Any]:
    """One comparison row from point values and the resampled (diff, cost, ref_cost) means [3, R]."""
    lo, hi = np.quantile(boot[1] / boot[2], [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return {"scope": scope, "n_items": int(acc.size if acc.ndim else 0), **summary(float(acc.mean() - ref.mean()),
            boot[0], ci), "acc": 100.0 * float(acc.mean()), "ref_acc": 100.0 * float(ref.mean()),
            "cost": float(cost.mean()), "ref_cost": float(ref_cost.mean()),
            "cost_ratio": float(cost.mean() / ref_cost.mean()), "ratio_low": float(lo), "ratio_high": float(hi)}


def compare(records: pd.DataFrame, name: str, reference: str, *, resamples: int = RESAMPLES, seed: int = 0,
            ci: float = CI) -> pd.DataFrame:
    """``name`` against ``reference``: rows MACRO, ALL and one per dataset (see the module docstring)."""
    items = item_means(records, [name, reference])
    acc, ref = items["correct"][name].to_numpy(), items["correct"][reference].to_numpy()
    cost, ref_cost = items["p_tokens"][name].to_numpy(), items["p_tokens"][reference].to_numpy()
    values = np.vstack([acc - ref, cost, ref_cost])
    datasets = items.index.get_level_values("dataset").to_numpy()
    rows, macro_boots, macro_points = [], [], []
    all_row = _row("ALL", acc, ref, cost, ref_cost, bootstrap_means(values, resample_counts(acc.size, resamples,
                                                                                             seed)), ci)
    for i, ds in enumerate(dict.fromkeys(datasets)):
        idx = np.flatnonzero(datasets == ds)
        boot = bootstrap_means(values[:, idx], resample_counts(idx.size, resamples, seed + 1 + i))
        rows.append(_row(str(ds), acc[idx], ref[idx], cost[idx], ref_cost[idx], boot, ci))
        macro_boots.append(boot)
        macro_points.append([acc[idx].mean(), ref[idx].mean(), cost[idx].mean(), ref_cost[idx].mean()])
    boot = np.mean(macro_boots, axis=0)
    m = np.mean(macro_points, axis=0)
    macro = _row("MACRO", np.array([m[0]]), np.array([m[1]]), np.array([m[2]]), np.array([m[3]]), boot, ci)
    macro["n_items"] = int(acc.size)
    return pd.DataFrame([macro, all_row, *rows])


def compare_seeds(records: pd.DataFrame, name: str, reference: str, *, resamples: int = RESAMPLES,
                  ci: float = CI) -> pd.DataFrame:
    """``compare`` per seed (column ``seed``) and on the seed-mean (``seed`` = "mean": per item, the mean
    correctness and cost over seeds)."""
    frames = [compare(records[records["seed"] == s], name, reference, resamples=resamples, ci=ci).assign(seed=str(s))
              for s in sorted(records["seed"].unique())]
    frames.append(compare(records, name, reference, resamples=resamples, ci=ci).assign(seed="mean"))
    out = pd.concat(frames, ignore_index=True)
    return out[["seed", *[c for c in out.columns if c != "seed"]]]


def verdict(stats: pd.DataFrame, name: str) -> dict[str, Any]:
    """The protocol's verdict from the seed-mean rows of ``compare_seeds`` (``VERDICT_RULE``)."""
    mean = stats[stats["seed"] == "mean"].set_index("scope")
    pooled, macro = mean.loc["ALL"], mean.loc["MACRO"]
    seeds = stats["seed"].astype(str)
    n_seeds = int(seeds[seeds != "mean"].nunique())
    checks = {f"seeds>={MIN_SEEDS}": n_seeds >= MIN_SEEDS,
              "item_diff>=0": bool(pooled["diff"] >= 0),
              f"item_ci_low>={ITEM_CI_LOW_MIN}": bool(pooled["ci_low"] >= ITEM_CI_LOW_MIN),
              "macro_diff>=0": bool(macro["diff"] >= 0),
              f"cost_ratio_ci_high<{COST_RATIO_CI_HIGH_MAX}": bool(pooled["ratio_high"] < COST_RATIO_CI_HIGH_MAX)}
    beats = all(checks.values())
    text = (f"{name} {'BEATS' if beats else 'does not beat'} the reference: item-pooled diff "
            f"{pooled['diff']:+.2f} [{pooled['ci_low']:+.2f}, {pooled['ci_high']:+.2f}], macro diff "
            f"{macro['diff']:+.2f} [{macro['ci_low']:+.2f}, {macro['ci_high']:+.2f}], p_tokens ratio "
            f"{pooled['cost_ratio']:.3f} [{pooled['ratio_low']:.3f}, {pooled['ratio_high']:.3f}] (seed-mean of "
            f"{n_seeds} seed{'s' if n_seeds != 1 else ''}{'' if n_seeds >= MIN_SEEDS else f'; partial: the protocol needs {MIN_SEEDS}'})")
    return {"method": name, "beats": beats, "checks": checks, "rule": VERDICT_RULE, "text": text}


def _md(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, floatfmt=".3f") + "\n"


def stats_markdown(stats: pd.DataFrame) -> str:
    """The compact table ``coba train --lodo`` prints: one row per (seed, scope)."""
    cols = ["seed", "scope", "n_items", "acc", "ref_acc", "diff", "ci_low", "ci_high", "cost_ratio", "ratio_low",
            "ratio_high"]
    return stats[cols].to_markdown(index=False, floatfmt=".3f")


def write_tables(result: Any, out: Path) -> None:
    """Write a ``ProtocolResult``'s records, inner table, choices, statistics and verdict into ``out``."""
    result.records.to_csv(out / "episodes.csv", index=False)
    for stem, frame in (("inner", result.inner), ("chosen", result.chosen), ("stats", result.stats)):
        frame.to_csv(out / f"{stem}.csv", index=False)
        atomic_write_text(out / f"{stem}.md", _md(frame))
    atomic_write_text(out / "verdict.md", f"{result.verdict['text']}\n\nRule: {VERDICT_RULE}\n\n"
                      f"Checks: {json.dumps(result.verdict['checks'])}\n\n{stats_markdown(result.stats)}\n")
    atomic_write_text(out / "protocol.json", strict_dumps({
        "method": result.method, "verdict": result.verdict, "seconds": result.seconds, "timings": result.timings,
        "chosen": result.chosen.to_dict("records")}, indent=2, default=str))
