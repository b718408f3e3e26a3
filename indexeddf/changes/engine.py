"""The change engine: MERGE, UPDATE and DELETE as one commit, copy on write or with
deletion vectors. Finding the rows is :mod:`.find`; what a change does to rows is
:mod:`.rows`; writing it is :mod:`.rewrite`; this module checks, runs and commits.

Every entry point (``IndexedTable.merge / update / delete``, and Spark's through them)
runs :func:`execute`:

1. **Find** the target files that can hold a changed row. When the merge predicate
   fixes every column of a usable index by equality with source columns (or an
   UPDATE/DELETE predicate fixes them by literals), the index is probed with the
   source's keys and only the files holding a verified match are read; otherwise every
   live file is (a scan, as Delta does). ``not_matched_by_source`` clauses need every
   target row, so they always scan.
2. **Rewrite** (:mod:`.rewrite`; memory bounded by a row group, the changed rows and the
   source): each candidate file's rows are joined with the source on the equality keys,
   the rest of the predicate filters the pairs, each pair takes its first matching
   clause; a file with a changed row is removed and its kept rows are copied, a row
   group at a time, into one new file of its bucket (in key order when it was sorted),
   or it gets a deletion vector; updated rows are written as new bucketed files with
   the inserts; all with their index entries. Files without a change stay.
3. **Insert** the source rows that matched no target row (``not_matched`` clauses).
4. **Commit** once: removes, adds, index entries and, while ``delta.enableChangeDataFeed`` is
   true, the ``cdc`` actions of the change data written a file at a time in step 2 (the
   deleted rows and the updated rows' pre-images read back from the row groups holding them,
   the post-images) and with the inserts (``writer/change_data.py``); the transaction read the touched
   buckets (Delta's WriteSerializable: blind appends rebase, a concurrent removal of a
   read file fails it with a typed conflict).

A target row matched by two source rows with a ``matched`` clause fails the change,
as Delta's MERGE does, before anything is committed. NULL keys never match.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pyarrow as pa

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction
from ..spec.column_mapping import evolve, file_schema, table_schema
from ..spec.features import deletion_vectors_enabled
from .clauses import INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
from .commit import commit_change, commit_metrics, ms_since  # noqa: F401 - commit_metrics re-exported
from .expressions import Scope
from .find import find, target_columns
from .model import Change, ChangeMetrics
from .parts import PartedSource, grouped
from .rewrite import rewrite, with_new_columns


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
    p = prepare(snapshot, change)
    schema, scope, stored, metadata = p.schema, p.scope, p.stored, p.metadata
    found = find(snapshot, change, stored, p.wanted)
    if found.located is not None and change.new_fields:
        found.located = with_new_columns(found.located, schema, stored)
    files, found_by = found.files, found.by
    metrics.rows_found_by = found_by
    metrics.scan_time_ms = ms_since(started)
    buckets = ALL_BUCKETS if found_by == "scan" else sorted({a.bucket for a in files if a.bucket is not None})
    if found_by != "scan" and any(a.bucket is None for a in files):
        buckets = ALL_BUCKETS  # a file without a bucket holds rows of every bucket
    tx = Transaction(snapshot, change.operation, change.parameters, read_buckets=buckets)
    if change.inserted is not None:
        tx.written_paths.extend(change.inserted.written)  # files of Spark's tasks: the transaction's now
    try:
        actions, index_files = rewrite(snapshot, change, scope, schema, found, p.vectors, tx.written_paths, metrics,
                                       metadata)
    except BaseException:
        tx.abort()
        raise
    if change.inserted is not None and change.inserted.adds:
        actions += change.inserted.adds
        metrics.num_target_files_added += len(change.inserted.adds)
        for name, fs in change.inserted.index_files.items():
            index_files.setdefault(name, []).extend(fs)
    return commit_change(snapshot, tx, actions, index_files, metrics, started, change.operation, change.txn,
                         metadata if change.new_fields else None)


@dataclass(frozen=True)
class _Prepared:
    """What running a change needs, computed and checked before anything is read."""

    schema: pa.Schema
    """The table's schema after the change (with its column mapping)."""
    scope: Scope
    stored: pa.Schema
    """The schema the table's files were written with (before a schema-evolving change)."""
    wanted: list[str]
    """The target columns the change reads."""
    vectors: bool
    metadata: object
    """The table's metaData after the change."""


