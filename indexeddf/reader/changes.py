"""Reading a table's change data feed (Delta's ``CDCReader``): the rows each version in a range
inserted, deleted or updated, with ``_change_type``, ``_commit_version`` and
``_commit_timestamp``.

Per commit, as Delta reads it:

- a commit with ``cdc`` actions: its change data files, and nothing else of it;
- otherwise its ``add`` actions with ``dataChange`` true are inserts (their rows minus their
  deletion vector), its ``remove`` actions with ``dataChange`` true are deletes (the removed
  file's rows minus the deletion vector it had); a file removed and added back in the same
  commit with another deletion vector (a change that marked rows deleted without writing its
  change data) contributes the rows newly deleted as deletes and the rows no longer deleted
  as inserts;
- actions with ``dataChange`` false (``optimize``, compaction) contribute nothing.

With a :class:`~.change_keys.KeyFilter` (``keys``), the feed of those keys only: of each
file above, only one of a key's bucket is opened, only its row groups that can hold a key
are decoded, and only the rows of a key are kept (:mod:`.change_keys`).

Every version of the range must have the feed on (the ``metaData`` in effect after its
commit has ``delta.enableChangeDataFeed = true``), or :class:`MissingChangeDataError` says
which one did not, before any file is read. Memory is bounded by a file: the feed comes a file
at a time (:func:`change_batches`). A caller holding a
snapshot (a pipeline's table object, opened before the commits it asks about) passes it: the
metadata of every version then comes from it and the commits' own lines, with no log replay.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np
import pyarrow as pa

from ..errors import InvalidOptionError, MissingChangeDataError, VersionNotFoundError
from ..format.datafiles import open_parquet, read_file
from ..format.deletion_vectors import keep_mask, read_deletion_vector
from ..format.log import commit_path, list_log, read_commit, read_commit_metadata, read_feed_commit
from ..format.snapshot import Snapshot, load_snapshot
from ..format.storage import TableStorage
from ..format.timetravel import to_millis, version_at
from ..spec.actions import AddFile, CdcFile, CommitInfo, Metadata, RemoveFile
from ..spec.change_data import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, DELETE, INSERT, labelled
from ..spec.column_mapping import file_schema, plain
from ..spec.delta import TAG_BUCKET
from ..spec.features import ENABLE_CHANGE_DATA_FEED, change_data_feed_enabled
from .change_keys import KeyFilter, read_keyed, skipped

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
"""The type of ``_commit_timestamp`` (Spark's timestamp: microseconds, UTC)."""


def version_range(storage: TableStorage, start_version: int | None, end_version: int | None,
                  start_timestamp=None, end_timestamp=None) -> tuple[int, int]:
    """The versions ``[start, end]`` a read of the feed covers, from versions or timestamps
    (a start timestamp: the first version committed at or after it; an end timestamp: the last
    version committed at or before it, as Delta resolves them). Delta's errors for a range
    that is not one."""
    commits, _ = list_log(storage)
    if not commits:
        raise VersionNotFoundError(f"{storage.url} has no commits")
    latest = commits[-1]
    if (start_version is None) == (start_timestamp is None):
        raise InvalidOptionError("give the feed's start as start_version or start_timestamp (one of them)")
    if end_version is not None and end_timestamp is not None:
        raise InvalidOptionError("give the feed's end as end_version or end_timestamp, not both")
    if start_timestamp is not None:
        ms = to_millis(start_timestamp)
        try:
            at = version_at(storage, ms)
            start = at if _commit_millis(storage, at) >= ms else at + 1
        except VersionNotFoundError:
            start = commits[0]  # before the first commit: from the first
    else:
        start = _version(start_version, "start_version")
    end = latest if end_version is None and end_timestamp is None else (
        _version(end_version, "end_version") if end_timestamp is None else version_at(storage, end_timestamp))
    if start > latest:
        raise VersionNotFoundError(
            f"Provided Start version({start}) for reading change data is invalid. Start version cannot be greater "
            f"than the latest version of the table({latest}).")
    if end < start:
        raise InvalidOptionError(
            f"CDC range from start {start} to end {end} was invalid. End cannot be before start.")
    return start, min(end, latest)


def _version(value, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidOptionError(f"{name} must be a version (an int >= 0), got {value!r}")
    return value


def _commit_millis(storage: TableStorage, version: int) -> int:
    for a in read_commit(storage, version):
        if isinstance(a, CommitInfo) and a.timestamp:
            return a.timestamp
    return storage.modified_ms(commit_path(version)) or 0


def change_batches(storage: TableStorage, start: int, end: int, columns: Sequence[str] | None = None,
                   keys: KeyFilter | None = None, known: Snapshot | None = None) -> Iterator[pa.Table]:
    """The feed of versions ``[start, end]`` (checked by :func:`version_range`), a file's
    changes at a time: the table's columns (``columns`` of them when given; the schema of
    version ``end``) plus ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.
    ``keys``: only the rows of those keys, from only the files and row groups that can hold
    them. ``known``: a snapshot the caller holds, whose metadata spares a log replay when it
    is of a version up to ``end`` (:func:`_metadata_at_start`). Every version is checked before
    the first file is read."""
    # Only what the feed needs of each commit is decoded (format/log.py): a MERGE's commit is
    # mostly file and index actions the feed skips.
    commits = [(v, *read_feed_commit(storage, v)) for v in range(start, end + 1)]
    metadata = _metadata_at_start(storage, start, end, commits, known)
    # The schema of version end: its newest metaData in the range, else the one at the start.
    newest = next((a for _, actions, _ in reversed(commits) for a in reversed(actions) if isinstance(a, Metadata)),
                  metadata)
    schema = file_schema(newest.schema_, newest.configuration)
    wanted = list(schema.names if columns is None else columns)
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise InvalidOptionError(f"the table has no columns {unknown} (it has {schema.names})")
    shape = _shape(schema, wanted)
    reads = []
    for version, actions, timestamp in commits:
        metadata = next((a for a in reversed(actions) if isinstance(a, Metadata)), metadata)
        if not change_data_feed_enabled(metadata.configuration):
            raise MissingChangeDataError(
                f"Error getting change data for range [{start} , {end}] as change data was not recorded for version "
                f"[{version}]. If you've enabled change data feed on this table, use `DESCRIBE HISTORY` to see when "
                f"it was first enabled. Otherwise, to start recording change data, use `ALTER TABLE table_name SET "
                f"TBLPROPERTIES ({ENABLE_CHANGE_DATA_FEED}=true)` (IndexedTable.set_properties).", version)
        millis = timestamp or storage.modified_ms(commit_path(version)) or 0
        reads += [_stamping(read, shape, version, millis)
                  for read in _commit_changes(storage, actions, schema, wanted, _Keys.of(keys, metadata))]
    # One file at a time: two threads (a pool, or pyarrow.dataset's) were slower on the two
    # shared cores this was measured on (docs/pipelines.md), the per-file work being mostly
    # Python that holds the GIL.
    for read in reads:
        rows = read()
        if rows is not None:
            yield rows


def _metadata_at_start(storage: TableStorage, start: int, end: int, commits: list, known: Snapshot | None) -> Metadata:
    """The metadata in effect before the range's own metaData actions apply, without a log
    replay when the caller holds a snapshot (``known``) of a version up to ``end`` and at most
    :data:`HELD_GAP` versions before ``start``: its metadata, then that of the commits between
    it and the range (their metaData lines only); the commits of the range give every later
    one. A snapshot of a version inside the range serves when no commit of the range after
    ``start`` and up to it changed the metadata. Otherwise the snapshot of ``start`` is replayed."""
    if known is not None and start - 1 - HELD_GAP <= known.version <= end and not any(
            isinstance(a, Metadata) for v, actions, _ in commits if start < v <= known.version for a in actions):
        metadata = known.metadata
        try:
            for v in range(known.version + 1, start):  # a pipeline's table held a few commits back
                metadata = read_commit_metadata(storage, v) or metadata
            return metadata
        except FileNotFoundError:  # those commits were cleaned up: the replay finds a checkpoint
            pass
    return load_snapshot(storage, start, unindexed_ok=True).metadata


HELD_GAP = 100
"""Commits before a read's range whose metadata lines a held snapshot's read reads rather than
replay the log (a replay reads a checkpoint and the commits after it, every line)."""


def _stamping(read, shape: pa.Schema, version: int, millis: int):
    """A read of one file's changes that also stamps them with the commit (None: no rows)."""
    def run():
        rows = read()
        return _stamped(rows, shape, version, millis) if rows.num_rows else None
    return run


def _shape(schema: pa.Schema, wanted: list[str]) -> pa.Schema:
    fields = [f for f in plain(schema) if f.name in wanted]
    fields.sort(key=lambda f: wanted.index(f.name))
    return pa.schema([*fields, pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64()),
                      pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE)])


