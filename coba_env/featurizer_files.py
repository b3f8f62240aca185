"""A fitted featurizer's files (``featurizer.json`` + ``featurizer.npz``): saving it, and reading it back with every
field checked.

A damaged or foreign file is one ``ValueError`` naming the file and the field; the arrays are read with
``allow_pickle=False``, so a file can hold numbers and strings only, never code.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from coba_env.featurizers import ARRAYS_FILE, JSON_FILE, NUMERIC, SOURCES, Featurizer, TextPart
from pools.atomic_write import atomic_write, atomic_write_text
from pools.parse_boundary import PARSE_ERRORS, parse_problem


def _fail(where: Path, key: str, got: Any, expected: str) -> ValueError:
    return ValueError(f"{where}: field {key!r} is {str(got)[:60]}; expected {expected}")


def _config(where: Path) -> dict[str, Any]:
    if not where.is_file():
        raise ValueError(f"{where}: missing; the checkpoint was saved without its featurizer")
    try:
        data = json.loads(where.read_bytes())
    except PARSE_ERRORS as exc:
        raise ValueError(f"{where}: not valid JSON ({parse_problem(exc)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def _categories(where: Path, value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                              for v in value.values()):
        raise _fail(where, "categories", value, "an object of field -> list of values")
    return {str(k): list(v) for k, v in value.items()}


def _scales(where: Path, value: Any, meta: bool) -> dict[str, tuple[float, float]]:
    if not meta:
        return {}
    ok = isinstance(value, dict) and all(
        isinstance(value.get(n), list) and len(value[n]) == 2
        and all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value[n])
        and value[n][1] > 0 for n, _ in NUMERIC)
    if not ok:
        raise _fail(where, "scales", value, f"[mean, scale > 0] for each of {[n for n, _ in NUMERIC]}")
    return {n: (float(value[n][0]), float(value[n][1])) for n, _ in NUMERIC}


def _text(where: Path) -> TextPart:
    try:
        with np.load(where, allow_pickle=False) as arrays:
            vocabulary, idf, components = (arrays[k] for k in ("vocabulary", "idf", "components"))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{where}: not a featurizer arrays file with vocabulary, idf and components "
                         f"({type(exc).__name__})") from None
    v = len(vocabulary)
    if vocabulary.ndim != 1 or vocabulary.dtype.kind != "U" or v == 0:
        raise ValueError(f"{where}: field 'vocabulary': expected a non-empty list of terms")
    if idf.shape != (v,) or not np.all(np.isfinite(idf)):
        raise ValueError(f"{where}: field 'idf': expected {v} finite numbers (one per term)")
    if components.ndim != 2 or components.shape[1] != v or not np.all(np.isfinite(components)):
        raise ValueError(f"{where}: field 'components': expected a finite [k, {v}] matrix")
    return TextPart(vocabulary=[str(w) for w in vocabulary], idf=idf.astype(np.float64),
                    components=components.astype(np.float64))


def read_featurizer(directory: Path) -> Featurizer:
    """The featurizer saved in ``directory`` (``save_featurizer``), every field checked."""
    where = directory / JSON_FILE
    data = _config(where)
    sources = data.get("sources")
    if not (isinstance(sources, list) and sources and all(s in SOURCES for s in sources)
            and len(set(sources)) == len(sources)):
        raise _fail(where, "sources", sources, f"a list of distinct names from {list(SOURCES)}")
    dim = data.get("embedding_dim")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0 or (dim > 0) != ("embeddings" in sources):
        raise _fail(where, "embedding_dim", dim, "an integer > 0 with the embeddings source, else 0")
    text = _text(directory / ARRAYS_FILE) if "text" in sources else None
    featurizer = Featurizer(tuple(s for s in SOURCES if s in sources), _categories(where, data.get("categories", {})),
                            _scales(where, data.get("scales"), "meta" in sources), text, dim)
    if data.get("names") != list(featurizer.names):
        raise _fail(where, "names", data.get("names"), f"the {len(featurizer.names)} names its settings give")
    return featurizer


def save_featurizer(featurizer: Featurizer, directory: str | Path) -> None:
    """Write ``featurizer.json`` and ``featurizer.npz`` into ``directory`` (each through a temp file + rename)."""
    out = Path(directory)
    config = {"sources": list(featurizer.sources), "categories": featurizer.categories,
              "scales": {k: list(v) for k, v in featurizer.scales.items()}, "embedding_dim": featurizer.embedding_dim,
              "names": list(featurizer.names)}
    arrays: dict[str, np.ndarray] = {}
    if featurizer.text is not None:
        arrays = {"vocabulary": np.array(featurizer.text.vocabulary, dtype=str), "idf": featurizer.text.idf,
                  "components": featurizer.text.components}

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    atomic_write(out / ARRAYS_FILE, write)
    atomic_write_text(out / JSON_FILE, json.dumps(config, indent=2, allow_nan=False))


def has_featurizer(directory: str | Path) -> bool:
    """Whether ``directory`` holds a saved featurizer."""
    return (Path(directory) / JSON_FILE).is_file()


def load_featurizer(directory: str | Path) -> Featurizer:
    """The featurizer saved in ``directory``; a ValueError naming the file and field when it is damaged."""
    return read_featurizer(Path(directory))
