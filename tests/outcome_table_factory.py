"""A synthetic wide outcome table of any size (RouterBench's shape), for the scale test and
scripts/bench_outcome_tables.py: one row per query, per model a True/False column and a dollar-cost column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: Categories the queries fall in; each model is better or worse on each.
CATEGORIES = ("algebra", "biology", "history", "law", "physics", "code", "chemistry", "ethics", "geography", "music")
_WORDS = np.array("the of a which is in what how many find value best answer given if then when number".split())


def write_wide_outcome_table(path: Path, n_generators: int, n_queries: int, seed: int = 0) -> Path:
    """Write ``path`` (.csv or .parquet): columns id, category, prompt, then per model ``m<k>`` (True/False) and
    ``m<k>|cost`` (dollars). Model k's accuracy rises with k (0.35 .. 0.85) and its price with it (x 1.5 per
    step); each model is better on some categories; harder queries defeat every model more often."""
    rng = np.random.default_rng(seed)
    ability = np.linspace(-0.6, 1.7, n_generators)
    category = rng.integers(len(CATEGORIES), size=n_queries)
    difficulty = rng.normal(0.0, 1.2, size=n_queries)
    affinity = rng.normal(0.0, 0.6, size=(n_generators, len(CATEGORIES)))
    lengths = rng.integers(8, 60, size=n_queries)
    words = _WORDS[rng.integers(len(_WORDS), size=int(lengths.sum()))]
    cuts = np.cumsum(lengths)[:-1]
    prompts = [f"Q{q} ({CATEGORIES[c]}): " + " ".join(w) + "?" for q, (c, w) in
               enumerate(zip(category, np.split(words, cuts), strict=True))]
    columns: dict[str, object] = {"id": [f"q{q}" for q in range(n_queries)],
                                  "category": [CATEGORIES[c] for c in category], "prompt": prompts}
    tokens = lengths * 1.3 + 20
    for k in range(n_generators):
        logit = ability[k] + affinity[k, category] - difficulty
        correct = rng.random(n_queries) < 1.0 / (1.0 + np.exp(-logit))
        columns[f"m{k}"] = np.where(correct, "True", "False")
        columns[f"m{k}|cost"] = np.round(tokens * 1e-7 * 1.5 ** k, 12)
    frame = pd.DataFrame(columns)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path
