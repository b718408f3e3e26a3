"""Optimistic transactions: read version v, write files, put-if-absent version v+1.

On a lost race the transaction reads the winning commits and either rebases onto them
(retrying at the next version) or fails with a typed conflict error. The rules
(PROTOCOL.md, "Conflicts"):

- a winner that changed ``protocol`` or ``metaData`` fails every concurrent writer;
- a commit that changes the schema fails on a winner that added or removed data
  (``ConcurrentSchemaChangeError``): that data was checked against the old schema; except
  a metadata-only ``ADD COLUMNS``, which read no data (as in Delta) and rebases unless a
  winner's file holds a column of a name it adds;
- a winner that committed the same ``txn`` app id at our version or later makes our
  commit a duplicate: it is dropped and the winner's version is returned;
- a winner that removed a file we remove: ``ConcurrentDeleteDeleteError``;
- a winner that removed a file in data we read: ``ConcurrentDeleteReadError``;
- a winner that added data to the buckets we read: ``ConcurrentAppendError`` (a blind append
  only under Serializable, or against a commit that changes the bucket count);
- a winner that changed an index this commit also changes (other than by only adding
  files to it while it stays ACTIVE, as appends do): ``ConcurrentIndexError``;
- anything else (blind appends, changes with ``dataChange=false``) rebases.

Appends maintain indexes through ``index_appends``: the ``index`` action is rebuilt at
every attempt from the newest state of the index, so it never undoes a winner's change.

File ids are random 63-bit integers drawn by the writer of each file (so index files
written before the commit can already name them); a commit whose file id is already
in use fails instead of committing a duplicate.
"""

from __future__ import annotations

import random
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

from .._version import __version__
from ..errors import (
    CommitRetriesExceededError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentIndexError,
    ConcurrentModificationError,
    ConcurrentSchemaChangeError,
    MetadataChangedError,
    ProtocolChangedError,
    TableExistsError,
    UnsupportedFeatureError,
)
from ..spec import config
from ..spec.actions import Action, AddFile, CommitInfo, IndexEntry, IndexFile, Metadata, Protocol, RemoveFile, Txn
from ..spec.column_mapping import physical_names, table_schema
from ..spec.delta import encode_commit
from ..spec.features import append_only, check_writable
from .checkpoint import write_checkpoint
from .datafiles import open_parquet
from .log import commit_path, read_commit
from .snapshot import Snapshot, initial_snapshot, update_snapshot
from .storage import TableStorage

ALL_BUCKETS = None
"""``read_buckets`` value for a transaction that read the whole table."""


@dataclass
class CommitResult:
    """What a commit produced: its version and the snapshot after it."""

    version: int
    snapshot: Snapshot
    duplicate: bool = False
    """True when an idempotent ``txn`` had already been committed (nothing was written)."""


