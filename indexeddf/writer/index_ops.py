"""Index operations on the log: create a secondary index over the live data."""

from __future__ import annotations

import re

import pyarrow.parquet as pq

from ..errors import IndexExistsError, InvalidOptionError, SchemaMismatchError
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
    storage = snapshot.storage
    schema = arrow_schema(snapshot.metadata.schema_)
    transaction = Transaction(snapshot, "CREATE INDEX", {"name": name, "columns": columns, "numBuckets": num_buckets})
    pieces = [
        DataPiece(a.fileId, pq.read_table(storage.full(a.path), columns=columns, schema=schema, filesystem=storage.arrow_filesystem()))
        for a in snapshot.live_files()
    ]
    try:
        files = build_index_files(storage, name, columns, num_buckets, pieces, transaction.written_paths)
    except BaseException:
        transaction.abort()
        raise
    entry = IndexEntry(
        name=name, columns=tuple(columns), kind="secondary", state="ACTIVE",
        numBuckets=num_buckets, coveredVersion=-1, files=tuple(files),
    )
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
