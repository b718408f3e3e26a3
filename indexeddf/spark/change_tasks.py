"""A MERGE of a large source run by Spark's tasks, a bucket at a time, committed once.

The connector sends a MERGE here (``"bucketTasks": true`` in its ``changeSpec``) when the change
engine evaluates it exactly as Spark does (``io.indexeddf.spark.plan.BucketTasks``): its source is
too large to send to the driver, its ON condition equates every bucketing column of the table
with a source expression of the column's own type, every live file has a bucket, and no ``NOT
MATCHED BY SOURCE`` clause needs every target row. Spark evaluates the source and every
expression over the source's columns alone, and repartitions the rows by the table's bucket
(Spark's ``hash`` of the keys, which is the bucket: docs/PROTOCOL.md), a few buckets a task.
Each task (:func:`write_buckets`) then runs the change engine on each of its buckets, the way
:func:`indexeddf.changes.engine.run_part` runs a part of a staged source on the driver: the index
finds the target rows of the bucket's keys, the bucket's files get their deletion vectors or are
copied without the changed rows, the new rows are written with their index entries. A target row
can only match source rows of its own bucket, so no two tasks touch one file, and a target row
matched twice is seen by one task, which fails the MERGE as Delta does. The driver
(:func:`commit_buckets`) commits every task's actions once, on the version the plan read.

A MERGE of a small source (``"oneTask": true``) comes here too: the connector coalesces the
source into one partition and its one task runs the change engine's single pass over it
(:func:`write_buckets`), which the driver's commit ran before. The commit is the same.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from ..changes.commit import commit_change
from ..changes.model import ChangeMetrics
from ..errors import InvalidOptionError
from ..format.transaction import ALL_BUCKETS, Transaction
from ..spec.actions import IndexFile, parse_line
from .task_actions import action_line, committed_before, task_metrics, txn_of, version_read

# The engine, the readers and writers load in the tasks that run the change (the local
# daemon has them loaded already), not with this module: the driver's commit worker
# imports it to commit, starting cold after an idle minute.

TASKS_KEY = "bucketTasks"
"""The key of a MERGE's ``changeSpec`` that makes its write tasks run it a bucket at a time."""
ONE_TASK_KEY = "oneTask"
"""The key of a MERGE's ``changeSpec`` that makes its one write task run it whole (a small
source, which the connector coalesces into one partition)."""


@dataclass
class ChangedBuckets(WriterCommitMessage):
    """What one task did to its buckets: actions (log lines) and index files to commit, the
    paths it wrote, the buckets it ran and read (None: every bucket), its counts."""

    actions: list[str] = field(default_factory=list)
    index_files: dict[str, list[str]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)
    read: list[int] | None = field(default_factory=list)
    found_by: list[str] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)
    operation: str = ""
    """The change's operation and parameters, as its commit records them."""
    parameters: dict = field(default_factory=dict)


def in_tasks(spec: dict) -> bool:
    """Whether a change's tasks run it themselves (a bucket at a time, or whole in one task)."""
    return bool(spec.get(TASKS_KEY) or spec.get(ONE_TASK_KEY))


def write_buckets(writer, iterator: Iterator[pa.RecordBatch]) -> ChangedBuckets:
    """Run the MERGE on this task's buckets (``writer``: the change's ``ChangeWriter``), one
    bucket's source rows in memory at a time; or, for a small source the connector coalesced
    into this one task, on all its rows in one pass, as the driver's commit would (the work
    then runs in an executor's Python worker, which the local daemon keeps loaded, instead of
    the driver's commit worker, which starts cold)."""
    snapshot = version_read(writer.url, writer.storage_options, writer.result_file, int(writer.spec["readVersion"]))
    if writer.spec.get(ONE_TASK_KEY):
        batches = [b for b in iterator if b.num_rows]
        rows = pa.Table.from_batches(batches).cast(writer.schema) if batches else writer.schema.empty_table()
        return _run_parts(writer, snapshot, [(None, rows)])
    staging = writer.staging_at(snapshot)  # the buckets of the version read, as Spark partitioned the rows
    if staging is None:
        raise InvalidOptionError("the MERGE cannot run a bucket at a time on the version it read (its ON condition "
                                 "does not fix every bucketing column, or a file has no bucket); nothing was "
                                 "committed. Run it with spark.indexeddf.merge.bucketTasks.enabled=false")
    return _run_parts(writer, snapshot, _by_bucket(iterator, staging, writer.schema))