def empty_changes(schema: pa.Schema, wanted: list[str]) -> pa.Table:
    """A feed without rows, typed as one with rows would be."""
    return _shape(schema, wanted).empty_table()


def _stamped(rows: pa.Table, shape: pa.Schema, version: int, millis: int) -> pa.Table:
    n = rows.num_rows
    columns = [rows.column(f.name) for f in shape if f.name not in (COMMIT_VERSION, COMMIT_TIMESTAMP)]
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(columns, shape)]  # a cast costs even as a no-op
    columns += [pa.array(np.full(n, version, np.int64)), pa.array(np.full(n, millis * 1000, np.int64), TIMESTAMP_TYPE)]
    return pa.Table.from_arrays(columns, schema=shape)


class _Keys:
    """A :class:`KeyFilter` at one commit: the buckets its keys are in under the commit's
    metadata (None: any bucket may hold them)."""

    def __init__(self, keys: KeyFilter, metadata: Metadata):
        self.filter = keys
        self.buckets = keys.buckets(metadata.indexColumns, metadata.numBuckets)

    @classmethod
    def of(cls, keys: KeyFilter | None, metadata: Metadata) -> "_Keys | None":
        return None if keys is None else cls(keys, metadata)

    def excludes(self, bucket: int | None) -> bool:
        """Whether a file of ``bucket`` (None: unknown) holds none of the keys (counted)."""
        out = bucket is not None and self.buckets is not None and bucket not in self.buckets
        if out:
            skipped()
        return out


