"""Rewriting the files a change touches, and writing its new rows: the second and third
steps of :mod:`.engine`.

Each candidate file's outcome comes from its located rows (the index found them) or from a
pass over the columns the change reads, a row group at a time. Under copy on write a
changed file's kept rows are copied into one new file of its bucket a row group at a time
(``writer/streamed.py``); with deletion vectors the file stays and gets a vector. Updated
and inserted rows are written together, bucketed, with their index entries. With the change
data feed on (``delta.enableChangeDataFeed``), each changed file's deleted rows and updated rows
(before and after) are gathered as change data when the file is handled, the inserts with the
new rows, and written in few files (``writer/change_data.py``'s buffer, bounded in bytes).
Memory is bounded by a row group, the changed rows and the source, not by a file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import iter_live_row_groups, live_mask, read_file, read_rows_at
from ..format.deletion_vectors import read_deletion_vector, write_deletion_vectors
from ..format.snapshot import Snapshot
from ..reader import lookup as lookup_mod
from ..spec.actions import AddFile
from ..spec.arrays import distinct
from ..spec.change_data import DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE, labelled
from ..spec.constraints import ConstraintChecker
from ..spec.deletion_vectors import unique_sorted
from ..spec.features import change_data_feed_enabled
from ..writer.change_data import ChangeDataBuffer
from ..writer.operations import maintained_indexes, write_rows
from ..writer.streamed import copy_kept_rows
from .expressions import Scope
from .find import Found, target_columns
from .model import ROW, SOURCE_ROW, Change, ChangeMetrics
from .rows import change_file, inserts

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


def rewrite(snapshot: Snapshot, change: Change, scope: Scope, schema: pa.Schema, found: Found, vectors: bool,
             written_paths: list[str], metrics: ChangeMetrics, metadata):
    """Every candidate file changed (rewritten, or given a deletion vector when
    ``vectors``), then the inserts: the actions and index files to commit (every path
    written is appended to ``written_paths``, a transaction's or a task's)."""
    from concurrent.futures import ThreadPoolExecutor

    source = change.source
    if source is not None:
        source = source.append_column(SOURCE_ROW, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    write = _Writer(snapshot, written_paths, metadata, schema)
    write.inserted_files = list(change.inserted.adds) if change.inserted is not None else []
    # Updated and inserted rows must keep the table's CHECK constraints (Spark's changes check
    # them in their plan, with Catalyst: apply_outcome leaves the checker out).
    write.checker = ConstraintChecker(metadata.configuration, schema)
    now = int(time.time() * 1000)
    located = _by_file(found.located)
    sources = _sources_by_file(located, source, change)
    # A row group read with no column has no rows: a change that reads nothing of the
    # target (DELETE without WHERE) reads the first index column.
    needed = target_columns(change, scope, schema) or list(metadata.indexColumns[:1])

    def one(a: AddFile) -> _Written:
        done = _Written()
        rows = located.get(a.fileId) if located is not None else None
        deleted: list = []
        if rows is not None:
            mine = source if sources is None else sources.get(a.fileId, source.slice(0, 0))
            touched, updated, done.matched_source = change_file(rows, mine, change, scope, schema, done.metrics,
                                                                deleted)
        else:
            touched, updated, done.matched_source = _change_by_row_group(snapshot, a, source, change, scope, schema,
                                                                         needed, done.metrics, deleted)
            done.metrics.num_target_files_scanned = 1
        if touched is not None:
            _apply_file(write, a, touched, updated, vectors, now, done,
                        np.concatenate(deleted) if deleted else np.zeros(0, np.int64))
        return done

    started = time.perf_counter()
    results = []
    # Files are rewritten REWRITE_THREADS at a time; each decodes on its own thread then.
    write.use_threads = len(found.files) < REWRITE_THREADS
    with ThreadPoolExecutor(REWRITE_THREADS) as pool:
        results += pool.map(one, found.files)
    done = _Written()
    new_rows = []
    if source is not None:
        matched = np.zeros(source.num_rows, dtype=bool)
        for r in results:
            if r.matched_source is not None:
                matched[r.matched_source] = True
        new_rows.append(inserts(source.filter(pa.array(~matched)), change, scope, schema, done.metrics))
    if change.inserted is not None and change.inserted.rows is not None:
        new_rows.append(change.inserted.rows)
        done.metrics.num_target_rows_inserted += change.inserted.rows.num_rows
    actions, index_files = _finish(write, results, new_rows, done, now, metrics)
    metrics.rewrite_time_ms += int((time.perf_counter() - started) * 1000)
    return actions, index_files


def apply_outcome(snapshot: Snapshot, schema: pa.Schema, metadata, vectors: bool,
                  changed: list[tuple[AddFile, np.ndarray, pa.Table | None, np.ndarray]], new_rows: pa.Table | None,
                  written_paths: list[str], metrics: ChangeMetrics) -> tuple[list, dict]:
    """Write what a change decided elsewhere (Spark's plan, in a task): each changed file
    ``(add, ordinals of its changed rows, their new versions or None, the ordinals of the
    deleted ones)`` gets a deletion vector (``vectors``) or has its kept rows copied, and the
    new versions with ``new_rows`` are written bucketed, with their index entries; with the
    change data feed on, the change data files too. The actions (``cdc`` ones included) and
    index files to commit; the paths written are appended to ``written_paths``."""
    from concurrent.futures import ThreadPoolExecutor

    write = _Writer(snapshot, written_paths, metadata, schema)
    now = int(time.time() * 1000)

    def one(item) -> _Written:
        done = _Written()
        _apply_file(write, item[0], item[1], item[2], vectors, now, done, item[3])
        return done

    write.use_threads = len(changed) < REWRITE_THREADS
    with ThreadPoolExecutor(REWRITE_THREADS) as pool:
        results = list(pool.map(one, changed))
    return _finish(write, results, [new_rows] if new_rows is not None else [], _Written(), now, metrics)


def _apply_file(write: "_Writer", a: AddFile, touched: np.ndarray, updated: pa.Table | None, vectors: bool,
                now: int, done: _Written, deleted: np.ndarray) -> None:
    """File ``a`` changed: the ordinals ``touched`` leave it (``updated``: their new
    versions, written later with the other new rows; ``deleted``: the ordinals of ``touched``
    that are deleted, not updated). With the change data feed on, the rows that leave are
    read back (only the row groups holding them) as the change's deletes and pre-images."""
    snapshot = write.snapshot
    if write.feed:  # gathered now (the buffer writes it in few files, bounded in bytes)
        before = read_rows_at(snapshot.storage, a, write.schema, touched, snapshot.version)
        ordinals = distinct(touched)  # sorted
        gone = pa.array(np.isin(ordinals, deleted))
        changes = [labelled(before.filter(gone), DELETE), labelled(before.filter(pc.invert(gone)), UPDATE_PREIMAGE)]
        if updated is not None:
            changes.append(labelled(updated, UPDATE_POSTIMAGE))
        write.change_data.add(changes)
    if vectors:  # the file stays; its new rows are written with the inserts, at most a file a bucket
        done.deleted, done.updated = (a, touched), updated
        return
    done.actions.append(a.removal(now))
    done.metrics.num_target_files_removed = 1
    if a.bucket is not None:
        # The kept rows are still of their bucket (and in key order when the file was
        # sorted): copied a row group at a time into one file; the updated rows go with
        # the inserts (once a bucket, like DVs).
        done.updated = updated
        write.kept(a, touched, done)
        return
    # A file without a bucket (another Delta writer's) holds rows of every bucket: its
    # kept rows are bucketed like new ones.
    if updated is not None and write.checker is not None:
        write.checker.check(updated)
    rows = _file_rows(snapshot, a, write.schema)
    copied = rows.filter(pc.invert(pc.is_in(rows.column(ROW), pa.array(touched)))).drop_columns([ROW])
    done.metrics.num_target_rows_copied += copied.num_rows
    write(pa.concat_tables([copied, updated]) if updated is not None else copied, done)


def _finish(write: "_Writer", results: list[_Written], new_rows: list[pa.Table], done: _Written, now: int,
            metrics: ChangeMetrics) -> tuple[list, dict]:
    """The files' new rows written with ``new_rows`` (into ``done``), the deletion vectors
    written, and every result's actions, index files and metrics gathered."""
    changes = [labelled(r, INSERT) for r in new_rows] if write.feed else []
    new_rows = [r.updated for r in results if r.updated is not None] + new_rows
    if new_rows:
        rows = pa.concat_tables(new_rows)
        if write.checker is not None:
            write.checker.check(rows)
        write(rows, done)
    results = results + [done]
    actions, index_files = [], {}
    for r in results:
        actions += r.actions
        for name, fs in r.index_files.items():
            index_files.setdefault(name, []).extend(fs)
        metrics.add(r.metrics)
    actions += _vector_actions(write.snapshot, [r.deleted for r in results if r.deleted is not None],
                               write.written_paths, now, metrics)
    if write.feed:
        storage = write.snapshot.storage
        write.change_data.add(changes)
        for add in write.inserted_files:  # files a Spark write added: their rows are inserts, one file at a time
            rows = read_file(storage, add.path, write.schema, partition=add.partitionValues)
            write.change_data.add([labelled(rows, INSERT)])
        actions += write.change_data.flush()
    return actions, {k: v for k, v in index_files.items() if v}


def with_new_columns(located: pa.Table, schema: pa.Schema, stored: pa.Schema) -> pa.Table:
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


def _sources_by_file(located: dict[int, pa.Table] | None, source: pa.Table | None,
                     change: Change) -> dict[int, pa.Table] | None:
    """Per located file, the source rows whose keys equal a key of its located rows (None:
    each file meets the whole source). One join of every located key with the source's keys,
    where pairing each file's rows with the whole source would build a hash table of the
    whole source once a file: at 2,000,000 source rows and 32 files, most of a MERGE's time.
    Only the key equality narrows: the rest of the merge predicate is applied to the pairs."""
    if located is None or source is None or not change.keys or len(located) < 2 or source.num_rows < _NARROW_MIN_ROWS:
        return None  # one file meets the source once anyway
    left = [t for t, _ in change.keys]
    any_rows = next(iter(located.values()))
    try:  # the source's keys in the target's types, as the pairs compare them (rows._pairs)
        keys = [source.column(s).cast(any_rows.schema.field(t).type) for t, s in change.keys]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        return None
    file_col, at_col = "__indexeddf_file", "__indexeddf_source_at"
    ids = np.concatenate([np.full(rows.num_rows, fid, np.int64) for fid, rows in located.items()])
    target = pa.concat_tables([rows.select(left) for rows in located.values()]).append_column(file_col, pa.array(ids))
    probe = pa.Table.from_arrays(keys + [pa.array(np.arange(source.num_rows, dtype=np.int64))], names=left + [at_col])
    pairs = target.join(probe, keys=left, join_type="inner", use_threads=False)  # NULL keys never equal
    files, at = pairs.column(file_col).to_numpy(), pairs.column(at_col).to_numpy()
    order = np.lexsort((at, files))
    files, at = files[order], at[order]
    # A source row twice for one file (a key held by two of its rows) is taken once.
    once = np.r_[True, (files[1:] != files[:-1]) | (at[1:] != at[:-1])] if len(files) else np.zeros(0, bool)
    files, at = files[once], at[once]
    taken = source.take(pa.array(at))  # one take, then a slice a file: a take a file rescans the source
    starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]]) if len(files) else np.zeros(0, np.int64)
    return {int(files[s]): taken.slice(int(s), int(e - s)) for s, e in zip(starts, np.r_[starts[1:], len(files)])}


