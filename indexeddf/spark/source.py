"""The Python fallback of the Spark data source ``indexeddf`` (PySpark's Python Data
Source API): batch reads with time travel, batch writes and streaming writes.

- :class:`IndexedDataSource`: ``spark.read.format("indexeddf")`` (with ``versionAsOf`` /
  ``timestampAsOf``), ``df.write.format("indexeddf")`` and
  ``df.writeStream.format("indexeddf")``. The writers live in
  :mod:`indexeddf.spark.write`.
- :class:`IndexedReader`: one input partition per bucket (split past
  ``maxPartitionBytes``); ``read()`` yields Arrow record batches.

Why this source plans no filter: Spark 4.3 keeps ONE read plan (the reader and its
partitions) per loaded relation, replaced by each filter pushdown and used by every
scan of that relation executed later, whatever its own filters. A plan narrowed to
one query's keys answered the next query on the same DataFrame (and the other side
of a union or self-join) with the wrong rows. So every scan reads every live file of
the version the DataFrame was loaded at, and Spark applies all filters. Index lookups
from Spark need the JVM connector; ``IndexedTable.lookup`` and ``IndexedTable.join``
use the indexes without it.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot, load_snapshot
from ..format.storage import TableStorage
from ..spec import change_data
from . import options as so

# Each statement's writer, the OPTIMIZE stages and the file reader load where they are used:
# Spark's driver-side Python workers import this module to load the source's classes, and
# start cold after an idle minute, so a MERGE's planning loads no maintenance or read code.

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""A read partition holds files of one bucket up to about this many bytes."""
READ_BATCH_ROWS = 65536


def _check_read_schema(given: StructType, table: StructType, url: str, version: int) -> None:
    """The schema Spark reads with must be the table's (nullable where the table is)."""
    ok = len(given.fields) == len(table.fields) and all(
        g.name == t.name and g.dataType == t.dataType and (g.nullable or not t.nullable)
        for g, t in zip(given.fields, table.fields)
    )
    if not ok:
        raise SchemaMismatchError(
            f"the schema to read ({given.simpleString()}) is not the schema of {url} at version "
            f"{version} ({table.simpleString()}): .schema(...) may only repeat the table's schema; "
            "load the table without .schema()."
        )


# -- options -----------------------------------------------------------------------------
def _read_options(options: Any) -> dict[str, str]:
    for key in dict(options or {}):
        if key.lower() in (change_data.READ_OPTION.lower(), change_data.READ_OPTION_ALIAS.lower()):
            raise InvalidOptionError(
                f"option {key!r}: the change data feed is read by the JVM connector, not by this Python "
                "fallback: start the session with indexeddf.configure(builder) (a JDK and the connector's jar) "
                "and read with spark.read.format('indexeddf')")
    return so.parse_options(options, so.READ_OPTIONS, "read.format('indexeddf')")


def _time_travel(opts: dict[str, str], storage: TableStorage) -> int | None:
    version = so.int_option(opts, "versionAsOf", None, 0)
    timestamp = opts.get("timestampAsOf")
    if version is not None and timestamp:
        raise InvalidOptionError("give versionAsOf or timestampAsOf, not both")
    if timestamp:
        from ..format.timetravel import version_at

        return version_at(storage, timestamp)
    return version


