"""SQL ``OPTIMIZE`` with the files rewritten by Spark's tasks, and Delta's result of it.

A statement reaches Python as writes through this data source (``operation.py``), whose
commit runs in a Python worker of the driver with no session to start a job from. So the
connector's command (``io.indexeddf.spark.plan.TableOperationCommand``) runs the job itself,
with the two stages of ``optimize(spark=)`` (``optimize.py``) as the reader and the writer of
the Python data source:

1. ``begin`` (:func:`begin_optimize`): the first write's commit plans as ``optimize()`` does
   (mode ``quick``, the partitions ``WHERE`` selects) and, when there are files to rewrite,
   returns the version it planned on instead of committing;
2. the command reads this source with the option ``_optimizeRewrite`` (the plan): each
   partition (:class:`RewriteReader`) rewrites some groups of files (``RewriteJob``: the live
   rows read with the project's reader, written with its writer, the entries of the rows it
   wrote written as index files by the task) and yields a row per new data or index file, one
   more partition the markers of the index buckets whose files are rewritten; the command
   repartitions these few rows by (index, index bucket) and sorts them, as ``optimize(spark=)``
   does (no index entry crosses into the JVM);
3. and writes them back with the operation ``optimizeMerge``: each task
   (:class:`MergeWriter`) leaves one file per index bucket, merging the bucket's new files
   and what its rewritten files keep (``MergeJob``), and the commit commits ``optimize()`` on the planned version with
   those files: one commit, ``dataChange = false``, the same plan recomputed from that
   version. It leaves Delta's result (:func:`optimize_result`) for the command's row.

A failed job aborts the write: the files its tasks returned are deleted, nothing is
committed, and files of tasks that did not return (a failed rewrite task deletes its own)
are named by no version, so ``vacuum`` deletes them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceReader, InputPartition, WriterCommitMessage

from ..format.snapshot import Snapshot, load_snapshot, update_snapshot
from ..writer import maintenance
from . import options as so
from .job_fence import JobFence
from .optimize_tasks import ENTRY_SCHEMA, TASKS_PER_CORE, MergeJob, RewriteJob, plan_actions

REWRITE_OPTION = "_optimizeRewrite"
"""Private read option: the plan of an ``OPTIMIZE`` whose rewrite stage the read runs."""


def begin_optimize(snapshot: Snapshot, where: str | None, start: int) -> dict | None:
    """``{"plan": ...}`` when ``OPTIMIZE [WHERE ...]`` has files to rewrite (nothing is
    committed yet), else None (the caller runs it as it is: it commits nothing)."""
    if not maintenance.compaction_groups(maintenance.optimized_files(snapshot, where), "quick"):
        return None
    # The (index, index bucket) keys: the most merge tasks that get work.
    pairs = sum(e.numBuckets for e in snapshot.indexes.values() if e.state == "ACTIVE")
    return {"plan": {"version": snapshot.version, "where": where, "startTimeMs": start, "pairs": pairs,
                     "fence": JobFence.new().folder}}


def _planned(url: str, storage_options: dict[str, Any], plan: dict):
    """The snapshot the plan read and the ``OptimizePlan`` of it (``optimize()``'s, again:
    the same version gives the same groups)."""
    snapshot = load_snapshot(so.shared_storage(url, storage_options), int(plan["version"]))
    groups = maintenance.compaction_groups(maintenance.optimized_files(snapshot, plan.get("where")), "quick")
    return snapshot, maintenance.plan_optimize(snapshot, "quick", groups)


def is_rewrite(options: Any) -> bool:
    """Whether a read's options carry an ``OPTIMIZE``'s rewrite stage."""
    return any(k.lower() == REWRITE_OPTION.lower() for k in dict(options))


def rewrite_reader(options: Any) -> "RewriteReader":
    """The reader of the rewrite stage (planned on the driver, run by the read's tasks)."""
    opts = {k.lower(): v for k, v in dict(options).items()}
    plan = json.loads(opts[REWRITE_OPTION.lower()])
    snapshot, optimize_plan = _planned(opts["path"], so.storage_options({"storageOptions": opts.get("storageoptions")}),
                                       plan)
    return RewriteReader(RewriteJob.of(snapshot, optimize_plan, TASKS_PER_CORE * int(plan.get("cores") or 1),
                                       JobFence(plan["fence"])))


REWRITE_SCHEMA = ENTRY_SCHEMA
"""The rows the rewrite stage yields (``optimize_tasks.ENTRY_SCHEMA``)."""


class RewriteReader(DataSourceReader):
    """A partition a rewrite task (some groups of files), and one of the markers."""

    def __init__(self, job: RewriteJob):
        self.job = job

    def partitions(self) -> list[InputPartition]:
        """One per rewrite task, then the markers' partition."""
        return [InputPartition(i) for i in range(len(self.job.tasks) + 1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's new data and index files (``REWRITE_SCHEMA``)."""
        if partition.value == len(self.job.tasks):
            if self.job.markers:
                yield self.job.marker_batch()
            return
        yield from self.job.run(partition.value)


@dataclass
class MergedMessage(WriterCommitMessage):
    """One merge task's outcome: ``(None, add JSON)`` or ``(index name, index file JSON)``."""

    results: list[tuple] = field(default_factory=list)


class MergeWriter(DataSourceArrowWriter):
    """Tasks merge index buckets; the commit commits the optimize once."""

    def __init__(self, url: str, storage_options: dict[str, Any], plan: dict, result_file: str | None):
        self.url, self.storage_options, self.plan, self.result_file = url, storage_options, plan, result_file
        snapshot, optimize_plan = _planned(url, storage_options, plan)
        self.job = MergeJob.of(snapshot, optimize_plan, JobFence(plan["fence"]))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MergedMessage:
        """One file for each index bucket whose rows (sorted by key) reach this task."""
        results = [(r["name"], r["json"]) for batch in self.job.run(iterator) for r in batch.to_pylist()]
        return MergedMessage(results)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """``optimize()`` on the planned version, its files those the tasks wrote."""
        results = [r for m in messages if isinstance(m, MergedMessage) for r in m.results]
        storage = so.shared_storage(self.url, self.storage_options)
        self.job.fence.close(storage)  # every task has ended
        before = load_snapshot(storage, int(self.plan["version"]))
        where = self.plan.get("where")

        def rewrite(snapshot, plan, written, progress):
            return plan_actions(plan, results, written, progress)

        considered = maintenance.optimized_files(before, where)
        result = maintenance.optimize(before, "quick", where=where, rewrite=rewrite)
        after = update_snapshot(before) if result is None else result.snapshot
        if self.result_file:
            with open(self.result_file, "w") as f:
                json.dump(optimize_result(before, after, considered, int(self.plan["startTimeMs"])), f)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the data and index files the tasks returned; nothing was committed. First
        wait until no task of the job writes any more (its fence, ``job_fence.py``): a rewrite
        task Spark is still cancelling writes its files when its groups are done, and should not
        do so after the statement failed (and after a ``vacuum`` that follows it)."""
        storage = so.shared_storage(self.url, self.storage_options)
        self.job.fence.abort(storage)
        for m in messages:
            if isinstance(m, MergedMessage):
                for _, text in m.results:
                    storage.delete(json.loads(text)["path"])


# -- Delta's result rows ------------------------------------------------------------------------
def file_sizes(files) -> dict[str, Any] | None:
    """Delta's FileSizeMetrics of ``files`` (None when there are none)."""
    sizes = [a.size for a in files]
    if not sizes:
        return None
    return {"min": min(sizes), "max": max(sizes), "avg": sum(sizes) / len(sizes), "totalFiles": len(sizes),
            "totalSize": sum(sizes)}


def changed_files(before, after) -> tuple[list, list]:
    """The files ``before`` has and ``after`` lacks (removed), and the reverse (added), each a
    logical file: its path and deletion vector."""
    def key(a):
        dv = a.deletionVector
        return a.path, None if dv is None else (dv.storageType, dv.pathOrInlineDv, dv.offset)

    old = {key(a): a for a in before.live_files()}
    new = {key(a): a for a in after.live_files()}
    return [a for k, a in old.items() if k not in new], [a for k, a in new.items() if k not in old]


def optimize_result(before, after, considered: list, start: int) -> dict:
    """``OPTIMIZE``'s row as Delta has it: the table's path and the metrics of going from
    ``before`` to ``after`` having considered ``considered`` files since ``start`` (ms)."""
    removed, added = changed_files(before, after)
    partitions = {tuple(sorted(a.partitionValues.items())) for a in removed}
    return {"path": before.storage.url, "metrics": {
        "numFilesAdded": len(added), "numFilesRemoved": len(removed),
        "filesAdded": file_sizes(added), "filesRemoved": file_sizes(removed),
        "partitionsOptimized": len(partitions), "numBatches": 1 if removed else 0,
        "totalConsideredFiles": len(considered),
        "totalFilesSkipped": len(considered) - len(removed),
        "preserveInsertionOrder": False, "startTimeMs": start, "endTimeMs": int(time.time() * 1000),
    }}
