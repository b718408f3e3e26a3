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

Every version of the range must have the feed on (the ``metaData`` in effect after its
commit has ``delta.enableChangeDataFeed = true``), or :class:`MissingChangeDataError` says
which one did not. Memory is bounded by a file: the feed comes a file at a time
(:func:`change_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import InvalidOptionError, MissingChangeDataError, VersionNotFoundError
from ..format.datafiles import read_file
from ..format.deletion_vectors import keep_mask, read_deletion_vector
from ..format.log import commit_path, list_log, read_commit, read_commit_for_feed
from ..format.snapshot import load_snapshot
from ..format.storage import TableStorage
from ..format.timetravel import to_millis, version_at
from ..spec.actions import AddFile, CdcFile, CommitInfo, Metadata, RemoveFile
from ..spec.change_data import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, DELETE, INSERT, labelled
from ..spec.column_mapping import file_schema, plain
from ..spec.features import ENABLE_CHANGE_DATA_FEED, change_data_feed_enabled

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
                   ) -> Iterator[pa.Table]:
    """The feed of versions ``[start, end]`` (checked by :func:`version_range`), a file's
    changes at a time: the table's columns (``columns`` of them when given; the schema of
    version ``end``) plus ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
    # The range's commits are read first (their file lines skipped where change data files
    # stand for them): the schema of version ``end`` is the last metaData among them, else the
    # one in effect at ``start``, so one snapshot is replayed, not two.
    commits = [read_commit_for_feed(storage, v) for v in range(start, end + 1)]
    metadata = load_snapshot(storage, start, unindexed_ok=True).metadata
    last = next((a for actions in reversed(commits) for a in reversed(actions) if isinstance(a, Metadata)), metadata)
    schema = file_schema(last.schema_, last.configuration)
    wanted = list(schema.names if columns is None else columns)
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise InvalidOptionError(f"the table has no columns {unknown} (it has {schema.names})")
    shape = _shape(schema, wanted)
    for version, actions in zip(range(start, end + 1), commits):
        metadata = next((a for a in reversed(actions) if isinstance(a, Metadata)), metadata)
        if not change_data_feed_enabled(metadata.configuration):
            raise MissingChangeDataError(
                f"Error getting change data for range [{start} , {end}] as change data was not recorded for version "
                f"[{version}]. If you've enabled change data feed on this table, use `DESCRIBE HISTORY` to see when "
                f"it was first enabled. Otherwise, to start recording change data, use `ALTER TABLE table_name SET "
                f"TBLPROPERTIES ({ENABLE_CHANGE_DATA_FEED}=true)` (IndexedTable.set_properties).", version)
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        millis = info.timestamp if info is not None and info.timestamp else (
            storage.modified_ms(commit_path(version)) or 0)
        for rows in _commit_changes(storage, actions, schema, wanted):
            if rows.num_rows:
                yield _stamped(rows, shape, version, millis)


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
    columns = [rows.column(f.name).cast(f.type) for f in shape if f.name not in (COMMIT_VERSION, COMMIT_TIMESTAMP)]
    columns += [pa.array(np.full(n, version, np.int64)),
                pa.array(np.full(n, millis * 1000, np.int64), pa.int64()).cast(TIMESTAMP_TYPE)]
    return pa.Table.from_arrays(columns, schema=shape)


def _commit_changes(storage: TableStorage, actions: list, schema: pa.Schema, wanted: list[str]) -> Iterator[pa.Table]:
    """One commit's changes, a file at a time (see the module docstring)."""
    cdcs = [a for a in actions if isinstance(a, CdcFile)]
    if cdcs:
        typed = pa.schema([*schema, pa.field(CHANGE_TYPE, pa.string())])
        for c in cdcs:
            yield read_file(storage, c.path, typed, [*wanted, CHANGE_TYPE], partition=c.partitionValues)
        return
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.dataChange}
    removes = {a.path: a for a in actions if isinstance(a, RemoveFile) and a.dataChange}
    for path, r in removes.items():
        a = adds.pop(path, None)
        if a is None:
            yield labelled(_rows(storage, r, schema, wanted, r.deletionVector, None), DELETE)
            continue
        # The same file removed and added back: a deletion vector changed.
        yield labelled(_rows(storage, r, schema, wanted, r.deletionVector, a.deletionVector, newly=True), DELETE)
        yield labelled(_rows(storage, r, schema, wanted, a.deletionVector, r.deletionVector, newly=True), INSERT)
    for a in adds.values():
        yield labelled(_rows(storage, a, schema, wanted, a.deletionVector, None), INSERT)


def _rows(storage: TableStorage, f, schema: pa.Schema, wanted: list[str], live_dv, gone_dv,
          newly: bool = False) -> pa.Table:
    """Rows of file ``f``: those ``live_dv`` does not delete (all when None); with ``newly``,
    those ``live_dv`` keeps and ``gone_dv`` deletes (the rows a change of deletion vector
    took out of the table)."""
    rows = read_file(storage, f.path, schema, wanted, partition=f.partitionValues)
    n = rows.num_rows
    keep = keep_mask(n, read_deletion_vector(storage, live_dv)) if live_dv is not None else np.ones(n, bool)
    if newly:
        gone = ~keep_mask(n, read_deletion_vector(storage, gone_dv)) if gone_dv is not None else np.zeros(n, bool)
        keep = keep & gone
    return rows if keep.all() else rows.filter(pa.array(keep))
