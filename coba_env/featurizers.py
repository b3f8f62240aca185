"""Problem featurizers: fitted on training items only, they map a problem table to a float vector per item.

Three sources, combinable (``SOURCES``; ``fit_featurizer(problems, "meta,text")``):

- ``meta``: what the pool holds about the item: one-hot of each categorical field (``coba_env.problems
  .CATEGORY_FIELDS``: dataset, level, subject, task, category) over the values seen in training, with an
  ``unknown`` bucket for a missing or unseen value (a field no training item has is left out), and the log of
  its prompt tokens and of its length in characters, standardized by the training items' mean and deviation.
- ``text``: scikit-learn TF-IDF (word 1-2 grams, sublinear tf, a term kept when it occurs in ``TEXT_MIN_DF``
  training problems or more) then TruncatedSVD to ``TEXT_DIMS`` dimensions (fewer when the training vocabulary
  is smaller), L2-normalized; vocabulary, idf and components come from the training problems alone, so a word
  that only a held-out problem holds has no column (``tests/test_problem_features.py`` checks it).
- ``embeddings``: the user's own vectors (the pool's embeddings table, ``pools.embeddings``), as they are.

A fitted featurizer is data: ``coba_env.featurizer_files.save_featurizer`` writes ``featurizer.json`` (settings, categories, scales, names)
and ``featurizer.npz`` (vocabulary, idf, SVD components; no pickle), ``load_featurizer`` reads them back and
transforms bit for bit as the fitted one. The problem table carries no gold answer or label
(``coba_env.problems``), so no label can reach a feature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from coba_env.problems import CATEGORY_FIELDS

#: The feature sources a featurizer combines, in this order.
SOURCES: tuple[str, ...] = ("meta", "text", "embeddings")
#: Text features: SVD dimensions, the least number of training problems a term must occur in, vocabulary cap.
TEXT_DIMS = 32
TEXT_MIN_DF = 2
TEXT_MAX_FEATURES = 20_000
#: Most one-hot values kept per categorical field (the most frequent in training; the rest fall in ``unknown``).
MAX_CATEGORIES = 64
#: The numeric meta features: (name, problem table column).
NUMERIC = (("log_prompt_tokens", "prompt_tokens"), ("log_problem_chars", "problem_chars"))
JSON_FILE, ARRAYS_FILE = "featurizer.json", "featurizer.npz"
_TOKENS = r"(?u)\b\w\w+\b"


def parse_sources(spec: Any) -> tuple[str, ...]:
    """``"meta,text"`` (or a sequence of names) -> the sources in ``SOURCES`` order; a ValueError naming an unknown
    or repeated one."""
    names = [p.strip() for p in spec.split(",")] if isinstance(spec, str) else [str(p) for p in spec]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in SOURCES]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"problem features {spec!r}: expected distinct names from {list(SOURCES)} separated by "
                         "commas")
    return tuple(s for s in SOURCES if s in names)


@dataclass
class TextPart:
    """The fitted text features: TF-IDF vocabulary and idf, SVD components [k, V]."""

    vocabulary: list[str]
    idf: np.ndarray
    components: np.ndarray
    _counter: Any = field(default=None, repr=False)

    def transform(self, texts: list[str]) -> np.ndarray:
        """[n, k] L2-normalized SVD coordinates of the TF-IDF (sublinear tf, L2-normalized) of ``texts``."""
        from sklearn.feature_extraction.text import CountVectorizer

        if self._counter is None:
            self._counter = CountVectorizer(vocabulary={w: i for i, w in enumerate(self.vocabulary)},
                                            ngram_range=(1, 2), token_pattern=_TOKENS, dtype=np.float64)
        counts = self._counter.transform(texts).tocsr()
        counts.data = (1.0 + np.log(counts.data)) * self.idf[counts.indices]
        norms = np.sqrt(np.asarray(counts.multiply(counts).sum(axis=1)).ravel())
        coords = np.asarray(counts @ self.components.T) / np.maximum(norms, 1e-12)[:, None]
        return coords / np.maximum(np.linalg.norm(coords, axis=1), 1e-12)[:, None]


def fit_text(texts: list[str], seed: int, dims: int = TEXT_DIMS) -> TextPart:
    """TF-IDF + TruncatedSVD fitted on the training ``texts`` only."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), token_pattern=_TOKENS, sublinear_tf=True,
                                 min_df=min(TEXT_MIN_DF, len(texts)), max_features=TEXT_MAX_FEATURES)
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # no term in any training problem
        raise ValueError("text features: the training problems hold no word of two or more letters") from None
    vocabulary = [str(w) for w in vectorizer.get_feature_names_out()]
    k = max(1, min(dims, len(vocabulary) - 1, matrix.shape[0] - 1))
    svd = TruncatedSVD(n_components=k, random_state=seed).fit(matrix) if len(vocabulary) > 1 else None
    components = svd.components_ if svd is not None else np.ones((1, len(vocabulary)))
    return TextPart(vocabulary=vocabulary, idf=np.asarray(vectorizer.idf_, dtype=np.float64),
                    components=np.asarray(components, dtype=np.float64))


