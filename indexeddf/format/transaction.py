"""Optimistic transactions: read version v, write files, put-if-absent version v+1.

On a lost race the transaction reads the winning commits and either rebases onto them
(retrying at the next version) or fails with a typed conflict error. The rules
(PROTOCOL.md, "Conflicts"):

- a winner that changed ``protocol`` or ``metaData`` fails every concurrent writer;
- a winner that committed the same ``txn`` app id at our version or later makes our
  commit a duplicate: it is dropped and the winner's version is returned;
- a winner that removed a file we remove: ``ConcurrentDeleteDeleteError``;
- a winner that removed a file in data we read: ``ConcurrentDeleteReadError``;
- a winner that added data to the buckets we read: ``ConcurrentAppendError``;
- a winner that changed an index this commit also changes: ``ConcurrentIndexError``;
- anything else (blind appends, changes with ``dataChange=false``) rebases.

File ids are random 63-bit integers drawn by the writer of each file (so index files
written before the commit can already name them); a commit whose file id is already
in use fails instead of committing a duplicate.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from .. import __version__
from ..errors import (
    CommitRetriesExceededError,
    ConcurrentModificationError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentIndexError,
    MetadataChangedError,
    TableExistsError,
    ProtocolChangedError,
    UnsupportedProtocolError,
)
from ..spec import config
from ..spec.actions import WRITER_VERSION, Action, AddFile, CommitInfo, IndexEntry, Metadata, Protocol, RemoveFile, Txn, to_lines
from .checkpoint import write_checkpoint
from .log import commit_path, list_log, read_commit
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
    ``ALL_BUCKETS`` (the whole table); ``()`` for a blind append.
    """

    snapshot: Snapshot
    operation: str
    parameters: dict[str, Any] = field(default_factory=dict)
    read_buckets: Iterable[int] | None = ()
    written_paths: list[str] = field(default_factory=list)

    @property
    def storage(self):
        return self.snapshot.storage

    def commit(self, actions: list[Action], metrics: dict[str, Any] | None = None) -> CommitResult:
        """Commit ``actions`` at the next free version, rebasing over winners when allowed.

        On any failure the files in ``written_paths`` are deleted, so nothing a failed
        transaction wrote stays behind.
        """
        try:
            return self._commit(actions, metrics or {})
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Delete the files this transaction wrote (nothing of it is in the log)."""
        _delete_all(self.storage, self.written_paths)
        self.written_paths = []

    # -- internals ---------------------------------------------------------------
    def _commit(self, actions: list[Action], metrics: dict[str, Any]) -> CommitResult:
        self._check_writable(self.snapshot)
        _check_new_file_ids(actions, self.snapshot.file_ids)
        max_retries = config.get(self.snapshot.metadata.configuration, "indexeddf.commit.maxRetries")
        base = self.snapshot
        winners: list[tuple[int, list[Action]]] = []
        for attempt in range(max_retries + 1):
            version = base.version + 1 + len(winners)
            last_ts = self._last_timestamp(base, winners)
            commit_info = self._commit_info(base.version, last_ts, actions, metrics)
            body = [commit_info] + actions
            if self.storage.put_if_absent(commit_path(version), to_lines(body).encode("utf-8")):
                return self._finish(base, winners, version, body)
            # Lost the race: read every winner up to the newest and check each.
            time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
            for v in range(version, _latest_version(self.storage, version) + 1):
                winning = read_commit(self.storage, v)
                winners.append((v, winning))
                duplicate = self._check_conflicts(v, winning, actions)
                if duplicate:
                    self.abort()
                    snap = update_snapshot(base)
                    return CommitResult(snap.version, snap, duplicate=True)
        raise CommitRetriesExceededError(
            f"{self.operation} on {self.storage.url} lost {max_retries + 1} races in a row; "
            "too many concurrent writers. Retry later or raise indexeddf.commit.maxRetries."
        )

    def _finish(self, base: Snapshot, winners, version: int, body: list[Action]) -> CommitResult:
        snap = base
        for v, winning in winners:
            snap = snap.apply(v, winning)
        snap = snap.apply(version, body)
        self.written_paths = []  # committed: no longer ours to clean up
        interval = config.get(snap.metadata.configuration, "indexeddf.checkpointInterval")
        if version % interval == 0:
            try:
                write_checkpoint(self.storage, snap)
            except OSError:
                pass  # a checkpoint is an optimisation; replay from JSON still works
        return CommitResult(version, snap)

    @staticmethod
    def _last_timestamp(base: Snapshot, winners) -> int:
        ts = base.timestamp
        for _, winning in winners:
            for a in winning:
                if isinstance(a, CommitInfo):
                    ts = max(ts, a.timestamp)
        return ts

    def _commit_info(self, read_version: int, last_ts: int, actions: list[Action], metrics) -> CommitInfo:
        blind = not any(isinstance(a, RemoveFile) for a in actions) and not self._reads_data()
        # Timestamps increase strictly with versions, so time travel can bisect them.
        now = max(int(time.time() * 1000), last_ts + 1)
        return CommitInfo(
            timestamp=now,
            operation=self.operation,
            operationParameters=self.parameters,
            readVersion=read_version if read_version >= 0 else None,
            isBlindAppend=blind,
            engineInfo=f"indexeddf/{__version__}",
            operationMetrics=metrics,
        )

    def _reads_data(self) -> bool:
        return self.read_buckets is None or bool(list(self.read_buckets))


    def _check_writable(self, snap: Snapshot) -> None:
        if snap.protocol.minWriterVersion > WRITER_VERSION:
            raise UnsupportedProtocolError(
                f"{self.storage.url} needs writer version {snap.protocol.minWriterVersion}; this "
                f"indexeddf writes up to {WRITER_VERSION}. Upgrade indexeddf to write to it."
            )

    def _check_conflicts(self, version: int, winning: list[Action], ours: list[Action]) -> bool:
        """Raise on a conflict with the commit at ``version``; True when ours is a duplicate."""
        what = f"{self.operation} (read version {self.snapshot.version}) lost to version {version}"
        our_txns = {a.appId: a.version for a in ours if isinstance(a, Txn)}
        our_removes = {a.path for a in ours if isinstance(a, RemoveFile)}
        our_indexes = {a.name for a in ours if isinstance(a, IndexEntry)}
        our_ids = {a.fileId for a in ours if isinstance(a, AddFile)}
        buckets = None if self.read_buckets is None else set(self.read_buckets)
        for a in winning:
            if isinstance(a, Protocol):
                raise ProtocolChangedError(f"{what}, which changed the protocol; re-read the table and retry")
            if isinstance(a, Metadata):
                raise MetadataChangedError(f"{what}, which changed the table metadata; re-read the table and retry")
            if isinstance(a, Txn) and a.appId in our_txns and a.version >= our_txns[a.appId]:
                return True
            if isinstance(a, RemoveFile):
                if a.path in our_removes:
                    raise ConcurrentDeleteDeleteError(f"{what}, which removed {a.path} that this commit removes too; retry")
                if a.dataChange and (buckets is None or a.bucket in buckets):
                    raise ConcurrentDeleteReadError(f"{what}, which removed {a.path} that this commit read; retry")
            if isinstance(a, AddFile) and a.fileId in our_ids:
                raise ConcurrentModificationError(f"{what}, which added file id {a.fileId} too; retry")
            if isinstance(a, AddFile) and a.dataChange and (buckets is None or a.bucket in buckets):
                raise ConcurrentAppendError(
                    f"{what}, which added {a.path} to bucket {a.bucket} that this commit read; retry"
                )
            if isinstance(a, IndexEntry) and a.name in our_indexes:
                raise ConcurrentIndexError(f"{what}, which changed index {a.name!r} too; retry")
        return False


def commit_create(storage: TableStorage, actions: list[Action], parameters: dict[str, Any],
                  written_paths: list[str], metrics: dict[str, Any] | None = None) -> CommitResult:
    """Commit version 0 of a new table; ``TableExistsError`` when another writer has one."""
    info = CommitInfo(
        timestamp=int(time.time() * 1000), operation="CREATE TABLE", operationParameters=parameters,
        isBlindAppend=True, engineInfo=f"indexeddf/{__version__}", operationMetrics=metrics or {},
    )
    _check_new_file_ids(actions, set())
    body = [info] + actions
    try:
        created = storage.put_if_absent(commit_path(0), to_lines(body).encode("utf-8"))
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


def _check_new_file_ids(actions: list[Action], in_use) -> None:
    """File ids of new files must be non-negative, distinct, and unused in the table."""
    ids = [a.fileId for a in actions if isinstance(a, AddFile)]
    bad = [i for i in ids if i < 0 or i in in_use]
    if bad or len(set(ids)) != len(ids):
        raise ConcurrentModificationError(
            f"file ids {bad or ids} are invalid or already in use (a random-id collision); retry the write"
        )


def _delete_all(storage: TableStorage, paths: list[str]) -> None:
    for rel in paths:
        storage.delete(rel)


def _latest_version(storage, at_least: int) -> int:
    commits, _ = list_log(storage)
    return max(commits[-1] if commits else at_least, at_least)