@dataclass
class Transaction:
    """One optimistic transaction against ``snapshot`` (the version it read).

    ``read_buckets``: the buckets whose data the transaction's outcome depends on, or
    ``ALL_BUCKETS`` (the whole table); ``()`` for a blind append. ``isolation``: the
    level this transaction commits at (default: the table's ``delta.isolationLevel``);
    RESTORE is always Serializable, since it promises an older version's exact content.
    """

    snapshot: Snapshot
    operation: str
    parameters: dict[str, Any] = field(default_factory=dict)
    read_buckets: Iterable[int] | None = ()
    written_paths: list[str] = field(default_factory=list)
    isolation: str | None = None

    def isolation_level(self, snap: Snapshot) -> str:
        """``Serializable`` or ``WriteSerializable``: this transaction's, else the table's."""
        return self.isolation or config.get(snap.metadata.configuration, "delta.isolationLevel", lenient=True)

    @property
    def storage(self):
        return self.snapshot.storage

    def commit(
        self,
        actions: list[Action],
        metrics: dict[str, Any] | None = None,
        index_appends: dict[str, list[IndexFile]] | None = None,
    ) -> CommitResult:
        """Commit ``actions`` at the next free version, rebasing over winners when allowed.

        ``index_appends``: new index files per index name, for the rows this commit
        adds. They become an ``index`` action built at each attempt from the newest
        state of that index, so concurrent appends that both maintain an index rebase
        cleanly; an index that is no longer ACTIVE gets no files (its queries scan
        the files it does not cover).

        On any failure the files in ``written_paths`` are deleted, so nothing a failed
        transaction wrote stays behind.
        """
        try:
            return self._commit(actions, metrics or {}, index_appends or {})
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Delete the files this transaction wrote (nothing of it is in the log)."""
        _delete_all(self.storage, self.written_paths)
        self.written_paths = []

    # -- internals ---------------------------------------------------------------
    def _commit(self, actions: list[Action], metrics: dict[str, Any], index_appends) -> CommitResult:
        self._check_writable(self.snapshot, actions)
        _check_new_file_ids(actions, self.snapshot.file_ids | self.snapshot.tombstone_sizes.keys())
        max_retries = config.get(self.snapshot.metadata.configuration, "indexeddf.commit.maxRetries", lenient=True)
        current = self.snapshot  # the read snapshot with every winner applied
        for attempt in range(max_retries + 1):
            version = current.version + 1
            body = [self._commit_info(current, actions, metrics)] + [_covering(a, version) for a in actions]
            body += _index_actions(current, index_appends, version, actions)
            try:
                won = self.storage.put_if_absent(commit_path(version), encode_commit(body).encode("utf-8"))
            except BaseException:
                # The put may have landed (an object store can time out after a write):
                # keep the files; a vacuum removes them if no version names them.
                self.written_paths = []
                raise
            if won:
                self.written_paths = []  # committed: the files belong to the table now
                return self._finish(current.apply(version, body))
            # Lost the race: read every winner up to the newest and check each.
            time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
            for v, winning in _winners(self.storage, version):
                duplicate = self._check_conflicts(v, winning, actions, current)
                current = current.apply(v, winning)
                if duplicate:
                    self.abort()
                    latest = update_snapshot(current)
                    return CommitResult(latest.version, latest, duplicate=True)
        raise CommitRetriesExceededError(
            f"{self.operation} on {self.storage.url} lost {max_retries + 1} races in a row; "
            "too many concurrent writers. Retry later or raise indexeddf.commit.maxRetries."
        )

    def _finish(self, snap: Snapshot) -> CommitResult:
        interval = config.get(snap.metadata.configuration, "indexeddf.checkpointInterval", lenient=True)
        if snap.version % interval == 0:
            try:
                write_checkpoint(self.storage, snap)
            except Exception as e:  # a checkpoint is an optimisation; replay from JSON still works
                warnings.warn(f"checkpoint of version {snap.version} not written: {e}", stacklevel=3)
        return CommitResult(snap.version, snap)

    def _commit_info(self, current: Snapshot, actions: list[Action], metrics) -> CommitInfo:
        blind = not any(isinstance(a, RemoveFile) for a in actions) and not self._reads_data()
        # Timestamps increase strictly with versions, so time travel can bisect them.
        now = max(int(time.time() * 1000), current.timestamp + 1)
        return CommitInfo(
            timestamp=now,
            operation=self.operation,
            operationParameters=self.parameters,
            readVersion=self.snapshot.version,
            isBlindAppend=blind,
            engineInfo=f"indexeddf/{__version__}",
            operationMetrics=metrics,
            isolationLevel=self.isolation_level(current),
        )

    def _reads_data(self) -> bool:
        return self.read_buckets is None or bool(list(self.read_buckets))


    def _check_writable(self, snap: Snapshot, actions: list[Action]) -> None:
        check_writable(snap.protocol, snap.metadata, self.storage.url)
        if append_only(snap.metadata) and any(isinstance(a, RemoveFile) and a.dataChange for a in actions):
            raise UnsupportedFeatureError(
                "appendOnly",
                f"{self.storage.url} has delta.appendOnly = true: {self.operation} would remove data. "
                "Set the property to false first if the table may lose rows.",
            )
        metadata = next((m for m in actions if isinstance(m, Metadata)), snap.metadata)
        physical = physical_names(table_schema(metadata))  # partitionValues use physical names
        columns = {physical.get(c, c) for c in metadata.partitionColumns}
        # The last guard against a wrong partitioned table: an add without its partition
        # values would read as NULL partitions in every Delta reader.
        if any(isinstance(f, AddFile) and set(f.partitionValues) != columns for f in actions):
            raise UnsupportedFeatureError(
                "partitionColumns",
                f"{self.storage.url} is partitioned by {list(metadata.partitionColumns)}; {self.operation} "
                "would add a file without its partition values, so nothing was committed. Write to it with "
                "an operation that keeps partitions (docs/PROTOCOL.md §18), or with another Delta engine.",
            )

    def _check_conflicts(self, version: int, winning: list[Action], ours: list[Action], before: Snapshot) -> bool:
        """Raise on a conflict with the commit at ``version`` (``before``: the state it
        was committed on); True when ours is a duplicate."""
        what = f"{self.operation} (read version {self.snapshot.version}) lost to version {version}"
        our_txns = {a.appId: a.version for a in ours if isinstance(a, Txn)}
        our_removes = {a.path for a in ours if isinstance(a, RemoveFile)}
        our_indexes = {a.name for a in ours if isinstance(a, IndexEntry)}
        our_ids = {a.fileId for a in ours if isinstance(a, AddFile)}
        winner_op = next((a.operation for a in winning if isinstance(a, CommitInfo)), "")
        buckets = None if self.read_buckets is None else set(self.read_buckets)
        # WriteSerializable (Delta's default): a blind append that won is serialized after
        # this commit, so what it added never conflicts with what this commit read.
        blind = any(isinstance(a, CommitInfo) and a.isBlindAppend for a in winning)
        # Delta's rule: a metadata change conflicts with concurrent transactions. A schema
        # change validated the table as it read it; rows another writer committed since were
        # checked against the old schema (a type this change widens or a column it adds under
        # another type), so it does not rebase over them.
        schema_change = any(isinstance(a, Metadata) and a.schema_ != self.snapshot.metadata.schema_ for a in ours)
        # ...except ADD COLUMNS alone (Delta's ConflictChecker: a metadata change re-checks blind
        # appends against what the transaction read, and ADD COLUMNS read nothing): rows written
        # meanwhile read the new columns as NULL, as the rows before them do.
        added = _added_columns(ours, self.snapshot.metadata) if schema_change else None
        # A new bucket count (optimize with num_buckets): files a winner added were bucketed by the
        # old count, so even a blind append conflicts (Delta's rule: under WriteSerializable a
        # transaction that changes the metadata checks blind appends too).
        rebucket = any(isinstance(a, Metadata) and a.numBuckets != self.snapshot.metadata.numBuckets for a in ours)
        appends_conflict = rebucket or not blind or self.isolation_level(before) == "Serializable"
        # An idempotent commit that the winner already made is a duplicate, whatever else
        # the two commits would conflict on.
        if any(isinstance(a, Txn) and a.appId in our_txns and a.version >= our_txns[a.appId] for a in winning):
            return True
        for a in winning:
            if isinstance(a, Protocol):
                raise ProtocolChangedError(f"{what}, which changed the protocol; re-read the table and retry")
            if isinstance(a, Metadata):
                raise MetadataChangedError(f"{what}, which changed the table metadata; re-read the table and retry")
            if schema_change and isinstance(a, (AddFile, RemoveFile)) and a.dataChange and (
                    added is None or (isinstance(a, AddFile) and self._holds_column(a, added))):
                raise ConcurrentSchemaChangeError(
                    f"{what}: this commit changes the schema of version {self.snapshot.version}, and version "
                    f"{version} {'added' if isinstance(a, AddFile) else 'removed'} data ({a.path}) meanwhile; "
                    "nothing of this commit was written. Re-read the table and retry")
            if isinstance(a, RemoveFile):
                if a.path in our_removes:
                    raise ConcurrentDeleteDeleteError(f"{what}, which removed {a.path} that this commit removes too; retry")
                if a.dataChange and _touches(a.bucket, buckets):
                    raise ConcurrentDeleteReadError(f"{what}, which removed {a.path} that this commit read; retry")
            if isinstance(a, AddFile) and a.fileId in our_ids:
                raise ConcurrentModificationError(f"{what}, which added file id {a.fileId} too; retry")
            if isinstance(a, AddFile) and a.dataChange and appends_conflict and _touches(a.bucket, buckets):
                raise ConcurrentAppendError(
                    f"{what}, which added {a.path} to bucket {a.bucket} that this commit read; retry"
                )
            if isinstance(a, IndexEntry) and a.name in our_indexes and not _is_index_append(before, a, winner_op, winning):
                raise ConcurrentIndexError(f"{what}, which changed index {a.name!r} too; retry")
        return False


    def _holds_column(self, add: AddFile, names: set[str]) -> bool:
        """Whether ``add``'s file holds a column of one of ``names`` (lower case): a writer
        outside the schema wrote it, and readers would take its values, of any type, for the
        new column's. A footer that cannot be read counts as holding one."""
        try:
            return bool(names & {n.lower() for n in open_parquet(self.storage, add.path).schema_arrow.names})
        except Exception:  # noqa: BLE001 - unknown content: refuse the rebase rather than guess
            return True