def _run_parts(writer, snapshot, parts: Iterable[tuple[int | None, pa.Table]]) -> ChangedBuckets:
    """Run the change on each part (a bucket and its source rows, or None and the whole
    source), without committing: the task's message of what it wrote."""
    from ..changes.engine import prepare, run_part, union_read

    change = writer.change_of(snapshot)
    prepared = prepare(snapshot, change)
    message, metrics, read = ChangedBuckets(operation=change.operation, parameters=change.parameters), ChangeMetrics(), set()
    try:
        for bucket, rows in parts:
            metrics.num_source_rows += rows.num_rows
            done = run_part(snapshot, replace(change, source=rows), prepared, None if bucket is None else {bucket},
                            message.written, metrics)
            if bucket is not None:
                message.buckets.append(bucket)
            message.actions += [action_line(a) for a in done.actions]
            for name, files in done.index_files.items():
                message.index_files.setdefault(name, []).extend(f.model_dump_json(by_alias=True) for f in files)
            message.found_by.append(done.found_by)
            read = union_read(read, done.read_buckets)
    except BaseException:
        _delete_uncommitted(snapshot.storage, message.written)
        raise
    message.read = None if read is ALL_BUCKETS else sorted(read)
    message.metrics = {k: v for k, v in metrics.as_dict().items() if isinstance(v, int)}
    return message


def _by_bucket(batches: Iterator[pa.RecordBatch], staging, schema: pa.Schema) -> Iterator[tuple[int, pa.Table]]:
    """The task's source rows, a bucket at a time: Spark hands a task its buckets' partitions
    one after another, so each bucket's rows come together."""
    held: list[pa.Table] = []
    current, done = None, set()
    for batch in batches:
        if not batch.num_rows:
            continue
        rows = pa.Table.from_batches([batch]).cast(schema)
        buckets = staging.of(rows)
        if buckets is None:
            raise InvalidOptionError("a MERGE source key does not fit the table's key type; nothing was committed")
        ends = np.r_[np.flatnonzero(buckets[1:] != buckets[:-1]) + 1, len(buckets)]
        start = 0
        for end in ends:
            bucket = int(buckets[start])
            if bucket != current:
                if held:
                    yield current, pa.concat_tables(held)
                    done.add(current)
                if bucket in done:
                    raise _split(bucket)
                held, current = [], bucket
            held.append(rows.slice(start, end - start))
            start = end
    if held:
        yield current, pa.concat_tables(held)


def _split(bucket: int) -> InvalidOptionError:
    return InvalidOptionError(
        f"the MERGE's source rows of bucket {bucket} reached more than one piece of work, so no task saw all of "
        "them; nothing was committed. Run the statement again with "
        "spark.indexeddf.merge.bucketTasks.enabled=false, and report the plan (EXPLAIN) to indexeddf's developers")


def commit_buckets(writer, messages: list) -> None:
    """Commit every task's actions once, on the version the plan read; the metrics go to the
    statement's result file."""
    started = time.perf_counter()
    msgs = [m for m in messages if isinstance(m, ChangedBuckets)]
    storage = writer._storage()
    written = [p for m in msgs for p in m.written]
    twice = [b for b, n in Counter(b for m in msgs for b in m.buckets).items() if n > 1]
    if twice:
        _delete_uncommitted(storage, written)
        raise _split(twice[0])
    snapshot = version_read(writer.url, writer.storage_options, writer.result_file, int(writer.spec["readVersion"]))
    txn = txn_of(writer.spec)
    metrics = task_metrics(msgs)
    found = {f for m in msgs for f in m.found_by}
    metrics.rows_found_by = "scan" if "scan" in found else "index"
    ran = next((m for m in msgs if m.operation), None)
    if ran is None or txn is not None and committed_before(snapshot, txn):
        # No task ran the change (a source of no partition changes nothing), or an
        # idempotent retry, which changes nothing either.
        _delete_uncommitted(storage, written)
        _result(writer, ChangeMetrics())
        return
    read = ALL_BUCKETS if any(m.read is None for m in msgs) else sorted({b for m in msgs for b in m.read})
    actions = [parse_line(a) for m in msgs for a in m.actions]
    index_files: dict[str, list[IndexFile]] = {}
    for m in msgs:
        for name, files in m.index_files.items():
            index_files.setdefault(name, []).extend(IndexFile.model_validate_json(f) for f in files)
    tx = Transaction(snapshot, ran.operation, ran.parameters, read_buckets=read, written_paths=written)
    _, metrics = commit_change(snapshot, tx, actions, index_files, metrics, started, ran.operation, txn)
    _result(writer, metrics)


def _delete_uncommitted(storage, written: list[str]) -> None:
    """``write_commit.delete_uncommitted``, imported where it runs (it loads the writers)."""
    from .write_commit import delete_uncommitted

    delete_uncommitted(storage, written)


def _result(writer, metrics: ChangeMetrics) -> None:
    if writer.result_file:
        with open(writer.result_file, "w") as f:
            json.dump({"version": metrics.version, "metrics": metrics.as_dict()}, f)


def abort_buckets(storage, messages: list) -> None:
    """Delete what the tasks wrote; nothing was committed."""
    _delete_uncommitted(storage, [p for m in messages if isinstance(m, ChangedBuckets) for p in m.written])
