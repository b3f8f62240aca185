"""What ``coba pools import`` does to an imported pool after its importer: rename its dataset, choose its labels,
add the verifier roles and model prices given on the command line.

* ``rename_dataset``: ``--dataset`` for a format whose importer has no dataset option of its own (jsonl,
  tot-game24): the source's one dataset gets the new name.
* ``use_grader_labels``: ``--labels grader``. Every importer grades every candidate and keeps the source's
  label, recording each candidate where the two disagree (``provenance.grader_agreement.disagreements``,
  with the answer and the gold); this takes the grader's verdict there instead. Source labels are not
  always right (blank answers labelled correct, answers identical to the gold labelled wrong), and the
  disagreement list printed by the import shows which side to trust.
* ``add_verifier_roles``, ``add_prices``: ``--verifier-role`` and ``--price``, over what the source declared.
"""

from __future__ import annotations

import dataclasses

from pools.errors import PoolError
from pools.prices import PRICES_KEY
from pools.store import Pool
from pools.validate import validate_pool

__all__ = ["LABEL_SOURCES", "add_prices", "add_verifier_roles", "rename_dataset", "use_grader_labels"]

#: ``--labels`` values: the source's correctness labels (default) or the project's grader.
LABEL_SOURCES: tuple[str, ...] = ("source", "grader")


def rename_dataset(pool: Pool, name: str, *, source: str) -> Pool:
    """``pool`` with its one dataset renamed ``name``; a source of several datasets is refused (PoolError)."""
    if not name.strip():
        raise PoolError("--dataset is blank; expected a dataset name", file=source)
    datasets = list(dict.fromkeys(pool.items["dataset"]))
    if len(datasets) > 1:
        raise PoolError(f"--dataset renames the source's one dataset, but it holds {len(datasets)} "
                        f"({', '.join(datasets)}); expected no --dataset", file=source)
    items, episodes = pool.items.copy(), pool.episodes.copy()
    items["dataset"], episodes["dataset"] = name, name
    provenance = pool.manifest.get("provenance", {})
    agreement = provenance.get("grader_agreement")
    if agreement:
        agreement = {**agreement, "groups": [{**g, "dataset": name} for g in agreement.get("groups", [])],
                     "disagreements": [{**d, "dataset": name} for d in agreement.get("disagreements", [])]}
        provenance = {**provenance, "grader_agreement": agreement}
    out = dataclasses.replace(pool, items=items, episodes=episodes, manifest=dict(pool.manifest))
    out.refresh_manifest(provenance={**provenance, "dataset_renamed": {"from": datasets[0], "to": name}})
    validate_pool(out, source=source)
    return out


def use_grader_labels(pool: Pool) -> Pool:
    """``pool`` with the grader's verdict as the label of every candidate where it disagreed with the source's."""
    provenance = pool.manifest.get("provenance", {})
    disagreements = (provenance.get("grader_agreement") or {}).get("disagreements") or []
    candidates = pool.candidates.copy()
    row = {(int(e), int(c)): i for i, (e, c) in enumerate(zip(candidates["episode_id"], candidates["candidate"],
                                                              strict=True))}
    correct = candidates["correct"].copy()
    for d in disagreements:
        correct.iloc[row[(int(d["episode_id"]), int(d["candidate"]))]] = bool(d["grader"])
    candidates["correct"] = correct
    out = dataclasses.replace(pool, candidates=candidates, manifest=dict(pool.manifest))
    out.refresh_manifest(provenance={**provenance, "labels_used": "grader",
                                     "labels_changed_to_grader": len(disagreements)})
    validate_pool(out, source=str(provenance.get("source", "pool")))
    return out


def add_verifier_roles(pool: Pool, roles: dict[str, str], *, source: str) -> Pool:
    """``pool`` (changed in place) with ``roles`` (verifier -> role) over its own; a role for a verifier the pool
    does not have is refused (PoolError)."""
    if roles:
        pool.manifest["verifier_roles"] = {**(pool.manifest.get("verifier_roles") or {}), **roles}
        validate_pool(pool, source=source)
    return pool


def add_prices(pool: Pool, prices: dict[str, dict[str, float]]) -> Pool:
    """``pool`` (changed in place) with ``prices`` (model -> $ per million tokens) over its own, model by model;
    a price for a model the pool does not have is refused (PoolError)."""
    if prices:
        models = list(pool.models["name"])
        unknown = [m for m in prices if m not in set(models)]
        if unknown:
            raise PoolError(f"--price {unknown[0]}=...: no such model in the pool; its models are {', '.join(models)}")
        pool.manifest[PRICES_KEY] = {**(pool.manifest.get(PRICES_KEY) or {}), **prices}
    return pool
