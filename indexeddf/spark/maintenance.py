"""Index builds as Spark jobs: ``create_index`` and ``refresh`` with ``spark=``.

The driver plans and commits once, through the same index lifecycle as the single-process
path (``writer/lifecycle.py``); only the work between the two commits (reading keys,
hashing, sorting, writing index files) runs on the executors, in one Spark job:

1. read: where Spark's own Parquet reader reads what the project's reader reads
   (``split_reads``), Spark scans the index columns with each row's ordinal in its file and
   computes the bucket and key hash with its own ``hash()``; the other files (deletion
   vectors, column mapping, an index on a partition column, ...) are read by a few Python
   tasks a core through the project's reader (``format/datafiles.py``) a row group at a
   time and hashed with ``spec/bucketing.py``. Either way hashes and buckets are bit for
   bit those of the single-process path, and only fixed-width entries go on: index
   bucket, key hash, file id, row ordinal;
2. write, in the same tasks (no shuffle: the read partitions are merged into one task a
   core): each task sorts its entries a chunk of ``index_tasks.WRITE_CHUNK_ENTRIES`` at a time
   (memory bounded by a chunk) and writes one index file per index bucket and chunk, as
   the single-process build writes one per bucket and chunk of data, and returns the
   files' descriptors; a failing task deletes what it wrote.

The files go under the operation's ``pendingDir``, so a failed job leaves nothing a
``cancel_index`` (run by the failing operation itself) or ``vacuum`` does not delete.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from typing import Iterator

import pyarrow as pa

from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.bucketing import KEY_HASH_SEED, seed_prefix
from ..spec.column_mapping import table_schema
from ..writer.index_files import INDEX_DIR
from ..writer.lifecycle import Progress, say
from .index_tasks import (
    ENTRY_SCHEMA,
    TASKS_PER_CORE,
    balanced_groups,
    check_present,
    file_entries,
    split_reads,
    write_entry_batches,
)
from .native import JVM_UNAVAILABLE
from .options import shared_storage
from .types import spark_type

KEY_PREFIX = seed_prefix(KEY_HASH_SEED)
"""Spark's ``hash(KEY_PREFIX, keys...)`` is the key hash of index entries."""
FILE_SCHEMA = "path string, size long, bucket int, numEntries long, fileIds array<long>"
"""What a write task returns per index file it wrote."""
FILE_ARROW = pa.schema([("path", pa.string()), ("size", pa.int64()), ("bucket", pa.int32()),
                        ("numEntries", pa.int64()), ("fileIds", pa.list_(pa.int64()))])


def spark_build(spark):
    """A ``build`` for ``writer.lifecycle`` operations (the signature of
    ``lifecycle.build_files``) that builds the index files in a Spark job of ``spark``."""

    def build(snapshot, entry: IndexEntry, data_files, written: list[str], dir_name: str,
              progress: Progress = None) -> list[IndexFile]:
        return build_files(spark, snapshot, entry, list(data_files), written, dir_name, progress)

    return build


def build_files(spark, snapshot, entry: IndexEntry, data_files: list[AddFile], written: list[str], dir_name: str,
                progress: Progress = None) -> list[IndexFile]:
    """Index files of ``entry`` for ``data_files``, written under ``dir_name`` by one Spark
    job; their paths are added to ``written`` (the transaction deletes them if the commit
    fails). Entries equal those of ``lifecycle.build_files`` for the same files."""
    if not data_files:
        say(progress, f"index {entry.name}: no data files to index")
        return []
    storage = snapshot.storage
    shared_storage(storage.url, storage.storage_options)  # refuses storage Spark's workers cannot see
    sc = spark.sparkContext
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    group = f"indexeddf-index-{entry.name}-{uuid.uuid4().hex[:8]}"
    try:
        sc.setJobGroup(group, f"indexeddf: index {entry.name}: plan the build of {len(data_files)} data files")
        entries = _entries(spark, snapshot, entry, data_files)
        rel_dir = dir_name[len(INDEX_DIR) + 1:] if dir_name.startswith(INDEX_DIR + "/") else dir_name
        tasks = TASKS_PER_CORE * sc.defaultParallelism
        out = _written(entries, tasks, storage.url, storage.storage_options, rel_dir)
        sc.setJobDescription(f"indexeddf: index {entry.name}: read, hash, sort and write the entries of "
                             f"{len(data_files)} data files into {entry.numBuckets} index buckets")
        say(progress, f"index {entry.name}: Spark job over {len(data_files)} data files")
        rows = collect_job(out)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    files = [IndexFile(path=r.path, size=r.size, bucket=r.bucket, numEntries=r.numEntries, fileIds=tuple(r.fileIds))
             for r in rows]
    written.extend(f.path for f in files)  # a failed commit deletes them
    files.sort(key=lambda f: (f.bucket, f.path))
    say(progress, f"index {entry.name}: {len(data_files)}/{len(data_files)} data files indexed, {len(files)} index files")
    return files


def collect_job(out) -> list:
    """The job's rows; a task's indexeddf error (e.g. ``MissingFileError`` for a data file
    deleted outside indexeddf) is raised as itself, not as Spark's wrapper of it."""
    from . import typed_error

    try:
        return out.collect()
    except Exception as e:
        typed = typed_error(e)
        if typed is None:
            raise
        raise typed from e


