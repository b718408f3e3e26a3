"""The change engine: MERGE, UPDATE and DELETE as one commit, copy on write.

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
   with a changed row is removed and its kept, updated and copied rows are written as
   new bucketed files with their index entries. Files without a change stay.
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
from ..optimizer import planner
from ..reader import lookup as lookup_mod
from ..spec.actions import AddFile, Txn
from ..spec.features import deletion_vectors_enabled
from ..spec.schema import arrow_schema
from ..writer.operations import maintained_indexes, write_metrics, write_rows
from .clauses import DELETE, INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, UPDATE, Clause
from .expressions import Scope

ROW = "__row"
"""A target row's ordinal in its file (pairs keep it to tell target rows apart)."""
SOURCE_ROW = "__source_row"
"""A source row's ordinal in the source (to know which source rows matched)."""


@dataclass
class ChangeMetrics:
    """What a change did (delta-rs's names for a MERGE's metrics)."""

    num_source_rows: int = 0
    num_target_rows_inserted: int = 0
    num_target_rows_updated: int = 0
    num_target_rows_deleted: int = 0
    num_target_rows_copied: int = 0
    num_output_rows: int = 0
    num_target_files_added: int = 0
    num_target_files_removed: int = 0
    num_target_files_scanned: int = 0
    num_deletion_vectors_added: int = 0
    rows_found_by: str = "scan"
    """``index`` when the index located the matched rows, ``scan`` when every file was read."""
    execution_time_ms: int = 0
    scan_time_ms: int = 0
    rewrite_time_ms: int = 0
    version: int | None = None
    """The version committed (None: nothing changed, nothing committed)."""

    def add(self, other: "ChangeMetrics") -> None:
        """Add the row and file counts of ``other`` (one file's) to these."""
        for name in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
                     "num_target_rows_copied", "num_output_rows", "num_target_files_added",
                     "num_target_files_removed", "num_target_files_scanned", "num_deletion_vectors_added"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict:
        """The metrics as a plain dict (the commit's ``operationMetrics`` take it)."""
        return dict(self.__dict__)


@dataclass
class Change:
    """One change to run: the source (None for UPDATE / DELETE), the equality key pairs
    (target column, source column) and the rest of the predicate, and the clauses."""

    operation: str
    parameters: dict
    clauses: list[Clause]
    source: pa.Table | None = None
    target_alias: str = "t"
    source_alias: str = "s"
    keys: list[tuple[str, str]] = field(default_factory=list)
    residual: str | None = None
    fixed: dict | None = None
    """UPDATE / DELETE: literal values the predicate fixes per column (planner's keys)."""
    txn: tuple[str, int] | None = None
    """(app id, version): commit only if this application has not committed that version."""


def execute(snapshot: Snapshot, change: Change) -> tuple[CommitResult | None, ChangeMetrics]:
    """Run ``change`` on ``snapshot``; returns the commit (None when nothing changed)
    and its metrics."""
    started = time.perf_counter()
    metrics = ChangeMetrics(num_source_rows=0 if change.source is None else change.source.num_rows)
    if change.txn is not None:
        done = snapshot.txn_version(change.txn[0])
        if done is not None and done >= change.txn[1]:
            return None, metrics  # committed before: an idempotent retry changes nothing
    schema = arrow_schema(snapshot.metadata.schema_)
    scope = Scope(schema, change.target_alias, None if change.source is None else change.source.schema,
                  change.source_alias)
    _check(change, scope, schema)
    vectors = deletion_vectors_enabled(snapshot.metadata.configuration)
    found = _find(snapshot, change, schema, _target_columns(change, scope, schema) if vectors else None)
    files, found_by = found.files, found.by
    metrics.rows_found_by = found_by
    metrics.scan_time_ms = _ms(started)
    buckets = ALL_BUCKETS if found_by == "scan" else sorted({a.bucket for a in files if a.bucket is not None})
    if found_by != "scan" and any(a.bucket is None for a in files):
        buckets = ALL_BUCKETS  # a file without a bucket holds rows of every bucket
    tx = Transaction(snapshot, change.operation, change.parameters, read_buckets=buckets)
    try:
        actions, index_files = _rewrite(snapshot, change, scope, schema, found, vectors, tx, metrics)
    except BaseException:
        tx.abort()
        raise
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
@dataclass
class _Found:
    """The live files that can hold a changed row, how they were found, and (index
    found, deletion vectors on) the located target rows with their file id and ordinal."""

    files: list[AddFile]
    by: str
    located: pa.Table | None = None