def _added_columns(ours: list[Action], read: Metadata) -> set[str] | None:
    """The names (lower case) of the columns ``ours`` adds when it is a metadata-only ADD
    COLUMNS: its ``metaData`` is the read one with fields appended at the end and nothing
    else changed, and it adds or removes no file; else None."""
    new = next((a for a in ours if isinstance(a, Metadata)), None)
    if new is None or any(isinstance(a, (AddFile, RemoveFile)) for a in ours):
        return None
    n = len(read.schema_)
    if len(new.schema_) <= n or tuple(new.schema_[:n]) != tuple(read.schema_):
        return None
    if new.model_copy(update={"schema_": read.schema_}) != read:
        return None
    return {f.name.lower() for f in new.schema_[n:]}


def _touches(bucket: int | None, read: set[int] | None) -> bool:
    """Whether a file of ``bucket`` (None: a file of every bucket) is in what was read."""
    if read is None:
        return True
    return bool(read) if bucket is None else bucket in read


def commit_create(storage: TableStorage, actions: list[Action], parameters: dict[str, Any],
                  written_paths: list[str], metrics: dict[str, Any] | None = None,
                  operation: str = "CREATE TABLE") -> CommitResult:
    """Commit version 0 of a new table; ``TableExistsError`` when another writer has one.
    ``operation``: the commit's operation name (Delta's ``CREATE OR REPLACE TABLE AS SELECT``
    when that statement creates the table)."""
    info = CommitInfo(
        timestamp=int(time.time() * 1000), operation=operation, operationParameters=parameters,
        isolationLevel="WriteSerializable",
        isBlindAppend=True, engineInfo=f"indexeddf/{__version__}", operationMetrics=metrics or {},
    )
    _check_new_file_ids(actions, set())
    body = [info] + actions
    try:
        created = storage.put_if_absent(commit_path(0), encode_commit(body).encode("utf-8"))
    except BaseException:
        _delete_all(storage, written_paths)
        raise
    if not created:
        _delete_all(storage, written_paths)
        raise TableExistsError(
            f"a table already exists at {storage.url}; open it with IndexedTable.for_path, "
            "or use overwrite() to replace its content"
        )
    return CommitResult(0, initial_snapshot(storage, body))