class Featurizer:
    """A fitted problem featurizer: ``names``, ``meanings`` and ``transform(problem table) -> float32 [n, D]``."""

    def __init__(self, sources: tuple[str, ...], categories: dict[str, list[str]],
                 scales: dict[str, tuple[float, float]], text: TextPart | None, embedding_dim: int) -> None:
        self.sources, self.categories, self.scales = sources, categories, scales
        self.text, self.embedding_dim = text, embedding_dim
        names: list[tuple[str, str]] = []
        if "meta" in sources:
            for name, values in categories.items():
                names += [(f"{name}={v}", f"1 if the problem's {name} is {v!r}") for v in values]
                names.append((f"{name}=unknown", f"1 if the problem's {name} is missing or not seen in training"))
            names += [(n, f"log(1 + {c}), standardized over the training problems") for n, c in NUMERIC]
        if text is not None:
            names += [(f"text_svd_{i}", f"text: TF-IDF SVD coordinate {i} (fitted on training problems)")
                      for i in range(len(text.components))]
        names += [(f"embedding_{i}", f"the pool's embedding, coordinate {i}") for i in range(embedding_dim)]
        self.names = tuple(n for n, _ in names)
        self.meanings = tuple(m for _, m in names)

    def transform(self, problems: pd.DataFrame) -> np.ndarray:
        """The features of every row of the problem table ``problems`` (float32 [n, D])."""
        parts: list[np.ndarray] = []
        n = len(problems)
        if "meta" in self.sources:
            for name, values in self.categories.items():
                index = {v: i for i, v in enumerate(values)}
                column = problems[name].tolist() if name in problems else [None] * n
                at = np.array([index.get(v, len(values)) if isinstance(v, str) else len(values) for v in column],
                              dtype=np.int64)
                parts.append(np.eye(len(values) + 1)[at])
            for name, column in NUMERIC:
                mean, scale = self.scales[name]
                raw = np.log1p(np.maximum(problems[column].to_numpy(dtype=np.float64), 0.0))
                parts.append(((raw - mean) / scale)[:, None])
        if self.text is not None:
            parts.append(self.text.transform(problems["problem"].fillna("").astype(str).tolist()))
        if self.embedding_dim:
            parts.append(embedding_matrix(problems, self.embedding_dim))
        return np.concatenate(parts, axis=1).astype(np.float32) if parts else np.zeros((n, 0), np.float32)


def embedding_matrix(problems: pd.DataFrame, dim: int | None = None) -> np.ndarray:
    """The problem table's ``embedding`` column as [n, d]; a ValueError when the pool has none or an item lacks one."""
    if "embedding" not in problems:
        raise ValueError("embeddings: the pool has no embeddings table (add one: coba pools embed POOL FILE)")
    rows = problems["embedding"].tolist()
    for i, row in enumerate(rows):
        if row is None or (dim is not None and len(row) != dim):
            raise ValueError(f"embeddings: item {problems['dataset'].iloc[i]}/{problems['item_id'].iloc[i]} has "
                             f"{'no embedding' if row is None else f'{len(row)} dimensions'}; expected {dim}")
    return np.asarray(np.stack([np.asarray(r, dtype=np.float64) for r in rows]) if rows else np.zeros((0, dim or 0)))


def fit_featurizer(problems: pd.DataFrame, sources: Any, *, seed: int = 0, text_dims: int = TEXT_DIMS) -> Featurizer:
    """A featurizer of ``sources`` fitted on the training problems ``problems`` (a problem table) only."""
    chosen = parse_sources(sources)
    if not len(problems):
        raise ValueError("problem features: no training problems to fit on")
    categories: dict[str, list[str]] = {}
    scales: dict[str, tuple[float, float]] = {}
    if "meta" in chosen:
        for name in CATEGORY_FIELDS:
            seen = pd.Series([v for v in problems[name].tolist() if isinstance(v, str)], dtype=object)
            if len(seen):  # the most frequent values (ties by value), listed in sorted order
                ranked = sorted(seen.value_counts().items(), key=lambda kv: (-kv[1], kv[0]))
                categories[name] = sorted(str(v) for v, _ in ranked[:MAX_CATEGORIES])
        for name, column in NUMERIC:
            raw = np.log1p(np.maximum(problems[column].to_numpy(dtype=np.float64), 0.0))
            std = float(raw.std())
            scales[name] = (float(raw.mean()), std if std > 0 else 1.0)
    text = fit_text(problems["problem"].fillna("").astype(str).tolist(), seed, text_dims) if "text" in chosen else None
    dim = embedding_matrix(problems).shape[1] if "embeddings" in chosen else 0
    return Featurizer(chosen, categories, scales, text, dim)
