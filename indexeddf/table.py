"""``IndexedTable``: the Python API of one table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .errors import InvalidOptionError
from .format.log import list_log, read_commit_info
from .format.snapshot import Snapshot, load_snapshot, update_snapshot
from .format.storage import TableStorage
from .format.timetravel import version_at
from .reader.direct import read_snapshot
from .spec.schema import arrow_schema
from .writer import operations


@dataclass(frozen=True)
class HistoryEntry:
    """One commit of the table, as ``history()`` lists it."""

    version: int
    timestamp: dt.datetime
    operation: str
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    read_version: int | None = None
    is_blind_append: bool = False
    engine_info: str = ""


class IndexedTable:
    """A table on a data lake: versioned, bucketed by its index columns, with history.

    Open one with :meth:`for_path` or make one with :meth:`create`. An instance shows
    one version (``version``); writes always commit on top of the newest version and
    move the instance to the version they created.
    """

    def __init__(self, snapshot: Snapshot):
        self._snapshot = snapshot

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str,
        data: Any,
        index_columns: Sequence[str],
        num_buckets: int = 16,
        *,
        name: str | None = None,
        description: str | None = None,
        properties: dict[str, str] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> "IndexedTable":
        """Create a table at ``path`` from its first rows (version 0).

        ``data``: a ``pyarrow.Table``, ``pyarrow.RecordBatchReader`` or pandas DataFrame
        (may have no rows; its schema becomes the table's). ``index_columns``: the
        columns rows are bucketed by; ``num_buckets``: how many buckets (1..65536).
        ``properties``: table properties (see ``docs/options.md``). Raises
        ``TableExistsError`` when a table is already there.
        """
        storage = TableStorage(path, storage_options)
        result = operations.create_table(
            storage, data, list(index_columns), num_buckets,
            name=name, description=description, properties=properties,
        )
        return cls(result.snapshot)

    @classmethod
    def for_path(
        cls,
        path: str,
        version: int | None = None,
        timestamp: Any = None,
        storage_options: dict[str, Any] | None = None,
    ) -> "IndexedTable":
        """Open the table at ``path``: the newest version, or ``version``, or the version
        current at ``timestamp`` (datetime, ISO 8601 string, or ms since the epoch; UTC
        when no zone is given). Raises ``TableNotFoundError`` when there is no table.
        """
        storage = TableStorage(path, storage_options)
        return cls(_load(storage, version, timestamp))

    # -- what it is ------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The table's location as given."""
        return self._snapshot.storage.url

    @property
    def version(self) -> int:
        """The version this instance shows."""
        return self._snapshot.version

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema."""
        return arrow_schema(self._snapshot.metadata.schema_)

    @property
    def index_columns(self) -> list[str]:
        """The columns rows are bucketed (and indexed) by."""
        return list(self._snapshot.metadata.indexColumns)

    @property
    def num_buckets(self) -> int:
        """How many buckets rows are hashed into."""
        return self._snapshot.metadata.numBuckets

    @property
    def table_id(self) -> str:
        """The table's unique id (stable across versions)."""
        return self._snapshot.metadata.id

    @property
    def properties(self) -> dict[str, str]:
        """Table properties as stored in the metadata."""
        return dict(self._snapshot.metadata.configuration)

    @property
    def snapshot(self) -> Snapshot:
        """The replayed log state of the version this instance shows."""
        return self._snapshot

    def update(self) -> "IndexedTable":
        """Move this instance to the newest version (reads only the new commits)."""
        self._snapshot = update_snapshot(self._snapshot)
        return self

    def snapshot_at(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        """The snapshot of another version (or this one when neither is given)."""
        if version is None and timestamp is None:
            return self._snapshot
        if version == self._snapshot.version:
            return self._snapshot
        return _load(self._snapshot.storage, version, timestamp)

    # -- reading -------------------------------------------------------------------
    def to_arrow(
        self,
        version: int | None = None,
        timestamp: Any = None,
        columns: Sequence[str] | None = None,
        filter=None,
    ) -> pa.Table:
        """The rows of a version (default: this instance's) as a ``pyarrow.Table``.

        ``columns`` projects; ``filter`` is an optional ``pyarrow.dataset`` expression.
        """
        return read_snapshot(self.snapshot_at(version, timestamp), columns, filter)

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Commits, newest first (at most ``limit``): version, timestamp, operation,
        parameters, metrics."""
        if limit is not None and limit < 0:
            raise InvalidOptionError(f"limit must be >= 0, got {limit}")
        storage = self._snapshot.storage
        commits, _ = list_log(storage)
        wanted = commits[::-1] if limit is None else commits[::-1][:limit]
        out = []
        for v in wanted:
            info = read_commit_info(storage, v)
            if info is None:
                continue
            out.append(
                HistoryEntry(
                    version=v,
                    timestamp=dt.datetime.fromtimestamp(info.timestamp / 1000, dt.timezone.utc),
                    operation=info.operation,
                    parameters=dict(info.operationParameters),
                    metrics=dict(info.operationMetrics),
                    read_version=info.readVersion,
                    is_blind_append=info.isBlindAppend,
                    engine_info=info.engineInfo,
                )
            )
        return out

    # -- writing -------------------------------------------------------------------
    def append(self, data: Any, txn: tuple[str, int] | None = None) -> int:
        """Append rows; returns the new version.

        ``txn=(app_id, version)`` makes the append idempotent: when that app id has
        already committed this version (or a later one) nothing is written and the
        current version is returned. Concurrent appends rebase on each other.
        """
        result = operations.append(update_snapshot(self._snapshot), data, txn)
        self._snapshot = result.snapshot
        return result.version

    def overwrite(self, data: Any, txn: tuple[str, int] | None = None, overwrite_schema: bool = False) -> int:
        """Replace every row; returns the new version. Earlier versions stay readable.

        With ``overwrite_schema=True`` the data's schema replaces the table's (the
        index columns must still be present).
        """
        result = operations.overwrite(update_snapshot(self._snapshot), data, txn, overwrite_schema)
        self._snapshot = result.snapshot
        return result.version

    def __repr__(self) -> str:
        return f"IndexedTable({self.path!r}, version={self.version})"


def _load(storage: TableStorage, version: int | None, timestamp: Any) -> Snapshot:
    if version is not None and timestamp is not None:
        raise InvalidOptionError("give version or timestamp, not both")
    if timestamp is not None:
        version = version_at(storage, timestamp)
    return load_snapshot(storage, version)
