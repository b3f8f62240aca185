"""The protocol's statistics against the reference and its verdict (docs/LEARNING.md, "Protocol").

Unit: the item (dataset, item_id); a policy's per-item correctness and p_tokens are means over the item's
generators. Paired bootstrap over items (``eval.bootstrap`` resampling):

- ``ALL``: item-pooled accuracy difference (points) with its 95% CI, and the cost ratio mean p_tokens /
  the reference's with its 95% CI (ratio of the resampled means);
- ``MACRO``: macro accuracy difference (mean over datasets), items resampled within each dataset, and the
  ratio of the macro mean costs;
- one row per dataset.

Per seed the resampling is over items. On the seed-mean it is **hierarchical** (issue 27): every resample
draws the seeds with replacement and the items with replacement (the same item draw for every seed: the seeds
are paired on the items) and averages over both, so the interval carries the seed-to-seed variance as well as
the item variance. With one seed it is the item bootstrap.

``verdict``: "beats" needs a **full** run (every outer fold of the pool and at least ``MIN_SEEDS`` seeds) and
``VERDICT_RULE`` on the seed-mean rows; a run that is not full is "partial", says why, and never beats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from eval.bootstrap import CI, RESAMPLES, bootstrap_means, resample_counts, summary
from pools.atomic_write import atomic_write_text
from pools.strict_json import strict_dumps
from train.protocol_arena import REPLAY

ITEM_CI_LOW_MIN = -0.5  # points
#: The replay env's cost bound (``train.protocol_arena.REPLAY``); the route env's is 0.8 (``ROUTE``).
COST_RATIO_CI_HIGH_MAX = REPLAY.ratio_high_max
#: Fewer seeds than this make a run partial: its verdict is never "beats".
MIN_SEEDS = 3


def verdict_rule(ratio_high_max: float = COST_RATIO_CI_HIGH_MAX) -> str:
    """The verdict rule in words, with the arena's cost bound (0.9 on the replay env, 0.8 on the route env)."""
    return (f"beats the reference iff the run is full (every outer fold of the pool, at least {MIN_SEEDS} seeds) "
            f"and on the seed-mean (hierarchical bootstrap over seeds and items): item-pooled accuracy "
            f"difference >= 0 and its 95% CI lower end >= {ITEM_CI_LOW_MIN} points, macro difference >= 0, and "
            f"the item-pooled p_tokens ratio's 95% CI upper end < {ratio_high_max:g}")


VERDICT_RULE = verdict_rule()


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


def _seed_item_values(records: pd.DataFrame, name: str, reference: str) -> tuple[np.ndarray, np.ndarray]:
    """(values [S, 4, n]: per seed, ``name``'s and the reference's per-item correctness and p_tokens; the
    items' datasets [n]) over the items every seed covers for both policies."""
    seeds = sorted(records["seed"].unique()) if "seed" in records.columns else [None]
    frames = [item_means(records if s is None else records[records["seed"] == s], [name, reference]) for s in seeds]
    common = frames[0].index
    for f in frames[1:]:
        common = common.intersection(f.index, sort=False)
    values = np.stack([np.vstack([f.loc[common, ("correct", name)], f.loc[common, ("correct", reference)],
                                  f.loc[common, ("p_tokens", name)], f.loc[common, ("p_tokens", reference)]])
                       for f in frames]).astype(float)
    return values, common.get_level_values("dataset").to_numpy()


def _hierarchical_means(values: np.ndarray, item_counts: np.ndarray, seed_weights: np.ndarray) -> np.ndarray:
    """Resampled means [3, R] of (diff, cost, ref_cost): per seed the item resample (``item_counts`` [R, n],
    shared by the seeds), then the seeds weighted by their resample counts (``seed_weights`` [R, S], rows sum
    to 1)."""
    per_seed = np.stack([bootstrap_means(np.vstack([v[0] - v[1], v[2], v[3]]), item_counts) for v in values])
    return np.einsum("rs,skr->kr", seed_weights, per_seed)


