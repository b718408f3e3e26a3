"""Table ``optimize`` as a Spark job: ``IndexedTable.optimize(..., spark=)``.

The driver plans exactly as the single-process path does (``writer/maintenance.py``:
which files each bucket's group rewrites, which index files each ACTIVE index merges) and
commits once through the same transaction (``dataChange = false``: concurrent appends
still commit, it rebases over them). Only the reading and writing runs on the executors,
in one Spark job of two stages:

1. rewrite: each task takes some groups (one bucket's files, in a partitioned table one
   partition's bucket; files without a bucket in chunks of ``OPTIMIZE_BATCH_BYTES``), one
   group at a time: it reads the group's live rows with the project's reader (deletion
   vectors applied, partition values and column mapping as ``format/datafiles.py`` reads
   them), writes them with the project's writer (``writer/files.py``: the same bucketing,
   sort order, statistics and bloom filters) and emits each new file's ``add`` and the
   index entries of its rows for every ACTIVE index (bucket, key hash, file id, row);
2. merge: Spark shuffles the entries by (index, index bucket) and sorts them so that
   each index bucket's entries arrive together; a task merges them with the entries the
   rewritten index files of that bucket keep (``index_compaction.merge_bucket``, as the
   single-process ``compact_index`` does) into one index file per index bucket. A memory
   of one group (stage 1) or one index bucket (stage 2), as in the single-process path.

A failing task deletes what it wrote and fails the job; nothing is committed, and files
of other tasks or of attempts Spark dropped are named by no version, so ``vacuum``
deletes them.

``optimize_index(..., spark=)`` (:func:`spark_compact`) merges an index's own small files
the same way, in one stage: the driver picks the files as ``writer/lifecycle.py`` does
and commits through the same lifecycle (OPTIMIZING, then ACTIVE); each Python task merges
the files of some index buckets, one bucket at a time (``merge_bucket``), into one file
per bucket under the operation's ``pendingDir``, so a failed job leaves what
``cancel_index`` deletes.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import read_live_rows
from ..format.snapshot import Snapshot
from ..spec import config
from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer.files import write_bucketed_pieces
from ..writer.index_compaction import kept_ids, merge_bucket, rewritten_by_bucket
from ..writer.index_files import DataPiece, entry_arrays
from ..writer.lifecycle import Compact, Progress, say
from ..writer.maintenance import FOREIGN, OPTIMIZE_BATCH_BYTES, OptimizePlan, Rewrite
from ..writer.operations import MAX_BUCKETS
from .maintenance import balanced_groups, collect_job
from .options import shared_storage

ENTRY_SCHEMA = "key int, hash long, file_id long, row int, add string"
"""A row between the two stages: an index entry (``key``: its index's position times :data:`KEY_STRIDE` plus its index
bucket; ``add`` NULL), a new data file (``add``, its action as JSON; the rest
NULL) or a marker that an index bucket's files are rewritten though no new entry lands
there (``file_id`` NULL). One int key: Spark shuffles and sorts it cheaper than a name and
a bucket."""
ENTRY_ARROW = pa.schema([("key", pa.int32()), ("hash", pa.int64()), ("file_id", pa.int64()), ("row", pa.int32()),
                         ("add", pa.string())])
RESULT_SCHEMA = "name string, json string"
"""What the job returns: an ``add`` (``name`` NULL) or an index file of index ``name``, as JSON."""
RESULT_ARROW = pa.schema([("name", pa.string()), ("json", pa.string())])
KEY_STRIDE = MAX_BUCKETS + 1
"""Keys of one index's buckets: index i's bucket b is ``i * KEY_STRIDE + b``."""
TASKS_PER_CORE = 2
"""Rewrite tasks a core of the session: a task rewrites its groups one after another, so
more tasks than cores even out groups of unequal size."""


def spark_rewrite(spark) -> Rewrite:
    """A ``rewrite`` for ``writer.maintenance.optimize`` that runs as one job of ``spark``."""

    def rewrite(snapshot: Snapshot, plan: OptimizePlan, written: list[str],
                progress: Progress) -> tuple[list[AddFile], list[IndexEntry]]:
        return rewrite_files(spark, snapshot, plan, written, progress)

    return rewrite


def rewrite_files(spark, snapshot: Snapshot, plan: OptimizePlan, written: list[str],
                  progress: Progress = None) -> tuple[list[AddFile], list[IndexEntry]]:
    """The data and index files of ``plan`` written by one Spark job (paths added to
    ``written``: a failed commit deletes them); the ``add`` and ``index`` actions that
    ``writer.maintenance.rewrite_here`` returns for the same plan, up to file ids and names."""
    storage = snapshot.storage
    shared_storage(storage.url, storage.storage_options)  # refuses storage Spark's workers cannot see
    sc = spark.sparkContext
    units = _units(plan.groups)
    n_files = sum(len(u) for u in units)
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    try:
        sc.setJobGroup(f"indexeddf-optimize-{uuid.uuid4().hex[:8]}",
                       f"indexeddf: optimize ({plan.mode}): rewrite {n_files} data files in {len(units)} groups "
                       f"and the index files of {len(plan.indexes)} indexes")
        entries = _rewritten(spark, snapshot, plan, units)
        merged = _merged(spark, snapshot, plan, entries)
        say(progress, f"optimize: Spark job over {n_files} data files in {len(units)} groups")
        rows = collect_job(merged)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    adds = [AddFile.model_validate_json(r.json) for r in rows if r.name is None]
    new_files: dict[str, list[IndexFile]] = {e.name: [] for e in plan.indexes}
    for r in rows:
        if r.name is not None:
            new_files[r.name].append(IndexFile.model_validate_json(r.json))
    written.extend([a.path for a in adds] + [f.path for fs in new_files.values() for f in fs])
    adds.sort(key=lambda a: (repr(sorted(a.partitionValues.items())), a.bucket, a.path))
    for a in adds:
        say(progress, f"optimize: bucket {a.bucket}: {a.stats.numRecords if a.stats else '?'} rows -> 1 file "
                      f"({a.size} bytes)")
    actions = []
    for entry in plan.indexes:
        by_bucket = rewritten_by_bucket(entry, plan.rewrite[entry.name])
        gone = [f.path for b in sorted(by_bucket) for f in by_bucket[b]]
        files = sorted(new_files[entry.name], key=lambda f: (f.bucket, f.path))
        actions.append(entry.model_copy(update={"files": tuple(files), "removedFiles": tuple(gone)}))
        say(progress, f"optimize: index {entry.name}: {len(gone)} index files -> {len(files)}")
    return adds, actions


def _units(groups: dict) -> list[list[AddFile]]:
    """The files each rewrite unit reads at once: a group's files (they become one file),
    files without a bucket in chunks of about ``OPTIMIZE_BATCH_BYTES`` (as the
    single-process path batches them)."""
    units = []
    for group, files in groups.items():
        if (group[0] if isinstance(group, tuple) else group) != FOREIGN:
            units.append(list(files))
            continue
        unit, size = [], 0
        for a in files:
            unit.append(a)
            size += a.size
            if size >= OPTIMIZE_BATCH_BYTES:
                units.append(unit)
                unit, size = [], 0
        if unit:
            units.append(unit)
    return units


def _rewritten(spark, snapshot: Snapshot, plan: OptimizePlan, units: list[list[AddFile]]):
    """Stage 1: a DataFrame (``ENTRY_SCHEMA``) of the new files' adds and index entries,
    written by Python tasks that each rewrite some units, one at a time; plus a marker row
    for every index bucket whose files are rewritten."""
    storage, meta = snapshot.storage, snapshot.metadata
    url, options, version = storage.url, storage.storage_options, snapshot.version
    schema = table_schema(meta)
    layout = (list(meta.indexColumns), meta.numBuckets, config.get(meta.configuration, "indexeddf.targetRowGroupBytes"),
              tuple(meta.partitionColumns))
    indexes = [(i * KEY_STRIDE, list(e.columns), e.numBuckets) for i, e in enumerate(plan.indexes)]
    # The adds travel as JSON without their statistics (not needed to read a file).
    jobs = [[a.model_copy(update={"stats": None}).model_dump_json(by_alias=True) for a in unit] for unit in units]

    def rewrite(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_storage = shared_storage(url, options)
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for u in tasks[task]:
                    adds = [AddFile.model_validate_json(j) for j in jobs[u]]
                    yield from _rewrite_unit(task_storage, adds, schema, version, layout, indexes)

    tasks = balanced_groups([sum(a.size for a in unit) for unit in units], TASKS_PER_CORE * spark.sparkContext.defaultParallelism)
    out = spark.range(0, len(tasks), 1, numPartitions=len(tasks)).mapInArrow(rewrite, ENTRY_SCHEMA)
    markers = [(i * KEY_STRIDE + b, None, None, None, None) for i, e in enumerate(plan.indexes)
               for b in rewritten_by_bucket(e, plan.rewrite[e.name])]
    if markers:
        out = out.unionByName(spark.createDataFrame(markers, ENTRY_SCHEMA))
    return out


def _rewrite_unit(storage, adds: list[AddFile], schema: pa.Schema, version: int, layout: tuple,
                  indexes: list[tuple]) -> Iterator[pa.RecordBatch]:
    """One unit rewritten as ``rewrite_here`` rewrites a batch: its live rows read and
    written by bucket (and partition); the new files' adds and their rows' index entries.
    A failure deletes the files this unit wrote."""
    index_columns, num_buckets, rg_bytes, partition_columns = layout
    written: list[str] = []
    try:
        rows = pa.concat_tables([read_live_rows(storage, a, schema, version=version) for a in adds])
        new = write_bucketed_pieces(storage, rows, index_columns, num_buckets, rg_bytes, written,
                                    partition_columns, schema)
        out = []
        for add, file_rows in new:
            add = add.model_copy(update={"dataChange": False})
            out.append(pa.RecordBatch.from_pylist([{"add": add.model_dump_json(by_alias=True)}], schema=ENTRY_ARROW))
            for base, columns, buckets in indexes:
                found = entry_arrays(columns, buckets, [DataPiece(add.fileId, file_rows.select(columns))])
                if found is not None:
                    out.append(_entry_batch(base, *found))
    except BaseException:
        for path in written:  # the job fails; nothing of this unit is committed
            storage.delete(path)
        raise
    yield from out


def _entry_batch(base: int, hashes, file_ids, rows, buckets) -> pa.RecordBatch:
    n = len(hashes)
    return pa.record_batch([
        pa.array((base + buckets).astype(np.int32), pa.int32()),
        pa.array(hashes.astype(np.int64), pa.int64()), pa.array(file_ids, pa.int64()),
        pa.array(rows.astype(np.int32), pa.int32()), pa.nulls(n, pa.string()),
    ], schema=ENTRY_ARROW)


def _merged(spark, snapshot: Snapshot, plan: OptimizePlan, entries):
    """Stage 2: the entries shuffled by (index, index bucket) and sorted so each index
    bucket's arrive together; a task writes one index file per index bucket, merging the
    entries the bucket's rewritten files keep. The adds pass through. A DataFrame of
    ``RESULT_SCHEMA``."""
    storage = snapshot.storage
    url, options = storage.url, storage.storage_options
    names = [e.name for e in plan.indexes]
    old = [{b: [f.model_dump_json() for f in fs] for b, fs in rewritten_by_bucket(e, plan.rewrite[e.name]).items()}
           for e in plan.indexes]
    keep = [kept_ids(e, plan.rewrite[e.name], plan.keep_ids) for e in plan.indexes]

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_storage = shared_storage(url, options)
        written: list[str] = []
        try:
            for key, run in _runs(batches):
                if key is None:  # the adds
                    yield from pa.table([pa.nulls(run.num_rows, pa.string()), run.column("add")],
                                        schema=RESULT_ARROW).to_batches()
                    continue
                i, bucket = divmod(key, KEY_STRIDE)
                new = run.filter(run.column("file_id").is_valid())
                added = None if not new.num_rows else (new.column("hash").to_numpy().astype(np.uint32),
                                                        new.column("file_id").to_numpy(), new.column("row").to_numpy())
                files = [IndexFile.model_validate_json(j) for j in old[i].get(bucket, ())]
                f = merge_bucket(task_storage, files, keep[i], added, names[i], bucket, written)
                if f is not None:
                    yield pa.RecordBatch.from_pylist([{"name": names[i], "json": f.model_dump_json()}], schema=RESULT_ARROW)
        except BaseException:
            for path in written:  # the job fails; this task's index files are not committed
                task_storage.delete(path)
            raise

    pairs = sum(e.numBuckets for e in plan.indexes)
    parts = max(1, min(pairs, TASKS_PER_CORE * spark.sparkContext.defaultParallelism))
    return entries.repartition(parts, "key").sortWithinPartitions("key").mapInArrow(merge, RESULT_SCHEMA)


def _runs(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple]:
    """Consecutive rows of one key (index bucket) as one table, key None for the adds; rows
    arrive sorted by key, so one index bucket is in memory at a time."""
    key, parts = None, []
    for batch in batches:
        if not batch.num_rows:
            continue
        # Run boundaries found with numpy (a row-by-row loop in Python costs seconds a million).
        keys = pc.fill_null(batch.column("key"), -1).to_numpy()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], batch.num_rows]
        for s, e in zip(starts.tolist(), ends.tolist()):
            k = None if keys[s] < 0 else int(keys[s])
            if parts and k != key:
                yield key, pa.Table.from_batches(parts).combine_chunks()
                parts = []
            key = k
            parts.append(batch.slice(s, e - s))
    if parts:
        yield key, pa.Table.from_batches(parts).combine_chunks()


# -- optimize_index(spark=): an index's own files merged per index bucket ---------------------
def spark_compact(spark, progress: Progress = None) -> Compact:
    """A ``compact`` for ``writer.lifecycle.optimize_index`` that merges the index files in
    one job of ``spark`` (the driver commits through the same lifecycle)."""

    def compact(storage, entry: IndexEntry, rewrite: set[str], keep_ids: set[int], dir_name: str,
                written: list[str]) -> tuple[list[IndexFile], list[str]]:
        return compact_files(spark, storage, entry, rewrite, keep_ids, dir_name, written, progress)

    return compact


def compact_files(spark, storage, entry: IndexEntry, rewrite: set[str], keep_ids: set[int], dir_name: str,
                  written: list[str], progress: Progress = None) -> tuple[list[IndexFile], list[str]]:
    """What ``index_compaction.compact_index`` returns for the same files (the new files,
    up to their names, and the replaced paths), each index bucket's files merged by a
    Python task (``merge_bucket``: a task's memory is one index bucket's entries). The new
    paths are added to ``written`` (a failed commit deletes them)."""
    shared_storage(storage.url, storage.storage_options)  # refuses storage Spark's workers cannot see
    url, options = storage.url, storage.storage_options
    by_bucket = rewritten_by_bucket(entry, rewrite)
    buckets = sorted(by_bucket)
    old = [[f.model_dump_json() for f in by_bucket[b]] for b in buckets]
    keep = kept_ids(entry, rewrite, keep_ids)
    sc = spark.sparkContext
    # Buckets of about equal bytes a task: a task costs a Python worker's round trip.
    tasks = balanced_groups([sum(f.size for f in by_bucket[b]) for b in buckets], TASKS_PER_CORE * sc.defaultParallelism)

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_storage = shared_storage(url, options)
        mine: list[str] = []
        done: list[IndexFile] = []
        try:
            for batch in batches:
                for task in batch.column(0).to_pylist():
                    for i in tasks[task]:
                        files = [IndexFile.model_validate_json(j) for j in old[i]]
                        f = merge_bucket(task_storage, files, keep, None, dir_name, buckets[i], mine)
                        if f is not None:
                            done.append(f)
        except BaseException:
            for path in mine:  # the job fails; this task's index files are not committed
                task_storage.delete(path)
            raise
        yield pa.RecordBatch.from_pylist([{"name": entry.name, "json": f.model_dump_json()} for f in done],
                                         schema=RESULT_ARROW)

    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    try:
        sc.setJobGroup(f"indexeddf-optimize-index-{entry.name}-{uuid.uuid4().hex[:8]}",
                       f"indexeddf: optimize index {entry.name}: merge {len(rewrite)} index files "
                       f"of {len(buckets)} index buckets")
        say(progress, f"index {entry.name}: Spark job merging {len(rewrite)} index files of {len(buckets)} index buckets")
        out = spark.range(0, len(tasks), 1, numPartitions=max(1, len(tasks))).mapInArrow(merge, RESULT_SCHEMA)
        rows = collect_job(out)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    files = sorted((IndexFile.model_validate_json(r.json) for r in rows), key=lambda f: (f.bucket, f.path))
    written.extend(f.path for f in files)
    return files, [f.path for b in buckets for f in by_bucket[b]]
