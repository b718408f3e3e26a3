"""The change engine: MERGE, UPDATE and DELETE as one commit, copy on write or with
deletion vectors. Finding the rows is :mod:`.find`; what a change does to rows is
:mod:`.rows`; this module reads the files, writes, and commits.

Every entry point (``IndexedTable.merge / update / delete``, and Spark's through them)
runs :func:`execute`:

1. **Find** the target files that can hold a changed row. When the merge predicate
   fixes every column of a usable index by equality with source columns (or an
   UPDATE/DELETE predicate fixes them by literals), the index is probed with the
   source's keys and only the files holding a verified match are read; otherwise every
   live file is (a scan, as Delta does). ``not_matched_by_source`` clauses need every
   target row, so they always scan.
2. **Rewrite**, one file at a time (memory bounded by a file and the source): the
   file's rows are joined with the source on the equality keys, the rest of the
   predicate filters the pairs, each pair takes its first matching clause; a file
   with a changed row is removed and its copied rows are written as a new file (as they
   are when the file was sorted: still one bucket, in key order), its updated rows as
   new bucketed files with the inserts; all with their index entries. Files without a
   change stay.
3. **Insert** the source rows that matched no target row (``not_matched`` clauses).
4. **Commit** once: removes, adds and index entries; the transaction read the touched
   buckets (Delta's WriteSerializable: blind appends rebase, a concurrent removal of a
   read file fails it with a typed conflict).

A target row matched by two source rows with a ``matched`` clause fails the change,
as Delta's MERGE does, before anything is committed. NULL keys never match.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.datafiles import live_mask, read_file
from ..format.deletion_vectors import read_deletion_vector, write_deletion_vectors
from ..format.snapshot import Snapshot
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction
from ..reader import lookup as lookup_mod
from ..spec.actions import AddFile, Txn
from ..spec.features import deletion_vectors_enabled
from ..spec.schema import arrow_schema
from ..writer.operations import maintained_indexes, write_metrics, write_rows
from .clauses import INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
from .expressions import Scope
from .find import Found, find, target_columns
from .model import ROW, SOURCE_ROW, Change, ChangeMetrics
from .rows import change_file, inserts


def execute(snapshot: Snapshot, change: Change) -> tuple[CommitResult | None, ChangeMetrics]:
    """Run ``change`` on ``snapshot``; returns the commit (None when nothing changed)
    and its metrics."""
    started = time.perf_counter()
    metrics = ChangeMetrics(num_source_rows=0 if change.source is None else change.source.num_rows)
    if change.txn is not None:
        done = snapshot.txn_version(change.txn[0])
        if done is not None and done >= change.txn[1]:
            return None, metrics  # committed before: an idempotent retry changes nothing
    schema = arrow_schema(change.new_fields or snapshot.metadata.schema_)
    scope = Scope(schema, change.target_alias, None if change.source is None else change.source.schema,
                  change.source_alias)
    _check(change, scope, schema)
    vectors = deletion_vectors_enabled(snapshot.metadata.configuration)
    stored = arrow_schema(snapshot.metadata.schema_)
    wanted = [c for c in target_columns(change, scope, schema) if c in stored.names] if vectors else None
    found = find(snapshot, change, stored, wanted)
    if found.located is not None and change.new_fields:
        found.located = _with_new_columns(found.located, schema, stored)
    files, found_by = found.files, found.by
    metrics.rows_found_by = found_by
    metrics.scan_time_ms = _ms(started)
    buckets = ALL_BUCKETS if found_by == "scan" else sorted({a.bucket for a in files if a.bucket is not None})
    if found_by != "scan" and any(a.bucket is None for a in files):
        buckets = ALL_BUCKETS  # a file without a bucket holds rows of every bucket
    tx = Transaction(snapshot, change.operation, change.parameters, read_buckets=buckets)
    metadata = snapshot.metadata
    if change.new_fields:
        metadata = metadata.model_copy(update={"schema_": change.new_fields})
    if change.inserted is not None:
        tx.written_paths.extend(change.inserted.written)  # files of Spark's tasks: the transaction's now
    try:
        actions, index_files = _rewrite(snapshot, change, scope, schema, found, vectors, tx, metrics, metadata)
    except BaseException:
        tx.abort()
        raise
    if change.inserted is not None and change.inserted.adds:
        actions += change.inserted.adds
        metrics.num_target_files_added += len(change.inserted.adds)
        for name, fs in change.inserted.index_files.items():
            index_files.setdefault(name, []).extend(fs)
    if change.new_fields and actions:
        actions.insert(0, metadata)  # the new schema, in the same commit as the rows that need it
    metrics.execution_time_ms = _ms(started)
    if not actions:
        return None, metrics
    if change.txn is not None:
        app_id, txn_version = change.txn
        tx.parameters = {**tx.parameters, "txnAppId": app_id, "txnVersion": txn_version}
        actions.append(Txn(appId=app_id, version=txn_version, lastUpdated=int(time.time() * 1000)))
    adds = [a for a in actions if isinstance(a, AddFile)]
    result = tx.commit(actions, _commit_metrics(change.operation, metrics, adds), index_files)
    metrics.version = result.version
    metrics.execution_time_ms = _ms(started)
    return result, metrics


def _ms(since: float) -> int:
    return int((time.perf_counter() - since) * 1000)


def _commit_metrics(operation: str, m: ChangeMetrics, adds: list[AddFile]) -> dict:
    """Delta's operationMetrics names for the commit (DELETE and UPDATE have their own),
    and the written files' counts every write of the project records."""
    written = write_metrics(adds)
    if operation == "DELETE":
        return {**written, "numDeletedRows": m.num_target_rows_deleted, "numRemovedFiles": m.num_target_files_removed,
                "numAddedFiles": m.num_target_files_added, "numCopiedRows": m.num_target_rows_copied,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    if operation == "WRITE":  # a selective overwrite (replaceWhere): Delta's WRITE metrics
        return {**written, "numRemovedFiles": m.num_target_files_removed, "numDeletedRows": m.num_target_rows_deleted,
                "numCopiedRows": m.num_target_rows_copied, "numAddedFiles": m.num_target_files_added,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    if operation == "UPDATE":
        return {**written, "numUpdatedRows": m.num_target_rows_updated, "numRemovedFiles": m.num_target_files_removed,
                "numAddedFiles": m.num_target_files_added, "numCopiedRows": m.num_target_rows_copied,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    return {**written,
        "numSourceRows": m.num_source_rows, "numTargetRowsInserted": m.num_target_rows_inserted,
        "numTargetRowsUpdated": m.num_target_rows_updated, "numTargetRowsDeleted": m.num_target_rows_deleted,
        "numTargetRowsCopied": m.num_target_rows_copied, "numOutputRows": m.num_output_rows,
        "numTargetFilesAdded": m.num_target_files_added, "numTargetFilesRemoved": m.num_target_files_removed,
        "numTargetDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms,
        "scanTimeMs": m.scan_time_ms, "rewriteTimeMs": m.rewrite_time_ms,
    }


# -- checks --------------------------------------------------------------------------
def _check(change: Change, scope: Scope, schema: pa.Schema) -> None:
    """Refuse what cannot run, before anything is read or written: unknown target
    columns, a source lacking what ``*`` needs, expressions that do not compile."""
    for when in (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE):
        kind = [c for c in change.clauses if c.when == when]
        if any(c.predicate is None for c in kind[:-1]):
            # Delta and Spark refuse it too: the later clauses of the kind could never apply.
            raise InvalidOptionError(
                f"only the last WHEN {when.upper().replace('_', ' ')} clause may omit its condition: the ones "
                "after an unconditional clause could never apply; give the earlier clauses a predicate")
    for clause in change.clauses:
        if clause.all_columns:
            if change.source is None:
                raise InvalidOptionError("UPDATE SET * needs a source")
            missing = [c for c in schema.names if c not in change.source.schema.names]
            if missing:
                kind = "INSERT *" if clause.action == INSERT else "UPDATE SET *"
                raise SchemaMismatchError(
                    f"{kind} needs every target column in the source; the source lacks {missing} "
                    f"(it has {change.source.schema.names}): name the columns with updates={{...}}", missing)
        unknown = [c for c in clause.updates if c not in schema.names]
        if unknown:
            raise SchemaMismatchError(f"cannot set {unknown}: the table has no such columns ({schema.names})", unknown)
        target_only = clause.when == NOT_MATCHED_BY_SOURCE
        source_only = clause.when == NOT_MATCHED
        sides = dict(target=not source_only, source=not target_only and change.source is not None)
        if clause.predicate is not None:
            scope.compile(clause.predicate, condition=True, **sides)
        for text in clause.updates.values():
            scope.compile(text, **sides)
    if change.residual is not None:
        scope.compile(change.residual, target=True, source=change.source is not None, condition=True)


# -- finding the files -----------------------------------------------------------------
# -- rewriting ---------------------------------------------------------------------------
REWRITE_THREADS = 2
"""Files rewritten at once: Parquet reads and writes release the GIL, so two files
overlap on two cores; memory stays bounded by this many files (and the source)."""


@dataclass
class _Written:
    """What rewriting one file (or writing the inserts) produced."""

    actions: list = field(default_factory=list)
    index_files: dict = field(default_factory=dict)
    metrics: ChangeMetrics = field(default_factory=ChangeMetrics)
    matched_source: np.ndarray | None = None
    deleted: tuple[AddFile, np.ndarray] | None = None
    """With deletion vectors: the file and the ordinals of its rows the change removes."""
    updated: pa.Table | None = None
    """The new versions of the file's updated rows, written later with the inserts (with
    deletion vectors, and when a sorted file is rewritten)."""


def _rewrite(snapshot: Snapshot, change: Change, scope: Scope, schema: pa.Schema, found: Found, vectors: bool,
             tx: Transaction, metrics: ChangeMetrics, metadata):
    """Every candidate file changed (rewritten, or given a deletion vector when
    ``vectors``), then the inserts: the actions and index files to commit."""
    from concurrent.futures import ThreadPoolExecutor

    source = change.source
    if source is not None:
        source = source.append_column(SOURCE_ROW, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    write = _writer(snapshot, tx, metadata)
    now = int(time.time() * 1000)
    located = _by_file(found.located)

    def one(a: AddFile) -> _Written:
        done = _Written()
        rows = located.get(a.fileId) if located is not None else None
        if rows is None:
            rows = _file_rows(snapshot, a, schema)
            done.metrics.num_target_files_scanned = 1
        touched, updated, done.matched_source = change_file(rows, source, change, scope, schema, done.metrics)
        if touched is None:
            return done
        if vectors:  # the file stays; its new rows are written with the inserts, at most a file a bucket
            done.deleted, done.updated = (a, touched), updated
            return done
        done.actions.append(a.removal(now))
        done.metrics.num_target_files_removed = 1
        copied = rows.filter(pc.invert(pc.is_in(rows.column(ROW), pa.array(touched)))).drop_columns([ROW])
        done.metrics.num_target_rows_copied += copied.num_rows
        if a.sorted and a.bucket is not None:
            # The kept rows are still in their bucket and key order: one file, written as
            # they are; the updated rows go with the inserts (once a bucket, like DVs).
            done.updated = updated
            write(copied, done, sorted_bucket=a.bucket)
        else:
            write(pa.concat_tables([copied, updated]) if updated is not None else copied, done)
        return done

    started = time.perf_counter()
    results = []
    with ThreadPoolExecutor(REWRITE_THREADS) as pool:
        results += pool.map(one, found.files)
    done = _Written()
    new_rows = [r.updated for r in results if r.updated is not None]
    if source is not None:
        matched = np.zeros(source.num_rows, dtype=bool)
        for r in results:
            if r.matched_source is not None:
                matched[r.matched_source] = True
        new_rows.append(inserts(source.filter(pa.array(~matched)), change, scope, schema, done.metrics))
    if change.inserted is not None and change.inserted.rows is not None:
        new_rows.append(change.inserted.rows)
        done.metrics.num_target_rows_inserted += change.inserted.rows.num_rows
    if new_rows:
        write(pa.concat_tables(new_rows), done)
    results.append(done)
    actions, index_files = [], {}
    for r in results:
        actions += r.actions
        for name, fs in r.index_files.items():
            index_files.setdefault(name, []).extend(fs)
        metrics.add(r.metrics)
    actions += _vector_actions(snapshot, [r.deleted for r in results if r.deleted is not None], tx, now, metrics)
    metrics.rewrite_time_ms = _ms(started)
    return actions, {k: v for k, v in index_files.items() if v}


def _with_new_columns(located: pa.Table, schema: pa.Schema, stored: pa.Schema) -> pa.Table:
    """Located target rows with the columns a schema-evolving change adds, as NULL (the
    rows were written before the columns existed)."""
    for f in schema:
        if f.name not in stored.names:
            located = located.append_column(f, pa.nulls(located.num_rows, f.type))
    return located


def _by_file(located: pa.Table | None) -> dict[int, pa.Table] | None:
    """Located target rows per file id, each with its ordinal as :data:`ROW`."""
    if located is None:
        return None
    out = {}
    ids = located.column(lookup_mod.FILE_ID).to_numpy()
    for fid in np.unique(ids):
        part = located.filter(pa.array(ids == fid))
        out[int(fid)] = part.drop_columns([lookup_mod.FILE_ID]).rename_columns(
            [ROW if c == lookup_mod.ROW_ORDINAL else c for c in part.column_names if c != lookup_mod.FILE_ID])
    return out


def _file_rows(snapshot: Snapshot, a: AddFile, schema: pa.Schema) -> pa.Table:
    """The rows of one file still in the table, each with its ordinal in the file as
    :data:`ROW` (a deletion vector names rows by that ordinal)."""
    rows = read_file(snapshot.storage, a.path, schema, version=snapshot.version, partition=a.partitionValues)
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    mask = live_mask(snapshot.storage, a, rows.num_rows)
    return rows if mask is None else rows.filter(pa.array(mask))


def _vector_actions(snapshot: Snapshot, deleted: list[tuple[AddFile, np.ndarray]], tx: Transaction, now: int,
                    metrics: ChangeMetrics) -> list:
    """Each changed file removed and added back with a deletion vector: its old deleted
    rows and ``touched`` (all the DVs written into one file, the transaction's)."""
    if not deleted:
        return []
    sets = []
    for a, touched in deleted:
        touched = touched.astype(np.uint64)  # row ordinals, as deletion vectors hold them
        old = read_deletion_vector(snapshot.storage, a.deletionVector) if a.deletionVector is not None else None
        sets.append(np.union1d(old.astype(np.uint64), touched) if old is not None else np.unique(touched))
    descriptors = write_deletion_vectors(snapshot.storage, sets)
    tx.written_paths.extend({d.relative_path for d in descriptors if d.storageType == "u"})
    actions = []
    for (a, _), d in zip(deleted, descriptors):
        actions += [a.removal(now), a.model_copy(update={"deletionVector": d, "dataChange": True})]
    metrics.num_deletion_vectors_added += len(descriptors)
    return actions


def _writer(snapshot: Snapshot, tx: Transaction, metadata):
    """A function writing rows as bucketed files with their index entries into a
    :class:`_Written` (the files are the transaction's: aborted with it); ``metadata``:
    the table's after the change (its schema evolved or not)."""
    indexes = maintained_indexes(snapshot)

    def write(rows: pa.Table, into: _Written, sorted_bucket: int | None = None) -> None:
        if rows.num_rows == 0:
            return
        adds, written = write_rows(snapshot.storage, metadata, indexes, rows, tx.written_paths, sorted_bucket)
        into.actions.extend(adds)
        into.metrics.num_target_files_added += len(adds)
        into.metrics.num_output_rows += rows.num_rows
        for name, fs in written.items():
            into.index_files.setdefault(name, []).extend(fs)
    return write
