"""A Spark DataFrame as a MERGE source, staged by Spark's tasks, never collected.

``IndexedTable.merge(spark_df, ...)`` gives the change engine a :class:`SparkSource`
(a :class:`~indexeddf.changes.parts.LazySource`). On a session with the JVM connector the
merge runs as Spark SQL's ``MERGE INTO`` (:meth:`SparkSource.run_merge`,
:mod:`.statements`); what a statement cannot carry (``txn``, ``storage_options``, no
connector) runs in the engine, with the source staged as follows. When the merge runs, the DataFrame's
tasks write its rows as Parquet under the table's ``data/_staging/<id>/`` (as SQL
``MERGE INTO`` stages its source), and the engine reads them back one part at a time:

- when the predicate fixes every bucketing column of the table by equality with source
  columns, the DataFrame is repartitioned by Spark's hash of those source columns cast to
  the table's types, into the table's bucket count: partition ``b`` holds exactly the
  rows of bucket ``b`` (the table's bucketing is Spark's ``pmod(hash(keys), n)``), staged
  as ``bucket=<b>-<uuid>.parquet``; the engine changes bucket ``b``'s files with part
  ``b`` alone, so this process holds one bucket's share of the source at a time;
- otherwise the tasks stage the rows as they are and the engine reads them whole.

The staged files are deleted after the merge, whatever happened.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ..changes.model import Change
from ..changes.parts import LazySource, PartedSource, SourcePart, staged_parts
from ..format.snapshot import Snapshot
from . import options as so
from .session import arrow_batches_by_rows
from .types import spark_schema
from .write_task import drop_staging, read_staged, staging_path

STAGED = "bucket int, path string, rows long"
"""What each staging task returns: its bucket (-1: not staged by bucket), file, row count."""


class SparkSource(LazySource):
    """A Spark DataFrame as a merge source, staged when the merge runs."""

    def __init__(self, df):
        self.df = df
        self.schema = so.arrow_schema_of(df.schema)
        self._staged: tuple[Any, str] | None = None  # (storage, write id)

    def stage(self, snapshot: Snapshot, change: Change, bucket_keys: list[str] | None) -> PartedSource:
        """Spark's tasks write the rows; the parts the engine reads one at a time."""
        from pyspark.sql import functions as F

        from .join import cast_key

        storage = snapshot.storage
        so.shared_storage(storage.url, storage.storage_options)  # refuses a table the workers cannot see
        write_id = uuid.uuid4().hex
        self._staged = (storage, write_id)
        df = self.df
        if bucket_keys is not None:
            tfields = {f.name: f for f in spark_schema(snapshot.metadata.schema_).fields}
            stypes = {f.name: f.dataType for f in df.schema.fields}
            keys = [cast_key(F.col(f"`{s}`"), tfields[t].dataType, stypes[s])
                    for t, s in zip(snapshot.metadata.indexColumns, bucket_keys)]
            df = df.repartition(snapshot.metadata.numBuckets, *keys)  # partition b holds exactly bucket b
        task = functools.partial(_stage_partition, storage.url, storage.storage_options, write_id, self.schema,
                                 bucket_keys is not None)
        with arrow_batches_by_rows(df.sparkSession):
            staged = df.mapInArrow(task, STAGED).collect()  # one small row per task
        if not staged and bucket_keys is None:
            # No source row: still one (empty) part, so that not_matched_by_source clauses run.
            return PartedSource(self.schema, [SourcePart(None, 0, self.schema.empty_table)])
        return staged_parts(self.schema, [(r.bucket, r.path, r.rows) for r in staged],
                            functools.partial(read_staged, storage, schema=self.schema))

    def run_merge(self, snapshot: Snapshot, predicate: str, clauses: list, source_alias: str, target_alias: str,
                  txn: tuple[str, int] | None, schema_mode: str | None) -> dict | None:
        """The MERGE as Spark SQL's ``MERGE INTO`` when the session can run it
        (:func:`.statements.runs_through_spark`): its metrics; else None, and the engine
        stages this DataFrame and runs it."""
        from . import statements

        if not statements.runs_through_spark(self.df.sparkSession, snapshot):
            return None
        return statements.merge(snapshot, self.df, predicate, clauses, source_alias, target_alias, schema_mode, txn)

    def drop(self) -> None:
        """Delete the staged files (those of task attempts Spark dropped too)."""
        if self._staged is None:
            return
        storage, write_id = self._staged
        self._staged = None
        drop_staging(storage, write_id)


def _stage_partition(url: str, storage_options: dict, write_id: str, schema: pa.Schema, by_bucket: bool,
                     batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a task: this partition's rows as one Parquet file, written batch by batch."""
    from pyspark import TaskContext

    bucket = TaskContext.get().partitionId() if by_bucket else -1
    storage = so.shared_storage(url, storage_options)
    rel = staging_path(write_id, f"bucket={bucket}-{uuid.uuid4().hex}.parquet")
    rows = 0
    writer = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if writer is None:
                storage.fs.makedirs(storage.full(staging_path(write_id)), exist_ok=True)
                writer = pq.ParquetWriter(storage.full(rel), schema, filesystem=storage.arrow_filesystem())
            writer.write_batch(pa.Table.from_batches([batch]).cast(schema).to_batches()[0]
                               if batch.schema != schema else batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    if rows:
        yield pa.RecordBatch.from_pydict({"bucket": [bucket], "path": [rel], "rows": [rows]},
                                         schema=pa.schema([("bucket", pa.int32()), ("path", pa.string()),
                                                           ("rows", pa.int64())]))
