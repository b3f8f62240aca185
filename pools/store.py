"""Pool: the in-memory candidate pool, and its atomic Parquet + manifest.json storage."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pools.atomic_write import atomic_dir
from pools.errors import PoolError
from pools.manifest_fields import derived_manifest, ordered_tiers
from pools.output_paths import check_output_dir
from pools.parse_boundary import PARSE_ERRORS, parse_problem
from pools.pool_writer import manifest_text, to_arrow
from pools.schema import LATER_COLUMNS, TABLES


@dataclass
class Pool:
    """A candidate pool: five tables and a manifest (see ``pools.schema``)."""

    items: pd.DataFrame
    models: pd.DataFrame
    episodes: pd.DataFrame
    candidates: pd.DataFrame
    verifications: pd.DataFrame
    manifest: dict[str, Any] = field(default_factory=dict)
    #: The optional embeddings table (dataset, item_id, embedding), ``pools.embeddings``; None without one.
    embeddings: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        for name, fills in LATER_COLUMNS.items():  # a pool built or saved before these columns existed
            table = self.table(name)
            missing = {col: fill for col, fill in fills.items() if col not in table.columns}
            if missing:
                setattr(self, name, table.assign(**missing))

    def table(self, name: str) -> pd.DataFrame:
        """Return the table called ``name``."""
        return getattr(self, name)

    @property
    def n_candidates(self) -> int:
        """N, the number of candidates per episode."""
        return int(self.manifest["n_candidates"])

    @property
    def tiers(self) -> list[str]:
        """The pool's verifiers (names with at least one stored call), in the pool's order.

        The order is the manifest's ``tiers`` when it lists exactly these names, else the paper's names in
        their order (V1, V2, V3) followed by any other name in order of first appearance.
        """
        present = list(pd.unique(self.verifications["tier"])) if len(self.verifications) else []
        return ordered_tiers(present, self.manifest.get("tiers"))

    def refresh_manifest(self, **updates: Any) -> None:
        """Recompute the manifest's derived fields (counts, models, datasets, tiers) from the tables."""
        m = {**self.manifest, **updates}
        if "n_candidates" not in m:
            per_episode = self.candidates.groupby("episode_id").size()
            m["n_candidates"] = int(per_episode.max()) if len(per_episode) else 0
        self.manifest = derived_manifest(
            m, models=self.models, dataset_sizes=self.items.groupby("dataset", sort=False).size().to_dict(),
            tiers=self.tiers, counts={name: len(self.table(name)) for name in TABLES})


def save_pool(pool: Pool, dest: str | os.PathLike[str], *, overwrite: bool = False,
              inputs: Sequence[str | os.PathLike[str] | None] = ()) -> Path:
    """Write ``pool`` to directory ``dest`` atomically: all files land in a temporary sibling, then it is renamed.

    ``dest`` is checked first (``pools.output_paths.check_output_dir``): an existing pool is replaced only
    with ``overwrite``, a folder holding anything else never; ``inputs`` (the command's own sources) are
    never overwritten.
    """
    dest = check_output_dir(dest, force=overwrite, inputs=inputs, kind="pool")
    pool.refresh_manifest()

    def fill(tmp: Path) -> None:
        for name in TABLES:
            pq.write_table(to_arrow(pool.table(name), name), tmp / f"{name}.parquet", compression="zstd")
        (tmp / "manifest.json").write_text(manifest_text(pool.manifest), encoding="utf-8")
        if pool.embeddings is not None:  # the optional table goes with the pool
            from pools.embeddings import write_embeddings

            write_embeddings(pool.embeddings, tmp)

    atomic_dir(dest, fill, marker="pool")
    return dest


def read_manifest_file(path: Path) -> dict[str, Any]:
    """The pool directory's manifest, checked as ``load_pool`` checks it (a directory holding a JSON object)."""
    if path.is_file():
        raise PoolError(f"is a file, not a pool directory; to use a candidate file, import it first: coba pools "
                        f"import {path} POOL_DIR", file=str(path))
    if not path.is_dir():
        raise PoolError("not a pool directory (expected a folder with manifest.json and Parquet tables)", file=str(path))
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise PoolError("missing manifest.json", file=str(path))
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except PARSE_ERRORS as exc:  # malformed, not UTF-8, nested too deep, a number of thousands of digits
        raise PoolError(parse_problem(exc), file=str(manifest_path)) from None
    if not isinstance(manifest, dict):
        raise PoolError("expected a JSON object", file=str(manifest_path))
    return manifest


def load_pool(path: str | os.PathLike[str], *, validate: bool = True) -> Pool:
    """Read a pool directory; with ``validate`` the tables are checked against the schema and each other."""
    path = Path(path)
    manifest = read_manifest_file(path)
    tables = {}
    for name, columns in TABLES.items():
        f = path / f"{name}.parquet"
        if not f.exists():
            raise PoolError("missing table file", file=str(f), table=name)
        try:
            df = pq.read_table(f).to_pandas()
        except (pa.ArrowInvalid, OSError) as exc:
            raise PoolError(f"unreadable or truncated Parquet ({exc})", file=str(f), table=name) from exc
        missing = [c for c in columns if c not in df.columns and c not in LATER_COLUMNS.get(name, {})]
        if missing:
            raise PoolError(f"missing column(s) {missing}; expected {list(columns)}", file=str(f), table=name,
                            field=missing[0])
        tables[name] = df
    pool = Pool(manifest=manifest, **tables)
    if validate:
        from pools.validate import validate_pool

        validate_pool(pool, source=str(path))
    from pools.embeddings import load_embeddings

    pool.embeddings = load_embeddings(path, pool.items)  # the optional table (None without one)
    return pool
