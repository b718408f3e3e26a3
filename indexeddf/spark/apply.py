"""Spark SQL's ``DELETE FROM`` and ``UPDATE`` on an indexeddf table, the Python side: the
outcome Spark computed, written by Spark's tasks and committed once by the driver.

The connector's command (``io.indexeddf.spark.plan.SparkChange``, docs/spark-tables.md) plans
the statement over the table's relation at the version it resolved: Catalyst evaluates the
condition and the assignments, and every changed row arrives here as ``__indexeddf_op``
(``delete`` or ``update``), ``__indexeddf_file`` and ``__indexeddf_row`` (the row's file
id, ``_metadata.indexeddf_file_id``, and Spark's ``_metadata.row_index``: its ordinal in the
file, what a deletion vector names) and, for an UPDATE, the row's new values in the table's
columns. Spark repartitions the rows by file, so every changed row of a file is in one task.

1. each task (:meth:`ApplyWriter.write`) writes its files' outcome with the change engine's
   writer (:func:`indexeddf.changes.rewrite.apply_outcome`): a deletion vector per file (the
   old one unioned in) or a copy of its kept rows into a new file of its bucket, and the
   updated rows as new bucketed files with their index entries; it returns the actions;
2. the driver (:meth:`ApplyWriter.commit`) commits them once, on the version the plan read
   (the transaction's conflict rules decide whether a concurrent commit lets it through), and
   leaves the metrics in the command's result file. A failed or aborted write deletes what
   the tasks wrote.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..changes.commit import commit_metrics, drop_inserts_only
from ..changes.model import ChangeMetrics
from ..errors import InvalidOptionError
from ..format.snapshot import Snapshot
from ..format.transaction import ALL_BUCKETS, Transaction
from ..spec.actions import AddFile, CdcFile, IndexFile, RemoveFile, Txn
from ..spec.column_mapping import file_schema
from ..spec.deletion_vectors import unique_sorted
from ..spec.features import deletion_vectors_enabled
from . import options as so
from .task_actions import action_json, committed_before, task_metrics, txn_of, version_read
from .write_commit import delete_uncommitted

APPLY_OPTION = "changeApply"
"""The option that makes a write of ``indexeddf_python`` the outcome of a change Spark planned."""
APPLY_OPTIONS = ["path", "storageOptions", APPLY_OPTION]
OP, FILE, ROW = "__indexeddf_op", "__indexeddf_file", "__indexeddf_row"
PART = "__indexeddf_part"
"""The plan's partition a row comes from, where the connector left the outcome where its join
put it (io.indexeddf.spark.plan.BucketedOutcome: every row of a file in one partition, the
partitions one after another in a task); null elsewhere."""


@dataclass
class AppliedMessage(WriterCommitMessage):
    """What one task wrote: actions and index files as JSON, the paths it created, its counts."""

    adds: list[str] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)
    cdcs: list[str] = field(default_factory=list)
    """The change data files the task wrote (``cdc`` actions), when the table's feed is on."""
    index_files: dict[str, list[str]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)


def is_apply(options: Any) -> bool:
    """Whether a write's options carry the outcome of a change Spark planned."""
    return any(k.lower() == APPLY_OPTION.lower() for k in dict(options))


def apply_writer(options: Any, schema) -> "ApplyWriter":
    """The writer of a change's outcome (its options parsed and checked on the driver)."""
    opts = so.parse_options(options, APPLY_OPTIONS, "a change planned by Spark")
    spec = so.json_option(opts, APPLY_OPTION, ("DELETE", "UPDATE", "MERGE"))
    return ApplyWriter(so.option_path(opts), so.storage_options(opts), spec)