def _entries(spark, snapshot, entry: IndexEntry, data_files: list[AddFile]):
    """The read stage: a DataFrame of every live row's entry (``ENTRY_SCHEMA``), from
    Spark's own Parquet reads where they read what ``format/datafiles.py`` reads, else from
    Python tasks."""
    native, python = split_reads(snapshot, entry, data_files)
    parts = []
    if native:
        parts.append(_native_entries(spark, snapshot, entry, native))
    if python:
        parts.append(_python_entries(spark, snapshot, entry, python))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def _native_entries(spark, snapshot, entry: IndexEntry, files: list[AddFile]):
    """Entries computed by Spark alone: its Parquet scan of the index columns and its
    ``hash()`` (Murmur3: ``pmod(hash(keys), n)`` is the bucket, bit for bit, and the key hash
    ``hash(seed_prefix(KEY_HASH_SEED), keys)``), built by the connector as for SQL's index
    builds (``IndexEntries``: the file id is the scan's constant ``_metadata.indexeddf_file_id``);
    where the session has no connector, by this module with a join on the file name."""
    paths = check_present(snapshot, files)
    # A table being converted is not indexed yet: the JVM replays it as such (and, uncached, only then).
    plan = {"version": snapshot.version, "native": [a.fileId for a in files], "columns": list(entry.columns),
            "numBuckets": entry.numBuckets, "unindexed": not snapshot.metadata.indexColumns}
    connector = _index_entries_class(spark)
    if connector is None:
        return _native_entries_by_name(spark, snapshot, entry, files, paths)
    from pyspark.sql import DataFrame

    return DataFrame(connector.forPython(spark._jsparkSession, snapshot.storage.url, json.dumps(plan)), spark)


def _index_entries_class(spark):
    """The connector's ``IndexEntries`` class in the session's JVM, or None: no JVM (Spark
    Connect), or no connector jar on the session (py4j then gives a package, not a class)."""
    from py4j.java_gateway import JavaClass

    try:
        found = spark._jvm.io.indexeddf.spark.plan.IndexEntries
    except JVM_UNAVAILABLE:
        return None
    return found if isinstance(found, JavaClass) else None


def _native_entries_by_name(spark, snapshot, entry: IndexEntry, files: list[AddFile], paths: list[str]):
    """:func:`_native_entries` without the connector: Spark's ``read.parquet`` of the files,
    each row's file id found by joining its file name with the files'."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    columns = list(entry.columns)
    fields = {f.name: f for f in snapshot.metadata.schema_}
    schema = StructType([StructField(c, spark_type(fields[c].type), True) for c in columns])
    rows = spark.read.schema(schema).parquet(*paths).select(
        *columns, F.col("_metadata.file_name").alias("_file"), F.col("_metadata.row_index").alias("_row"))
    ids = spark.createDataFrame([(posixpath.basename(a.path), a.fileId) for a in files], "_file string, file_id long")
    keys = [F.col(c) for c in columns]
    return rows.join(F.broadcast(ids), "_file").select(
        F.pmod(F.hash(*keys), F.lit(entry.numBuckets)).cast("int").alias("bucket"),
        F.pmod(F.hash(F.lit(KEY_PREFIX), *keys).cast("long"), F.lit(1 << 32)).alias("hash"),
        F.col("file_id"), F.col("_row").cast("int").alias("row"))


def _python_entries(spark, snapshot, entry: IndexEntry, data_files: list[AddFile]):
    """Entries computed by Python tasks, each reading some of the files through
    ``format/datafiles.py`` and hashing with ``spec/bucketing.py``."""
    storage = snapshot.storage
    url, options = storage.url, storage.storage_options
    schema = table_schema(snapshot.metadata)
    columns, num_buckets, version = list(entry.columns), entry.numBuckets, snapshot.version
    # The adds travel as JSON without their statistics (not needed; a checkpoint's are lazy).
    adds = [a.model_copy(update={"stats": None}).model_dump_json(by_alias=True) for a in data_files]

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_storage = shared_storage(url, options)
        for batch in batches:
            for group in batch.column(0).to_pylist():
                for i in groups[group]:
                    add = AddFile.model_validate_json(adds[i])
                    yield from file_entries(task_storage, add, schema, columns, num_buckets, version)

    groups = balanced_groups([a.size for a in data_files], TASKS_PER_CORE * spark.sparkContext.defaultParallelism)
    ids = spark.range(0, len(groups), 1, numPartitions=len(groups))
    return ids.mapInArrow(read, ENTRY_SCHEMA)


def _written(entries, tasks: int, url: str, options: dict, rel_dir: str):
    """The write stage, in the tasks that read (no shuffle): the read partitions merged into
    ``tasks`` tasks (``coalesce``), each of which sorts its entries a chunk at a time and
    writes one index file per index bucket and chunk, as the single-process build does; a
    DataFrame of the files (``FILE_SCHEMA``).

    Spark could shuffle the entries by bucket and sort them (one file per bucket), but the
    shuffle, Spark's sort and the rows' trip back to Python cost more CPU than the whole
    single-process build (measured by ``benchmarks/maintenance_spark.py``); here each row
    crosses into Python once, as 20 fixed-width bytes."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        done = write_entry_batches(shared_storage(url, options), rel_dir, batches)
        yield pa.RecordBatch.from_pylist(
            [{"path": f.path, "size": f.size, "bucket": f.bucket, "numEntries": f.numEntries,
              "fileIds": list(f.fileIds)} for f in done],
            schema=FILE_ARROW)

    return entries.coalesce(tasks).mapInArrow(write, FILE_SCHEMA)
