"""Spark writes into a table: the batch and streaming writers of the ``indexeddf`` source.

One write, in PySpark's Python data source API, in three steps of their own modules
(this module holds the writer classes Spark calls, and re-exports the steps' names):

1. Driver, planning (:func:`plan_write`, ``write_plan.py``): read the table (or see
   that it is missing), validate the options and the DataFrame's schema, and fix what
   the tasks write with (metadata, the indexes to maintain) and the version the write
   is based on. Errors are typed (``SchemaMismatchError``, ``InvalidOptionError``,
   ``TableExistsError``) and stop the job before any task runs.
2. Executors (:func:`write_task`, ``write_task.py``): conform the Arrow batches to the
   table schema and write them like ``operations.append`` does (``write_rows``: one
   data file per touched bucket per ~128 MB of input, plus the entries of every
   maintained index). The ``add`` actions and index files go back to the driver in a
   :class:`FilesMessage`.
3. Driver (:func:`commit_plan` or :func:`abort_write`, ``write_commit.py``): ONE log
   commit through :class:`Transaction` (blind append; overwrite reads everything), or
   ``commit_create`` for a new table.

Nothing a failed job wrote stays behind, even from tasks Spark killed while they were
still writing (their results never reach the driver). Each task, once its files are
written, records them in a manifest ``data/_staging/<write id>/<uuid>.json`` and then
looks for the abort marker ``data/_staging/<write id>/_ABORTED``; ``abort`` first
creates the marker, then deletes the files of every manifest. A task that looked
before the marker existed wrote its manifest before that, so ``abort`` finds it; one
that looks after deletes its own files. A commit removes the manifests (and files of
task attempts whose results were dropped). Readers never list ``data/``.

Streaming micro-batches commit with ``txn=(txnAppId, batchId)``: a batch that the
table already holds (a replay after a crash between our commit and Spark's offset
commit) is dropped, so every micro-batch lands exactly once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ..errors import IndexedDFError
from ..format.snapshot import load_snapshot
from ..spec.actions import PRIMARY_INDEX, IndexEntry
from ..writer.operations import maintained_indexes
from . import options as so
from .write_commit import abort_write, commit_plan, delete_uncommitted, files_messages, gather_files
from .write_plan import WritePlan, plan_write
from .write_task import TASK_FLUSH_BYTES, FilesMessage, write_task

__all__ = [
    "IndexedBatchWriter", "IndexedStreamWriter", "MicroBatchWriter", "batch_writer", "stream_writer",
    # the steps, defined in write_plan, write_task and write_commit
    "WritePlan", "plan_write", "FilesMessage", "TASK_FLUSH_BYTES", "write_task",
    "commit_plan", "abort_write", "delete_uncommitted",
]


# -- the Spark writer classes -----------------------------------------------------------------
class IndexedBatchWriter(DataSourceArrowWriter):
    """``df.write.format("indexeddf")``: tasks write bucketed files, the driver commits once."""

    def __init__(self, plan: WritePlan):
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_plan(self.plan, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        msgs = files_messages(messages)
        abort_write(self.plan.storage(), {self.plan.write_id} | {m.write_id for m in msgs}, gather_files(msgs)[2])


class IndexedStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("indexeddf")``: one commit per micro-batch, exactly once.

    Spark makes a new writer for each micro-batch's tasks and another one to commit
    it, each planned against the table as it is then. The commit takes the plan the
    tasks used from their messages (write id, action, base version), so the transaction
    checks every commit since that version (e.g. a metadata change).
    """

    def __init__(self, plan: WritePlan, app_id: str, overwrite: bool):
        self.plan = plan
        self.app_id = app_id
        self.overwrite = overwrite

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        msgs = files_messages(messages)
        plans = {(m.write_id, m.action, m.read_version, m.metadata_json) for m in msgs}
        if len(plans) > 1:
            abort_write(self.plan.storage(), {m.write_id for m in msgs}, gather_files(msgs)[2])
            raise IndexedDFError(f"the tasks of micro-batch {batchId} were planned differently: {plans}")
        plan = self.plan if not plans else _task_plan(self.plan, *plans.pop())
        # Delta's STREAMING UPDATE parameters (its commitInfo names the output mode and the batch).
        plan = replace(plan, parameters={**plan.parameters, "outputMode": "Complete" if self.overwrite else "Append",
                                         "epochId": int(batchId)})
        commit_plan(plan, messages, "STREAMING UPDATE", txn=(self.app_id, int(batchId)), commit_empty=self.overwrite)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        msgs = files_messages(messages)
        abort_write(self.plan.storage(), {m.write_id for m in msgs}, gather_files(msgs)[2])