class ApplyWriter(DataSourceArrowWriter):
    """Writes each task's changed files, commits them all once."""

    def __init__(self, url: str, storage_options: dict[str, Any], spec: dict):
        self.url, self.storage_options, self.spec = url, storage_options, spec

    def _snapshot(self) -> Snapshot:
        return version_read(self.url, self.storage_options, self.spec.get("resultFile"), int(self.spec["readVersion"]))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AppliedMessage:
        """Write the outcome of this task's files, a partition of the plan at a time where the
        plan says where its partitions end (:func:`_partitions`)."""
        message, metrics, snapshot = AppliedMessage(), ChangeMetrics(), None
        try:
            for rows in _partitions(iterator):
                snapshot = snapshot or self._snapshot()
                _write_rows(snapshot, rows, message, metrics)
        except BaseException:
            if snapshot is not None:
                delete_uncommitted(snapshot.storage, message.written)
            raise
        message.metrics = {k: v for k, v in metrics.as_dict().items() if isinstance(v, int)}
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's actions once, on the version the plan read."""
        started = time.perf_counter()
        msgs = [m for m in messages if isinstance(m, AppliedMessage)]
        snapshot = self._snapshot()
        removes = [RemoveFile.model_validate_json(a) for m in msgs for a in m.removes]
        _one_task_a_file(removes)
        adds = [AddFile.model_validate_json(a) for m in msgs for a in m.adds]
        cdcs = [CdcFile.model_validate_json(a) for m in msgs for a in m.cdcs]
        index_files: dict[str, list[IndexFile]] = {}
        for m in msgs:
            for name, files in m.index_files.items():
                index_files.setdefault(name, []).extend(IndexFile.model_validate_json(f) for f in files)
        metrics = task_metrics(msgs)
        txn = txn_of(self.spec)
        written = [p for m in msgs for p in m.written]
        if txn is not None and committed_before(snapshot, txn):
            delete_uncommitted(snapshot.storage, written)  # an idempotent retry changes nothing
            metrics = ChangeMetrics()
        elif removes or adds:
            parameters = json.loads(self.spec.get("parameters") or "{}")
            # Decided for the whole commit: a task that only inserted cannot know whether another changed rows.
            actions: list = drop_inserts_only(snapshot.storage, removes + adds + cdcs, written)
            if txn is not None:
                parameters.update(txnAppId=txn[0], txnVersion=txn[1])
                actions.append(Txn(appId=txn[0], version=txn[1], lastUpdated=int(time.time() * 1000)))
            tx = Transaction(snapshot, self.spec["operation"], parameters,
                             read_buckets=ALL_BUCKETS, written_paths=written)
            metrics.execution_time_ms = int((time.perf_counter() - started) * 1000)
            result = tx.commit(actions, commit_metrics(self.spec["operation"], metrics, adds), index_files)
            metrics.version = result.version
        result_file = self.spec.get("resultFile")
        if result_file:
            with open(result_file, "w") as f:
                json.dump({"version": metrics.version, "metrics": metrics.as_dict()}, f)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete what the tasks wrote; nothing was committed."""
        written = [p for m in messages if isinstance(m, AppliedMessage) for p in m.written]
        delete_uncommitted(so.shared_storage(self.url, self.storage_options), written)


def _partitions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The task's rows, a plan partition at a time where they carry it (``PART``), else all
    at once: a task that writes several buckets' outcomes holds one bucket's rows at a time."""
    held: list[pa.RecordBatch] = []
    part = None
    for batch in batches:
        if not batch.num_rows:
            continue
        column = batch.column(PART) if PART in batch.schema.names else None
        if column is None or column.null_count == batch.num_rows:
            held.append(batch)
            continue
        parts = column.to_numpy(zero_copy_only=False)
        ends = np.r_[np.flatnonzero(parts[1:] != parts[:-1]) + 1, len(parts)]
        start = 0
        for end in ends:
            if held and parts[start] != part:
                yield pa.Table.from_batches(held)
                held = []
            held.append(batch.slice(start, end - start))
            part, start = parts[start], end
    if held:
        yield pa.Table.from_batches(held)


