"""Upper bounds on numbers from data and from the command line, written once.

What ``pools import`` and ``pools validate`` accept must be what ``coba bench`` can run: a token count of
2**62 or a model of 1e308 billion parameters turns every cost sum into an overflow. The bounds are far above
any real value (a call of a billion tokens, a model of a hundred thousand billion parameters) and far below
where float64 sums over a pool lose meaning. Sizes the user asks for (``--resamples``, ``--n-max``,
``n_items``) have bounds too, so a typo ends in one line instead of a MemoryError.
"""

from __future__ import annotations

__all__ = ["MAX_CANDIDATES", "MAX_CELL_CHARS", "MAX_CLUSTER", "MAX_CONCURRENCY", "MAX_HIDDEN_UNITS", "MAX_ITEMS", "MAX_LATENCY_S",
           "MAX_PARAMS_B", "MAX_PRICE_USD_PER_M", "MAX_RESAMPLES", "MAX_SEED", "MAX_TOKENS", "MAX_WORKERS"]

#: Tokens of one call (prompt or output).
MAX_TOKENS = 10**9
#: Model size in billions of parameters.
MAX_PARAMS_B = 1e5
#: Dollars per million tokens of one model (input or output): far above any listed price (GPT-4 32k was $120).
MAX_PRICE_USD_PER_M = 1e4
#: Seconds of one call.
MAX_LATENCY_S = 1e7
#: Candidates per episode (N, N_max).
MAX_CANDIDATES = 4096
#: Answer cluster ids (at most one cluster per candidate, ids from 0).
MAX_CLUSTER = MAX_CANDIDATES - 1
#: Bootstrap resamples.
MAX_RESAMPLES = 1_000_000
#: Items a generated or simulated pool may ask for.
MAX_ITEMS = 10_000_000
#: Units of one hidden layer of a controller network.
MAX_HIDDEN_UNITS = 65_536
#: Calls in flight at once (threads) and replay worker processes.
MAX_CONCURRENCY = 1024
MAX_WORKERS = 256
#: Largest random seed (numpy's generators take 0 .. 2**32 - 1).
MAX_SEED = 2**32 - 1
#: Characters of one cell of an outcome table (a prompt or a response): 2**19, the 128k-token context of the
#: sources' largest models at 4 characters per token. A longer cell is most often an unclosed quote that
#: swallowed the rest of the file.
MAX_CELL_CHARS = 2**19
