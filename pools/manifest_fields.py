"""The manifest's derived fields (counts, models, datasets, tiers), from the tables or from what a streamed
writer counted: one definition for ``Pool.refresh_manifest`` and ``pools.pool_writer``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pools.schema import FORMAT_VERSION, TIERS


def ordered_tiers(present: Sequence[str], declared: Any) -> list[str]:
    """The pool's verifier order: ``declared`` (the manifest's ``tiers``) when it lists exactly the ``present``
    names (in order of first appearance), else the paper's names (V1, V2, V3) then the others as they appear."""
    if isinstance(declared, list) and len(declared) == len(present) and set(declared) == set(present):
        return [str(t) for t in declared]
    return [t for t in TIERS if t in present] + [str(t) for t in present if t not in TIERS]


def derived_manifest(manifest: Mapping[str, Any], *, models: pd.DataFrame, dataset_sizes: Mapping[str, int],
                     tiers: Sequence[str], counts: Mapping[str, int]) -> dict[str, Any]:
    """``manifest`` with its derived fields set (``tiers`` already in the pool's order, see ``ordered_tiers``);
    ``n_candidates`` must already be in it."""
    m = dict(manifest)
    m["format_version"] = FORMAT_VERSION
    m["models"] = [
        {"name": r.name, "params_b": float(r.params_b), "role": r.role}
        for r in models.itertuples(index=False)
    ]
    m["datasets"] = {str(k): int(v) for k, v in dataset_sizes.items()}
    m["tiers"] = list(tiers)
    m.setdefault("generation", {})
    m.setdefault("provenance", {})
    m["counts"] = {name: int(n) for name, n in counts.items()}
    return m
