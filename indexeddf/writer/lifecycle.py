"""Index lifecycle (after Hyperspace): every state change is a commit of an ``index``
action through the optimistic transaction.

Stable states: ``ACTIVE`` (used by readers, maintained by writes) and ``DELETED``
(soft-dropped: files kept, so it can be restored). An operation first commits its
transient state, does its work, then commits the stable state it ends in:

==================  ===========  ==========  =================================
operation           from         transient   to
==================  ===========  ==========  =================================
create_index        (none),      CREATING    ACTIVE
                    DELETED
refresh_index       ACTIVE       REFRESHING  ACTIVE
optimize_index      ACTIVE       OPTIMIZING  ACTIVE
drop_index          ACTIVE       DELETING    DELETED
restore_index       DELETED      RESTORING   ACTIVE
vacuum_index        DELETED      VACUUMING   DELETED (files deleted, "vacuumed")
cancel_index        any          (none)      its last stable state
                    transient
==================  ===========  ==========  =================================

The transient action keeps the index's files (it adds and removes none), so the
files of the last stable state stay in the log while the operation runs, and records
in ``properties`` the state to go back to (``stableState``), the folder the operation
writes its new index files into (``pendingDir``, ``_indexes/<name>/<operation id>``),
the operation and when it started. ``cancel_index`` uses them after a crash: it
commits the stable state back, then deletes the files under ``pendingDir`` (a
vacuum, which may already have deleted files, is rolled forward instead).

Two operations on one index cannot both run: the second sees a transient state and
fails with ``InvalidIndexStateError``, or, when both read the same version, loses
the race to the first's transient commit with ``ConcurrentIndexError``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import IndexNotFoundError, InvalidIndexStateError, InvalidOptionError, VersionNotFoundError
from ..format.datafiles import live_mask, read_file
from ..format.snapshot import Snapshot, update_snapshot
from ..format.transaction import CommitResult, Transaction
from ..spec.actions import PRIMARY_INDEX, IndexEntry, IndexFile
from ..spec.column_mapping import table_schema
from ..spec.states import STABLE_STATES, TRANSIENT_STATES
from .index_files import INDEX_DIR, DataPiece, build_index_files

Progress = Callable[[str], None] | None


STABLE = "stableState"
PENDING = "pendingDir"
OPERATION = "operation"
STARTED = "startedAt"
VACUUMED = "vacuumed"
TRANSIENT_KEYS = (STABLE, PENDING, OPERATION, STARTED)

BUILD_CHUNK_BYTES = 256 << 20
"""Index builds read this many bytes of data files at a time, then write their
entries (bounded memory; a crashed build leaves only whole files behind)."""
SMALL_INDEX_FILE_BYTES = 8 << 20
"""``optimize_index(mode="quick")`` merges index files smaller than this."""


def say(progress: Progress, message: str) -> None:
    """Report ``message`` to ``progress`` (a long job's callback), when there is one."""
    if progress is not None:
        progress(message)


def stable_props(props: dict[str, str]) -> dict[str, str]:
    """``properties`` without the keys of a running operation."""
    return {k: v for k, v in props.items() if k not in TRANSIENT_KEYS}


def require(snapshot: Snapshot, name: str, allowed: tuple[str, ...], what: str) -> IndexEntry:
    """The index ``name``, which must be in one of the ``allowed`` states."""
    entry = snapshot.indexes.get(name)
    if entry is None:
        raise IndexNotFoundError(f"no index {name!r} on {snapshot.storage.url}; indexes: {sorted(snapshot.indexes)}")
    if entry.state not in allowed:
        hint = ""
        if entry.state in TRANSIENT_STATES:
            op = entry.properties.get(OPERATION, "an operation")
            hint = (f" ({op} is running on it, or its process died: wait for it, or run "
                    f"cancel_index({name!r}) to go back to {entry.properties.get(STABLE, TRANSIENT_STATES[entry.state])})")
        raise InvalidIndexStateError(
            f"cannot {what} index {name!r}: it is {entry.state}; {what} needs {' or '.join(allowed)}{hint}"
        )
    return entry


@dataclass
class Started:
    """An operation whose transient state is committed."""

    snapshot: Snapshot
    entry: IndexEntry
    pending_dir: str
    version: int


def begin(snapshot: Snapshot, entry: IndexEntry, transient: str, operation: str, params: dict,
          removed: tuple[str, ...] = ()) -> Started:
    """Commit ``entry`` in state ``transient``, its files unchanged (plus ``removed``)."""
    op_id = uuid.uuid4().hex
    pending = f"{INDEX_DIR}/{entry.name}/{op_id}"
    props = stable_props(entry.properties) | {
        STABLE: TRANSIENT_STATES[transient], PENDING: pending, OPERATION: operation, STARTED: str(int(time.time() * 1000)),
    }
    change = entry.model_copy(update={"state": transient, "files": (), "removedFiles": tuple(removed), "properties": props})
    result = Transaction(snapshot, operation, {**params, "state": transient}).commit([change])
    return Started(result.snapshot, result.snapshot.indexes[entry.name], pending, result.version)


Work = Callable[[Started, list[str]], tuple[tuple[IndexFile, ...], tuple[str, ...], dict, dict]]


def finish(started: Started, operation: str, params: dict, final: str, work: Work | None = None,
           covered: bool = False) -> CommitResult:
    """Do ``work`` (new files, removed paths, metrics, extra properties), then commit the
    ``final`` state. On an error the operation's files are deleted and the index is
    put back into its stable state (unless another writer changed it meanwhile)."""
    tx = Transaction(started.snapshot, operation, {**params, "state": final})
    try:
        files, removed, metrics, extra = work(started, tx.written_paths) if work else ((), (), {}, {})
        change = started.entry.model_copy(update={
            "state": final, "files": tuple(files), "removedFiles": tuple(removed),
            "properties": stable_props(started.entry.properties) | extra,
            "coveredVersion": -1 if covered else started.entry.coveredVersion,
        })
        return tx.commit([change], metrics)
    except BaseException:
        tx.abort()
        # Safe after any error, a lost race included: _rollback only cancels the
        # transient state if it is still this operation's (a cancel may have won).
        _rollback(started)
        raise


def _rollback(started: Started) -> None:
    """Best effort: cancel our own transient state after a failure in this process."""
    try:
        snap = update_snapshot(started.snapshot)
        entry = snap.indexes.get(started.entry.name)
        if entry is not None and entry.properties.get(PENDING) == started.pending_dir:
            cancel_index(snap, entry.name)
    except Exception:  # the original error matters more; cancel_index can be run later
        pass


def run(snapshot: Snapshot, entry: IndexEntry, transient: str, final: str, operation: str, params: dict,
        work: Work | None = None, covered: bool = False, removed: tuple[str, ...] = ()) -> CommitResult:
    """``begin`` then ``finish``: the two commits of one lifecycle operation."""
    started = begin(snapshot, entry, transient, operation, params, removed)
    return finish(started, operation, params, final, work, covered)


# -- building index files -----------------------------------------------------------------
Build = Callable[..., list[IndexFile]]
"""What writes an operation's index files: :func:`build_files` or a function of its
signature (``indexeddf.spark.maintenance.spark_build`` runs it as a Spark job)."""


def build_files(snapshot: Snapshot, entry: IndexEntry, data_files, written: list[str], dir_name: str,
                progress: Progress = None) -> list[IndexFile]:
    """Index files of ``entry`` for ``data_files``, written under ``dir_name`` in chunks
    of about ``BUILD_CHUNK_BYTES`` of data (one file per index bucket and chunk)."""
    storage = snapshot.storage
    schema = table_schema(snapshot.metadata)
    columns = list(entry.columns)
    rel_dir = dir_name[len(INDEX_DIR) + 1:] if dir_name.startswith(INDEX_DIR + "/") else dir_name
    out: list[IndexFile] = []
    chunk: list[DataPiece] = []
    size, done, total = 0, 0, len(data_files)
    for a in data_files:
        chunk.append(_live_piece(storage, a, schema, columns, snapshot.version))
        size += a.size
        done += 1
        if size >= BUILD_CHUNK_BYTES:
            out += build_index_files(storage, rel_dir, columns, entry.numBuckets, chunk, written)
            chunk, size = [], 0
            say(progress, f"index {entry.name}: {done}/{total} data files indexed")
    if chunk:
        out += build_index_files(storage, rel_dir, columns, entry.numBuckets, chunk, written)
    say(progress, f"index {entry.name}: {done}/{total} data files indexed, {len(out)} index files")
    return out


def _live_piece(storage, a, schema, columns: list[str], version: int) -> DataPiece:
    """The key columns of one data file's live rows, each with its ordinal in the FILE
    (index entries point at file positions; rows a deletion vector deletes get none, so
    an index does not grow with dead rows)."""
    rows = read_file(storage, a.path, schema, columns, version, a.partitionValues)
    mask = live_mask(storage, a, rows.num_rows)
    if mask is None:
        return DataPiece(a.fileId, rows)
    return DataPiece(a.fileId, rows.filter(mask), np.flatnonzero(mask))


# -- the operations ------------------------------------------------------------------------
def drop_index(snapshot: Snapshot, name: str) -> CommitResult:
    """Soft delete: ACTIVE -> DELETING -> DELETED. Files are kept (``restore_index``)."""
    if name == PRIMARY_INDEX:
        raise InvalidOptionError("the primary index cannot be dropped: it is built with the data")
    entry = require(snapshot, name, ("ACTIVE",), "drop")
    return run(snapshot, entry, "DELETING", "DELETED", "DROP INDEX", {"name": name})


def restore_index(snapshot: Snapshot, name: str) -> CommitResult:
    """DELETED -> RESTORING -> ACTIVE, with the files it had when it was dropped.

    Files appended meanwhile are not covered (lookups scan them) until a refresh.
    """
    entry = require(snapshot, name, ("DELETED",), "restore")
    if entry.properties.get(VACUUMED) == "true":
        raise InvalidIndexStateError(f"index {name!r} was vacuumed (its files are gone); create it again instead")
    missing = [f.path for f in entry.files if not snapshot.storage.exists(f.path)]
    if missing:
        raise VersionNotFoundError(
            f"cannot restore index {name!r}: {len(missing)} of its files were deleted (e.g. {missing[0]}), "
            "probably by vacuum; create it again instead"
        )
    return run(snapshot, entry, "RESTORING", "ACTIVE", "RESTORE INDEX", {"name": name})


def vacuum_index(snapshot: Snapshot, name: str, progress: Progress = None) -> CommitResult:
    """DELETED -> VACUUMING -> DELETED with no files: deletes the index's files for good.

    Lookups through this index at versions from before the vacuum can then fail;
    the table's rows and every other index are unaffected.
    """
    entry = require(snapshot, name, ("DELETED",), "vacuum")

    def work(started: Started, written):
        paths = _delete_index_files(snapshot, started.entry, progress)
        return (), paths, {"numIndexFilesDeleted": len(paths)}, {VACUUMED: "true"}

    return run(snapshot, entry, "VACUUMING", "DELETED", "VACUUM INDEX", {"name": name}, work)


def _delete_index_files(snapshot: Snapshot, entry: IndexEntry, progress: Progress) -> list[str]:
    paths = [f.path for f in entry.files]
    for i, p in enumerate(paths, 1):
        snapshot.storage.delete(p)
        say(progress, f"index {entry.name}: deleted {i}/{len(paths)} {p}")
    return paths


Compact = Callable[..., tuple[list[IndexFile], list[str]]]
"""What merges an index's files per index bucket: ``index_compaction.compact_index`` (in
this process) or a function of the signature ``(storage, entry, rewrite, keep_ids,
dir_name=, written=)`` (``indexeddf.spark.optimize.spark_compact`` runs it as a Spark job)."""


def optimize_index(snapshot: Snapshot, name: str, mode: str = "quick", progress: Progress = None,
                   compact: Compact | None = None) -> CommitResult | None:
    """ACTIVE -> OPTIMIZING -> ACTIVE: merge an index's files per index bucket.

    ``quick``: the files under 8 MiB of each bucket that has two or more of them;
    ``full``: every bucket with two or more files, or with entries of removed data
    files, becomes one file (entries of removed data files are dropped). Returns
    None, committing nothing, when there is nothing to merge. ``compact``: what merges
    the files (:data:`Compact`; None merges them in this process).
    """
    from .index_compaction import compact_index, small_file_groups

    compact = compact or compact_index
    if mode not in ("quick", "full"):
        raise InvalidOptionError(f"optimize mode {mode!r}: use 'quick' or 'full'")
    entry = require(snapshot, name, ("ACTIVE",), "optimize")
    if not small_file_groups(entry, mode, SMALL_INDEX_FILE_BYTES, snapshot.file_ids):
        return None

    def work(started: Started, written):
        snap = started.snapshot
        rewrite = small_file_groups(started.entry, mode, SMALL_INDEX_FILE_BYTES, snap.file_ids)
        files, removed = compact(snap.storage, started.entry, rewrite, set(snap.file_ids),
                                 dir_name=started.pending_dir[len(INDEX_DIR) + 1:], written=written)
        say(progress, f"index {name}: {len(removed)} index files -> {len(files)}")
        return files, removed, {"numIndexFilesRemoved": len(removed), "numIndexFilesAdded": len(files)}, {}

    return run(snapshot, entry, "OPTIMIZING", "ACTIVE", "OPTIMIZE INDEX", {"name": name, "mode": mode}, work)


def cancel_index(snapshot: Snapshot, name: str, progress: Progress = None) -> CommitResult:
    """Return an index stuck in a transient state (its operation's process died) to its
    last stable state, then delete the files the operation was writing.

    CREATING ends DELETED (and vacuumed); VACUUMING is rolled forward (the vacuum may
    have deleted files already) and ends DELETED and vacuumed; every other state goes
    back to the state it started from, with the files it had. Cancelling an operation
    that is in fact still running makes its final commit fail.
    """
    entry = require(snapshot, name, tuple(TRANSIENT_STATES), "cancel")
    stable = entry.properties.get(STABLE) or TRANSIENT_STATES[entry.state]
    pending = entry.properties.get(PENDING)
    props = stable_props(entry.properties)
    removed: tuple[str, ...] = ()
    if entry.state == "VACUUMING" or stable == "NONE":
        state, props, removed = "DELETED", props | {VACUUMED: "true"}, tuple(f.path for f in entry.files)
    elif stable in STABLE_STATES:
        state = stable
    else:
        state = TRANSIENT_STATES[entry.state]
    change = entry.model_copy(update={"state": state, "files": (), "removedFiles": removed, "properties": props})
    params = {"name": name, "from": entry.state, "state": state}
    result = Transaction(snapshot, "CANCEL INDEX", params).commit([change], {"numIndexFilesRemoved": len(removed)})
    # Only now (the cancel is committed: the operation can no longer commit its files)
    # delete what the operation wrote.
    if entry.state == "VACUUMING":
        _delete_index_files(snapshot, entry, progress)
    if pending and pending.startswith(f"{INDEX_DIR}/{name}/"):
        from .tree import list_tree

        live = {f.path for f in result.snapshot.indexes[name].files}
        for rel, _, _ in list_tree(snapshot.storage, pending):
            if rel not in live:
                snapshot.storage.delete(rel)
                say(progress, f"index {name}: deleted partial file {rel}")
        from .tree import remove_empty_dirs

        remove_empty_dirs(snapshot.storage, pending)
    return result
