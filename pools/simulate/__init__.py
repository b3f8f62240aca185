"""The calibrated pool simulator: a profile and a seed in, a schema-exact ``Pool`` out.

``simulate_pool("paper")`` mirrors the CoBa paper's setup (five datasets, three generators, N = 16,
tiers V1-V3) and hits its per-dataset greedy / majority / oracle accuracy by construction. The
generative model lives in ``pools.simulate.model`` (its step 1 in ``pools.simulate.difficulty``); profiles in ``pools.simulate.profiles``;
parameters and what they were fit to in docs/SIMULATOR.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pools.errors import PoolError
from pools.output_paths import check_output_dir
from pools.pool_writer import write_pool_stream
from pools.simulate import tables
from pools.simulate.draws import PoolDraws, draw_pool
from pools.simulate.model import SIMULATOR_VERSION
from pools.simulate.profiles import BUILTIN_PROFILES, Profile, load_profile, validate_profile
from pools.store import Pool

__all__ = [
    "BUILTIN_PROFILES",
    "SIMULATOR_VERSION",
    "Profile",
    "load_profile",
    "simulate_pool",
    "validate_profile",
    "write_simulated_pool",
]


def simulate_pool(profile: str | os.PathLike[str] | dict[str, Any] | Profile, seed: int = 0) -> Pool:
    """Generate the pool described by ``profile`` (built-in name, JSON path, dict) from ``seed``.

    The whole pool is held in memory as pandas frames; a pool of millions of candidates is written with
    ``write_simulated_pool`` instead (the same tables, never held whole).
    """
    prof = _profile(profile, seed)
    draws = draw_pool(prof.data, int(seed))
    frames: dict[str, list[pd.DataFrame]] = {}
    for name, df in tables.table_chunks(draws, chunk_episodes=max(draws.n_episodes, 1)):
        frames.setdefault(name, []).append(df)
    pool = Pool(**{name: parts[0] for name, parts in frames.items()})
    pool.refresh_manifest(**_manifest_fields(prof, int(seed), draws))
    return pool


def write_simulated_pool(profile: str | os.PathLike[str] | dict[str, Any] | Profile, dest: str | os.PathLike[str],
                         seed: int = 0, *, overwrite: bool = False, chunk_episodes: int = tables.CHUNK_EPISODES,
                         progress: Callable[[int], object] | None = None) -> dict[str, Any]:
    """Generate the pool described by ``profile`` from ``seed`` and write it to ``dest`` chunk by chunk.

    The files are those ``save_pool(simulate_pool(profile, seed), dest)`` writes, byte for byte, but only the
    numeric draws and one chunk of ``chunk_episodes`` episodes' rows are in memory at a time. ``dest`` is
    checked first as ``save_pool`` does (an existing pool is replaced only with ``overwrite``, a folder holding
    anything else never). ``progress(episodes)`` is called per chunk written. Returns the manifest.
    """
    prof = _profile(profile, seed)
    dest = check_output_dir(dest, force=overwrite, inputs=[profile if isinstance(profile, (str, os.PathLike))
                                                           else None], kind="pool")
    draws = draw_pool(prof.data, int(seed))

    def counted(name: str, rows: int) -> None:
        if progress is not None and name == "episodes":
            progress(rows)

    return write_pool_stream(dest, tables.table_chunks(draws, chunk_episodes),
                             _manifest_fields(prof, int(seed), draws), on_frame=counted)


def _profile(profile: str | os.PathLike[str] | dict[str, Any] | Profile, seed: int) -> Profile:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PoolError(f"expected a non-negative integer seed, got {seed!r}", field="seed")
    return profile if isinstance(profile, Profile) else load_profile(profile)


def _manifest_fields(prof: Profile, seed: int, draws: PoolDraws) -> dict[str, Any]:
    """The manifest fields the tables do not give: N, the generation settings and the provenance."""
    pr = prof.data
    return {
        "n_candidates": pr["n_candidates"],
        "generation": {"max_output_tokens": pr["max_output_tokens"], "temperature": pr["sampling"]["temperature"],
                       "top_p": pr["sampling"]["top_p"], "simulated": True},
        "provenance": {"simulator": SIMULATOR_VERSION, "profile": prof.name, "seed": seed,
                       "profile_sha256": prof.content_hash, "quota_misses": draws.quota_misses},
    }
