"""Summary statistics of a pool per (dataset, generator): accuracy of simple selectors, tokens, coverage.

``inspect_pool`` is a pure function of the pool (correctness labels included: these are evaluator-side
figures, never policy inputs), with each verifier's coverage, AUROC, calibration error and best-of-N accuracy
(``pools.verifier_quality``); ``format_inspection`` renders its result as a text table; ``pool_summary`` is
the one line ``coba pools import`` and ``validate`` print (the manifest's counts).

Selectors over the first ``n`` candidates of an episode:

* first-sample: candidate 0 is correct;
* majority@n: the answer with the most votes wins, ties going to the answer that appeared first; votes are
  counted per answer cluster (``key="cluster"``) or per exact ``raw_answer`` string (``key="raw_answer"``);
  candidates without an answer (none, or an empty string) do not vote, and an episode where none answers
  counts as wrong; an outcome-only candidate (status ``outcome``: an outcome table's, its correctness known but
  no answer recorded) votes as its own answer, as in the env;
* pass@n: at least one candidate is correct;
* mean (per-sample accuracy): the share of correct candidates among those with a known label.

A selector's verdict is unknown (NaN, left out of the mean) when the label it needs is null.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from pools.schema import OUTCOME_STATUS, PAPER_TIER_ROLES
from pools.store import Pool
from pools.verifier_quality import format_diagnostics, verifier_diagnostics

VOTE_KEYS: tuple[str, ...] = ("cluster", "raw_answer")


def _labels(candidates: pd.DataFrame) -> np.ndarray:
    """Correctness as floats: 1.0, 0.0, or NaN when unknown."""
    return candidates["correct"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def episode_outcomes(pool: Pool, n: int | None = None) -> pd.DataFrame:
    """Per episode (index episode_id): first_sample, majority (cluster vote), majority_exact, pass_at_n."""
    n = pool.n_candidates if n is None else n
    cands = pool.candidates[pool.candidates["candidate"] < n]
    correct = pd.Series(_labels(cands), index=cands.index)
    episode = cands["episode_id"]
    out = pd.DataFrame(index=pd.Index(pool.episodes["episode_id"].to_numpy(), name="episode_id"))
    first = cands["candidate"] == 0
    out["first_sample"] = pd.Series(correct[first].to_numpy(), index=episode[first].to_numpy())
    for key, column in (("cluster", "majority"), ("raw_answer", "majority_exact")):
        out[column] = _majority(cands, correct, key).reindex(out.index).fillna(0.0)
    any_true = (correct == 1.0).groupby(episode).any()
    any_unknown = correct.isna().groupby(episode).any()
    out["pass_at_n"] = pd.Series(np.where(any_true, 1.0, np.where(any_unknown, np.nan, 0.0)), index=any_true.index)
    return out


def _majority(cands: pd.DataFrame, correct: pd.Series, key: str) -> pd.Series:
    """Per episode with at least one answer: the label of the first member of the winning vote group."""
    if key not in VOTE_KEYS:
        raise ValueError(f"unknown vote key {key!r}; expected one of {list(VOTE_KEYS)}")
    if key == "cluster":
        voting = cands["cluster"] >= 0
    else:  # an empty or blank answer is no answer, here as in clustering
        voting = cands["raw_answer"].fillna("").astype(str).str.strip() != ""
    # an outcome-only candidate (an outcome table's) votes alone, as when compiled (coba_env.compiled.outcome_clusters)
    outcome = cands["extraction_status"] == OUTCOME_STATUS
    v = cands.loc[voting | outcome, ["episode_id", "candidate", key]].astype({key: object})
    v.loc[outcome[voting | outcome].to_numpy(), key] = "\0outcome " + v["candidate"].astype(str)
    groups = v.groupby(["episode_id", key], sort=False)["candidate"].agg(["size", "min"]).reset_index()
    winners = groups.sort_values(["episode_id", "size", "min"], ascending=[True, False, True])
    winners = winners.drop_duplicates("episode_id")
    label = pd.Series(correct.to_numpy(), index=pd.MultiIndex.from_arrays(
        [cands["episode_id"].to_numpy(), cands["candidate"].to_numpy()]))
    picked = label.reindex(pd.MultiIndex.from_arrays([winners["episode_id"].to_numpy(),
                                                      winners["min"].to_numpy()]))
    return pd.Series(picked.to_numpy(), index=winners["episode_id"].to_numpy())


def majority_accuracy(pool: Pool, n: int, key: str = "cluster") -> float:
    """majority@n accuracy over all episodes, voting per ``key`` ("cluster" or exact "raw_answer")."""
    column = {"cluster": "majority", "raw_answer": "majority_exact"}.get(key)
    if column is None:
        raise ValueError(f"unknown vote key {key!r}; expected one of {list(VOTE_KEYS)}")
    return _mean(episode_outcomes(pool, n)[column])


def _mean(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.mean()) if len(values) else None


def _group_stats(pool: Pool, episode_ids: pd.Index, outcomes: pd.DataFrame) -> dict[str, Any]:
    cands = pool.candidates[pool.candidates["episode_id"].isin(episode_ids)]
    verifs = pool.verifications[pool.verifications["episode_id"].isin(episode_ids)]
    scored = verifs[verifs["score"].notna()].groupby("tier").size()
    n_cands = len(cands)
    o = outcomes.loc[episode_ids]
    return {
        "episodes": len(episode_ids),
        "n": pool.n_candidates,
        "first_sample_accuracy": _mean(o["first_sample"]),
        "majority_at_n": _mean(o["majority"]),
        "majority_at_n_exact": _mean(o["majority_exact"]),
        "pass_at_n": _mean(o["pass_at_n"]),
        "mean_accuracy": _mean(pd.Series(_labels(cands))),
        "mean_prompt_tokens": float(cands["prompt_tokens"].mean()) if n_cands else None,
        "mean_output_tokens": float(cands["output_tokens"].mean()) if n_cands else None,
        "tokens_estimated_share": float(cands["tokens_estimated"].mean()) if n_cands else None,
        "score_coverage": {t: (float(scored.get(t, 0)) / n_cands if n_cands else None) for t in _coverage_tiers(pool)},
    }


def _coverage_tiers(pool: Pool) -> list[str]:
    """The verifiers whose score coverage is reported: the pool's own, by their names and in its order (a pool
    without the paper's V1, V2, V3 gets no column of zeros for them)."""
    return list(pool.tiers)