def _target_columns(change: Change, scope: Scope, schema: pa.Schema) -> list[str]:
    """The target columns a deletion-vector change must read of its matched rows: the key
    columns, those its conditions and expressions name, and those an UPDATE keeps as they
    were (none for ``UPDATE SET *``, whose new rows come from the source alone). An upsert
    then decodes the key columns of the row groups it touches, not the whole rows."""
    prefix = scope.target_name("")
    needed = {t for t, _ in change.keys}
    texts = [change.residual] if change.residual is not None else []
    for c in change.clauses:
        texts += [c.predicate] if c.predicate is not None else []
        texts += list(c.updates.values())
        if c.action == UPDATE and not c.all_columns:
            needed |= {f for f in schema.names if f not in c.updates}
    for text in texts:
        needed |= {name[len(prefix):] for name in scope.compile(text).columns_used if name.startswith(prefix)}
    return [c for c in schema.names if c in needed]


def _find(snapshot: Snapshot, change: Change, schema: pa.Schema, with_rows: list[str] | None) -> _Found:
    """Where the change's target rows are: through the index when it can say, else every
    live file. ``with_rows`` (columns): the index lookup returns the rows themselves, so
    a deletion-vector change reads only those columns of the row groups that hold them."""
    live = snapshot.live_files()
    if any(c.when == NOT_MATCHED_BY_SOURCE for c in change.clauses) or not live:
        return _Found(live, "scan")
    keys = _probe_keys(change, schema)
    if keys is None:
        return _Found(live, "scan")
    columns, table = keys
    entry, _ = planner.join_index(snapshot, columns)
    if entry is None:
        return _Found(live, "scan")
    if table.num_rows == 0:
        return _Found([], "index")
    read = list(entry.columns) if with_rows is None else [c for c in schema.names
                                                          if c in with_rows or c in entry.columns]
    located = lookup_mod.run_plan(
        snapshot, planner.plan_lookup(snapshot, entry, table.select(list(entry.columns))), read, locate=True)
    ids = set(located.column(lookup_mod.FILE_ID).to_pylist())
    return _Found([a for a in live if a.fileId in ids], "index", None if with_rows is None else located)