# -- the data source ---------------------------------------------------------------------
class IndexedDataSource(DataSource):
    """The ``indexeddf`` format: batch read, batch write, streaming write."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``indexeddf``."""
        return "indexeddf"

    def schema(self) -> StructType:
        """The table's Spark schema at the version this DataFrame reads (resolved now); an
        ``OPTIMIZE``'s rewrite stage (:mod:`indexeddf.spark.optimize_statement`): its rows'."""
        from . import optimize_statement as ost
        from .types import spark_schema

        if ost.is_rewrite(self.options):
            return ost.REWRITE_SCHEMA
        opts = _read_options(self.options)
        storage = so.shared_storage(so.option_path(opts), so.storage_options(opts))
        snapshot = load_snapshot(storage, _time_travel(opts, storage))
        # Spark pickles this instance after schema(): the DataFrame reads the version
        # resolved now (the newest, or the time-travel one) in every query. Spark 4.3
        # keeps a relation's first read plan anyway; resolving it here makes which
        # version that is plain (docs/spark.md).
        self._version = snapshot.version
        return spark_schema(snapshot.metadata.schema_)

    def reader(self, schema: StructType) -> "IndexedReader":
        """A reader of the version :meth:`schema` resolved (or of an ``OPTIMIZE``'s rewrite stage)."""
        from . import optimize_statement as ost
        from .types import spark_schema

        if ost.is_rewrite(self.options):
            return ost.rewrite_reader(self.options)
        opts = _read_options(self.options)
        storage = so.shared_storage(so.option_path(opts), so.storage_options(opts))
        version = getattr(self, "_version", None)
        if version is None:
            version = _time_travel(opts, storage)
        snapshot = load_snapshot(storage, version)
        _check_read_schema(schema, spark_schema(snapshot.metadata.schema_), storage.url, snapshot.version)
        max_bytes = so.int_option(opts, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, 1)
        return IndexedReader(snapshot, schema, max_bytes)

    def writer(self, schema: StructType, overwrite: bool):
        """The batch writer (:mod:`indexeddf.spark.write`), or a change statement's
        (:mod:`indexeddf.spark.change`: Spark SQL's MERGE INTO), or the outcome of a DELETE or
        UPDATE that Spark planned (:mod:`indexeddf.spark.apply`), or a maintenance statement's
        (:mod:`indexeddf.spark.operation`: OPTIMIZE, VACUUM, RESTORE)."""
        from . import change as sc

        if sc.is_change(self.options):  # first: the others' modules need not load for it
            return sc.change_writer(self.options, schema)
        from . import apply as sa
        from . import operation as sop
        from . import write as sw

        if sop.is_operation(self.options):
            return sop.operation_writer(self.options)
        if sa.is_apply(self.options):
            return sa.apply_writer(self.options, schema)
        return sw.batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        """The exactly-once streaming sink (:mod:`indexeddf.spark.write`)."""
        from . import write as sw

        return sw.stream_writer(self.options, schema, overwrite)

    def streamReader(self, schema: StructType):
        """Refused: a table is read as a stream by the JVM connector (Delta's streaming source,
        ``io.indexeddf.spark.IndexedDFSource``), not by this Python source."""
        raise InvalidOptionError(
            "streaming reads of an indexeddf table are the JVM connector's: use "
            "spark.readStream.format('indexeddf').load(path) in a session with the connector "
            "(indexeddf.configure(builder) or indexeddf.local_session(), docs/spark.md)")


class PythonNamedDataSource(IndexedDataSource):
    """The same source under the name ``indexeddf_python``: next to the JVM connector (which
    owns ``indexeddf`` and writes through this one), and for explicit use."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``indexeddf_python``."""
        return "indexeddf_python"


class BucketPartition(InputPartition):
    """Files of one bucket to read in one task (paths relative to the table root), the
    deletion vectors of those that have one and, in a partitioned table, each file's
    partition values (by path)."""

    def __init__(self, bucket: int, paths: list[str], url: str, storage_options: dict[str, Any],
                 deletion_vectors: dict | None = None, partitions: dict | None = None):
        self.bucket = bucket
        self.paths = paths
        self.url = url
        self.storage_options = storage_options
        self.deletion_vectors = deletion_vectors or {}
        self.partitions = partitions or {}