def seed_resample_weights(n_seeds: int, resamples: int, seed: int = 0) -> np.ndarray:
    """[R, S]: each resample's seed draw (S seeds with replacement) as weights summing to 1; all 1 for S = 1."""
    rng = np.random.default_rng(10_000 + seed)
    return rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=resamples) / n_seeds


def compare(records: pd.DataFrame, name: str, reference: str, *, resamples: int = RESAMPLES, seed: int = 0,
            ci: float = CI) -> pd.DataFrame:
    """``name`` against ``reference``: rows MACRO, ALL and one per dataset (see the module docstring); with
    several seeds in ``records["seed"]``, the hierarchical bootstrap over seeds and items."""
    values, datasets = _seed_item_values(records, name, reference)
    n_seeds, n_items = values.shape[0], values.shape[2]
    weights = seed_resample_weights(n_seeds, resamples, seed)
    point = values.mean(axis=0)  # [4, n]: per item, the mean over seeds
    acc, ref, cost, ref_cost = point
    rows, macro_boots, macro_points = [], [], []
    all_boot = _hierarchical_means(values, resample_counts(n_items, resamples, seed), weights)
    all_row = _row("ALL", acc, ref, cost, ref_cost, all_boot, ci)
    for i, ds in enumerate(dict.fromkeys(datasets)):
        idx = np.flatnonzero(datasets == ds)
        boot = _hierarchical_means(values[:, :, idx], resample_counts(idx.size, resamples, seed + 1 + i), weights)
        rows.append(_row(str(ds), acc[idx], ref[idx], cost[idx], ref_cost[idx], boot, ci))
        macro_boots.append(boot)
        macro_points.append([acc[idx].mean(), ref[idx].mean(), cost[idx].mean(), ref_cost[idx].mean()])
    boot = np.mean(macro_boots, axis=0)
    m = np.mean(macro_points, axis=0)
    macro = _row("MACRO", np.array([m[0]]), np.array([m[1]]), np.array([m[2]]), np.array([m[3]]), boot, ci)
    macro["n_items"] = int(n_items)
    return pd.DataFrame([macro, all_row, *rows])


def compare_seeds(records: pd.DataFrame, name: str, reference: str, *, resamples: int = RESAMPLES,
                  ci: float = CI) -> pd.DataFrame:
    """``compare`` per seed (column ``seed``) and on the seed-mean (``seed`` = "mean": per item, the mean
    correctness and cost over seeds; the hierarchical bootstrap over seeds and items)."""
    frames = [compare(records[records["seed"] == s], name, reference, resamples=resamples, ci=ci).assign(seed=str(s))
              for s in sorted(records["seed"].unique())]
    frames.append(compare(records, name, reference, resamples=resamples, ci=ci).assign(seed="mean"))
    out = pd.concat(frames, ignore_index=True)
    return out[["seed", *[c for c in out.columns if c != "seed"]]]


@dataclass(frozen=True)
class Coverage:
    """What a protocol run covers: the pool's name, the seeds run, the outer folds run and the pool's folds."""

    pool: str
    seeds: tuple[int, ...]
    folds: tuple[str, ...]
    all_folds: tuple[str, ...]
    env: str = REPLAY.env
    reference: str = REPLAY.reference

    @property
    def missing_folds(self) -> list[str]:
        """The pool's outer folds (held-out datasets) the run did not run."""
        return [f for f in self.all_folds if f not in self.folds]

    def partial_reasons(self) -> list[str]:
        """Why the run is partial (empty for a full run)."""
        reasons = []
        if self.missing_folds:
            reasons.append(f"outer folds missing: {', '.join(self.missing_folds)} (ran {len(self.folds)} of "
                           f"{len(self.all_folds)} folds)")
        if len(set(self.seeds)) < MIN_SEEDS:
            reasons.append(f"fewer than {MIN_SEEDS} seeds ({len(set(self.seeds))})")
        return reasons

    def describe(self) -> str:
        """One line: pool, env, reference, seeds and folds."""
        return (f"pool {self.pool}; {self.env} env, reference {self.reference}; seeds "
                f"{', '.join(map(str, self.seeds))}; held-out folds {', '.join(self.folds)}")


