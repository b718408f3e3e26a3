"""The Spark data source ``indexeddf`` (PySpark's Python Data Source API) and native scans.

- :class:`IndexedDataSource`: ``spark.read.format("indexeddf")`` (with ``versionAsOf`` /
  ``timestampAsOf``), ``df.write.format("indexeddf")`` and
  ``df.writeStream.format("indexeddf")``. The writers live in
  :mod:`indexeddf.writer.spark_write`.
- :class:`IndexedReader`: one input partition per bucket (split past
  ``maxPartitionBytes``); ``read()`` yields Arrow record batches. ``pushFilters``
  turns EqualTo / EqualNullSafe / In / IsNull on every column of an ACTIVE index into
  an index lookup (one task per touched index bucket, plus one scanning the files the
  index does not cover), or else prunes buckets by the table's index columns. It
  hands every filter back to Spark, so each answer equals the full scan.
- :func:`native_scan`: the snapshot's exact file list read by Spark's own Parquet
  reader (column pruning, predicate pushdown): ``IndexedTable.to_df``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
import warnings
from collections.abc import Sequence
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    In,
    InputPartition,
    IsNull,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot, load_snapshot, update_snapshot
from ..format.storage import TableStorage
from ..format.timetravel import version_at
from ..spec.actions import READABLE_STATES
from ..spec.bucketing import bucket_ids
from .cache import configure as configure_cache
from .lookup import ReadContext, run_task
from .lookup_plan import LookupTask, keys_table, plan_lookup, serving_index, usable_indexes
from ..spec.schema import Field, arrow_type, check_columns
from ..writer import spark_options as so
from ..writer import spark_write as sw

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""A read partition holds files of one bucket up to about this many bytes."""
MAX_PRUNING_KEYS = 4096
"""Bucket pruning gives up when the pushed values combine to more keys than this."""
READ_BATCH_ROWS = 65536
DEFAULT_LOOKUP_PARTITIONS = 4
"""Index lookups are spread over at most this many read tasks (``lookupPartitions``)."""
BUCKETS_PER_LOOKUP_TASK = 16
"""A lookup read task probes about this many buckets before another task is worth its
start-up (tens of ms a Spark task against a few ms a bucket probe)."""

_SPARK_TYPES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "byte": ByteType(),
    "short": ShortType(),
    "integer": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
}


# -- schema ------------------------------------------------------------------------------
def spark_type(name: str) -> DataType:
    """The Spark type of a log type name (``spec/schema.py``)."""
    if name in _SPARK_TYPES:
        return _SPARK_TYPES[name]
    t = arrow_type(name)  # raises UnsupportedTypeError for an unknown name
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    raise SchemaMismatchError(f"type {name!r} has no Spark equivalent", [])


def spark_schema(fields: Sequence[Field]) -> StructType:
    """The Spark schema of a table's log fields."""
    return StructType([StructField(f.name, spark_type(f.type), f.nullable) for f in fields])


def _check_read_schema(given: StructType, table: StructType, url: str, version: int) -> None:
    """The schema Spark reads with must be the table's (nullable where the table is)."""
    ok = len(given.fields) == len(table.fields) and all(
        g.name == t.name and g.dataType == t.dataType and (g.nullable or not t.nullable)
        for g, t in zip(given.fields, table.fields)
    )
    if not ok:
        raise SchemaMismatchError(
            f"the schema to read ({given.simpleString()}) is not the schema of {url} at version "
            f"{version} ({table.simpleString()}). The table's schema changed since the DataFrame "
            "was created, or .schema(...) was given: load the table again without .schema()."
        )


# -- options -----------------------------------------------------------------------------
def _read_options(options: Any) -> dict[str, str]:
    return so.parse_options(options, so.READ_OPTIONS, "read.format('indexeddf')")