class IndexedReader(DataSourceReader):
    """Reads every live file of one snapshot; picklable (Spark ships it to the tasks).

    It has no ``pushFilters`` (the module docstring says why): Spark applies every
    filter, and the partitions depend only on the version read.
    """

    def __init__(self, snapshot: Snapshot, schema: StructType, max_partition_bytes: int):
        from ..spec.column_mapping import table_schema, with_mapping

        self.url = snapshot.storage.url
        self.storage_options = dict(snapshot.storage.storage_options)
        self.version = snapshot.version
        self.files: list[tuple[int, str, int, Any]] | None = _file_list(snapshot)
        self.partition_values = {a.path: a.partitionValues for a in snapshot.files.values() if a.partitionValues}
        self.max_partition_bytes = max_partition_bytes
        # Spark's types, with the physical names files use in a column-mapped table.
        self.arrow_schema = with_mapping(_spark_arrow_schema(schema), table_schema(snapshot.metadata))

    def __getstate__(self) -> dict:
        # Spark pickles the reader into every read task; the file list is only needed
        # for planning, so it stays behind (partitions() reloads it if ever called on a copy).
        state = dict(self.__dict__)
        state["files"] = None
        state["partition_values"] = None
        return state

    def partitions(self) -> list[InputPartition]:
        """One partition per bucket (split past ``maxPartitionBytes``), in bucket order."""
        files = self.files
        if files is None:
            snapshot = load_snapshot(TableStorage(self.url, self.storage_options), self.version)
            files = _file_list(snapshot)
            self.partition_values = {a.path: a.partitionValues for a in snapshot.files.values() if a.partitionValues}
        by_bucket: dict[int, list[tuple[str, int]]] = {}
        dvs = {path: dv for _, path, _, dv in files if dv is not None}
        for bucket, path, size, _ in files:
            by_bucket.setdefault(bucket, []).append((path, size))
        parts = []
        for bucket in sorted(by_bucket):
            chunk, chunk_bytes = [], 0
            for path, size in by_bucket[bucket]:
                if chunk and chunk_bytes + size > self.max_partition_bytes:
                    parts.append(self._partition(bucket, chunk, dvs))
                    chunk, chunk_bytes = [], 0
                chunk.append(path)
                chunk_bytes += size
            if chunk:
                parts.append(self._partition(bucket, chunk, dvs))
        return parts

    def _partition(self, bucket: int, paths: list[str], dvs: dict) -> BucketPartition:
        """The partition of ``paths``, with the deletion vectors of those that have one."""
        own = {p: dvs[p] for p in paths if p in dvs}
        values = {p: self.partition_values[p] for p in paths if p in self.partition_values}
        return BucketPartition(bucket, paths, self.url, self.storage_options, own, values)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one partition's files, as Arrow batches of Spark's schema."""
        if not isinstance(partition, BucketPartition):
            return iter(())  # an empty table: Spark plans one partition with no value
        return _read_files(partition, self.arrow_schema, self.version)


def _file_list(snapshot: Snapshot) -> list[tuple[int, str, int, Any]]:
    """(bucket, path, size, deletion vector or None) of the live files in write order (the
    order rows are read in); bucket -1 for files another Delta writer added (they have none)."""
    return [(-1 if a.bucket is None else a.bucket, a.path, a.size, a.deletionVector) for a in snapshot.live_files()]


def _spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects of returned batches (it checks it exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _row_counts(pf) -> Iterator[int]:
    """The row count of each of a file's batches, when no stored column is read."""
    total = pf.metadata.num_rows
    for start in range(0, total, READ_BATCH_ROWS):
        yield min(READ_BATCH_ROWS, total - start)


def _read_files(partition: BucketPartition, target: pa.Schema, version: int) -> Iterator[pa.RecordBatch]:
    """The live rows of a partition's files, batch by batch, typed as ``target``."""
    from ..format.datafiles import conform, file_columns, open_parquet
    from ..format.deletion_vectors import keep_mask, read_deletion_vector

    storage = TableStorage(partition.url, partition.storage_options)
    for rel in partition.paths:
        pf = open_parquet(storage, rel, version)
        dv = partition.deletion_vectors.get(rel)
        keep = None if dv is None else keep_mask(pf.metadata.num_rows, read_deletion_vector(storage, dv))
        start = 0  # the file's row ordinal of the batch's first row: the mask is by ordinal
        values = partition.partitions.get(rel)
        stored = [c for c in file_columns(pf, target.names, target) if not values or c not in values]
        if not stored:  # only partition columns asked: the rows' count is what matters
            batches = (pa.record_batch([pa.nulls(n, pa.null())], names=["_"]) for n in _row_counts(pf))
        else:
            batches = pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=stored)
        for batch in batches:
            rows = conform(batch, target, partition=values)
            if keep is not None:
                rows = rows.filter(pa.array(keep[start:start + batch.num_rows]))
                start += batch.num_rows
            yield rows
