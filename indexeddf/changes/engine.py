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
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.datafiles import iter_live_row_groups, live_mask, read_file
from ..format.deletion_vectors import read_deletion_vector, write_deletion_vectors
from ..format.snapshot import Snapshot
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction
from ..reader import lookup as lookup_mod
from ..spec.actions import AddFile, Txn
from ..spec.features import deletion_vectors_enabled
from ..spec.schema import arrow_schema
from ..writer.operations import maintained_indexes, write_metrics, write_rows
from ..writer.streamed import copy_kept_rows
from .clauses import INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
from .expressions import Scope
from .find import Found, find, target_columns
from .model import ROW, SOURCE_ROW, Change, ChangeMetrics
from .parts import PartedSource
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
    if isinstance(change.source, PartedSource):
        return _execute_parts(snapshot, change, metrics, started)
    schema = arrow_schema(change.new_fields or snapshot.metadata.schema_)
    scope = Scope(schema, change.target_alias, None if change.source is None else change.source.schema,
                  change.source_alias)
    _check(change, scope, schema)
    vectors = deletion_vectors_enabled(snapshot.metadata.configuration)
    stored = arrow_schema(snapshot.metadata.schema_)
    wanted = [c for c in target_columns(change, scope, schema) if c in stored.names]
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
    try:
        actions, index_files = _rewrite(snapshot, change, scope, schema, found, vectors, tx, metrics, metadata)
    except BaseException:
        tx.abort()
        raise
    return _commit_change(snapshot, change, tx, metadata, actions, index_files, metrics, started)


def _commit_change(snapshot: Snapshot, change: Change, tx: Transaction, metadata, actions: list, index_files: dict,
                   metrics: ChangeMetrics, started: float) -> tuple[CommitResult | None, ChangeMetrics]:
    """Commit the change's actions once (nothing when there are none)."""
    if change.new_fields and actions:
        actions.insert(0, metadata)  # the new schema, in the same commit as the rows that need it
    metrics.execution_time_ms = _ms(started)
    if not actions:
        tx.abort()
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


def _execute_parts(snapshot: Snapshot, change: Change, metrics: ChangeMetrics,
                   started: float) -> tuple[CommitResult | None, ChangeMetrics]:
    """:func:`execute` of a staged source (:mod:`.parts`), one part at a time, one commit:
    a part of some buckets meets only the files of those buckets (its rows can match no
    other target row), so each file is changed by one part, and the source is never whole
    in memory. A part of every bucket is the whole source, read once."""
    source = change.source
    schema = arrow_schema(change.new_fields or snapshot.metadata.schema_)
    scope = Scope(schema, change.target_alias, source.schema, change.source_alias)
    _check(change, scope, schema)
    vectors = deletion_vectors_enabled(snapshot.metadata.configuration)
    stored = arrow_schema(snapshot.metadata.schema_)
    wanted = [c for c in target_columns(change, scope, schema) if c in stored.names]
    tx = Transaction(snapshot, change.operation, change.parameters, read_buckets=())
    metadata = snapshot.metadata
    if change.new_fields:
        metadata = metadata.model_copy(update={"schema_": change.new_fields})
    actions, index_files, read, by = [], {}, set(), set()
    try:
        for part in source.parts:
            one = replace(change, source=part.read())
            found_started = time.perf_counter()
            found = find(snapshot, one, stored, wanted)
            if part.buckets is not None:
                found.files = [a for a in found.files if a.bucket in part.buckets]
            if found.located is not None and change.new_fields:
                found.located = _with_new_columns(found.located, schema, stored)
            by.add(found.by)
            metrics.scan_time_ms += _ms(found_started)
            if found.by == "scan":
                part_read = ALL_BUCKETS if part.buckets is None else set(part.buckets)
            else:
                part_read = {a.bucket for a in found.files}
            if part_read is ALL_BUCKETS or None in part_read:  # a file without a bucket holds every bucket's rows
                read = ALL_BUCKETS
            elif read is not ALL_BUCKETS:
                read |= part_read
            tx.read_buckets = read if read is ALL_BUCKETS else sorted(read)
            part_actions, part_index = _rewrite(snapshot, one, scope, schema, found, vectors, tx, metrics, metadata)
            actions += part_actions
            for name, fs in part_index.items():
                index_files.setdefault(name, []).extend(fs)
            del one, found  # the part's rows: one part in memory at a time
    except BaseException:
        tx.abort()
        raise
    metrics.rows_found_by = "scan" if "scan" in by else "index"
    return _commit_change(snapshot, change, tx, metadata, actions, index_files, metrics, started)


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
    write = _Writer(snapshot, tx, metadata, schema)
    now = int(time.time() * 1000)
    located = _by_file(found.located)
    # A row group read with no column has no rows: a change that reads nothing of the
    # target (DELETE without WHERE) reads the first index column.
    needed = target_columns(change, scope, schema) or list(metadata.indexColumns[:1])

    def one(a: AddFile) -> _Written:
        done = _Written()
        rows = located.get(a.fileId) if located is not None else None
        if rows is not None:
            touched, updated, done.matched_source = change_file(rows, source, change, scope, schema, done.metrics)
        else:
            touched, updated, done.matched_source = _change_by_row_group(snapshot, a, source, change, scope, schema,
                                                                         needed, done.metrics)
            done.metrics.num_target_files_scanned = 1
        if touched is None:
            return done
        if vectors:  # the file stays; its new rows are written with the inserts, at most a file a bucket
            done.deleted, done.updated = (a, touched), updated
            return done
        done.actions.append(a.removal(now))
        done.metrics.num_target_files_removed = 1
        if a.bucket is not None:
            # The kept rows are still of their bucket (and in key order when the file was
            # sorted): copied a row group at a time into one file; the updated rows go with
            # the inserts (once a bucket, like DVs).
            done.updated = updated
            write.kept(a, touched, done)
            return done
        # A file without a bucket (another Delta writer's) holds rows of every bucket: its
        # kept rows are bucketed like new ones.
        rows = _file_rows(snapshot, a, schema)
        copied = rows.filter(pc.invert(pc.is_in(rows.column(ROW), pa.array(touched)))).drop_columns([ROW])
        done.metrics.num_target_rows_copied += copied.num_rows
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
    metrics.rewrite_time_ms += _ms(started)
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
    ids = located.column(lookup_mod.FILE_ID).to_numpy()
    # One take in file order, then slices: a filter per file would scan every chunk (a
    # lookup's rows come in a chunk per row group read) once per file.
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    located = located.take(pa.array(order)).drop_columns([lookup_mod.FILE_ID])
    located = located.rename_columns([ROW if c == lookup_mod.ROW_ORDINAL else c for c in located.column_names])
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], len(ids)]
    return {int(ids[s]): located.slice(int(s), int(e - s)) for s, e in zip(starts, ends)}