def _time_travel(opts: dict[str, str], storage: TableStorage) -> int | None:
    version = so.int_option(opts, "versionAsOf", None, 0)
    timestamp = opts.get("timestampAsOf")
    if version is not None and timestamp:
        raise InvalidOptionError("give versionAsOf or timestampAsOf, not both")
    if timestamp:
        return version_at(storage, timestamp)
    return version


# -- the data source ---------------------------------------------------------------------
class IndexedDataSource(DataSource):
    """The ``indexeddf`` format: batch read, batch write, streaming write."""

    @classmethod
    def name(cls) -> str:
        return "indexeddf"

    def schema(self) -> StructType:
        opts = _read_options(self.options)
        storage = so.shared_storage(so.option_path(opts), so.storage_options(opts))
        snapshot = load_snapshot(storage, _time_travel(opts, storage))
        # Spark pickles this instance after schema(): a time-travel read is pinned to the
        # version resolved now (timestampAsOf is resolved once). A plain read takes the
        # newest version each time the DataFrame is planned, as long as its schema holds.
        self._version = snapshot.version if (opts.get("versionAsOf") or opts.get("timestampAsOf")) else None
        return spark_schema(snapshot.metadata.schema_)

    def reader(self, schema: StructType) -> "IndexedReader":
        opts = _read_options(self.options)
        storage = so.shared_storage(so.option_path(opts), so.storage_options(opts))
        version = getattr(self, "_version", None)
        if version is None:
            version = _time_travel(opts, storage)
        snapshot = load_snapshot(storage, version)
        _check_read_schema(schema, spark_schema(snapshot.metadata.schema_), storage.url, snapshot.version)
        max_bytes = so.int_option(opts, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, 1)
        reader = IndexedReader(snapshot, schema, max_bytes)
        reader.cache_max_bytes = so.int_option(opts, "indexeddf.cache.maxBytes", None, 0)
        reader.lookup_partitions = so.int_option(opts, "lookupPartitions", DEFAULT_LOOKUP_PARTITIONS, 1)
        return reader

    def writer(self, schema: StructType, overwrite: bool):
        return sw.batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        return sw.stream_writer(self.options, schema, overwrite)


class BucketPartition(InputPartition):
    """Files of one bucket to read in one task (paths relative to the table root)."""

    def __init__(self, bucket: int, paths: list[str], url: str, storage_options: dict[str, Any]):
        self.bucket = bucket
        self.paths = paths
        self.url = url
        self.storage_options = storage_options


