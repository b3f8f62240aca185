"""Batched reads of a ``CoBaVectorEnv``'s label-free state: what the fixed policies' ``act_batch`` read.

Each helper is the batched twin of one ``coba_env.evidence.Evidence`` read that a scalar ``act`` makes
(``top_share``, ``top_tier_mean``, ``cap_hits[-1]``, ``clusters[-1]``, a legal-action test), computed from the
vector env's arrays with the same float operations so both forms take the same decisions. None reads labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def top_stat_columns(venv: Any) -> dict[int, tuple[int, int]]:
    """Tier slots whose per-cluster statistics the vector env keeps for the top answer (``top_record`` columns
    sum, count): its feature layout's cheap judge in columns 0-1, its strong verifier in columns 3-4."""
    fl = venv.features
    columns = {fl.strong: (3, 4)} if fl.strong >= 0 else {}
    if fl.cheap >= 0:
        columns[fl.cheap] = (0, 1)
    return columns


def legal(action_masks: np.ndarray, action: int | None) -> np.ndarray:
    """Whether ``action`` is legal in each row (all False when ``action`` is None): batched ``can``."""
    if action is None:
        return np.zeros(len(action_masks), dtype=bool)
    return action_masks[:, action] > 0


def top_share(venv: Any) -> np.ndarray:
    """Share of revealed candidates in the top answer cluster per row (0 before any answer)."""
    has_top = venv.top >= 0
    return np.divide(venv.top_count, np.maximum(venv.n, 1), out=np.zeros(venv.num_envs), where=has_top)


def top_tier_mean(venv: Any, slot: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(mean score at tier ``slot`` over the top cluster's scored candidates, whether there is one) per row.

    ``Evidence.top_tier_mean`` returns None where the second array is False. Only the tiers in
    ``top_stat_columns`` are kept by the vector env (see ``supports_top_mean``).
    """
    b = venv.num_envs
    if slot is None:
        return np.zeros(b), np.zeros(b, dtype=bool)
    s, c = top_stat_columns(venv)[slot]
    total, count = venv.top_record[:, s], venv.top_record[:, c]
    has = count > 0
    return np.divide(total, count, out=np.zeros(b), where=has), has


def supports_top_mean(venv: Any, slot: int | None) -> bool:
    """Whether ``top_tier_mean`` can read tier ``slot`` from ``venv`` (None: nothing to read)."""
    return slot is None or slot in top_stat_columns(venv)


def newest(venv: Any, table: np.ndarray) -> np.ndarray:
    """``table``'s [E, N] value of each row's newest revealed candidate (candidate 0 where none is revealed)."""
    n_cand = table.shape[1]
    return table.ravel().take(venv.ep * n_cand + np.maximum(venv.n - 1, 0))


def newest_cap_hit(venv: Any) -> np.ndarray:
    """Whether each row's newest revealed candidate hit the token cap (``Evidence.cap_hits[-1]``)."""
    return newest(venv, venv.pool.cap_hit)


def newest_cluster(venv: Any) -> np.ndarray:
    """Answer cluster of each row's newest revealed candidate, -1 without an answer (``Evidence.clusters[-1]``)."""
    return newest(venv, venv.pool.cluster)
