"""SQL ``CREATE INDEX`` and ``REFRESH INDEX`` with the index built by Spark's tasks.

A statement reaches Python as writes through this data source (``operation.py``): a write's
commit runs in a Python worker of the driver, which has no session to start a job from, so
the connector's command (``io.indexeddf.spark.plan.TableOperationCommand``) runs two writes:

1. ``begin``: a write of one row whose commit checks the statement and commits the index's
   transient state (``lifecycle.begin``: CREATING or REFRESHING, with its ``pendingDir``),
   exactly as the Python API does, and returns the build's plan (:func:`begin_build`): the
   transient version, the data files to index (their ids) and the index files to drop;
2. ``indexBuild``: a write of one row per task (the session's ``defaultParallelism``), each
   row a group of data files of about equal bytes: each task (:meth:`BuildWriter.write`)
   reads its files' index columns through the project's reader (deletion vectors, column
   mapping, partition values as the single-process build reads them), hashes them with
   ``spec/bucketing.py``, sorts and writes index files under ``pendingDir``
   (``index_tasks.task_index_files``, as ``create_index(spark=)`` writes them) and
   returns their descriptors; the commit (:meth:`BuildWriter.commit`) commits ACTIVE with
   them through the same lifecycle (``lifecycle.finish``).

The entries are those of the single-process build. A failed job (a task cannot read a data
file) aborts the write: the tasks' files are deleted and the operation cancels itself
(``cancel_index``: CREATING ends DELETED, REFRESHING goes back to ACTIVE); if the driver
dies between the two writes the index stays in its transient state, which ``cancel_index``
ends, as after any crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import ConcurrentIndexError
from ..format.snapshot import Snapshot, load_snapshot, update_snapshot
from ..spec.actions import IndexFile
from ..writer import index_ops, lifecycle
from ..writer.index_files import INDEX_DIR
from . import options as so
from .index_tasks import balanced_groups, task_index_files

BUILD_OPERATION = "indexBuild"
"""The ``_operation`` of the second write: the build's tasks and its final commit."""


def begin_build(snapshot: Snapshot, operation: str, spec: dict) -> dict | None:
    """The first write's commit: the statement checked and its transient state committed;
    ``{"plan": ...}`` for the build write, or ``{"version": v}`` when no data is to be read
    (the operation finished here). None for ``REFRESH INDEX ... QUICK`` (it reads no data:
    the caller runs it as it is)."""
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
    return {"plan": plan}


def build_writer(url: str, storage_options: dict[str, Any], spec: dict) -> "BuildWriter":
    """The second write's writer (``spec``: the plan and the number of tasks)."""
    return BuildWriter(url, storage_options, spec["plan"], int(spec.get("tasks") or 1), spec.get("resultFile"))


@dataclass
class BuiltMessage(WriterCommitMessage):
    """One task's index files, as JSON."""

    files: list[str] = field(default_factory=list)


class BuildWriter(DataSourceArrowWriter):
    """Tasks build a share of the index files each; the commit commits them all once."""

    def __init__(self, url: str, storage_options: dict[str, Any], plan: dict, tasks: int, result_file: str | None):
        self.url, self.storage_options, self.plan, self.tasks = url, storage_options, plan, tasks
        self.result_file = result_file

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BuiltMessage:
        """Index the data files of the groups this task's rows name."""
        groups = [g for batch in iterator for g in batch.column(0).to_pylist()]
        storage = so.shared_storage(self.url, self.storage_options)
        snapshot = load_snapshot(storage, self.plan["version"])
        entry = snapshot.indexes[self.plan["name"]]
        by_id = {a.fileId: a for a in snapshot.live_files()}
        files = [by_id[i] for i in self.plan["fileIds"]]
        # Every task computes the same groups from the plan; a row names one of them.
        shares = balanced_groups([a.size for a in files], self.tasks)
        mine = [files[i] for g in groups if g < len(shares) for i in shares[g]]
        rel_dir = self.plan["pendingDir"][len(INDEX_DIR) + 1:]
        built = task_index_files(storage, snapshot, entry, mine, rel_dir) if mine else []
        return BuiltMessage([f.model_dump_json() for f in built])

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit the index ACTIVE with every task's files (the transient state's version
        is the one the plan began)."""
        files = [IndexFile.model_validate_json(j) for m in messages if isinstance(m, BuiltMessage) for j in m.files]
        files.sort(key=lambda f: (f.bucket, f.path))
        started = self._started()
        result = _finish(started, self.plan, files)
        if self.result_file:
            with open(self.result_file, "w") as f:
                json.dump({"version": result.version}, f)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The job failed: delete what the tasks wrote and cancel the operation (its pending
        folder goes too), unless another operation took the index meanwhile."""
        storage = so.shared_storage(self.url, self.storage_options)
        for m in messages:
            if isinstance(m, BuiltMessage):
                for j in m.files:
                    storage.delete(IndexFile.model_validate_json(j).path)
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