def prepare(snapshot: Snapshot, change: Change) -> _Prepared:
    """The schemas and expression scope of ``change`` at ``snapshot``, after :func:`_check`."""
    conf = snapshot.metadata.configuration
    schema = file_schema(change.new_fields or snapshot.metadata.schema_, conf)
    scope = Scope(schema, change.target_alias, None if change.source is None else change.source.schema,
                  change.source_alias)
    _check(change, scope, schema)
    stored = table_schema(snapshot.metadata)
    wanted = [c for c in target_columns(change, scope, schema) if c in stored.names]
    metadata = evolve(snapshot.metadata, change.new_fields) if change.new_fields else snapshot.metadata
    return _Prepared(schema, scope, stored, wanted, deletion_vectors_enabled(conf), metadata)



def _execute_parts(snapshot: Snapshot, change: Change, metrics: ChangeMetrics,
                   started: float) -> tuple[CommitResult | None, ChangeMetrics]:
    """:func:`execute` of a staged source (:mod:`.parts`), one part at a time, one commit:
    a part of some buckets meets only the files of those buckets (its rows can match no
    other target row), so each file is changed by one part, and the source is never whole
    in memory. A part of every bucket is the whole source, read once."""
    p = prepare(snapshot, change)
    tx = Transaction(snapshot, change.operation, change.parameters, read_buckets=())
    actions, index_files, read, by = [], {}, set(), set()
    try:
        for part in grouped(change.source.parts):
            done = run_part(snapshot, replace(change, source=part.read()), p, part.buckets, tx.written_paths, metrics)
            actions += done.actions
            for name, fs in done.index_files.items():
                index_files.setdefault(name, []).extend(fs)
            by.add(done.found_by)
            read = union_read(read, done.read_buckets)
            tx.read_buckets = read if read is ALL_BUCKETS else sorted(read)
            del done  # the part's rows: one part in memory at a time
    except BaseException:
        tx.abort()
        raise
    metrics.rows_found_by = "scan" if "scan" in by else "index"
    return commit_change(snapshot, tx, actions, index_files, metrics, started, change.operation, change.txn,
                         p.metadata if change.new_fields else None)


@dataclass
class PartDone:
    """What running one part of a change wrote: the actions and index files to commit, the
    buckets it read (or ``ALL_BUCKETS``) and how it found the rows."""

    actions: list
    index_files: dict
    read_buckets: object
    found_by: str


def run_part(snapshot: Snapshot, one: Change, p: "_Prepared", buckets, written_paths: list[str],
             metrics: ChangeMetrics) -> PartDone:
    """Run ``one``, whose source rows are of ``buckets`` only (None: of any), on the files of
    those buckets, without committing: a part of a staged source on the driver, or a Spark
    task's buckets of a source Spark partitioned by the table's bucket. Every path written is
    appended to ``written_paths``; ``metrics`` counts."""
    found_started = time.perf_counter()
    found = find(snapshot, one, p.stored, p.wanted)
    if buckets is not None:
        found.files = [a for a in found.files if a.bucket in buckets]
    if found.located is not None and one.new_fields:
        found.located = with_new_columns(found.located, p.schema, p.stored)
    metrics.scan_time_ms += ms_since(found_started)
    if found.by == "scan":
        read = ALL_BUCKETS if buckets is None else set(buckets)
    else:
        read = {a.bucket for a in found.files}
    if read is not ALL_BUCKETS and None in read:  # a file without a bucket holds every bucket's rows
        read = ALL_BUCKETS
    actions, index_files = rewrite(snapshot, one, p.scope, p.schema, found, p.vectors, written_paths, metrics,
                                   p.metadata)
    return PartDone(actions, index_files, read, found.by)


def union_read(read, more):
    """Two sets of read buckets together (``ALL_BUCKETS`` absorbs)."""
    if read is ALL_BUCKETS or more is ALL_BUCKETS:
        return ALL_BUCKETS
    return set(read) | set(more)




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
