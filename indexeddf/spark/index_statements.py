"""SQL ``CREATE INDEX``, ``REFRESH INDEX`` and ``CONVERT TO INDEXEDDF`` with the index built by
Spark's tasks.

A statement reaches Python as writes through this data source (``operation.py``): a write's
commit runs in a Python worker of the driver, which has no session to start a job from, so
the connector's command (``io.indexeddf.spark.plan.TableOperationCommand``) runs the job:

1. ``begin``: a write of one row whose commit checks the statement and, for an index
   statement, commits the index's transient state (``lifecycle.begin``: CREATING or
   REFRESHING, with its ``pendingDir``), exactly as the Python API does; it returns the
   build's plan (:func:`begin_build`, :func:`begin_convert`): the version to read, the index's
   columns and bucket count, and the data files to index, each named with the way it is read
   (``index_tasks.split_reads``): ``native`` by Spark's
   Parquet scan, ``python`` by the project's reader;
2. the command builds the entries (``bucket, hash, file_id, row``: ``index_tasks.ENTRY_SCHEMA``)
   bit for bit as the single-process build does: for the ``native`` files, Spark's scan of the index
   columns with ``_metadata.row_index`` and the connector's constant
   ``_metadata.indexeddf_file_id``, hashed by Spark's ``Murmur3Hash`` with the seeds of
   ``spec.json``; for the ``python`` files (deletion vectors, column mapping, an index on a
   partition column, storage that is not local, ...), a read of this source with the option
   ``_indexEntries`` (:class:`EntriesReader`: a task a group of files of about equal bytes,
   each file read through ``format/datafiles.py`` and hashed with ``spec/bucketing.py``);
3. ``indexBuild``: a write of those entries, merged into one task a core (no shuffle): each
   task (:meth:`BuildWriter.write`) sorts its entries a chunk at a time and writes index
   files under ``pendingDir`` (``index_tasks.write_entry_batches``, as ``create_index(spark=)``
   writes them) and returns their descriptors; the commit (:meth:`BuildWriter.commit`)
   commits ACTIVE with them through the same lifecycle (``lifecycle.finish``), or for
   ``CONVERT TO INDEXEDDF`` the conversion (``convert_table``: one commit).

The entries are those of the single-process build. A failed job (a task cannot read a data
file) aborts the write: the tasks' files are deleted and the operation cancels itself
(``cancel_index``: CREATING ends DELETED, REFRESHING goes back to ACTIVE; a conversion
committed nothing); if the driver dies between the writes the index stays in its transient
state, which ``cancel_index`` ends, as after any crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceReader, InputPartition, WriterCommitMessage

from ..errors import ConcurrentIndexError
from ..format.snapshot import Snapshot, load_snapshot, update_snapshot
from ..spec.actions import AddFile, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..writer import index_ops, lifecycle
from ..writer.index_files import INDEX_DIR
from . import options as so
from .index_tasks import TASKS_PER_CORE, balanced_groups, check_present, file_entries, split_reads, write_entry_batches

BUILD_OPERATION = "indexBuild"
"""The ``_operation`` of the build write: the tasks that sort and write, and the final commit."""
ENTRIES_OPTION = "_indexEntries"
"""Private read option: the plan whose ``python`` files the read turns into index entries."""


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
    try:
        plan |= _reads(started.snapshot, started.entry, to_index)
    except BaseException:  # a data file is missing: the operation ends as a failed build ends
        lifecycle.cancel_index(started.snapshot, name)
        raise
    return {"plan": plan}


def begin_convert(snapshot: Snapshot, columns: list[str], num_buckets: int | None) -> dict:
    """``CONVERT TO INDEXEDDF``'s first write: the conversion checked and planned
    (``convert_plan``; nothing is committed): ``{"plan": ...}``, whose build write's commit
    converts with the files the tasks wrote."""
    from ..writer.convert import convert_plan
    from ..writer.index_files import PRIMARY

    entry, _ = convert_plan(snapshot, columns, num_buckets)
    live = snapshot.live_files()
    plan = {"name": PRIMARY, "statement": "convert", "version": snapshot.version, "pendingDir": f"{INDEX_DIR}/{PRIMARY}",
            "fileIds": [a.fileId for a in live], "removed": [], "unindexed": True}
    return {"plan": plan | _reads(snapshot, entry, live)}


def _reads(snapshot: Snapshot, entry: IndexEntry, files: list[AddFile]) -> dict:
    """What the connector needs to build the entries of ``files``: the index's columns and
    bucket count and each file's way (``split_reads``); the files Spark's scan reads are
    checked to exist (``MissingFileError``, as the single-process build raises)."""
    native, python = split_reads(snapshot, entry, files)
    check_present(snapshot, native)
    return {"columns": list(entry.columns), "numBuckets": entry.numBuckets,
            "native": [a.fileId for a in native], "python": [a.fileId for a in python]}


def is_entries(options: Any) -> bool:
    """Whether a read's options carry a build plan (:data:`ENTRIES_OPTION`)."""
    return any(k.lower() == ENTRIES_OPTION.lower() for k in dict(options))