def _covering(action: Action, version: int) -> Action:
    """An ``index`` action with ``coveredVersion`` -1 covers the version it commits as."""
    if isinstance(action, IndexEntry) and action.coveredVersion < 0:
        return action.model_copy(update={"coveredVersion": version})
    return action


INDEX_OPERATIONS = ("CREATE INDEX", "REFRESH INDEX")
"""Operations whose ``index`` actions are index changes in their own right, never
mere maintenance appends (two refreshes of one index must not both commit)."""


def _is_index_append(before: Snapshot, change: IndexEntry, operation: str, winning: list[Action] = ()) -> bool:
    """Whether ``change`` only added files to an ACTIVE index (what data writes do), and
    removed none but index files of data files gone after its commit (a pruning)."""
    prev = before.indexes.get(change.name)
    return (
        operation not in INDEX_OPERATIONS
        and prev is not None
        and prev.state == change.state == "ACTIVE"
        and (prev.columns, prev.kind, prev.numBuckets) == (change.columns, change.kind, change.numBuckets)
        and (not change.removedFiles
             or set(change.removedFiles) <= set(_dead_index_files(prev, _live_after(before, winning))))
    )


def _live_after(before: Snapshot, actions) -> frozenset[int]:
    """The live file ids once ``actions`` commit on ``before`` (a file removed and added
    back, as a deletion vector does, stays)."""
    added = {a.fileId for a in actions if isinstance(a, AddFile)}
    removed = {a.fileId for a in actions if isinstance(a, RemoveFile) and a.fileId is not None} - added
    return (before.file_ids - removed) | added


