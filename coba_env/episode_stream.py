"""Which episode comes next, with which lambda: the episode order of the one-episode envs (a mixin of ``CoBaEnv``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coba_env.compiled import CompiledPool
from coba_env.episode_data import EpisodeData
from coba_env.evidence import Evidence
from coba_env.rules.config import RESET_OPTIONS, check_int, check_lam, check_options, pair_caps

if TYPE_CHECKING:  # annotations only
    import numpy as np

__all__ = ["ORDERS", "EpisodeStream"]

#: Episode orders: "sequential" cycles in pool order, "shuffle" permutes each pass, "random" draws with replacement.
ORDERS = ("sequential", "shuffle", "random")
#: ``reset`` without options (read only).
_NO_OPTIONS: dict[str, Any] = {}


class EpisodeStream:
    """The episode bookkeeping of ``CoBaEnv``: the pool replayed, the episode order, the current evidence."""

    pool: CompiledPool
    order: str
    lam: float
    lambda_range: tuple[float, float] | None
    np_random: np.random.Generator
    _rows: list[EpisodeData]
    _cursor: int
    _perm: np.ndarray | None
    _ep: int
    _ev: Evidence | None
    _pair_caps: list[int] | None
    n_max: int

    def use_pool(self, pool: CompiledPool, rows: list[EpisodeData] | None = None) -> None:
        """Replay ``pool``'s episodes from the next reset on (its N must be the configuration's pool's).

        ``rows``: the per-episode rows ``step`` reads (default ``pool.episode_rows()``); a live episode passes
        rows it fills as the evidence arrives (``coba_env.live.LiveEpisode``).
        """
        if pool.n_candidates != self.pool.n_candidates:
            raise ValueError(f"the pool has N={pool.n_candidates} candidates per episode; this env's has "
                             f"{self.pool.n_candidates}")
        self.pool = pool
        if self._pair_caps is not None:  # pairs: the SAMPLE caps of the new pool's own episodes
            self._pair_caps = pair_caps(pool, self.n_max).tolist()
        self._rows = pool.episode_rows() if rows is None else rows
        self._cursor, self._perm = 0, None

    @property
    def n_episodes(self) -> int:
        """Episodes in this env's subset."""
        return self.pool.n_episodes

    @property
    def episode_index(self) -> int:
        """Index (within this env's subset) of the current episode; -1 before the first reset."""
        return self._ep

    @property
    def evidence(self) -> Evidence:
        """The current episode's revealed evidence, label-free; policies read it and must not modify it."""
        if self._ev is None:
            raise RuntimeError("call reset() first")
        return self._ev

    def _episode_and_lambda(self, options: dict[str, Any] | None) -> tuple[int, float]:
        """The episode and lambda a reset starts: ``options["episode"]`` or the next one in ``order``;
        ``options["lam"]``, else a draw from ``lambda_range``, else ``lam``."""
        options = check_options(options, RESET_OPTIONS) if options is not None else _NO_OPTIONS
        if "episode" in options:
            ep = check_int("options['episode']", options["episode"], low=0, high=self.pool.n_episodes - 1)
        else:
            ep = self._next_episode()
        if "lam" in options:
            return ep, check_lam("options['lam']", options["lam"])
        if self.lambda_range is not None:
            return ep, float(self.np_random.uniform(*self.lambda_range))
        return ep, self.lam

    def _next_episode(self) -> int:
        if self.order == "sequential":
            ep = self._cursor % len(self._rows)  # one row per episode of the pool
            self._cursor += 1
            return ep
        n = self.pool.n_episodes
        if self.order == "random":
            return int(self.np_random.integers(n))
        if self._perm is None or self._cursor >= n:  # "shuffle"
            self._perm = self.np_random.permutation(n)
            self._cursor = 0
        ep = int(self._perm[self._cursor])
        self._cursor += 1
        return ep