_NARROW_MIN_ROWS = 10_000
"""A source this small meets each file whole: its hash table costs less than the narrowing."""


def _file_rows(snapshot: Snapshot, a: AddFile, schema: pa.Schema) -> pa.Table:
    """The rows of one file still in the table, each with its ordinal in the file as
    :data:`ROW` (a deletion vector names rows by that ordinal)."""
    rows = read_file(snapshot.storage, a.path, schema, version=snapshot.version, partition=a.partitionValues)
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    mask = live_mask(snapshot.storage, a, rows.num_rows)
    return rows if mask is None else rows.filter(pa.array(mask))


def _change_by_row_group(snapshot: Snapshot, a: AddFile, source: pa.Table | None, change: Change, scope: Scope,
                         schema: pa.Schema, columns: list[str], metrics: ChangeMetrics, deleted: list | None = None):
    """:func:`change_file` of one file's live rows read a row group at a time, with only
    ``columns`` (what the change reads of the target): memory bounded by a row group and
    the changed rows, not by the file. Each target row's outcome depends on that row (and
    the source) alone, so the groups' outcomes are the file's."""
    touched, updated, matched = [], [], []
    for ordinals, rows in iter_live_row_groups(snapshot.storage, a, schema, columns, snapshot.version):
        t, u, m = change_file(rows.append_column(ROW, pa.array(ordinals)), source, change, scope, schema, metrics,
                              deleted)
        touched += [t] if t is not None else []
        updated += [u] if u is not None else []
        matched += [m] if m is not None else []
    return (np.concatenate(touched) if touched else None, pa.concat_tables(updated) if updated else None,
            np.concatenate(matched) if matched else None)


