"""Candidate pools: where evidence comes from and how it is stored (the bottom layer)."""

from pools.errors import PoolError
from pools.store import Pool, load_pool, save_pool

__all__ = ["Pool", "PoolError", "load_pool", "save_pool"]