class IndexedReader(DataSourceReader):
    """Reads one snapshot; picklable (Spark ships it to the tasks after ``pushFilters``)."""

    def __init__(self, snapshot: Snapshot, schema: StructType, max_partition_bytes: int):
        meta = snapshot.metadata
        self.url = snapshot.storage.url
        self.storage_options = dict(snapshot.storage.storage_options)
        self.version = snapshot.version
        self.index_columns = list(meta.indexColumns)
        self.num_buckets = meta.numBuckets
        self.column_types = {f.name: arrow_type(f.type) for f in meta.schema_}
        self.files: list[tuple[int, str, int]] | None = _file_list(snapshot)
        self.max_partition_bytes = max_partition_bytes
        self.arrow_schema = _spark_arrow_schema(schema)
        self.buckets: set[int] | None = None
        """Buckets that can hold matching rows (None: all), set by ``pushFilters``."""
        self._snapshot: Snapshot | None = snapshot
        self.lookup: list[LookupPartition] | None = None
        """Index lookup partitions when an index answers the filters (set by ``pushFilters``)."""
        self.index_used: str | None = None
        self.cache_max_bytes: int | None = None
        self.lookup_partitions = DEFAULT_LOOKUP_PARTITIONS

    def pushFilters(self, filters: list) -> Iterator:
        """Prune buckets from equality filters on the index columns; Spark keeps every filter.

        The hook where index lookups will answer filters; for now nothing is pushed, so
        Spark evaluates all filters on the rows of the remaining buckets.
        """
        try:
            keys = pruning_keys(filters, self.index_columns, self.column_types)
            if keys is not None:
                columns = [pa.array(vals, type=self.column_types[c]) for c, vals in zip(self.index_columns, keys)]
                touched = {int(b) for b in np.unique(bucket_ids(columns, self.num_buckets))}
                self.buckets = touched if self.buckets is None else self.buckets & touched
        except Exception:  # noqa: BLE001 - pruning is an optimisation; a full scan is always right
            pass
        try:
            self._plan_index_lookup(filters)
        except Exception:  # noqa: BLE001 - the bucket scan planned above is always right
            self.lookup = None
        return filters

    def _plan_index_lookup(self, filters: list) -> None:
        """Plan the read as index lookups when an ACTIVE index's columns are all fixed."""
        snapshot = self._snapshot
        if snapshot is None:
            return
        schema = pa.schema([(f.name, arrow_type(f.type)) for f in snapshot.metadata.schema_])
        latest = update_snapshot(snapshot)  # a newer state of an index may serve this version
        names = dict.fromkeys(e.name for e in usable_indexes(snapshot) + usable_indexes(latest))
        for name in names:
            entry = serving_index(snapshot, [snapshot.indexes.get(name), latest.indexes.get(name)])
            if entry is None or entry.state not in READABLE_STATES:
                continue
            keys = pruning_keys(filters, list(entry.columns), self.column_types)
            if keys is None:
                continue
            table = keys_table(list(zip(*keys)), entry.columns, schema)
            plan = plan_lookup(snapshot, entry, table, check_files=latest.version != snapshot.version)
            if plan.why_not is not None:
                continue  # too stale: bucket pruning (above) is the better plan
            # Few partitions: each Spark task costs tens of ms, a bucket probe a few.
            n = max(1, min(-(-len(plan.tasks) // BUCKETS_PER_LOOKUP_TASK), self.lookup_partitions))
            groups = [plan.tasks[i::n] for i in range(n)]
            self.lookup = [LookupPartition(ReadContext.of(snapshot, plan, g), g, self.cache_max_bytes) for g in groups if g]
            self.index_used = entry.name
            return

    def __getstate__(self) -> dict:
        # Spark pickles the reader into every read task; the file list is only needed
        # for planning, so it stays behind (partitions() reloads it if ever called on a copy).
        state = dict(self.__dict__)
        state["files"] = None
        state["_snapshot"] = None
        return state

    def partitions(self) -> list[InputPartition]:
        if self.lookup is not None:
            return list(self.lookup)
        files = self.files
        if files is None:
            files = _file_list(load_snapshot(TableStorage(self.url, self.storage_options), self.version))
        by_bucket: dict[int, list[tuple[str, int]]] = {}
        for bucket, path, size in files:
            if self.buckets is None or bucket in self.buckets:
                by_bucket.setdefault(bucket, []).append((path, size))
        parts = []
        for bucket in sorted(by_bucket):
            chunk, chunk_bytes = [], 0
            for path, size in by_bucket[bucket]:
                if chunk and chunk_bytes + size > self.max_partition_bytes:
                    parts.append(BucketPartition(bucket, chunk, self.url, self.storage_options))
                    chunk, chunk_bytes = [], 0
                chunk.append(path)
                chunk_bytes += size
            if chunk:
                parts.append(BucketPartition(bucket, chunk, self.url, self.storage_options))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, LookupPartition):
            return _read_lookup(partition, self.arrow_schema)
        if not isinstance(partition, BucketPartition):
            return iter(())  # an empty table: Spark plans one partition with no value
        return _read_files(partition, self.arrow_schema)


class LookupPartition(InputPartition):
    """Index lookup tasks run by one Spark task: bucket probes and scans of uncovered files."""

    def __init__(self, ctx: ReadContext, tasks: list[LookupTask], cache_max_bytes: int | None):
        self.ctx = ctx
        self.tasks = tasks
        self.cache_max_bytes = cache_max_bytes

    @property
    def buckets(self) -> set[int]:
        """Index buckets probed and data buckets scanned by this partition."""
        return {t.bucket for t in self.tasks if t.bucket is not None} | {a.bucket for t in self.tasks for a in t.scan_files}


def _read_lookup(partition: LookupPartition, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    if partition.cache_max_bytes is not None:
        configure_cache(partition.cache_max_bytes)
    parts = [run_task(partition.ctx, task, target.names) for task in partition.tasks]
    if not parts:
        return
    # Fetched rows are many small slices (a key's run per row group): combined, they
    # cross to the JVM as a few batches, not one tiny batch per slice.
    rows = pa.concat_tables(parts).combine_chunks()
    arrays = [rows.column(f.name) if rows.column(f.name).type == f.type else rows.column(f.name).cast(f.type) for f in target]
    yield from pa.Table.from_arrays(arrays, schema=target).to_batches(max_chunksize=READ_BATCH_ROWS)


def _file_list(snapshot: Snapshot) -> list[tuple[int, str, int]]:
    """(bucket, path, size) of the live files in file-id order (the order rows are read in)."""
    return [(a.bucket, a.path, a.size) for a in snapshot.live_files()]


def _spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects of returned batches (it checks it exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _read_files(partition: BucketPartition, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    storage = TableStorage(partition.url, partition.storage_options)
    fs = storage.arrow_filesystem()
    names = target.names
    for rel in partition.paths:
        pf = pq.ParquetFile(storage.full(rel), filesystem=fs)
        for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=names):
            arrays = []
            for f in target:
                col = batch.column(f.name)
                arrays.append(col if col.type == f.type else col.cast(f.type))
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


# -- bucket pruning ------------------------------------------------------------------------
def pruning_keys(filters: Sequence, index_columns: list[str], types: dict[str, pa.DataType]) -> list[list] | None:
    """Per index column, the key values a matching row must have; None when unknown.

    Uses EqualTo, EqualNullSafe, In and IsNull on each index column (the tightest one
    when several apply). A literal is used only when it converts to the column's Arrow
    type without any change of value; otherwise that filter is ignored.
    """
    allowed: dict[str, list] = {}
    for f in filters:
        attr = getattr(f, "attribute", None)
        if not attr or len(attr) != 1 or attr[0] not in types or attr[0] not in index_columns:
            continue
        col = attr[0]
        if isinstance(f, IsNull):
            values = [None]
        elif isinstance(f, (EqualTo, EqualNullSafe)):
            if f.value is None and isinstance(f, EqualTo):
                continue  # `col = NULL` is never true; Spark folds it anyway
            values = [f.value]
        elif isinstance(f, In):
            values = list(f.value)
        else:
            continue
        if not all(v is None or exact_literal(v, types[col]) for v in values):
            continue
        values = _dedupe(values)
        if col not in allowed or len(values) < len(allowed[col]):
            allowed[col] = values
    if any(c not in allowed for c in index_columns):
        return None
    if math.prod(len(allowed[c]) for c in index_columns) > MAX_PRUNING_KEYS:
        return None
    combos = list(itertools.product(*(allowed[c] for c in index_columns)))
    return [[combo[i] for combo in combos] for i in range(len(index_columns))]


def _dedupe(values: list) -> list:
    out, seen = [], set()
    for v in values:
        key = (type(v), v) if not (isinstance(v, float) and math.isnan(v)) else ("nan",)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def exact_literal(value: Any, t: pa.DataType) -> bool:
    """Whether ``value`` is a literal of Arrow type ``t`` that converts without change."""
    try:
        if pa.types.is_boolean(t):
            return isinstance(value, bool)
        if pa.types.is_integer(t):
            if isinstance(value, bool) or not isinstance(value, int):
                return False
            pa.scalar(value, type=t)  # raises on overflow
            return True
        if pa.types.is_floating(t):
            if not isinstance(value, float):
                return False
            if pa.types.is_float32(t) and not math.isnan(value):
                return float(np.float32(value)) == value
            return True
        if pa.types.is_decimal(t):
            if not isinstance(value, decimal.Decimal) or not value.is_finite():
                return False
            return pa.scalar(value, type=t).as_py() == value
        if pa.types.is_string(t):
            return isinstance(value, str)
        if pa.types.is_binary(t):
            return isinstance(value, (bytes, bytearray))
        if pa.types.is_date32(t):
            return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        if pa.types.is_timestamp(t):
            if not isinstance(value, dt.datetime) or (value.tzinfo is None) != (t.tz is None):
                return False
            return pa.scalar(value, type=t).as_py() == value
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError, TypeError):
        return False
    return False


# -- native scans (IndexedTable.to_df) -----------------------------------------------------
_HADOOP_SCHEMES = {"s3": "s3a", "s3a": "s3a", "gs": "gs", "gcs": "gs", "hdfs": "hdfs", "abfs": "abfs", "abfss": "abfss"}
_GLOB_CHARS = "\\*?[]{}"


def _escape_glob(path: str) -> str:
    # Spark expands glob patterns in the paths it is given; a file name is never one.
    return "".join("\\" + ch if ch in _GLOB_CHARS else ch for ch in path)


def hadoop_path(storage: TableStorage, rel: str, glob_escaped: bool = True) -> str:
    """A location Spark's (Hadoop) file readers open for a file of the table.

    Local tables give ``file://`` URIs. A remote table keeps its URL with the scheme
    Hadoop uses for that store (``s3://`` is read as ``s3a://``); stores Hadoop has no
    filesystem for (``memory://``, ``http://``, ...) raise ``InvalidOptionError``.
    ``glob_escaped``: escape glob characters (``spark.read`` expands globs in the paths
    it is given; a file index built directly does not).
    """
    esc = _escape_glob if glob_escaped else (lambda p: p)
    if storage.is_local:
        return "file://" + esc(storage.full(rel))
    scheme, sep, rest = storage.url.partition("://")
    mapped = _HADOOP_SCHEMES.get(scheme.lower()) if sep else None
    if mapped is None:
        raise InvalidOptionError(
            f"a native Spark scan needs a location Spark's Hadoop filesystems can read; {storage.url} "
            f"is not one (memory:// lives only in this Python process). Use "
            "spark.read.format('indexeddf').load(path) or to_arrow() instead, or keep the table on a "
            "local disk, HDFS, S3, GCS or Azure storage."
        )
    return f"{mapped}://{esc(rest.rstrip('/'))}/{esc(rel)}"


def native_scan(spark, snapshot: Snapshot, columns: Sequence[str] | None = None, bucketed: bool = False):
    """A Spark DataFrame over exactly the snapshot's live files (Spark's Parquet reader).

    ``bucketed``: tell Spark how the files are bucketed (:mod:`.spark_bucketed`), where
    possible (``bucketed_scan_reason`` says why not); otherwise, or when False, a plain
    scan. A JVM that cannot build the bucketed relation gives a plain scan and a warning.
    """
    from .spark_bucketed import bucketed_relation_df, bucketed_scan_reason

    schema = spark_schema(snapshot.metadata.schema_)
    check_columns(schema.names, columns)
    files = snapshot.live_files()
    df = None
    if bucketed and files and bucketed_scan_reason(snapshot) is None:
        paths = [hadoop_path(snapshot.storage, a.path, glob_escaped=False) for a in files]
        try:
            df = bucketed_relation_df(spark, snapshot, paths, schema)
        except Exception as exc:  # noqa: BLE001 - e.g. Spark Connect: a plain scan is as right
            warnings.warn(f"indexeddf: reading {snapshot.storage.url} unbucketed: Spark's JVM did not build a "
                          f"bucketed relation ({type(exc).__name__}: {str(exc)[:200]})", stacklevel=2)
    if df is None and not files:
        df = spark.createDataFrame([], schema)
    elif df is None:
        paths = [hadoop_path(snapshot.storage, a.path) for a in files]
        df = spark.read.schema(schema).parquet(*paths)
    return df if columns is None else df.select(*columns)
