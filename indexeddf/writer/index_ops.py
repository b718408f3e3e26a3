"""Index operations on the log: create a secondary index over the live data."""

from __future__ import annotations

import re

import pyarrow.parquet as pq

from ..errors import IndexExistsError, IndexNotFoundError, InvalidIndexStateError, InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot
from ..format.transaction import CommitResult, Transaction
from ..spec.actions import IndexEntry
from ..spec.bucketing import is_hashable_type
from ..spec.schema import arrow_schema
from .index_files import DataPiece, build_index_files
from .operations import MAX_BUCKETS

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def create_index(snapshot: Snapshot, name: str, columns: list[str], num_buckets: int | None = None) -> CommitResult:
    """Build index ``name`` on ``columns`` from every live data file, in one commit.

    The index covers the files live at the version read; files appended meanwhile are
    covered by their own appends when they maintained it, and otherwise scanned by
    lookups until a refresh. A concurrent creation of the same name fails with
    ``ConcurrentIndexError``.
    """
    num_buckets = snapshot.metadata.numBuckets if num_buckets is None else num_buckets
    _validate(snapshot, name, columns, num_buckets)
    transaction = Transaction(snapshot, "CREATE INDEX", {"name": name, "columns": columns, "numBuckets": num_buckets})
    entry = IndexEntry(
        name=name, columns=tuple(columns), kind="secondary", state="ACTIVE", numBuckets=num_buckets, coveredVersion=-1,
    )
    try:
        files = _index_files_of(snapshot, entry, snapshot.live_files(), transaction.written_paths)
    except BaseException:
        transaction.abort()
        raise
    entry = entry.model_copy(update={"files": tuple(files)})
    metrics = {"numIndexFiles": len(files), "numIndexedRows": sum(f.numEntries for f in files)}
    return transaction.commit([entry], metrics)


def _validate(snapshot: Snapshot, name: str, columns: list[str], num_buckets: int) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidOptionError(f"index name {name!r} must be letters, digits and _ (not starting with a digit)")
    existing = snapshot.indexes.get(name)
    if existing is not None and existing.state != "DELETED":
        raise IndexExistsError(f"index {name!r} already exists (state {existing.state}); pick another name or drop it first")
    if not columns:
        raise InvalidOptionError("an index needs at least one column")
    schema = arrow_schema(snapshot.metadata.schema_)
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"index columns {missing} are not in the table ({schema.names})", missing)
    unhashable = [c for c in columns if not is_hashable_type(schema.field(c).type)]
    if unhashable:
        raise SchemaMismatchError(f"columns {unhashable} cannot be indexed (type not hashable)", unhashable)
    if not isinstance(num_buckets, int) or not 1 <= num_buckets <= MAX_BUCKETS:
        raise InvalidOptionError(f"num_buckets must be an integer in 1..{MAX_BUCKETS}, got {num_buckets!r}")


REFRESH_MODES = ("incremental", "full", "quick")


def refresh_index(snapshot: Snapshot, name: str, mode: str = "incremental") -> CommitResult:
    """Bring index ``name`` up to the version read, in one commit.

    - ``incremental``: index only the live files the index does not cover, and drop
      index files all of whose data files are gone;
    - ``full``: rebuild the index from every live file;
    - ``quick``: record the version only (no files); queries keep scanning the files
      the index does not cover.

    It rebases over concurrent appends (their files stay uncovered, or are covered by
    their own index maintenance) and fails with ``ConcurrentIndexError`` only when
    another writer changed the same index otherwise.
    """
    if mode not in REFRESH_MODES:
        raise InvalidOptionError(f"refresh mode {mode!r}: use one of {list(REFRESH_MODES)}")
    entry = snapshot.indexes.get(name)
    if entry is None:
        raise IndexNotFoundError(f"no index {name!r} on {snapshot.storage.url}; indexes: {sorted(snapshot.indexes)}")
    if entry.state != "ACTIVE":
        raise InvalidIndexStateError(f"index {name!r} is {entry.state}; only an ACTIVE index can be refreshed")
    live_ids = snapshot.file_ids
    if mode == "full":
        to_index, removed = snapshot.live_files(), tuple(f.path for f in entry.files)
    elif mode == "quick":
        to_index, removed = [], ()
    else:
        # Index files that name a removed data file are replaced: their live files are
        # indexed again, so no entry of a removed file stays behind.
        stale = [f for f in entry.files if not live_ids.issuperset(f.fileIds)]
        removed = tuple(f.path for f in stale)
        kept = {i for f in entry.files if f.path not in set(removed) for i in f.fileIds}
        to_index = [a for a in snapshot.live_files() if a.fileId not in kept]
    transaction = Transaction(snapshot, "REFRESH INDEX", {"name": name, "mode": mode})
    try:
        files = _index_files_of(snapshot, entry, to_index, transaction.written_paths)
    except BaseException:
        transaction.abort()
        raise
    change = entry.model_copy(update={"files": tuple(files), "removedFiles": removed, "coveredVersion": -1})
    metrics = {"numIndexedFiles": len(to_index), "numIndexFilesAdded": len(files), "numIndexFilesRemoved": len(removed)}
    return transaction.commit([change], metrics)


def _index_files_of(snapshot: Snapshot, entry: IndexEntry, data_files, written: list[str]):
    storage = snapshot.storage
    schema = arrow_schema(snapshot.metadata.schema_)
    columns = list(entry.columns)
    pieces = [
        DataPiece(a.fileId, pq.read_table(storage.full(a.path), columns=columns, schema=schema, filesystem=storage.arrow_filesystem()))
        for a in data_files
    ]
    return build_index_files(storage, entry.name, columns, entry.numBuckets, pieces, written)