def _probe_keys(change: Change, schema: pa.Schema) -> tuple[list[str], pa.Table] | None:
    """The target columns fixed by equality and their distinct non-NULL values (from the
    source's key columns, or an UPDATE/DELETE predicate's literals); None: no keys."""
    if change.source is not None:
        if not change.keys:
            return None
        columns = [t for t, _ in change.keys]
        arrays = []
        for t, s in change.keys:
            try:
                arrays.append(change.source.column(s).cast(schema.field(t).type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return None  # keys of another type: compared by the join, found by a scan
        table = pa.Table.from_arrays(arrays, names=columns)
        valid = None
        for c in columns:  # NULL keys never match
            v = pc.is_valid(table.column(c))
            valid = v if valid is None else pc.and_(valid, v)
        table = table.filter(valid)
        return columns, _distinct(table)
    if not change.fixed:
        return None
    import itertools

    columns = list(change.fixed)
    rows = list(itertools.product(*(change.fixed[c] for c in columns)))
    if len(rows) > planner.MAX_INDEX_KEYS:
        return None
    try:
        table = planner.keys_table(rows, tuple(columns), schema) if rows else schema.empty_table().select(columns)
    except SchemaMismatchError:
        return None
    return columns, table


def _distinct(table: pa.Table) -> pa.Table:
    if table.num_rows < 2:
        return table
    return table.group_by(table.column_names, use_threads=False).aggregate([])


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
    """With deletion vectors: the new versions of the file's updated rows (written later)."""


def _rewrite(snapshot: Snapshot, change: Change, scope: Scope, schema: pa.Schema, found: _Found, vectors: bool,
             tx: Transaction, metrics: ChangeMetrics):
    """Every candidate file changed (rewritten, or given a deletion vector when
    ``vectors``), then the inserts: the actions and index files to commit."""
    from concurrent.futures import ThreadPoolExecutor

    source = change.source
    if source is not None:
        source = source.append_column(SOURCE_ROW, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    write = _writer(snapshot, tx)
    now = int(time.time() * 1000)
    located = _by_file(found.located)

    def one(a: AddFile) -> _Written:
        done = _Written()
        rows = located.get(a.fileId) if located is not None else None
        if rows is None:
            rows = _file_rows(snapshot, a, schema)
            done.metrics.num_target_files_scanned = 1
        touched, updated, done.matched_source = _change_file(rows, source, change, scope, schema, done.metrics)
        if touched is None:
            return done
        if vectors:  # the file stays; its new rows are written with the inserts, at most a file a bucket
            done.deleted, done.updated = (a, touched), updated
            return done
        done.actions.append(a.removal(now))
        done.metrics.num_target_files_removed = 1
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
        new_rows.append(_inserts(source.filter(pa.array(~matched)), change, scope, schema, done.metrics))
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
    rows = read_file(snapshot.storage, a.path, schema, version=snapshot.version)
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


def _writer(snapshot: Snapshot, tx: Transaction):
    """A function writing rows as bucketed files with their index entries into a
    :class:`_Written` (the files are the transaction's: aborted with it)."""
    indexes = maintained_indexes(snapshot)

    def write(rows: pa.Table, into: _Written) -> None:
        if rows.num_rows == 0:
            return
        adds, written = write_rows(snapshot.storage, snapshot.metadata, indexes, rows, tx.written_paths)
        into.actions.extend(adds)
        into.metrics.num_target_files_added += len(adds)
        into.metrics.num_output_rows += rows.num_rows
        for name, fs in written.items():
            into.index_files.setdefault(name, []).extend(fs)
    return write


def _change_file(rows: pa.Table, source: pa.Table | None, change: Change, scope: Scope, schema: pa.Schema,
                 metrics: ChangeMetrics) -> tuple[np.ndarray | None, pa.Table | None, np.ndarray | None]:
    """What the change does to ``rows`` (one file's, each with its ordinal as :data:`ROW`):
    the ordinals of the rows it deletes or replaces (None: it changes none), their new
    versions (None: none), and the ordinals of the source rows that matched one of them."""
    target = scope.target_columns(rows)
    matched_source = None
    if source is None:  # UPDATE / DELETE: every row is its own "pair"
        pairs = target
    else:
        pairs = _pairs(target, source, change, scope)
        _check_cardinality(pairs, change, scope)
        matched_source = pairs.column(scope.source_name(SOURCE_ROW)).to_numpy()
    touched, updated = _apply(pairs, [c for c in change.clauses if c.when == MATCHED], scope, schema, metrics)
    by_source = [c for c in change.clauses if c.when == NOT_MATCHED_BY_SOURCE]
    if by_source:
        lonely = target.filter(pc.invert(pc.is_in(target.column(scope.target_name(ROW)),
                                                  pairs.column(scope.target_name(ROW)))))
        more, more_updated = _apply(lonely, by_source, scope, schema, metrics, source=False)
        touched, updated = touched + more, updated + more_updated
    if not touched:
        return None, None, matched_source
    return np.concatenate(touched), (pa.concat_tables(updated) if updated else None), matched_source


def _apply(rows: pa.Table, clauses: list[Clause], scope: Scope, schema: pa.Schema, metrics: ChangeMetrics,
           source: bool = True) -> tuple[list[np.ndarray], list[pa.Table]]:
    """Each row takes its first clause whose condition holds: the ordinals of the rows a
    clause took, and the new versions of the updated ones."""
    taken = _first_clause(rows, clauses, scope, source=source)
    ordinals = rows.column(scope.target_name(ROW)).to_numpy()
    touched, updated = [], []
    for i, clause in enumerate(clauses):
        took = taken == i
        n = int(took.sum())
        if n == 0:
            continue
        touched.append(ordinals[took])
        if clause.action == DELETE:
            metrics.num_target_rows_deleted += n
        else:
            metrics.num_target_rows_updated += n
            updated.append(_assign(rows.filter(pa.array(took)), clause, scope, schema, source=source))
    return touched, updated


def _pairs(target: pa.Table, source: pa.Table, change: Change, scope: Scope) -> pa.Table:
    """(target row, source row) pairs the merge predicate holds for: an equi-join on the
    key pairs (NULLs never equal), then the rest of the predicate."""
    src = scope.source_columns(source)
    if change.keys:
        left = [scope.target_name(t) for t, _ in change.keys]
        right = [scope.source_name(s) for _, s in change.keys]
        # Key columns of different types are joined as the target's type.
        cast = [src.column(r).cast(target.schema.field(lk).type) for lk, r in zip(left, right)]
        keyed = src
        for r, c in zip(right, cast):
            keyed = keyed.set_column(keyed.schema.get_field_index(r), r, c)
        pairs = target.join(keyed, keys=left, right_keys=right, join_type="inner", use_threads=False,
                            coalesce_keys=False)
    else:
        pairs = _cross(target, src)
    if change.residual is not None and pairs.num_rows:
        keep = pc.fill_null(scope.evaluate(change.residual, pairs, condition=True), False)
        pairs = pairs.filter(keep)
    return pairs


def _cross(target: pa.Table, source: pa.Table) -> pa.Table:
    """Every (target, source) pair: a merge predicate without equalities (small sides only)."""
    if target.num_rows * source.num_rows > 50_000_000:
        raise InvalidOptionError(
            "the merge predicate has no equality between a target and a source column, so every target row "
            f"would be paired with every source row ({target.num_rows} x {source.num_rows}): add one (t.k = s.k)")
    ti = np.repeat(np.arange(target.num_rows), source.num_rows)
    si = np.tile(np.arange(source.num_rows), target.num_rows)
    left, right = target.take(pa.array(ti)), source.take(pa.array(si))
    for name, col in zip(right.column_names, right.columns):
        left = left.append_column(name, col)
    return left


def _check_cardinality(pairs: pa.Table, change: Change, scope: Scope) -> None:
    """A target row matched by several source rows cannot be updated or deleted
    unambiguously: Delta's MERGE fails then (and so does this one)."""
    if not any(c.when == MATCHED for c in change.clauses) or pairs.num_rows < 2:
        return
    rows = pairs.column(scope.target_name(ROW)).to_numpy()
    if len(np.unique(rows)) != len(rows):
        raise InvalidOptionError(
            "MERGE: multiple source rows matched the same target row; a matched clause cannot tell which to apply. "
            "Make the source unique on the merge keys (for example keep the newest row per key) and run it again; "
            "nothing was committed")


def _first_clause(rows: pa.Table, clauses: list[Clause], scope: Scope, source: bool = True,
                  target: bool = True) -> np.ndarray:
    """Per row, the position of the first clause whose condition holds (-1: none)."""
    taken = np.full(rows.num_rows, -1, dtype=np.int64)
    for i, clause in enumerate(clauses):
        free = taken < 0
        if not free.any():
            break
        if clause.predicate is None:
            holds = free
        else:
            holds = free & _truth(scope.evaluate(clause.predicate, rows, target=target, source=source, condition=True))
        taken[holds] = i
    return taken


def _truth(values) -> np.ndarray:
    """A SQL condition's result as booleans (NULL is not true)."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _assign(rows: pa.Table, clause: Clause, scope: Scope, schema: pa.Schema, source: bool = True) -> pa.Table:
    """Target rows after an UPDATE clause: assigned columns from their expressions (all
    from the source's same-named columns with ``*``), the others as they were."""
    return _new_rows(rows, clause, scope, schema, lambda f: rows.column(scope.target_name(f.name)),
                     target=True, source=source)


def _new_rows(rows: pa.Table, clause: Clause, scope: Scope, schema: pa.Schema, unset, target: bool,
              source: bool) -> pa.Table:
    """Rows of the table's schema made by an UPDATE or INSERT clause from ``rows``: every
    column from the source's of its name with ``*``, assigned columns from their
    expressions, the others ``unset(field)`` (kept for an update, NULL for an insert)."""
    arrays = []
    for f in schema:
        if clause.all_columns:
            value = rows.column(scope.source_name(f.name))
        elif f.name in clause.updates:
            value = scope.evaluate(clause.updates[f.name], rows, target=target, source=source)
        else:
            value = unset(f)
        arrays.append(_typed(value, f, rows.num_rows))
    return pa.Table.from_arrays(arrays, schema=schema)


def _inserts(source: pa.Table, change: Change, scope: Scope, schema: pa.Schema, metrics: ChangeMetrics) -> pa.Table:
    """New rows from the source rows no target row matched (first NOT MATCHED clause)."""
    clauses = [c for c in change.clauses if c.when == NOT_MATCHED]
    if not clauses or source.num_rows == 0:
        return schema.empty_table()
    src = scope.source_columns(source)
    taken = _first_clause(src, clauses, scope, source=True, target=False)
    parts = []
    for i, clause in enumerate(clauses):
        rows = src.filter(pa.array(taken == i))
        if rows.num_rows == 0:
            continue
        parts.append(_new_rows(rows, clause, scope, schema, lambda f, n=rows.num_rows: pa.nulls(n, f.type),
                               target=False, source=True))
    out = pa.concat_tables(parts) if parts else schema.empty_table()
    metrics.num_target_rows_inserted += out.num_rows
    return out


def _typed(value, f: pa.Field, n: int):
    """An expression's result as the column's type (a scalar is broadcast), or a typed
    error naming the column."""
    if isinstance(value, pa.Scalar):
        value = pa.array([value.as_py()] * n, value.type) if n else pa.array([], value.type)
    try:
        value = value.cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(f"the value for column {f.name!r} is not a {f.type}: {e}", [f.name]) from None
    if not f.nullable and value.null_count:
        raise SchemaMismatchError(f"column {f.name!r} is NOT NULL, but the change would write NULL into it", [f.name])
    return value