def _file_rows(snapshot: Snapshot, a: AddFile, schema: pa.Schema) -> pa.Table:
    """The rows of one file still in the table, each with its ordinal in the file as
    :data:`ROW` (a deletion vector names rows by that ordinal)."""
    rows = read_file(snapshot.storage, a.path, schema, version=snapshot.version, partition=a.partitionValues)
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    mask = live_mask(snapshot.storage, a, rows.num_rows)
    return rows if mask is None else rows.filter(pa.array(mask))


def _change_by_row_group(snapshot: Snapshot, a: AddFile, source: pa.Table | None, change: Change, scope: Scope,
                         schema: pa.Schema, columns: list[str], metrics: ChangeMetrics):
    """:func:`change_file` of one file's live rows read a row group at a time, with only
    ``columns`` (what the change reads of the target): memory bounded by a row group and
    the changed rows, not by the file. Each target row's outcome depends on that row (and
    the source) alone, so the groups' outcomes are the file's."""
    touched, updated, matched = [], [], []
    for ordinals, rows in iter_live_row_groups(snapshot.storage, a, schema, columns, snapshot.version):
        t, u, m = change_file(rows.append_column(ROW, pa.array(ordinals)), source, change, scope, schema, metrics)
        touched += [t] if t is not None else []
        updated += [u] if u is not None else []
        matched += [m] if m is not None else []
    return (np.concatenate(touched) if touched else None, pa.concat_tables(updated) if updated else None,
            np.concatenate(matched) if matched else None)


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


class _Writer:
    """Writes rows as bucketed files with their index entries into a :class:`_Written`
    (the files are the transaction's: aborted with it); ``metadata`` and ``schema``: the
    table's after the change (its schema evolved or not)."""

    def __init__(self, snapshot: Snapshot, tx: Transaction, metadata, schema: pa.Schema):
        self.snapshot, self.tx, self.metadata, self.schema = snapshot, tx, metadata, schema
        self.indexes = maintained_indexes(snapshot)

    def __call__(self, rows: pa.Table, into: _Written) -> None:
        """Write new rows (updated or inserted), bucketed."""
        if rows.num_rows == 0:
            return
        adds, written = write_rows(self.snapshot.storage, self.metadata, self.indexes, rows, self.tx.written_paths)
        into.actions.extend(adds)
        into.metrics.num_target_files_added += len(adds)
        into.metrics.num_output_rows += rows.num_rows
        self._index_files(into, written)

    def kept(self, a: AddFile, touched: np.ndarray, into: _Written) -> None:
        """Copy the rows of ``a`` but ``touched`` into a new file of its bucket, streamed."""
        add, written, copied = copy_kept_rows(self.snapshot.storage, self.metadata, self.indexes, a, self.schema,
                                              touched, self.tx.written_paths, self.snapshot.version)
        into.metrics.num_target_rows_copied += copied
        into.metrics.num_output_rows += copied
        if add is not None:
            into.actions.append(add)
            into.metrics.num_target_files_added += 1
        self._index_files(into, written)

    @staticmethod
    def _index_files(into: _Written, written: dict) -> None:
        for name, fs in written.items():
            into.index_files.setdefault(name, []).extend(fs)