def entries_reader(options: Any) -> "EntriesReader":
    """The reader of a plan's ``python`` files' entries (the option holds the plan and the
    session's core count)."""
    opts = {k.lower(): v for k, v in dict(options).items()}
    spec = json.loads(opts[ENTRIES_OPTION.lower()])
    storage_options = so.storage_options({"storageOptions": opts.get("storageoptions")})
    return EntriesReader(opts["path"], storage_options, spec["plan"], TASKS_PER_CORE * int(spec.get("cores") or 1))


class EntriesReader(DataSourceReader):
    """A partition a group of the plan's ``python`` files (about equal bytes); its rows are
    the files' entries (``ENTRY_SCHEMA``), read and hashed in the task."""

    def __init__(self, url: str, storage_options: dict[str, Any], plan: dict, tasks: int):
        self.url, self.storage_options, self.plan, self.tasks = url, storage_options, plan, tasks

    def partitions(self) -> list[InputPartition]:
        """One per group of files (every task computes the same groups from the plan)."""
        return [InputPartition(i) for i in range(len(self._groups(self._files()[1])))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The entries of the live rows of the partition's files, a row group at a time."""
        snapshot, files = self._files()
        schema = table_schema(snapshot.metadata)
        columns, num_buckets = list(self.plan["columns"]), int(self.plan["numBuckets"])
        for i in self._groups(files)[partition.value]:
            yield from file_entries(snapshot.storage, files[i], schema, columns, num_buckets, snapshot.version)

    def _files(self) -> tuple[Snapshot, list[AddFile]]:
        """The snapshot the plan read and its ``python`` files, in the plan's order."""
        storage = so.shared_storage(self.url, self.storage_options)
        snapshot = load_snapshot(storage, int(self.plan["version"]), unindexed_ok=True)
        by_id = {a.fileId: a for a in snapshot.live_files()}
        return snapshot, [by_id[i] for i in self.plan["python"]]

    def _groups(self, files: list[AddFile]) -> list[list[int]]:
        return balanced_groups([a.size for a in files], self.tasks) if files else []


def build_writer(url: str, storage_options: dict[str, Any], spec: dict) -> "BuildWriter":
    """The build write's writer (``spec``: the plan)."""
    return BuildWriter(url, storage_options, spec["plan"], spec.get("resultFile"))


@dataclass
class BuiltMessage(WriterCommitMessage):
    """One task's index files, as JSON."""

    files: list[str] = field(default_factory=list)


class BuildWriter(DataSourceArrowWriter):
    """Tasks sort and write a share of the entries each; the commit commits them all once."""

    def __init__(self, url: str, storage_options: dict[str, Any], plan: dict, result_file: str | None):
        self.url, self.storage_options, self.plan, self.result_file = url, storage_options, plan, result_file

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BuiltMessage:
        """Sort this task's entries a chunk at a time and write them as index files."""
        storage = so.shared_storage(self.url, self.storage_options)
        rel_dir = self.plan["pendingDir"][len(INDEX_DIR) + 1:]
        built = write_entry_batches(storage, rel_dir, iterator)
        return BuiltMessage([f.model_dump_json() for f in built])

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit the index ACTIVE with every task's files (the transient state's version
        is the one the plan began), or the conversion with them."""
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
        committed nothing to cancel."""
        storage = so.shared_storage(self.url, self.storage_options)
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
