"""The per-episode record files of a bench: ``episodes.parquet`` and ``episodes.csv.gz``, streamed per policy.

Each policy's records are converted to Arrow once and appended as one Parquet row group and one CSV chunk, so
the writer never holds a second copy of every record. The CSV is written by Arrow (C++, about 10x faster than
pandas' ``to_csv`` at 100k episodes x 20 policies) and gzip level 1: floats in shortest round-trip form
("1174" for 1174.0) and booleans as ``true``/``false``; ``pandas.read_csv`` reads both back to the same values.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from eval.records import RecordLayout

#: The Arrow type of each column kind (``RecordLayout.kinds``).
ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}


def record_schema(layout: RecordLayout) -> pa.Schema:
    """The Arrow schema of an episode-records table of ``layout`` (its columns in order, dollars last if priced)."""
    return pa.schema([(c, ARROW_TYPES[kind]) for c, kind in layout.kinds.items()])


def write_episode_files(frames: Iterable[pd.DataFrame], parquet_path: Path, csv_path: Path, *,
                        layout: RecordLayout) -> int:
    """Write the record frames (one per policy, the columns of ``layout``; any other column is left out) to both
    files; returns the rows written."""
    rows = 0
    schema = record_schema(layout)
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


@dataclass(frozen=True)
class EpisodePieces:
    """A folder of pieces of the episode files, one pair per (policy, chunk) of a streamed bench
    (``eval.chunked_replay``), written where each chunk is replayed and joined policy-major into the two files.

    A piece's CSV is a gzip member without the header row: the joined CSV is the header's member and the pieces'
    bytes one after another (a gzip file may hold several members; ``gzip`` and ``pandas.read_csv`` read them as
    one text, the same as ``write_episode_files``' for the same records). Picklable: Ray tasks write pieces too
    (the folder must be one every node sees, as the stored pool is)."""

    folder: Path
    layout: RecordLayout

    def write(self, policy: int, chunk: int, frame: pd.DataFrame) -> None:
        """Write the records ``frame`` of policy number ``policy`` on chunk number ``chunk``."""
        schema = record_schema(self.layout)
        table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
        stem = self.folder / f"{policy:05d}-{chunk:07d}"
        pq.write_table(table, stem.with_suffix(".parquet"))
        with gzip.open(stem.with_suffix(".csv.gz"), "wb", compresslevel=1) as raw:
            csv = pa_csv.CSVWriter(raw, schema, write_options=pa_csv.WriteOptions(include_header=False))
            csv.write_table(table)
            csv.close()

    def join(self, parquet_path: Path, csv_path: Path) -> int:
        """Write both episode files from the pieces (policy by policy, each in chunk order); returns the rows."""
        schema = record_schema(self.layout)
        rows = 0
        with pq.ParquetWriter(parquet_path, schema) as parquet, open(csv_path, "wb") as out:
            header = pa.BufferOutputStream()
            pa_csv.CSVWriter(header, schema).close()
            out.write(gzip.compress(header.getvalue().to_pybytes(), compresslevel=1))
            for stem in sorted(p.name.removesuffix(".parquet") for p in self.folder.glob("*.parquet")):
                table = pq.read_table(self.folder / f"{stem}.parquet", schema=schema)
                parquet.write_table(table)
                rows += table.num_rows
                with open(self.folder / f"{stem}.csv.gz", "rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
            if not rows:
                parquet.write_table(schema.empty_table())
        return rows
