"""Compare two ``coba bench`` output folders: every number in results.json (timings aside) and episodes.parquet.

Usage: python scripts/compare_bench.py BEFORE_DIR AFTER_DIR
Prints each differing JSON path (exact comparison, NaN equal to NaN) and exits 1 if any differs.
Keys named like timings (``timings``, ``*_s``, ``elapsed``, ``seconds``, ``created``) and ``files`` (output paths)
are skipped.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

SKIP = ("timing", "elapsed", "seconds", "created", "wall", "duration")
#: Output paths (the two runs write to different folders).
SKIP_KEYS = ("files",)


def skipped(key: str) -> bool:
    """Whether a JSON key names a timing (not compared)."""
    k = key.lower()
    return k in SKIP_KEYS or k.endswith("_s") or any(s in k for s in SKIP)


def diff(a, b, path: str = "") -> list[str]:
    """Paths where the JSON values ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if skipped(key):
                continue
            if key not in a or key not in b:
                out.append(f"{path}/{key}: only in {'after' if key not in a else 'before'}")
            else:
                out += diff(a[key], b[key], f"{path}/{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main() -> int:
    """Compare the two folders named on the command line."""
    before, after = (Path(p) for p in sys.argv[1:3])
    a = json.loads((before / "results.json").read_text())
    b = json.loads((after / "results.json").read_text())
    diffs = diff(a, b)
    n_numbers = sum(1 for _ in _numbers(a))
    ea, eb = pd.read_parquet(before / "episodes.parquet"), pd.read_parquet(after / "episodes.parquet")
    cols = [c for c in ea.columns if not skipped(c)]
    same_episodes = ea.shape == eb.shape and ea[cols].equals(eb[cols])
    for d in diffs[:50]:
        print(d)
    print(f"results.json: {n_numbers} numbers compared, {len(diffs)} differences; "
          f"episodes.parquet {ea.shape}: {'identical' if same_episodes else 'DIFFERENT'}")
    return 0 if not diffs and same_episodes else 1


def _numbers(x, key: str = ""):
    if isinstance(x, dict):
        for k, v in x.items():
            if not skipped(k):
                yield from _numbers(v, k)
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v, key)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield x


if __name__ == "__main__":
    sys.exit(main())
