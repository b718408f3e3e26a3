"""SQL ``CREATE INDEX``, ``REFRESH INDEX`` and ``CONVERT TO INDEXEDDF`` with the index built by
Spark's tasks, as ``create_index(spark=)`` builds it (``maintenance.py``).

A statement reaches Python as writes through this data source (``operation.py``): a write's
commit runs in a Python worker of the driver, which has no session to start a job from, so
the connector's command (``io.indexeddf.spark.plan.TableOperationCommand``) runs the job:

1. ``begin``: a write of one row whose commit checks the statement and, for an index
   statement, commits the index's transient state (``lifecycle.begin``: CREATING or
   REFRESHING, with its ``pendingDir``), exactly as the Python API does; it returns the
   build's plan (:func:`begin_build`, :func:`begin_convert`): the version to read, the index's
   columns and bucket count, and the data files to index in groups of about equal bytes
   (``index_tasks.balanced_groups``), one a core of the session (the command's ``cores``);
2. ``indexBuild``: a write of one row a group (the group's number), a task each: the task
   (:meth:`BuildWriter.write`) reads its files' index columns through the project's reader a few
   row groups at a time (``index_tasks.file_entries``: deletion vectors, column mapping,
   partition values), hashes them with ``spec/bucketing.py``, sorts the entries a chunk at a
   time and writes index files under ``pendingDir`` (``index_tasks.write_entry_batches``), as
   ``create_index(spark=)``'s tasks do, and returns their descriptors; no entry crosses into
   the JVM. The commit (:meth:`BuildWriter.commit`) commits ACTIVE with them through the same
   lifecycle (``lifecycle.finish``), or for ``CONVERT TO INDEXEDDF`` the conversion
   (``convert_table``: one commit).

The entries are those of the single-process build. A failed job (a task cannot read a data
file: ``MissingFileError`` for one deleted outside indexeddf) aborts the write: the tasks'
files are deleted and the operation cancels itself (``cancel_index``: CREATING ends DELETED,
REFRESHING goes back to ACTIVE; a conversion committed nothing); if the driver dies between
the writes the index stays in its transient state, which ``cancel_index`` ends, as after any
crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import ConcurrentIndexError
from ..format.snapshot import Snapshot, load_snapshot, update_snapshot
from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer import index_ops, lifecycle
from ..writer.index_files import INDEX_DIR
from . import options as so
from .index_tasks import TASKS_PER_CORE, balanced_groups, files_entries, task_add, write_entry_batches
from .job_fence import JobFence

BUILD_OPERATION = "indexBuild"
"""The ``_operation`` of the build write: the tasks that sort and write, and the final commit."""


def begin_build(snapshot: Snapshot, operation: str, spec: dict) -> dict | None:
    """The first write's commit: the statement checked and its transient state committed;
    ``{"plan": ...}`` for the build, or ``{"version": v}`` when no data is to be read (the
    operation finished here). None for ``REFRESH INDEX ... QUICK`` (it reads no data: the
    caller runs it as it is)."""
    name = spec.get("name")
    if operation == "createIndex":
        entry, params, removed = index_ops.create_plan(snapshot, name, list(spec.get("columns") or []),
                                                       spec.get("numBuckets"))
        started = lifecycle.begin(snapshot, entry, "CREATING", "CREATE INDEX", params, removed)
        to_index, removed = started.snapshot.live_files(), ()
    else:
        mode = spec.get("mode") or "incremental"
        if mode == "quick":
            return None
        entry, to_index, removed = index_ops.refresh_plan(snapshot, name, mode)
        params = {"name": name, "mode": mode}
        started = lifecycle.begin(snapshot, entry, "REFRESHING", "REFRESH INDEX", params)
    plan = {"name": name, "statement": operation, "params": params, "version": started.version,
            "pendingDir": started.pending_dir, "fileIds": [a.fileId for a in to_index], "removed": list(removed)}
    if not to_index:  # nothing to read: no job
        return {"version": _finish(started, plan, []).version}
    return {"plan": plan | _reads(started.entry, to_index, int(spec.get("cores") or 1))}


def begin_convert(snapshot: Snapshot, columns: list[str], num_buckets: int | None, cores: int = 1) -> dict:
    """``CONVERT TO INDEXEDDF``'s first write: the conversion checked and planned
    (``convert_plan``; nothing is committed): ``{"plan": ...}``, whose build write's commit
    converts with the files the tasks wrote (``cores``: the session's, a task each)."""
    from ..writer.convert import convert_plan
    from ..writer.index_files import PRIMARY

    entry, _ = convert_plan(snapshot, columns, num_buckets)
    live = snapshot.live_files()
    plan = {"name": PRIMARY, "statement": "convert", "version": snapshot.version, "pendingDir": f"{INDEX_DIR}/{PRIMARY}",
            "fileIds": [a.fileId for a in live], "removed": [], "unindexed": True}
    return {"plan": plan | _reads(entry, live, cores)}


def _reads(entry: IndexEntry, files: list[AddFile], cores: int) -> dict:
    """What the build write needs: the index's columns and bucket count and the files to read,
    in groups of about equal bytes (``balanced_groups``), one a task, a task a core."""
    groups = balanced_groups([a.size for a in files], TASKS_PER_CORE * max(1, cores))
    return {"columns": list(entry.columns), "numBuckets": entry.numBuckets,
            "groups": [[files[i].fileId for i in g] for g in groups], "fence": JobFence.new().folder}


def build_writer(url: str, storage_options: dict[str, Any], spec: dict) -> "BuildWriter":
    """The build write's writer (``spec``: the plan), made on the driver: the adds of the
    plan's groups are read from the log here once and reach the tasks with the writer."""
    plan = spec["plan"]
    storage = so.shared_storage(url, storage_options)
    snapshot = load_snapshot(storage, int(plan["version"]), unindexed_ok=bool(plan.get("unindexed")))
    by_id = {a.fileId: a for a in snapshot.live_files()}
    groups = [[task_add(by_id[i]) for i in g] for g in plan["groups"]]
    return BuildWriter(url, storage_options, plan, spec.get("resultFile"), table_schema(snapshot.metadata), groups)


@dataclass
class BuiltMessage(WriterCommitMessage):
    """One task's index files, as JSON."""

    files: list[str] = field(default_factory=list)


class BuildWriter(DataSourceArrowWriter):
    """A task a group of data files reads, hashes, sorts and writes their entries; the commit
    commits every task's index files once."""

    def __init__(self, url: str, storage_options: dict[str, Any], plan: dict, result_file: str | None,
                 schema: pa.Schema, groups: list[list[str]]):
        self.url, self.storage_options, self.plan, self.result_file = url, storage_options, plan, result_file
        self.schema, self.groups = schema, groups
        self.fence = JobFence(plan["fence"])

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BuiltMessage:
        """The index files of the groups this task's rows name (a group's number a row): each
        file's live rows read through the project's reader and hashed
        (``index_tasks.file_entries``), sorted a chunk at a time and written
        (``write_entry_batches``), as ``create_index(spark=)``'s tasks do."""
        storage = so.shared_storage(self.url, self.storage_options)
        rel_dir = self.plan["pendingDir"][len(INDEX_DIR) + 1:]
        ids = [g for batch in iterator for g in batch.column(0).to_pylist()]
        columns, num_buckets, version = list(self.plan["columns"]), int(self.plan["numBuckets"]), self.plan["version"]
        adds = [add for g in ids for add in self.groups[g]]
        entries = files_entries(storage, adds, self.schema, columns, num_buckets, version, self.fence)
        built = write_entry_batches(storage, rel_dir, entries, self.fence)
        return BuiltMessage([f.model_dump_json() for f in built])

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit the index ACTIVE with every task's files (the transient state's version
        is the one the plan began), or the conversion with them."""
        self.fence.close(so.shared_storage(self.url, self.storage_options))  # every task has ended
        files = [IndexFile.model_validate_json(j) for m in messages if isinstance(m, BuiltMessage) for j in m.files]
        files.sort(key=lambda f: (f.bucket, f.path))
        if self.plan["statement"] == "convert":
            result = self._convert(files)
        else:
            result = _finish(self._started(), self.plan, files)
        if self.result_file:
            with open(self.result_file, "w") as f:
                json.dump({"version": result.version}, f)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The job failed: delete what the tasks wrote and cancel the operation (its pending
        folder goes too), unless another operation took the index meanwhile. A conversion
        committed nothing to cancel. First the job's fence (``job_fence.py``): no task of it
        writes after this."""
        storage = so.shared_storage(self.url, self.storage_options)
        self.fence.abort(storage)
        for m in messages:
            if isinstance(m, BuiltMessage):
                for j in m.files:
                    storage.delete(IndexFile.model_validate_json(j).path)
        if self.plan["statement"] == "convert":
            return
        snapshot = update_snapshot(load_snapshot(storage, self.plan["version"]))
        entry = snapshot.indexes.get(self.plan["name"])
        if entry is not None and entry.properties.get(lifecycle.PENDING) == self.plan["pendingDir"]:
            lifecycle.cancel_index(snapshot, entry.name)

    def _started(self) -> lifecycle.Started:
        """The operation the first write began, read back from the log at its version."""
        storage = so.shared_storage(self.url, self.storage_options)
        snapshot = load_snapshot(storage, self.plan["version"])
        entry = snapshot.indexes[self.plan["name"]]
        if entry.properties.get(lifecycle.PENDING) != self.plan["pendingDir"]:
            raise ConcurrentIndexError(f"index {entry.name!r} is no longer this statement's operation")
        return lifecycle.Started(snapshot, entry, self.plan["pendingDir"], self.plan["version"])

    def _convert(self, files: list[IndexFile]):
        """``convert_table`` on the version the plan read, its primary index the tasks' files
        (a failed commit deletes them)."""
        from ..writer.convert import convert_table

        storage = so.shared_storage(self.url, self.storage_options)
        snapshot = load_snapshot(storage, self.plan["version"], unindexed_ok=True)

        def built(snapshot, entry, data_files, written: list[str], dir_name: str, progress=None) -> list[IndexFile]:
            written.extend(f.path for f in files)
            return files

        return convert_table(snapshot, list(self.plan["columns"]), int(self.plan["numBuckets"]), build=built)


def _finish(started: lifecycle.Started, plan: dict, files: list[IndexFile]):
    """The final commit (ACTIVE) of the operation ``plan`` began, with ``files``."""
    removed = tuple(plan["removed"])

    def work(s: lifecycle.Started, written: list[str]):
        written.extend(f.path for f in files)  # a failed commit deletes them
        if plan["statement"] == "createIndex":
            return files, removed, index_ops.create_metrics(files), {}
        return files, removed, index_ops.refresh_metrics(plan["fileIds"], files, removed), {}

    operation = "CREATE INDEX" if plan["statement"] == "createIndex" else "REFRESH INDEX"
    return lifecycle.finish(started, operation, plan["params"], "ACTIVE", work, covered=True)
