"""``validate_pool``'s checks of the large tables that need the whole table, on the passes' compact arrays.

Each takes the ``pools.stored_validation.Resolver`` (its passes and files) and the step, and returns the
``Failure`` of the first bad row, or None (the candidate-index step raises through the small tables' checker for
an episode without candidates or a wrong N, as validate_pool does). Keys that do not strictly increase and
clusters of a table not in (episode, candidate) order are checked on the key columns read again (compact arrays).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from pools.row_checks import C, Failure, V, name_pattern_ok
from pools.safe_names import MAX_NAME_CHARS
from pools.schema import TIERS, VERIFIER_NAME_PATTERN
from pools.validate import (
    _CONTROL,
    NAME_MESSAGE,
    NOT_A_VERIFIER_MESSAGE,
    TABLE_KEYS,
    TIER_FORM_MESSAGE,
    TIER_ROLE_MESSAGE,
    UNKNOWN_VERIFIER_MODEL_MESSAGE,
    _braces,
    candidate_indices_message,
    cluster_order_message,
    duplicate_key_message,
    n_candidates_message,
    no_candidates_message,
    tier_case_message,
)

if TYPE_CHECKING:
    from pools.stored_validation import Resolver

Step = tuple[str, str, str]


def _fixed(table: str, pos: int, field: str, message: str) -> Failure:
    """A failure whose message has no value to fill."""
    return Failure(table, pos, field, _braces(message))


def _first_of(first: dict[Any, int], bad: list) -> int | None:
    return min((first[name] for name in bad), default=None)


def duplicate_keys(r: Resolver, step: Step) -> Failure | None:
    """validate_pool's duplicate-key check of a large table."""
    table = step[1]
    if (r.cands if table == C else r.verifs).ordered:
        return None
    keys = list(TABLE_KEYS[table])
    read = pq.read_table(r.path / f"{table}.parquet", columns=keys, read_dictionary=["tier"] if table == V else None)
    arrays = [_codes(read.column(k)) for k in keys]
    order = np.lexsort(arrays[::-1])
    same = np.logical_and.reduce([a[order][1:] == a[order][:-1] for a in arrays])
    if not same.any():
        return None
    pos = int(order[1:][same].min())
    run = np.cumsum(np.r_[True, ~same])
    k = int(np.flatnonzero(order == pos)[0])
    first = int(order[np.flatnonzero(run == run[k])[0]])
    return _fixed(table, pos, keys[-1], duplicate_key_message(keys, first))


def _codes(column: Any) -> np.ndarray:
    if hasattr(column.type, "value_type"):  # dictionary-encoded: one dictionary for every chunk
        column = column.unify_dictionaries()
        return np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in column.chunks]).astype(np.int64)
    return column.to_numpy().astype(np.int64)


def bad_model_name(r: Resolver, step: Step) -> Failure | None:
    """validate_pool's printable-name check of the verification table's model column."""
    first = r.verifs.first["model"]
    bad = [m for m in first if re.search(_CONTROL, str(m)) or len(str(m)) > MAX_NAME_CHARS]
    pos = _first_of(first, bad)
    return None if pos is None else Failure(V, pos, "model", NAME_MESSAGE)


def tier_form(r: Resolver, step: Step) -> Failure | None:
    """A verifier name matching ``VERIFIER_NAME_PATTERN``."""
    first = r.verifs.first["tier"]
    pos = _first_of(first, [t for t in first if not name_pattern_ok(t, VERIFIER_NAME_PATTERN)])
    return None if pos is None else Failure(V, pos, "tier", TIER_FORM_MESSAGE)


def tier_case(r: Resolver, step: Step) -> Failure | None:
    """Verifier names that differ beyond case (names in order of first appearance)."""
    first = r.verifs.first["tier"]
    names = sorted(first, key=first.get)
    folded = pd.Series([str(t).casefold() for t in names])
    clash = folded.duplicated(keep="first").to_numpy()
    if not clash.any():
        return None
    earlier = names[int(np.flatnonzero(folded == folded[int(np.argmax(clash))])[0])]
    pos = _first_of(first, [t for t, c in zip(names, clash, strict=True) if c])
    return Failure(V, pos, "tier", tier_case_message(earlier))