def verdict(stats: pd.DataFrame, name: str, coverage: Coverage, *,
            ratio_high_max: float = COST_RATIO_CI_HIGH_MAX) -> dict[str, Any]:
    """The protocol's verdict from the seed-mean rows of ``compare_seeds`` (``verdict_rule(ratio_high_max)``)
    for a run covering ``coverage``; a partial run is reported with its reason and never beats."""
    mean = stats[stats["seed"] == "mean"].set_index("scope")
    pooled, macro = mean.loc["ALL"], mean.loc["MACRO"]
    checks = {"item_diff>=0": bool(pooled["diff"] >= 0),
              f"item_ci_low>={ITEM_CI_LOW_MIN}": bool(pooled["ci_low"] >= ITEM_CI_LOW_MIN),
              "macro_diff>=0": bool(macro["diff"] >= 0),
              f"cost_ratio_ci_high<{ratio_high_max:g}": bool(pooled["ratio_high"] < ratio_high_max)}
    reasons = coverage.partial_reasons()
    met = all(checks.values())
    beats = met and not reasons
    numbers = (f"item-pooled diff {pooled['diff']:+.2f} [{pooled['ci_low']:+.2f}, {pooled['ci_high']:+.2f}], macro "
               f"diff {macro['diff']:+.2f} [{macro['ci_low']:+.2f}, {macro['ci_high']:+.2f}], p_tokens ratio "
               f"{pooled['cost_ratio']:.3f} [{pooled['ratio_low']:.3f}, {pooled['ratio_high']:.3f}]")
    if reasons:
        what = ("would meet the bounds" if met else "does not meet the bounds")
        text = (f"{name}: partial run, no verdict ({'; '.join(reasons)}); on what it covers it {what}: {numbers} "
                f"({coverage.describe()})")
    else:
        text = (f"{name} {'BEATS' if beats else 'does not beat'} the reference ({coverage.reference}): {numbers} "
                f"(seed-mean, hierarchical "
                f"bootstrap over seeds and items; full run: {coverage.describe()})")
    return {"method": name, "beats": beats, "scope": "partial" if reasons else "full",
            "partial_reason": "; ".join(reasons), "pool": coverage.pool, "seeds": list(coverage.seeds),
            "folds": list(coverage.folds), "missing_folds": coverage.missing_folds, "env": coverage.env,
            "reference": coverage.reference, "checks": checks, "rule": verdict_rule(ratio_high_max), "text": text}


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
    v = result.verdict
    scope = v["scope"] + (f" ({v['partial_reason']})" if v["partial_reason"] else "")
    atomic_write_text(out / "verdict.md", f"{v['text']}\n\nScope: {scope}\n\nPool: {v['pool']}\n\n"
                      f"Env: {v['env']}; reference: {v['reference']}\n\n"
                      f"Seeds: {', '.join(map(str, v['seeds']))}\n\nHeld-out folds: {', '.join(v['folds'])}\n\n"
                      f"Cost unit B (p_tokens, every fit): {result.cost_unit:.1f}\n\nRule: {v['rule']}\n\n"
                      f"Checks: {json.dumps(v['checks'])}\n\n{stats_markdown(result.stats)}\n")
    atomic_write_text(out / "protocol.json", strict_dumps({
        "method": result.method, "verdict": v, "cost_unit": result.cost_unit, "seconds": result.seconds,
        "timings": result.timings, "chosen": result.chosen.to_dict("records")}, indent=2, default=str))