def _commit_changes(storage: TableStorage, actions: list, schema: pa.Schema, wanted: list[str],
                    keys: _Keys | None = None) -> Iterator:
    """One commit's changes, a read (a callable giving a table) a file (see the module
    docstring); with ``keys``, only theirs, from the files of their buckets."""
    cdcs = [a for a in actions if isinstance(a, CdcFile)]
    if cdcs:
        typed = pa.schema([*schema, pa.field(CHANGE_TYPE, pa.string())])
        for c in cdcs:
            if keys is None:
                yield partial(_read_change_file, storage, c, typed, [*wanted, CHANGE_TYPE])
            elif not keys.excludes(_cdc_bucket(c)):
                cols = [*_with_keys(wanted, keys), CHANGE_TYPE]
                yield partial(_first, read_keyed, storage, c.path, typed, cols, keys.filter, c.partitionValues, keys.buckets)
        return
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.dataChange}
    removes = {a.path: a for a in actions if isinstance(a, RemoveFile) and a.dataChange}
    for path, r in removes.items():
        a = adds.pop(path, None)
        if keys is not None and keys.excludes(r.bucket):
            continue
        if a is None:
            yield partial(_labelled_rows, DELETE, storage, r, schema, wanted, r.deletionVector, None, keys=keys)
            continue
        # The same file removed and added back: a deletion vector changed.
        yield partial(_labelled_rows, DELETE, storage, r, schema, wanted, r.deletionVector, a.deletionVector,
                      newly=True, keys=keys)
        yield partial(_labelled_rows, INSERT, storage, r, schema, wanted, a.deletionVector, r.deletionVector,
                      newly=True, keys=keys)
    for a in adds.values():
        if keys is None or not keys.excludes(a.bucket):
            yield partial(_labelled_rows, INSERT, storage, a, schema, wanted, a.deletionVector, None, keys=keys)


def _read_change_file(storage: TableStorage, c: CdcFile, typed: pa.Schema, columns: list[str]) -> pa.Table:
    """The ``columns`` of a change data file, typed as ``typed``: straight from pyarrow when the
    file holds them under those names and types (indexeddf's files of a table without column
    mapping or partitions: about a sixth of the read spared), else conformed by ``read_file``."""
    threads = c.size > THREADED_FILE_BYTES
    if not c.partitionValues and not any(typed.field(n).metadata for n in columns):
        pf = open_parquet(storage, c.path)
        stored = pf.schema_arrow
        if all(stored.get_field_index(n) >= 0 and stored.field(n).type == typed.field(n).type for n in columns):
            return pf.read(columns=columns, use_threads=threads)
    return read_file(storage, c.path, typed, columns, partition=c.partitionValues, use_threads=threads)


THREADED_FILE_BYTES = 1 << 20
"""A change data file larger than this is decoded on pyarrow's threads (a large change's file: a
column each); a smaller one on the caller's (a 1,000-row MERGE's file read a third faster so on
the two shared cores measured, the threads' hand-offs costing more than they save)."""


def _first(read, *args):
    """The rows of :func:`read_keyed` (its first result)."""
    return read(*args)[0]


def _labelled_rows(change_type: str, *args, **kwargs) -> pa.Table:
    """:func:`_rows` labelled ``change_type``."""
    return labelled(_rows(*args, **kwargs), change_type)


def _cdc_bucket(c: CdcFile) -> int | None:
    """The bucket a change data file's tags name (None: another engine's file, of any bucket)."""
    value = (c.tags or {}).get(TAG_BUCKET)
    return int(value) if value is not None and value.isdigit() else None


def _with_keys(wanted: list[str], keys: _Keys) -> list[str]:
    """``wanted`` plus the key columns it lacks (read to compare, dropped by ``_stamped``)."""
    return wanted + [c for c in keys.filter.columns if c not in wanted]


def _rows(storage: TableStorage, f, schema: pa.Schema, wanted: list[str], live_dv, gone_dv,
          newly: bool = False, keys: _Keys | None = None) -> pa.Table:
    """Rows of file ``f``: those ``live_dv`` does not delete (all when None); with ``newly``,
    those ``live_dv`` keeps and ``gone_dv`` deletes (the rows a change of deletion vector
    took out of the table). With ``keys``: only the rows of a key."""
    if keys is None:
        rows = read_file(storage, f.path, schema, wanted, partition=f.partitionValues)
        n, ordinals = rows.num_rows, None
    else:
        rows, ordinals, n = read_keyed(storage, f.path, schema, _with_keys(wanted, keys), keys.filter,
                                       f.partitionValues)
    keep = keep_mask(n, read_deletion_vector(storage, live_dv)) if live_dv is not None else np.ones(n, bool)
    if newly:
        gone = ~keep_mask(n, read_deletion_vector(storage, gone_dv)) if gone_dv is not None else np.zeros(n, bool)
        keep = keep & gone
    if ordinals is not None:
        keep = keep[ordinals]
    return rows if keep.all() else rows.filter(pa.array(keep))