def tier_role(r: Resolver, step: Step) -> Failure | None:
    """A verifier name with a role (the paper's, or declared in the manifest)."""
    first, roles = r.verifs.first["tier"], r.ck.pool.manifest.get("verifier_roles") or {}
    pos = _first_of(first, [t for t in first if not (t in TIERS or t in roles)])
    return None if pos is None else Failure(V, pos, "tier", TIER_ROLE_MESSAGE)


def model_known(r: Resolver, step: Step) -> Failure | None:
    """A verification's model in table models."""
    first, known = r.verifs.first["model"], set(r.ck.pool.models["name"])
    pos = _first_of(first, [m for m in first if m not in known])
    return None if pos is None else Failure(V, pos, "model", UNKNOWN_VERIFIER_MODEL_MESSAGE)


def model_role(r: Resolver, step: Step) -> Failure | None:
    """A verification's model with a verifier role."""
    models = r.ck.pool.models
    verifiers = {n for n, role in zip(models["name"], models["role"], strict=True) if "verifier" in role}
    first = r.verifs.first["model"]
    pos = _first_of(first, [m for m in first if m not in verifiers])
    return None if pos is None else Failure(V, pos, "model", NOT_A_VERIFIER_MESSAGE)


def candidate_indices(r: Resolver, step: Step) -> Failure | None:
    """Each episode holds candidates 0..k-1 (k from 1 to N), every episode some, N the most any holds."""
    from pools.pool_chunks import read_rows

    s, n, ck = r.cands.stats, r.n, r.ck
    held = s["size"] > 0
    bad = held & ((s["low"] != 0) | (s["high"] != s["size"] - 1) | (s["size"] > n))
    if bad.any():
        k = np.flatnonzero(bad)[int(np.argmin(s["first"][bad]))]
        ep = r.cands.ids[k]
        idx = sorted(read_rows(r.path, C, np.array([ep]), columns=["candidate"])["candidate"].tolist())
        shown = idx if len(idx) <= 20 else idx[:20] + ["..."]
        return _fixed(C, int(s["first"][k]), "candidate", candidate_indices_message(int(ep), shown, n))
    episodes = ck.pool.episodes["episode_id"].to_numpy(dtype=np.int64)
    at, known = r.cands.locate(episodes)
    ck.first_bad("episodes", ~(known & held[at]), "episode_id", no_candidates_message(n))
    most = int(s["size"].max()) if len(s["size"]) else 0
    if most != n:
        ck.fail_manifest("n_candidates", n_candidates_message(n, most))
    return None


def cluster_order(r: Resolver, step: Step) -> Failure | None:
    """Cluster ids numbered in order of first appearance within each episode (candidates in index order)."""
    if r.cands.ordered:
        found = r.cands.order_failure
    else:
        read = pq.read_table(r.path / f"{C}.parquet", columns=["episode_id", "candidate", "cluster"]).to_pandas()
        order = np.lexsort((read["candidate"].to_numpy(), read["episode_id"].to_numpy()))
        ep, cl = read["episode_id"].to_numpy()[order], read["cluster"].to_numpy()[order]
        before = pd.Series(cl).groupby(ep).cummax().groupby(ep).shift(1).fillna(-1).to_numpy()
        bad = cl > before + 1
        found = None if not bad.any() else (int(order[int(np.argmax(bad))]), int(cl[int(np.argmax(bad))]),
                                            int(before[int(np.argmax(bad))]) + 1)
    if found is None:
        return None
    return _fixed(C, found[0], "cluster", cluster_order_message(found[1], found[2]))


WHOLE_STEPS = {"whole_keys": duplicate_keys, "name": bad_model_name, "tier_form": tier_form, "tier_case": tier_case,
               "tier_role": tier_role, "whole_indices": candidate_indices, "model_known": model_known,
               "model_role": model_role, "whole_order": cluster_order}
