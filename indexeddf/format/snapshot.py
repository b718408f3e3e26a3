"""Replay of the log into snapshots: the state of a table at one version.

Replay rules (PROTOCOL.md, "Replay"): the latest ``protocol`` and ``metaData`` win;
``add`` and ``remove`` are reconciled by logical file, Delta's (path, deletion vector
unique id): a ``remove`` takes out the live file only when it names the same deletion
vector, and within one commit the removes apply before the adds, so a file removed
with its old deletion vector and added back with a new one stays live with the new
one whatever the order of the two actions; the latest ``txn`` per ``appId`` and the
latest ``index`` per name win; ``commitInfo`` is provenance only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import CorruptLogError, NotIndexedError, TableNotFoundError, VersionNotFoundError
from ..spec.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    IndexEntry,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)
from ..spec.features import check_readable
from ..spec.type_widening import check_indexed_columns_kept
from . import checkpoint as ckpt
from .log import checkpoint_path, commit_path, list_log, read_commit, uuid_checkpoint_path
from .replay_rules import merge_index
from .storage import TableStorage


class Tombstones(MutableMapping):
    """The removed files of a version by path (Delta's tombstones). Those a checkpoint holds
    stay undecoded (:class:`~.checkpoint.DeferredRemoves`) until a caller reads them: the
    changes replayed on top are kept in order and applied after them then. File ids and
    sizes, which every commit and index plan needs, come from the checkpoint's columns."""

    def __init__(self, items: Mapping[str, RemoveFile] | None = None,
                 deferred: tuple[ckpt.DeferredRemoves, ...] = (), ops: tuple = ()):
        self._data = dict(items or {})
        self._deferred = tuple(deferred)
        self._ops: list[tuple[str, RemoveFile | None]] = list(ops)
        """(path, tombstone, or None where an add took the path back), applied after the deferred."""

    def defer(self, removes: ckpt.DeferredRemoves) -> None:
        """A checkpoint's removes, the first thing replayed (nothing is held before them)."""
        self._deferred += (removes,)

    def _load(self) -> dict[str, RemoveFile]:
        if self._deferred:
            data = {r.path: r for d in self._deferred for r in d.decode()}
            data.update(self._data)
            for path, r in self._ops:
                if r is None:
                    data.pop(path, None)
                else:
                    data[path] = r
            self._data, self._deferred, self._ops = data, (), []
        return self._data

    def discard(self, path: str) -> None:
        """Drop the tombstone of ``path`` if there is one (the file was added back)."""
        if self._deferred:
            self._ops.append((path, None))
        else:
            self._data.pop(path, None)

    def __setitem__(self, path: str, r: RemoveFile) -> None:
        if self._deferred:
            self._ops.append((path, r))
        else:
            self._data[path] = r

    def __getitem__(self, path: str) -> RemoveFile:
        return self._load()[path]

    def __delitem__(self, path: str) -> None:
        del self._load()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def copy(self) -> "Tombstones":
        """An independent copy that shares the undecoded removes (each decodes once)."""
        return Tombstones(self._data, self._deferred, tuple(self._ops))

    def id_sizes(self) -> dict[int, int]:
        """Each tombstone's file id and size in bytes, without decoding a checkpoint's."""
        if not self._deferred:
            return {r.fileId: r.size for r in self._data.values()}
        held: dict[str, tuple[int, int]] = {}
        for d in self._deferred:
            held.update(d.by_path())
        held.update({p: (r.fileId, r.size) for p, r in self._data.items()})
        for path, r in self._ops:
            if r is None:
                held.pop(path, None)
            else:
                held[path] = (r.fileId, r.size)
        return dict(held.values())


@dataclass(frozen=True)
class Snapshot:
    """The table as of ``version``. Immutable: applying commits returns a new snapshot."""

    storage: TableStorage
    version: int
    protocol: Protocol
    metadata: Metadata
    files: dict[str, AddFile]
    tombstones: Tombstones = field(default_factory=Tombstones)
    """Removed files by path (a checkpoint's are decoded when first read)."""
    txns: dict[str, Txn] = field(default_factory=dict)
    indexes: dict[str, IndexEntry] = field(default_factory=dict)
    timestamp: int = 0
    """Commit timestamp of ``version``, ms since the epoch (UTC)."""
    domains: dict[str, DomainMetadata] = field(default_factory=dict)
    """Delta's domain metadata by domain (other engines'; kept in checkpoints)."""

    # -- derived views -----------------------------------------------------------
    def live_files(self) -> list[AddFile]:
        """Live row-batch files in the order they were written (the order rows are read in)."""
        return sorted(self.files.values(), key=lambda a: (a.modificationTime, a.path))

    @cached_property
    def tombstone_sizes(self) -> dict[int, int]:
        """Bytes of each removed file, by file id (computed once per snapshot, without
        decoding a checkpoint's tombstones)."""
        return self.tombstones.id_sizes()

    @cached_property
    def file_ids(self) -> frozenset[int]:
        """File ids of the live files."""
        return frozenset(a.fileId for a in self.files.values())

    def num_records(self) -> int:
        """Rows in the snapshot, from file statistics (a file another Delta writer added
        without ``numRecords`` counts as 0: an estimate, never used for answers)."""
        return sum(a.stats.numRecords or 0 for a in self.files.values() if a.stats is not None)

    def size_bytes(self) -> int:
        """Bytes of the live row-batch files."""
        return sum(a.size for a in self.files.values())

    def txn_version(self, app_id: str) -> int | None:
        """The last committed version of an idempotent writer, or None."""
        t = self.txns.get(app_id)
        return None if t is None else t.version

    def apply(self, version: int, actions: list[Action]) -> "Snapshot":
        """The snapshot after one more commit."""
        state = ReplayState.from_snapshot(self)
        state.apply(actions)
        return state.freeze(self.storage, version)


@dataclass
class ReplayState:
    """The table's state while a log is replayed: actions are applied to it commit by
    commit (:meth:`apply`), then it is frozen into a :class:`Snapshot`."""

    protocol: Protocol | None = None
    metadata: Metadata | None = None
    files: dict[str, AddFile] = field(default_factory=dict)
    tombstones: Tombstones = field(default_factory=Tombstones)
    txns: dict[str, Txn] = field(default_factory=dict)
    indexes: dict[str, IndexEntry] = field(default_factory=dict)
    timestamp: int = 0
    domains: dict[str, DomainMetadata] = field(default_factory=dict)

    @classmethod
    def from_snapshot(cls, s: Snapshot) -> "ReplayState":
        """A state holding what ``s`` holds, to replay later commits onto."""
        return cls(s.protocol, s.metadata, dict(s.files), s.tombstones.copy(), dict(s.txns), dict(s.indexes), s.timestamp,
                   dict(s.domains))

    def apply(self, actions: list[Action]) -> None:
        """Apply one commit's (or one checkpoint's) actions: removes first, then the rest
        in order (see the module docstring)."""
        for a in actions:
            if isinstance(a, RemoveFile):
                self._remove(a)
            elif isinstance(a, ckpt.DeferredRemoves):  # a checkpoint's: the state holds no file yet
                self.tombstones.defer(a)
        for a in actions:
            if isinstance(a, AddFile):
                self.files[a.path] = a
                self.tombstones.discard(a.path)
            elif not isinstance(a, (RemoveFile, ckpt.DeferredRemoves)):
                self._apply_other(a)

    def _remove(self, a: RemoveFile) -> None:
        live = self.files.get(a.path)
        if live is not None and _dv_id(live) != _dv_id(a):
            return  # another logical file of that path (an older deletion vector): the live one stays
        self.files.pop(a.path, None)
        if live is not None and (a.fileId != live.fileId or a.bucket != live.bucket):
            # Other Delta writers remove files without our tags: the tombstone
            # keeps the id and bucket the file had (index coverage counts by id).
            a = a.model_copy(update={"fileId": live.fileId, "bucket": live.bucket, "size": a.size or live.size})
        self.tombstones[a.path] = a

    def _apply_other(self, a: Action) -> None:
        if isinstance(a, Txn):
            self.txns[a.appId] = a
        elif isinstance(a, IndexEntry):
            self.indexes[a.name] = merge_index(self.indexes.get(a.name), a)
        elif isinstance(a, Metadata):
            # Columns indexed before this metaData (a widening before convert is fine).
            indexed = set(self.metadata.indexColumns if self.metadata else ()) | {
                c for i in self.indexes.values() for c in i.columns}
            check_indexed_columns_kept(self.metadata, a, indexed)
            self.metadata = a
        elif isinstance(a, Protocol):
            check_readable(a, "the table")
            self.protocol = a
        elif isinstance(a, CommitInfo):
            self.timestamp = a.timestamp
        elif isinstance(a, DomainMetadata):
            if a.removed:
                self.domains.pop(a.domain, None)
            else:
                self.domains[a.domain] = a

    def freeze(self, storage: TableStorage, version: int, unindexed_ok: bool = False,
               first: str | None = None) -> Snapshot:
        """The replayed state as the snapshot of ``version``; ``first`` is the log file the
        replay started from (the file that should have held the protocol and metaData)."""
        if self.protocol is None or self.metadata is None:
            where = storage.full(first) if first else storage.url
            start = " (replayed from this file on)" if first else ""
            raise CorruptLogError(
                f"{where}: version {version} has no protocol or metaData action{start}; the log is damaged "
                "or was not written by indexeddf",
                where,
            )
        check_readable(self.protocol, storage.url)
        if not self.metadata.indexColumns and not unindexed_ok:
            raise NotIndexedError(
                f"{storage.url} version {version} is a Delta table that indexeddf has not indexed (its "
                "metaData has no indexeddf.indexColumns): index it with IndexedTable.convert(path, "
                "index_columns=[...], num_buckets=N); versions before the conversion are read by any "
                "Delta reader (delta-rs, DuckDB, Spark with Delta)"
            )
        return Snapshot(
            storage, version, self.protocol, self.metadata, self.files,
            self.tombstones, self.txns, self.indexes, self.timestamp, self.domains,
        )


def _dv_id(a: AddFile | RemoveFile) -> str | None:
    """The deletion vector part of a logical file's identity (None: no deletion vector)."""
    return None if a.deletionVector is None else a.deletionVector.unique_id


def initial_snapshot(storage: TableStorage, actions: list[Action]) -> Snapshot:
    """The snapshot of version 0 from its actions (used when a table is created)."""
    state = ReplayState()
    state.apply(actions)
    return state.freeze(storage, 0, first=commit_path(0))


def load_snapshot(storage: TableStorage, version: int | None = None, unindexed_ok: bool = False) -> Snapshot:
    """Replay the newest checkpoint at or before the target, then the commits after it.

    A version whose table is not indexed raises ``NotIndexedError`` unless
    ``unindexed_ok`` (for ``convert``, which indexes it)."""
    commits, checkpoints = list_log(storage)
    if not commits and not checkpoints:
        if storage.list_names("_indexeddf_log"):
            raise TableNotFoundError(
                f"{storage.url} is a table of indexeddf's first layout (_indexeddf_log/): turn it into a "
                "Delta table in place with `indexeddf upgrade PATH` (or IndexedTable.upgrade(path))"
            )
        if unindexed_ok:  # convert: the user meant an existing Delta table
            raise TableNotFoundError(
                f"no Delta table at {storage.url} (no {storage.full('_delta_log')}): convert indexes an existing "
                "Delta table in place; give the folder that holds _delta_log/, or create an indexed table with "
                "IndexedTable.create(path, data, index_columns=[...])"
            )
        raise TableNotFoundError(
            f"no indexeddf table at {storage.url} (no {storage.full('_delta_log')}); "
            "create one with IndexedTable.create(path, data, index_columns=[...])"
        )
    latest = max(commits[-1] if commits else -1, checkpoints[-1] if checkpoints else -1)
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(
            f"{storage.url} has versions up to {latest}; version {target} does not exist"
        )
    usable = [c for c in checkpoints if c <= target]
    state = ReplayState()
    start = 0
    if usable:
        state.apply(ckpt.read_checkpoint(storage, usable[-1]))
        start = usable[-1] + 1
    present = set(commits)
    for v in range(start, target + 1):
        if v not in present:
            raise VersionNotFoundError(
                f"{storage.url}: commit {v} is missing from the log, so version {target} "
                "cannot be reconstructed; pick a version at or after the oldest checkpoint"
            )
        state.apply(read_commit(storage, v))
    first = None
    if state.protocol is None or state.metadata is None:  # the error names the file replayed first
        first = _checkpoint_read(storage, usable[-1]) if usable else commit_path(0)
    return state.freeze(storage, target, unindexed_ok, first)


def _checkpoint_read(storage: TableStorage, version: int) -> str:
    """The checkpoint file of ``version`` a replay reads: the classic one when it exists (as
    ``read_checkpoint`` prefers it), else a UUID-named one (the first part's name for a
    multi-part checkpoint is not worked out: only an error message uses this)."""
    classic = checkpoint_path(version)
    if storage.exists(classic):
        return classic
    return uuid_checkpoint_path(storage, version) or classic


def update_snapshot(snapshot: Snapshot) -> Snapshot:
    """The latest snapshot, replaying only the commits after ``snapshot`` when possible."""
    commits, _ = list_log(snapshot.storage)
    newer = [v for v in commits if v > snapshot.version]
    if not newer:
        return snapshot
    if newer != list(range(snapshot.version + 1, newer[-1] + 1)):
        return load_snapshot(snapshot.storage, unindexed_ok=not snapshot.metadata.indexColumns)
    state = ReplayState.from_snapshot(snapshot)
    for v in newer:
        state.apply(read_commit(snapshot.storage, v))
    return state.freeze(snapshot.storage, newer[-1], unindexed_ok=not snapshot.metadata.indexColumns)