def _task_plan(current: WritePlan, write_id: str, action: str, read_version: int | None,
               metadata_json: str | None = None) -> WritePlan:
    """The plan the tasks wrote with, rebuilt on the committing driver (``metadata_json``:
    the schema-changing metadata they wrote with, if any)."""
    if action == "create":
        if current.action == "create":
            return replace(current, write_id=write_id)
        # The table appeared while the batch ran (our previous batch, or another writer).
        # This driver's planning checked the DataFrame's columns and the bucketing options
        # against it; commit as a create, whose fallback appends when the layouts match.
        m = load_snapshot(current.storage()).metadata
        ours = m.model_copy(update={"schema_": tuple(f.model_copy(update={"nullable": True}) for f in m.schema_)})
        primary = IndexEntry(name=PRIMARY_INDEX, columns=m.indexColumns, kind="primary", state="ACTIVE",
                             numBuckets=m.numBuckets, coveredVersion=0)
        return replace(current, action="create", write_id=write_id, read_version=None,
                       metadata_json=ours.model_dump_json(by_alias=True), indexes_json=[primary.model_dump_json()],
                       fail_if_exists=False, skip_if_exists=False, parameters={"mode": "append"})
    snap = load_snapshot(current.storage(), read_version)
    indexes = maintained_indexes(snap, rebuild=action == "overwrite")
    return replace(current, action=action, write_id=write_id, read_version=read_version,
                   metadata_json=metadata_json or snap.metadata.model_dump_json(by_alias=True),
                   new_metadata=metadata_json is not None,
                   indexes_json=[i.model_dump_json() for i in indexes])


STREAM_BATCH_OPTION = "_streamBatchId"
"""Private batch-write option: this batch write is micro-batch N of a stream (the JVM
connector's stream sink passes each micro-batch on as a batch write with it)."""


def batch_writer(options: Any, spark_schema, overwrite: bool):
    """The writer of ``df.write.format("indexeddf")``; with ``_streamBatchId`` the stream
    writer of that micro-batch (:class:`MicroBatchWriter`)."""
    batch_id = None
    rest = {}
    for key, value in dict(options or {}).items():
        if key.lower() == STREAM_BATCH_OPTION.lower():
            batch_id = value
        else:
            rest[key] = value
    if batch_id is not None:
        batch = so.int_option({"batch": batch_id}, "batch", None, 0)
        return MicroBatchWriter(stream_writer(rest, spark_schema, overwrite), batch)
    return IndexedBatchWriter(plan_write(options, spark_schema, overwrite, streaming=False))


class MicroBatchWriter(DataSourceArrowWriter):
    """One micro-batch written as a batch write, committed exactly as
    :class:`IndexedStreamWriter` commits it (``txn=(txnAppId, batchId)``, "STREAMING UPDATE",
    an empty append commits nothing): the JVM connector's stream sink uses it."""

    def __init__(self, stream: IndexedStreamWriter, batch_id: int):
        self.stream = stream
        self.batch_id = batch_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        return self.stream.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.stream.commit(messages, self.batch_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.stream.abort(messages, self.batch_id)


def stream_writer(options: Any, spark_schema, overwrite: bool) -> IndexedStreamWriter:
    """The writer of one micro-batch of ``writeStream.format("indexeddf")``."""
    plan = plan_write(options, spark_schema, overwrite, streaming=True)
    app_id = so.parse_options(options, so.STREAM_OPTIONS, "writeStream.format('indexeddf')")["txnAppId"].strip()
    return IndexedStreamWriter(plan, app_id, overwrite)
