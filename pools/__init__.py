"""Candidate pools: where evidence comes from and how it is stored (the bottom layer), cut by concept.

- the pool as data (this package's top level): ``schema``, ``store`` (``Pool``, save/load), ``validate``,
  ``export``, ``inspect``, ``tokens``, ``default`` (the one pool resolver, ``resolve_pool``), ``problems``
  (problem sets), ``atomic_write``, ``errors``;
- producers: ``simulate/`` (the simulator) and ``importers/`` (JSONL and other formats);
- ``grading/``: answer extraction, clustering and gold grading (``live_grading``: one live answer);
- ``client/``: the OpenAI-compatible model client, prompt files and judge calls (what the live path needs);
- ``generation/``: sampling and judging through the client into a resumable journal, then building a pool.
"""

from pools.errors import PoolError
from pools.store import Pool, load_pool, save_pool

__all__ = ["Pool", "PoolError", "load_pool", "save_pool"]