def _vector_actions(snapshot: Snapshot, deleted: list[tuple[AddFile, np.ndarray]], written_paths: list[str],
                    now: int, metrics: ChangeMetrics) -> list:
    """Each changed file removed and added back with a deletion vector: its old deleted
    rows and ``touched`` (all the DVs written into one file, the transaction's)."""
    if not deleted:
        return []
    sets = []
    for a, touched in deleted:
        touched = touched.astype(np.uint64)  # row ordinals, as deletion vectors hold them
        old = read_deletion_vector(snapshot.storage, a.deletionVector) if a.deletionVector is not None else None
        sets.append(np.union1d(old.astype(np.uint64), touched) if old is not None else unique_sorted(touched))
    descriptors = write_deletion_vectors(snapshot.storage, sets)
    written_paths.extend({d.relative_path for d in descriptors if d.storageType == "u"})
    actions = []
    for (a, _), d in zip(deleted, descriptors):
        actions += [a.removal(now), a.model_copy(update={"deletionVector": d, "dataChange": True})]
    metrics.num_deletion_vectors_added += len(descriptors)
    return actions


class _Writer:
    """Writes rows as bucketed files with their index entries into a :class:`_Written`
    (every path written is added to ``written_paths``: a transaction's, aborted with it);
    ``metadata`` and ``schema``: the table's after the change (its schema evolved or not)."""

    def __init__(self, snapshot: Snapshot, written_paths: list[str], metadata, schema: pa.Schema):
        self.snapshot, self.written_paths, self.metadata, self.schema = snapshot, written_paths, metadata, schema
        self.indexes = maintained_indexes(snapshot)
        self.use_threads = True  # pyarrow's threads decode a copied file's row groups
        self.checker: ConstraintChecker | None = None
        """The table's CHECK constraints, checked on updated and inserted rows (None: checked elsewhere)."""
        self.feed = change_data_feed_enabled(metadata.configuration)
        """Whether the change writes its change data (``delta.enableChangeDataFeed``)."""
        self.change_data = ChangeDataBuffer(snapshot.storage, metadata, schema, written_paths)
        """The change data gathered (written when ``feed``)."""
        self.inserted_files: list[AddFile] = []
        """Files written elsewhere (a Spark write's) whose rows the change inserts."""

    def __call__(self, rows: pa.Table, into: _Written) -> None:
        """Write new rows (updated or inserted), bucketed."""
        if rows.num_rows == 0:
            return
        adds, written = write_rows(self.snapshot.storage, self.metadata, self.indexes, rows, self.written_paths)
        into.actions.extend(adds)
        into.metrics.num_target_files_added += len(adds)
        into.metrics.num_output_rows += rows.num_rows
        self._index_files(into, written)

    def kept(self, a: AddFile, touched: np.ndarray, into: _Written) -> None:
        """Copy the rows of ``a`` but ``touched`` into a new file of its bucket, streamed."""
        add, written, copied = copy_kept_rows(self.snapshot.storage, self.metadata, self.indexes, a, self.schema,
                                              touched, self.written_paths, self.snapshot.version,
                                              self.use_threads)
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