def inspect_pool(pool: Pool) -> dict[str, Any]:
    """Statistics per (dataset, generator) and overall; JSON-ready (unknown figures are None)."""
    outcomes = episode_outcomes(pool)
    agreement = (pool.manifest.get("provenance") or {}).get("grader_agreement") or {}
    agree_by_group = {(g["dataset"], g["generator"]): g for g in agreement.get("groups", [])}
    groups = []
    for (dataset, generator), eps in pool.episodes.groupby(["dataset", "generator"], sort=False):
        stats = {"dataset": dataset, "generator": generator,
                 **_group_stats(pool, pd.Index(eps["episode_id"]), outcomes)}
        g = agree_by_group.get((dataset, generator))
        stats["grader_agreement"] = g["agree"] / g["compared"] if g and g["compared"] else None
        groups.append(stats)
    overall = _group_stats(pool, pd.Index(pool.episodes["episode_id"]), outcomes)
    overall["grader_agreement"] = agreement.get("rate")
    return {
        "n_candidates": pool.n_candidates,
        "counts": {name: int(v) for name, v in pool.manifest.get("counts", {}).items()},
        "datasets": sorted(pool.items["dataset"].unique().tolist()),
        "models": [{"name": r.name, "params_b": float(r.params_b), "role": r.role}
                   for r in pool.models.itertuples(index=False)],
        "tiers": pool.tiers,
        "verifier_roles": {t: (pool.manifest.get("verifier_roles") or {}).get(t, PAPER_TIER_ROLES.get(t))
                           for t in pool.tiers},
        "groups": groups,
        "overall": overall,
        "grader_disagreements": len(agreement.get("disagreements", [])) if agreement else None,
        "estimated": _estimated(pool),
        "verifiers": verifier_diagnostics(pool),
        **_candidate_counts(pool),
    }


def _candidate_counts(pool: Pool) -> dict[str, Any]:
    """``candidates_per_episode`` (N the most, the least, the median, how many episodes hold fewer than N) when
    episodes hold different numbers of candidates; nothing when every episode holds N."""
    per_episode = pool.candidates.groupby("episode_id").size().to_numpy()
    if not len(per_episode) or per_episode.min() == pool.n_candidates:
        return {}
    return {"candidates_per_episode": {"max": pool.n_candidates, "min": int(per_episode.min()),
                                       "median": float(np.median(per_episode)),
                                       "short_episodes": int((per_episode < pool.n_candidates).sum()),
                                       "episodes": int(len(per_episode))}}


