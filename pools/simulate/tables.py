"""The simulated pool's tables from its draws (``pools.simulate.draws``), for any range of episodes.

The Python strings (answers, ids, names) exist only for the episodes asked for, so a large pool is written
in chunks (``pools.simulate.write_simulated_pool``) and a small one built whole (``simulate_pool``); the
rows are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from pools.schema import LATER_COLUMNS, TABLES
from pools.simulate.draws import PoolDraws, prompt_tokens

#: Episodes per chunk when a pool is written in chunks: ~260k candidate rows for N = 16.
CHUNK_EPISODES = 16_384


def typed(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """``df`` with the schema's columns in order and the dtypes ``load_pool`` gives, so a fresh pool and
    a stored one compare equal."""
    kinds = {"str": "str", "str?": "str", "int": "int64", "float": "float64", "float?": "float64",
             "bool": "bool", "bool?": "boolean"}
    later = LATER_COLUMNS.get(table, {})  # outcome-table columns the simulator has no value for (NaN)
    return pd.DataFrame({c: (df[c] if c in df.columns else pd.Series(later[c], index=df.index)).astype(kinds[k])
                         for c, k in TABLES[table].items()})


def items_table(draws: PoolDraws) -> pd.DataFrame:
    """The items table (one row per item; small, built whole)."""
    return typed(pd.DataFrame({k: draws.items[k] for k in TABLES["items"]}), "items")


def models_table(pr: dict[str, Any]) -> pd.DataFrame:
    """One row per model: generator, verifier, or both."""
    verifiers = {t["model"] for t in pr["tiers"].values()}
    rows = []
    for name, params in pr["models"].items():
        gen, ver = name in pr["generators"], name in verifiers
        role = "generator+verifier" if gen and ver else "generator" if gen else "verifier"
        rows.append({"name": name, "params_b": float(params), "role": role})
    return typed(pd.DataFrame(rows), "models")


def episodes_table(draws: PoolDraws, lo: int, hi: int) -> pd.DataFrame:
    """Episodes ``lo`` to ``hi - 1``."""
    lay, sl = draws.lay, slice(lo, hi)
    return typed(pd.DataFrame({
        "episode_id": np.arange(lo, hi),
        "dataset": np.array(lay.datasets, dtype=object)[lay.ep_dataset[sl]],
        "item_id": draws.items["item_id"][lay.ep_item[sl]],
        "generator": np.array(lay.generators, dtype=object)[lay.ep_generator[sl]],
    }), "episodes")


def candidates_table(draws: PoolDraws, lo: int, hi: int) -> pd.DataFrame:
    """The candidates of episodes ``lo`` to ``hi - 1`` (episode-major, then candidate position)."""
    pr, n_cand = draws.pr, draws.codes.shape[1]
    c = {name: col[lo * n_cand:hi * n_cand] for name, col in draws.candidates.items()}
    flat = draws.codes[lo:hi].reshape(-1)
    gold = draws.items["gold"][np.repeat(draws.lay.ep_item[lo:hi], n_cand)]
    key = np.empty(len(flat), dtype=object)
    raw = np.empty(len(flat), dtype=object)
    value, variant = c["value"], c["variant"]
    for i in np.flatnonzero(flat >= 0):
        key[i] = gold[i] if flat[i] == 0 else str(value[i])
        raw[i] = _written(key[i], variant[i])
    cap_hit = c["cap_hit"]
    return typed(pd.DataFrame({
        "episode_id": np.repeat(np.arange(lo, hi), n_cand),
        "candidate": np.tile(np.arange(n_cand), hi - lo),
        "text": np.full(len(flat), None, dtype=object),
        "raw_answer": raw,
        "answer_key": key,
        "cluster": c["cluster"].astype(np.int64),
        "correct": c["correct"],
        "prompt_tokens": prompt_tokens(pr, draws.lay, draws.items, n_cand, slice(lo, hi)),
        "output_tokens": c["output_tokens"].astype(np.int64),
        "tokens_estimated": np.zeros(len(flat), bool),
        "latency_s": c["latency_s"],
        "finish_reason": np.where(cap_hit, "length", "stop").astype(object),
        "cap_hit": cap_hit,
        "extraction_status": np.where(cap_hit, "none", "boxed").astype(object),
        "incomplete_boxed": c["incomplete_boxed"],
        "repetition_score": c["repetition_score"],
    }), "candidates")


def _written(key: str, u: float) -> str:
    """How a model might have written a normalized answer: LaTeX fraction forms, a stray '.0'."""
    if key.startswith(r"\frac"):
        return key if u < 0.6 else key.replace(r"\frac", r"\dfrac") if u < 0.9 else "/".join(
            part.strip("{}") for part in key[len(r"\frac"):].split("}{"))
    return f"{key}.0" if u < 0.02 else key


def verifications_table(draws: PoolDraws, lo: int, hi: int) -> pd.DataFrame:
    """The verifier calls on episodes ``lo`` to ``hi - 1``, ordered by episode, candidate, then tier."""
    parts: dict[str, list[np.ndarray]] = {c: [] for c in (*TABLES["verifications"], "tier_index")}
    for t in draws.tiers:
        width = len(t.columns)
        sl = slice(lo * width, hi * width)
        keep = t.keep[sl]
        rows = int(keep.sum())
        parts["episode_id"].append(np.repeat(np.arange(lo, hi), width)[keep])
        parts["candidate"].append(np.tile(t.columns, hi - lo)[keep])
        parts["tier"].append(np.full(rows, t.tier, dtype=object))
        parts["tier_index"].append(np.full(rows, t.tier_index))
        parts["model"].append(np.full(rows, t.model, dtype=object))
        parts["score"].append(t.score[sl][keep])
        parts["prompt_tokens"].append(t.prompt_tokens[sl][keep].astype(np.int64))
        parts["output_tokens"].append(t.output_tokens[sl][keep].astype(np.int64))
        parts["latency_s"].append(t.latency_s[sl][keep])
    columns = {c: np.concatenate(v) for c, v in parts.items()}
    # (episode, candidate, tier) is unique, so sorting each range of episodes gives the whole table's order.
    order = np.lexsort((columns.pop("tier_index"), columns["candidate"], columns["episode_id"]))
    return typed(pd.DataFrame({c: v[order] for c, v in columns.items()}), "verifications")


def table_chunks(draws: PoolDraws, chunk_episodes: int = CHUNK_EPISODES) -> Iterator[tuple[str, pd.DataFrame]]:
    """Every table as ``(name, frame)`` pairs: items and models whole, the episode tables per chunk."""
    yield "items", items_table(draws)
    yield "models", models_table(draws.pr)
    for lo in range(0, max(draws.n_episodes, 1), chunk_episodes):
        hi = min(lo + chunk_episodes, draws.n_episodes)
        yield "episodes", episodes_table(draws, lo, hi)
        yield "candidates", candidates_table(draws, lo, hi)
        yield "verifications", verifications_table(draws, lo, hi)
