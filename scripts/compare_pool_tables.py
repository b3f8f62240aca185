"""Compare two pool folders table by table without loading either whole: file bytes, then rows in batches.

    python scripts/compare_pool_tables.py POOL_A POOL_B

For each table prints whether the Parquet files are byte-identical, and whether the rows are equal (read in
batches of ``--batch-rows`` from both files, whatever their row groups); then whether manifest.json is equal.
Exit status 0 when every table's rows and the manifest are equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pools.schema import TABLES


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 16 MB pieces."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while piece := f.read(1 << 24):
            h.update(piece)
    return h.hexdigest()


def batches(path: Path, rows: int) -> Iterator[pa.Table]:
    """The file's rows as tables of exactly ``rows`` rows (the last may be shorter), whatever its row groups."""
    pending: list[pa.Table] = []
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=rows):
        pending.append(pa.Table.from_batches([batch]))
        n += batch.num_rows
        while n >= rows:
            whole = pa.concat_tables(pending)
            yield whole.slice(0, rows)
            rest = whole.slice(rows)
            pending, n = [rest], rest.num_rows
    if n:
        yield pa.concat_tables(pending)


def same_rows(a: Path, b: Path, rows: int) -> tuple[bool, int]:
    """Whether the two files hold equal rows (schemas and values, NaN equal to NaN), and the rows compared."""
    if pq.ParquetFile(a).schema_arrow != pq.ParquetFile(b).schema_arrow:
        return False, 0
    seen = 0
    left, right = batches(a, rows), batches(b, rows)
    for x in left:
        y = next(right, None)
        if y is None or not x.equals(y):
            return False, seen
        seen += x.num_rows
    return next(right, None) is None, seen


def main() -> int:
    """Compare the two pools and print one line per table and one for the manifest."""
    parser = argparse.ArgumentParser(description="Compare two pool folders table by table, in batches.")
    parser.add_argument("a", type=Path, help="first pool folder")
    parser.add_argument("b", type=Path, help="second pool folder")
    parser.add_argument("--batch-rows", type=int, default=1 << 20, help="rows per compared batch (default: 1048576)")
    args = parser.parse_args()
    ok = True
    for name in TABLES:
        fa, fb = args.a / f"{name}.parquet", args.b / f"{name}.parquet"
        identical = file_digest(fa) == file_digest(fb)
        equal, seen = same_rows(fa, fb, args.batch_rows)
        ok &= equal
        print(f"{name:14s} bytes {'identical' if identical else 'DIFFER'}; rows {'equal' if equal else 'DIFFER'} "
              f"({seen} rows compared)")
    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (args.a, args.b))
    ok &= ma == mb
    print(f"manifest.json  {'equal' if ma == mb else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
