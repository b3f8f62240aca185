"""The project's default pool: resolve a pool spec to a ``Pool``, simulating and caching when needed.

``resolve_pool()`` (or ``"paper"``) gives the simulated paper pool, ``"tiny"`` the small test pool;
any other spec is a path to a pool directory or to a simulator profile JSON. Simulated pools are
generated once and cached under ``$COBA_CACHE_DIR`` (default ``~/.cache/coba-env``) in
``pools/<profile>-seed<seed>-<hash>``, where the hash covers the profile's content and the
simulator version, so an edited profile or a new simulator never reuses a stale cache entry.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from pathlib import Path

from pools.errors import PoolError
from pools.simulate import BUILTIN_PROFILES, SIMULATOR_VERSION, Profile, load_profile, simulate_pool
from pools.store import Pool, load_pool, save_pool

#: Environment variable naming the cache directory.
CACHE_ENV = "COBA_CACHE_DIR"

DEFAULT_SPEC = "paper"


def default_cache_dir() -> Path:
    """The cache root: ``$COBA_CACHE_DIR`` if set, else ``~/.cache/coba-env``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "coba-env"


def cache_key(profile: Profile, seed: int) -> str:
    """Directory name of a simulated pool in the cache: ``<profile>-seed<seed>-<12 hex digits>``."""
    digest = hashlib.sha256(f"{profile.content_hash}|{SIMULATOR_VERSION}".encode()).hexdigest()[:12]
    return f"{profile.name}-seed{seed}-{digest}"


def resolve_pool(spec: Pool | str | os.PathLike[str] | None = None, *, seed: int = 0) -> Pool:
    """The project's one pool resolver: a ``Pool`` -> itself; None / "paper" / "tiny" -> a cached simulated
    pool; a directory -> that pool; a .json file -> its profile."""
    if isinstance(spec, Pool):
        return spec
    text = DEFAULT_SPEC if spec is None else os.fspath(spec)
    if not text.strip():
        raise PoolError(f"empty pool name; expected a built-in profile {list(BUILTIN_PROFILES)}, a pool directory, "
                        "or a simulator profile JSON file")
    if text not in BUILTIN_PROFILES:
        path = Path(text)
        if path.is_dir():
            return load_pool(path)
        if not path.is_file():
            raise PoolError(f"no such pool or profile: expected a built-in profile {list(BUILTIN_PROFILES)}, "
                            "a pool directory, or a simulator profile JSON file", file=text)
        if path.suffix.lower() != ".json":
            raise PoolError("is a file, not a pool directory or a simulator profile (.json); to use a candidate "
                            f"file, import it first: coba pools import {text} POOL_DIR (then pass POOL_DIR)",
                            file=text)
    return simulated_pool(load_profile(text), seed=seed)


def pool_label(spec: Pool | str | os.PathLike[str] | None) -> str:
    """How a pool spec is named in results: its text, "paper (default)" for None, "<Pool object>" for a Pool."""
    if isinstance(spec, Pool):
        return "<Pool object>"
    return f"{DEFAULT_SPEC} (default)" if spec is None else os.fspath(spec)


def pool_directory(spec: Pool | str | os.PathLike[str] | None = None, *, seed: int = 0) -> Path | None:
    """The directory ``resolve_pool(spec, seed=seed)`` reads its pool from (a pool directory, or a simulated pool's
    cache entry once resolved), for a reader of its Parquet tables; None for a ``Pool`` or a pool not stored."""
    if isinstance(spec, Pool):
        return None
    text = DEFAULT_SPEC if spec is None else os.fspath(spec)
    if text not in BUILTIN_PROFILES and Path(text).is_dir():
        return Path(text)
    dest = default_cache_dir() / "pools" / cache_key(load_profile(text), seed)
    return dest if (dest / "manifest.json").is_file() else None


def simulated_pool(profile: Profile, *, seed: int = 0) -> Pool:
    """The pool ``simulate_pool(profile, seed)`` from the cache, generating and storing it on a miss."""
    dest = default_cache_dir() / "pools" / cache_key(profile, seed)
    if (dest / "manifest.json").is_file():
        try:
            return load_pool(dest, validate=False)
        except PoolError as exc:  # a damaged entry: regenerate it
            warnings.warn(f"regenerating damaged cache entry: {exc}", stacklevel=2)
    pool = simulate_pool(profile, seed=seed)
    try:
        save_pool(pool, dest, overwrite=True)
    except (OSError, PoolError) as exc:  # an unwritable cache costs time, not correctness
        warnings.warn(f"could not cache the simulated pool in {dest}: {exc}", stacklevel=2)
        return pool
    # Read back what was stored, so a first call and a cached call return identical tables.
    return load_pool(dest, validate=False)


def clear_cache() -> int:
    """Delete every cached simulated pool; return how many were removed."""
    root = default_cache_dir() / "pools"
    if not root.is_dir():
        return 0
    removed = 0
    for entry in sorted(root.iterdir()):
        leftover = entry.name.startswith(".")  # the temporary of an interrupted save
        if entry.is_dir() and (leftover or (entry / "manifest.json").is_file()):
            shutil.rmtree(entry, ignore_errors=True)
            removed += not leftover
    return removed