def _write_rows(snapshot: Snapshot, rows: pa.Table, message: AppliedMessage, metrics: ChangeMetrics) -> None:
    """Write the outcome of the files ``rows`` change (every changed row of each) and of their
    inserted rows into ``message``; ``metrics`` counts them."""
    # In the task only: the writer's code is what a Python worker's daemon preloads, and Spark's
    # planner processes, which load this module to create and commit the write, never run it.
    from ..changes.rewrite import apply_outcome

    conf = snapshot.metadata.configuration
    schema = file_schema(snapshot.metadata.schema_, conf)
    ops = rows.column(OP)
    counted = rows.filter(pc.equal(ops, "count"))  # a MERGE's source rows, counted by Spark
    rows = rows.filter(pc.not_equal(ops, "count"))
    ops = rows.column(OP)
    inserted = rows.filter(pc.equal(ops, "insert"))
    changed, deleted, updated = [], 0, 0
    for add, ordinals, mine in _by_file(snapshot, rows.filter(pc.not_equal(ops, "insert"))):
        new = mine.filter(pc.equal(mine.column(OP), "update"))
        gone = mine.filter(pc.equal(mine.column(OP), "delete")).column(ROW).to_numpy().astype(np.int64)
        changed.append((add, ordinals, new.select(schema.names).cast(schema) if new.num_rows else None, gone))
        updated += new.num_rows
        deleted += len(ordinals) - new.num_rows
    actions, index_files = apply_outcome(
        snapshot, schema, snapshot.metadata, deletion_vectors_enabled(conf), changed,
        inserted.select(schema.names).cast(schema) if inserted.num_rows else None, message.written, metrics)
    metrics.num_target_rows_updated += updated
    metrics.num_target_rows_deleted += deleted
    metrics.num_target_rows_inserted += inserted.num_rows
    metrics.num_source_rows += sum(counted.column(ROW).to_pylist())
    message.adds += [action_json(a) for a in actions if isinstance(a, AddFile)]
    message.removes += [a.model_dump_json(by_alias=True) for a in actions if isinstance(a, RemoveFile)]
    message.cdcs += [a.model_dump_json(by_alias=True) for a in actions if isinstance(a, CdcFile)]
    for name, files in index_files.items():
        message.index_files.setdefault(name, []).extend(f.model_dump_json(by_alias=True) for f in files)


def _one_task_a_file(removes: list[RemoveFile]) -> None:
    """Refuse to commit when two tasks changed the same file: the plan hands every row of a
    file to one task (a repartition by file, or a bucketed scan whose partition holds the
    file's bucket); two outcomes of one file would each keep rows the other changed."""
    twice = sorted(p for p, n in Counter(r.path for r in removes).items() if n > 1)
    if twice:
        raise InvalidOptionError(
            f"the change's tasks split the rows of {twice[0]} (and {len(twice) - 1} more files) between them, so "
            "no task saw all of its changes; nothing was committed. Run the statement again with "
            "spark.indexeddf.change.bucketedOutcome.enabled=false, and report the plan (EXPLAIN) to indexeddf's developers")


def _by_file(snapshot: Snapshot, rows: pa.Table) -> Iterator[tuple[AddFile, np.ndarray, pa.Table]]:
    """Each file the rows name (its id, ``_metadata.indexeddf_file_id``), the ordinals of its
    changed rows, and those rows."""
    if not rows.num_rows:
        return
    by_id = {a.fileId: a for a in snapshot.live_files()}
    ids = rows.column(FILE).to_numpy()
    order = np.argsort(ids, kind="stable")  # one pass: the rows of each file together
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    for start, end in zip(starts, np.r_[starts[1:], len(ids)]):
        add = _file_of(by_id, int(sorted_ids[start]))
        mine = rows.take(order[start:end])
        ordinals = mine.column(ROW).to_numpy().astype(np.int64)
        if len(unique_sorted(ordinals)) != len(ordinals):  # only a MERGE's join can name a row twice
            raise InvalidOptionError(
                "MERGE: multiple source rows matched the same target row; a matched clause cannot tell which to "
                "apply. Make the source unique on the merge keys (for example keep the newest row per key) and run "
                "it again; nothing was committed")
        yield add, ordinals, mine


def _file_of(by_id: dict[int, AddFile], file_id: int) -> AddFile:
    """The live file of the version read whose id a changed row names."""
    add = by_id.get(file_id)
    if add is None:
        raise InvalidOptionError(f"a change named the file id {file_id}, which the version it read does not hold")
    return add