def _dead_index_files(entry: IndexEntry, live: frozenset[int]) -> tuple[str, ...]:
    """Paths of ``entry``'s index files whose every data file is gone: entries nothing can
    reach, which only make the index look stale (PROTOCOL.md §8, pruning)."""
    return tuple(f.path for f in entry.files if f.fileIds and not any(i in live for i in f.fileIds))


def _index_actions(current: Snapshot, index_appends: dict[str, list[IndexFile]], version: int,
                   actions: list[Action] = ()) -> list[IndexEntry]:
    """``index`` actions adding ``index_appends`` to the ACTIVE indexes of ``current``; a
    commit that removes data files also prunes the index files of gone files from them
    (when writes maintain the indexes: ``indexeddf.index.autoRefresh``)."""
    # Only where writes maintain the indexes: with autoRefresh off, writes leave them as
    # they are, and their staleness is what tells the user to refresh.
    prunes = any(isinstance(a, RemoveFile) for a in actions) and config.get(
        current.metadata.configuration, "indexeddf.index.autoRefresh", lenient=True)
    live = _live_after(current, actions) if prunes else frozenset()
    own = {a.name for a in actions if isinstance(a, IndexEntry)}  # an index operation's own change
    out = []
    for name, entry in current.indexes.items():
        files = tuple(index_appends.get(name, ()))
        dead = _dead_index_files(entry, live) if prunes and name not in own else ()
        if entry.state != "ACTIVE" or not (files or dead):
            continue
        covered = version if files else entry.coveredVersion
        out.append(entry.model_copy(update={"files": files, "removedFiles": dead, "coveredVersion": covered}))
    return out


def _check_new_file_ids(actions: list[Action], in_use) -> None:
    """File ids of new files must be non-negative, distinct, and unused in the table. A
    file removed and added back in the same commit (another deletion vector on the same
    data file) keeps its id: it is no new file."""
    same_file = {(a.path, a.fileId) for a in actions if isinstance(a, RemoveFile)}
    ids = [a.fileId for a in actions if isinstance(a, AddFile) and (a.path, a.fileId) not in same_file]
    bad = [i for i in ids if i < 0 or i in in_use]
    if bad or len(set(ids)) != len(ids):
        raise ConcurrentModificationError(
            f"file ids {bad or ids} are invalid or already in use (a random-id collision); retry the write"
        )


def _delete_all(storage: TableStorage, paths: list[str]) -> None:
    for rel in paths:
        storage.delete(rel)


def _winners(storage, first: int):
    """(version, actions) of the commits from ``first`` on, read until the first absent
    version. Versions are dense, so this needs no listing of the log folder: a listing
    costs O(commits) (paged on object stores) at every lost race, a read only the winners."""
    v = first
    while True:
        try:
            yield v, read_commit(storage, v)
        except FileNotFoundError:
            if v == first:  # the put said the version exists: read it, it cannot be absent
                raise
            return
        v += 1


def write_metrics(adds) -> dict[str, int]:
    """The operationMetrics of a commit that adds ``adds``."""
    return {
        "numFiles": len(adds),
        "numOutputRows": sum(a.stats.numRecords for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
    }
