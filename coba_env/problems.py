"""A pool's problems as a policy may read them before any call: label-free columns, one row per item.

``problem_table`` builds it when a pool is compiled (``CompiledPool.problems``): the item's dataset and id, its
text, the pool's categorical fields (``CATEGORY_FIELDS``: level, subject, task, and ``category`` from the item's
metadata JSON when it names one), its prompt tokens (the mean over the item's stored calls: known before the
call is made) and its length in characters, and the user's own embedding when the pool holds an embeddings
table (``pools.embeddings``). Never the gold answer, a ``correct`` flag or a graded score: the problem
features (``coba_env.problem_features``) and the routers are built from this table only.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

#: The categorical fields a problem may carry (each one-hot encoded by the meta featurizer, with an unknown bucket).
CATEGORY_FIELDS: tuple[str, ...] = ("dataset", "level", "subject", "task", "category")
#: The columns of a problem table, in order (``embedding`` only when the pool holds embeddings).
PROBLEM_COLUMNS: tuple[str, ...] = ("dataset", "item_id", "problem", "level", "subject", "task", "category",
                                    "prompt_tokens", "problem_chars")


def _category(metadata: Any) -> str | None:
    """The ``category`` an item's metadata JSON names (None when there is none or it is not a JSON object)."""
    if not isinstance(metadata, str) or not metadata:
        return None
    try:
        data = json.loads(metadata)
    except ValueError:
        return None
    value = data.get("category") if isinstance(data, dict) else None
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def problem_table(items: pd.DataFrame, episode_items: pd.DataFrame, episode_prompt_tokens: np.ndarray,
                  embeddings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The label-free problem table of a pool: ``items`` (the pool's items table; its gold is dropped here),
    ``episode_items`` (each episode's dataset and item_id) with ``episode_prompt_tokens`` (each episode's mean
    prompt tokens) and the optional ``embeddings`` table (dataset, item_id, embedding)."""
    table = pd.DataFrame({
        "dataset": items["dataset"].astype(str).to_numpy(dtype=object),
        "item_id": items["item_id"].astype(str).to_numpy(dtype=object),
        "problem": items["problem"].fillna("").astype(str).to_numpy(dtype=object),
    })
    for name in ("level", "subject", "task"):
        column = items[name] if name in items else pd.Series([None] * len(items))
        table[name] = [None if v is None or v != v else str(v) for v in column.tolist()]
    metadata = items["metadata"] if "metadata" in items else pd.Series([None] * len(items))
    table["category"] = [_category(m) for m in metadata.tolist()]
    per_item = (pd.DataFrame({"dataset": episode_items["dataset"].astype(str).to_numpy(dtype=object),
                              "item_id": episode_items["item_id"].astype(str).to_numpy(dtype=object),
                              "prompt_tokens": np.asarray(episode_prompt_tokens, dtype=np.float64)})
                .groupby(["dataset", "item_id"], sort=False)["prompt_tokens"].mean())
    keys = pd.MultiIndex.from_arrays([table["dataset"], table["item_id"]])
    table["prompt_tokens"] = per_item.reindex(keys).fillna(0.0).to_numpy(dtype=np.float64)
    table["problem_chars"] = table["problem"].str.len().astype(np.float64)
    if embeddings is not None:
        vectors = embeddings.set_index(["dataset", "item_id"])["embedding"]
        table["embedding"] = vectors.reindex(keys).to_numpy(dtype=object)
    return table


def problems_of(pool: Any) -> pd.DataFrame:
    """The problem table rows of the items ``pool``'s episodes cover (a ``CompiledPool``, in order of first
    appearance): what a featurizer fitted on these episodes may see, and nothing of any other item."""
    table = getattr(pool, "problems", None)
    if table is None:
        raise ValueError("the pool carries no problem table (compile it from a Pool: coba_env.compiled.compile_pool)")
    keys = list(dict.fromkeys(zip(pool.dataset.tolist(), pool.item_id.tolist(), strict=True)))
    index = pd.MultiIndex.from_arrays([table["dataset"], table["item_id"]])
    at = index.get_indexer(pd.MultiIndex.from_tuples(keys, names=index.names))
    if (at < 0).any():
        d, i = keys[int(np.flatnonzero(at < 0)[0])]
        raise ValueError(f"item {d}/{i} of the episodes is not in the pool's problem table")
    return table.iloc[at].reset_index(drop=True)


def episode_problem_rows(pool: Any, problems: pd.DataFrame) -> np.ndarray:
    """For each episode of ``pool`` the row of its item in ``problems`` (int64 [E]); a ValueError naming an item
    the table lacks."""
    index = pd.MultiIndex.from_arrays([problems["dataset"].astype(str), problems["item_id"].astype(str)])
    keys = pd.MultiIndex.from_arrays([pool.dataset.astype(str), pool.item_id.astype(str)])
    at = index.get_indexer(keys)
    if (at < 0).any():
        e = int(np.flatnonzero(at < 0)[0])
        raise ValueError(f"item {pool.dataset[e]}/{pool.item_id[e]} has no row in the problem table")
    return at.astype(np.int64)
