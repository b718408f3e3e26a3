"""Table ``optimize`` as a Spark job: ``IndexedTable.optimize(..., spark=)``.

The driver plans exactly as the single-process path does (``writer/maintenance.py``:
which files each bucket's group rewrites, which index files each ACTIVE index merges) and
commits once through the same transaction (``dataChange = false``: concurrent appends
still commit, it rebases over them). Only the reading and writing runs on the executors,
in one Spark job of two stages:

1. rewrite: each task takes some groups (one bucket's files, in a partitioned table one
   partition's bucket; files without a bucket in chunks of ``OPTIMIZE_BATCH_BYTES``), one
   group at a time, and rewrites it as the single process does (``writer/bucket_merge.py``
   ``rewrite_unit``): a bucket's sorted files merged into one a row group at a time, other
   files read and written by bucket with the project's writer (deletion vectors applied,
   partition values and column mapping as ``format/datafiles.py`` reads them; the same
   bucketing, sort order, statistics and bloom filters). For every ACTIVE index it keeps
   the entries of the rows it wrote (16 bytes a row), and every ``ENTRY_CHUNK`` (and at its
   end) sorts them as every build does (``entry_order``) and writes one index file per
   touched index bucket. It emits each new file's ``add`` and each index file's descriptor:
   no entry crosses into the JVM;
2. merge: Spark shuffles those few rows (a row a file) by (index, index bucket); a task
   takes each index bucket's rows together and leaves one file per index bucket, as the
   single process does (``bucket_merge.merge_index_bucket``): the one file a rewrite task
   wrote when no rewritten file of that bucket keeps an entry (nothing read or written: the
   primary index of an unpartitioned table, whose index bucket is the data bucket one task
   rewrote), else those files' entries and the ones the rewritten files keep merged into
   one file (``index_compaction.merge_bucket``) and the merged files deleted. A memory of a
   row group of each of a bucket's files (a batch of files without a bucket) and at most a
   chunk of entries an index (stage 1), or one index bucket's entries (stage 2): bounded by
   a file or a chunk, never by the table.

A failing task deletes what it wrote and fails the job; nothing is committed. The job's fence
(``job_fence.py``) holds the failure back until no task of the job writes any more: the
other tasks' files, and those of attempts Spark dropped, are named by no version, so ``vacuum``
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

import pyarrow as pa

from ..format.snapshot import Snapshot
from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..writer.index_compaction import kept_ids, merge_bucket, rewritten_by_bucket
from ..writer.lifecycle import Compact, Progress, say
from ..writer.maintenance import OptimizePlan, Rewrite
from .index_tasks import balanced_groups
from .job_fence import JobFence
from .maintenance import collect_job
from .optimize_tasks import (
    ENTRY_SCHEMA,
    RESULT_ARROW,
    RESULT_SCHEMA,
    TASKS_PER_CORE,
    MergeJob,
    RewriteJob,
    plan_actions,
)
from .options import shared_storage


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
    fence = JobFence.new()
    job = RewriteJob.of(snapshot, plan, TASKS_PER_CORE * sc.defaultParallelism, fence)
    n_files = sum(len(u) for u in job.units)
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    try:
        group = f"indexeddf-optimize-{uuid.uuid4().hex[:8]}"
        sc.setJobGroup(group,
                       f"indexeddf: optimize ({plan.mode}): rewrite {n_files} data files in {len(job.units)} groups "
                       f"and the index files of {len(plan.indexes)} indexes")
        entries = _rewritten(spark, job)
        merged = _merged(spark, snapshot, plan, entries, fence)
        say(progress, f"optimize: Spark job over {n_files} data files in {len(job.units)} groups")
        rows = collect_job(merged, storage, fence)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    return plan_actions(plan, [(r.name, r.json) for r in rows], written, progress)


def _rewritten(spark, job: RewriteJob):
    """Stage 1: a DataFrame (``ENTRY_SCHEMA``) of the new data and index files, written by
    Python tasks that each rewrite some units, one at a time, then write their entries; plus
    a marker row for every index bucket whose files are rewritten."""

    def rewrite(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield from job.run(task)

    out = spark.range(0, len(job.tasks), 1, numPartitions=len(job.tasks)).mapInArrow(rewrite, ENTRY_SCHEMA)
    if job.markers:
        out = out.unionByName(spark.createDataFrame([(k, None) for k in job.markers], ENTRY_SCHEMA))
    return out


def _merged(spark, snapshot: Snapshot, plan: OptimizePlan, entries, fence: JobFence):
    """Stage 2: the files' rows shuffled by (index, index bucket) and sorted so each index
    bucket's arrive together; a task leaves one index file per index bucket
    (:class:`MergeJob`). The adds pass through. A DataFrame of ``RESULT_SCHEMA``."""
    job = MergeJob.of(snapshot, plan, fence)
    parts = max(1, min(job.pairs(plan), TASKS_PER_CORE * spark.sparkContext.defaultParallelism))
    return entries.repartition(parts, "key").sortWithinPartitions("key").mapInArrow(job.run, RESULT_SCHEMA)


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

    fence = JobFence.new()

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_storage = shared_storage(url, options)
        mine: list[str] = []
        done: list[IndexFile] = []
        with fence.task(task_storage, mine):  # a failure deletes this task's index files
            for batch in batches:
                for task in batch.column(0).to_pylist():
                    for i in tasks[task]:
                        fence.check(task_storage)  # another task failed: stop
                        files = [IndexFile.model_validate_json(j) for j in old[i]]
                        f = merge_bucket(task_storage, files, keep, None, dir_name, buckets[i], mine)
                        if f is not None:
                            done.append(f)
        yield pa.RecordBatch.from_pylist([{"name": entry.name, "json": f.model_dump_json()} for f in done],
                                         schema=RESULT_ARROW)

    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    try:
        sc.setJobGroup(f"indexeddf-optimize-index-{entry.name}-{uuid.uuid4().hex[:8]}",
                       f"indexeddf: optimize index {entry.name}: merge {len(rewrite)} index files "
                       f"of {len(buckets)} index buckets")
        say(progress, f"index {entry.name}: Spark job merging {len(rewrite)} index files of {len(buckets)} index buckets")
        out = spark.range(0, len(tasks), 1, numPartitions=max(1, len(tasks))).mapInArrow(merge, RESULT_SCHEMA)
        rows = collect_job(out, storage, fence)
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
    files = sorted((IndexFile.model_validate_json(r.json) for r in rows), key=lambda f: (f.bucket, f.path))
    written.extend(f.path for f in files)
    return files, [f.path for b in buckets for f in by_bucket[b]]
