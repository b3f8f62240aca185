"""The per-episode record files of a bench: ``episodes.parquet`` and ``episodes.csv.gz``, streamed per policy.

Each policy's records are converted to Arrow once and appended as one Parquet row group and one CSV chunk, so
the writer never holds a second copy of every record. The CSV is written by Arrow (C++, about 10x faster than
pandas' ``to_csv`` at 100k episodes x 20 policies) and gzip level 1: floats in shortest round-trip form
("1174" for 1174.0) and booleans as ``true``/``false``; ``pandas.read_csv`` reads both back to the same values.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from eval.runner import RECORD_COLUMNS

_TYPES = {"episode_id": pa.int64(), "n_actions": pa.int64(), "n_samples": pa.int64(), "n_v1": pa.int64(),
          "n_v2": pa.int64(), "n_v3": pa.int64(), "selected_candidate": pa.int64(), "correct": pa.bool_(),
          "tokens": pa.float64(), "p_tokens": pa.float64(), "calls": pa.float64(), "latency": pa.float64(),
          "reward": pa.float64(), "oracle_available": pa.bool_()}
#: The Arrow schema of an episode-records table (``eval.runner.RECORD_COLUMNS``; the other columns are text).
RECORD_SCHEMA = pa.schema([(c, _TYPES.get(c, pa.string())) for c in RECORD_COLUMNS])


#: The same with the dollar cost of a priced pool (``pools.prices``) last.
PRICED_RECORD_SCHEMA = RECORD_SCHEMA.append(pa.field("usd", pa.float64()))


def write_episode_files(frames: Iterable[pd.DataFrame], parquet_path: Path, csv_path: Path, *,
                        usd: bool = False) -> int:
    """Write the record frames (one per policy, ``RECORD_COLUMNS``, and ``usd`` when ``usd``) to both files;
    returns the rows written."""
    rows = 0
    schema = PRICED_RECORD_SCHEMA if usd else RECORD_SCHEMA
    with pq.ParquetWriter(parquet_path, schema) as parquet, \
            gzip.open(csv_path, "wb", compresslevel=1) as raw:
        csv = pa_csv.CSVWriter(raw, schema)
        for frame in frames:
            if not len(frame):
                continue
            table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
            parquet.write_table(table)
            csv.write_table(table)
            rows += len(frame)
        if not rows:  # the header row still names every column
            empty = schema.empty_table()
            parquet.write_table(empty)
        csv.close()
    return rows