def counts_line(counts: dict[str, Any]) -> str:
    """``candidates_per_episode`` in one line: N is the most, then the least and the median."""
    return (f"candidates per episode: N = {counts['max']} is the most; min {counts['min']}, median "
            f"{counts['median']:g}; {counts['short_episodes']} of {counts['episodes']} episodes hold fewer than N "
            f"(maj@N, pass@N and best-of-N use what each holds)")


_ESTIMATED_FIELDS = ("prompt_tokens", "output_tokens", "latency_s", "verifier_prompt_tokens",
                     "verifier_output_tokens", "verifier_latency_s")


def _field_order(name: str) -> tuple[int, str]:
    return (_ESTIMATED_FIELDS.index(name) if name in _ESTIMATED_FIELDS else len(_ESTIMATED_FIELDS), name)


def _estimated(pool: Pool) -> dict[str, Any]:
    """How much of the pool's cost data was estimated: flagged candidates and the import's per-field counts."""
    counts = (pool.manifest.get("provenance") or {}).get("estimated") or {}
    return {
        "candidates_with_estimated_tokens": int(pool.candidates["tokens_estimated"].sum()),
        "candidates": int(len(pool.candidates)),
        "fields": {name: int(counts[name]) for name in sorted(counts, key=_field_order) if counts[name]},
    }


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_inspection(stats: dict[str, Any]) -> str:
    """A plain-text table of ``inspect_pool``'s result, one row per (dataset, generator) plus the total."""
    n = stats["n_candidates"]
    header = ["dataset", "generator", "episodes", "N", "first", "mean", f"maj@{n}", f"maj@{n} exact", f"pass@{n}",
              "prompt tok", "output tok", *[f"cov {t}" for t in stats["overall"]["score_coverage"]], "grader agree"]
    rows = []
    for g in [*stats["groups"], {"dataset": "all", "generator": "", **stats["overall"]}]:
        rows.append([
            g["dataset"], g["generator"], _fmt(g["episodes"]), _fmt(g["n"]),
            _fmt(g["first_sample_accuracy"]), _fmt(g["mean_accuracy"]), _fmt(g["majority_at_n"]), _fmt(g["majority_at_n_exact"]),
            _fmt(g["pass_at_n"]), _fmt(g["mean_prompt_tokens"], 1), _fmt(g["mean_output_tokens"], 1),
            *[_fmt(v, 2) for v in g["score_coverage"].values()], _fmt(g["grader_agreement"]),
        ])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    models = ", ".join(f"{m['name']} ({m['params_b']:g}B, {m['role']})" for m in stats["models"])
    counts = ", ".join(f"{k} {v}" for k, v in stats["counts"].items())
    roles = stats.get("verifier_roles") or {}
    tiers = ", ".join(f"{t} ({roles[t]})" if t in roles else t for t in stats["tiers"])
    footer = [f"models: {models}", f"tiers: {tiers or 'none'}", f"rows: {counts}"]
    if stats.get("candidates_per_episode"):
        footer.append(counts_line(stats["candidates_per_episode"]))
    if stats.get("verifiers"):
        footer += format_diagnostics(stats["verifiers"], n)
    est = stats.get("estimated")
    if est and est["candidates"]:
        fields = ", ".join(f"{name} {n}" for name, n in est["fields"].items()) or "none counted by the importer"
        footer.append(f"estimated: token counts of {est['candidates_with_estimated_tokens']}/{est['candidates']} "
                      f"candidates (tokens_estimated); values per field: {fields}")
    if stats.get("grader_disagreements"):
        footer.append(f"grader disagreements with the source's labels: {stats['grader_disagreements']} "
                      "(listed in manifest.json provenance.grader_agreement)")
    return "\n".join(lines + [""] + footer)


def pool_summary(pool: Pool) -> str:
    """One line of the manifest's counts: episodes x candidates, items per dataset, models, tiers, verifications."""
    m = pool.manifest
    datasets = ", ".join(f"{k} {v}" for k, v in m["datasets"].items())
    counts = _candidate_counts(pool).get("candidates_per_episode")
    per = f"up to {m['n_candidates']} candidates (min {counts['min']}, median {counts['median']:g})" if counts else \
        f"{m['n_candidates']} candidates"
    return (f"{m['counts']['episodes']} episodes x {per}; items {m['counts']['items']} "
            f"({datasets}); models {m['counts']['models']}; tiers {', '.join(m['tiers']) or 'none'}; "
            f"verifications {m['counts']['verifications']}")
