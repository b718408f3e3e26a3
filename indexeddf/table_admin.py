"""``TableAdmin``: the managing half of ``IndexedTable``'s API.

History and description, the indexes (list, create, refresh, and their lifecycle:
drop, restore, vacuum, cancel, optimize), table properties, and table maintenance
(optimize, vacuum, restore): what ``docs/admin.md`` and the ``indexeddf`` command
cover. ``IndexedTable`` (``table.py``) inherits these methods; reading, lookups,
joins and writing rows are defined there. The methods work on ``self._snapshot`` and
the properties ``IndexedTable`` defines (``path``, ``table_id``, ``index_columns``,
``num_buckets``, ``properties``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidOptionError
from .format.log import list_log, read_commit_info
from .format.snapshot import Snapshot, update_snapshot
from .optimizer import planner
from .spec.actions import IndexEntry
from .writer import index_ops, operations


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


@dataclass(frozen=True)
class IndexInfo:
    """One index as ``indexes()`` lists it."""

    name: str
    columns: list[str]
    kind: str
    state: str
    num_buckets: int
    covered_version: int
    num_files: int
    size_bytes: int
    num_entries: int

    @classmethod
    def of(cls, e: IndexEntry) -> "IndexInfo":
        return cls(
            e.name, list(e.columns), e.kind, e.state, e.numBuckets, e.coveredVersion,
            len(e.files), sum(f.size for f in e.files), sum(f.numEntries for f in e.files),
        )


class TableAdmin:
    """History, indexes, properties and maintenance of a table; a base of ``IndexedTable``."""

    _snapshot: Snapshot
    _spark: Any = None  # IndexedTable.for_path(spark=): the session of maintenance calls that name none

    def _session(self, spark):
        """The SparkSession a maintenance call runs on: its own ``spark``, else the table's."""
        return self._spark if spark is None else spark

    # -- history -------------------------------------------------------------------
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

    # -- indexes -------------------------------------------------------------------
    def indexes(self) -> list[IndexInfo]:
        """Every index of this version: name, columns, kind, state, covered version,
        file count and bytes."""
        return [IndexInfo.of(e) for e in sorted(self._snapshot.indexes.values(), key=lambda e: e.name)]

    def detail(self) -> dict[str, Any]:
        """Location, table id, version, files, bytes, buckets, properties, and each index
        with its state and staleness (shares of live bytes not covered, of covered
        bytes removed)."""
        snap = self._snapshot
        indexes = []
        for info in self.indexes():
            entry = snap.indexes[info.name]
            appended, deleted = planner.staleness(snap, planner.covered_ids(entry))
            indexes.append(dataclasses.asdict(info) | {"appended_ratio": appended, "deleted_ratio": deleted})
        return {
            "location": self.path,
            "table_id": self.table_id,
            "name": snap.metadata.name,
            "version": snap.version,
            "timestamp": dt.datetime.fromtimestamp(snap.timestamp / 1000, dt.timezone.utc).isoformat(),
            "num_files": len(snap.files),
            "size_bytes": snap.size_bytes(),
            "num_rows": snap.num_records(),
            "index_columns": self.index_columns,
            "num_buckets": self.num_buckets,
            "properties": self.properties,
            "indexes": indexes,
        }

    def create_index(self, name: str, columns: Sequence[str], num_buckets: int | None = None,
                     progress: Callable[[str], None] | None = None, spark=None) -> int:
        """Build a secondary index on ``columns`` over the newest version; returns the
        version that commits it. ``num_buckets`` defaults to the table's bucket count.
        Appends then maintain it (``indexeddf.index.autoRefresh``). ``progress``: called
        with a line of text at each step of the build. ``spark``: a SparkSession whose
        executors read, hash, sort and write the index files in one job (the driver
        commits); None: the table's session (``for_path(spark=)``) if it has one, else
        built in this process (``docs/admin.md``)."""
        result = index_ops.create_index(update_snapshot(self._snapshot), name, list(columns), num_buckets,
                                        progress=progress, build=_build(self._session(spark)))
        self._snapshot = result.snapshot
        return result.version

    def refresh(self, index: str | None = None, mode: str = "incremental",
                progress: Callable[[str], None] | None = None, spark=None) -> list[int]:
        """Refresh ``index`` (default: every ACTIVE index) up to the newest version.

        ``mode``: ``"incremental"`` (index the files appended since, drop entries of
        removed files), ``"full"`` (rebuild) or ``"quick"`` (record the version only;
        queries keep scanning unindexed files). ``progress``: called with a line of
        text at each step. ``spark``: a SparkSession that indexes the files as a Spark
        job (as for :meth:`create_index`, whose default it shares; ``quick`` reads no data).
        Returns the versions committed.
        """
        snap = update_snapshot(self._snapshot)
        names = [index] if index is not None else sorted(n for n, e in snap.indexes.items() if e.state == "ACTIVE")
        versions = []
        for name in names:
            result = index_ops.refresh_index(snap, name, mode, progress=progress, build=_build(self._session(spark)))
            snap = result.snapshot
            versions.append(result.version)
        self._snapshot = snap
        return versions

    # -- properties ----------------------------------------------------------------
    def set_properties(self, properties: dict[str, str]) -> int:
        """Set table properties (see ``docs/options.md``); returns the new version."""
        result = operations.set_properties(update_snapshot(self._snapshot), updates=properties)
        self._snapshot = result.snapshot
        return result.version

    def unset_properties(self, names: Sequence[str]) -> int:
        """Remove table properties (they fall back to their defaults); returns the new version."""
        result = operations.set_properties(update_snapshot(self._snapshot), removals=list(names))
        self._snapshot = result.snapshot
        return result.version

    # -- CHECK constraints (writer/operations.py; Delta's delta.constraints.*) ------------
    def add_constraint(self, constraints: dict[str, str]) -> int:
        """Add CHECK constraints, ``{name: SQL condition}`` (delta-rs's
        ``DeltaTable.alter.add_constraint``; SQL's ``ALTER TABLE t ADD CONSTRAINT name CHECK
        (expr)``), in one commit that stores each as the property ``delta.constraints.<name>``
        (the name in lower case) and upgrades the protocol to Delta's writer 3 (or the feature
        ``checkConstraints``). The table's rows are checked first: if some break a constraint,
        ``ConstraintViolationError`` says how many and nothing is committed; a name the table
        has raises ``ConstraintExistsError``. Every later write (append, overwrite, merge,
        update) refuses rows for which a constraint is false or NULL. A condition the Python
        expressions cannot evaluate raises ``ConstraintNotEvaluableError``: add it through
        Spark SQL instead. Returns the new version."""
        result = operations.add_constraint(update_snapshot(self._snapshot), constraints)
        self._snapshot = result.snapshot
        return result.version

    def drop_constraint(self, name: str, raise_if_not_exists: bool = True) -> int:
        """Drop the CHECK constraint ``name`` (delta-rs's ``DeltaTable.alter.drop_constraint``;
        SQL's ``ALTER TABLE t DROP CONSTRAINT [IF EXISTS] name``): one metadata commit.
        A name the table lacks raises ``ConstraintNotFoundError``, or with
        ``raise_if_not_exists=False`` changes nothing. Returns the table's version after it."""
        result = operations.drop_constraint(update_snapshot(self._snapshot), name, raise_if_not_exists)
        if result is None:
            return update_snapshot(self._snapshot).version
        self._snapshot = result.snapshot
        return result.version

    def constraints(self) -> dict[str, str]:
        """The table's CHECK constraints, ``{name: SQL condition}`` (its ``delta.constraints.*``)."""
        from .spec.constraints import constraints

        return constraints(update_snapshot(self._snapshot).metadata.configuration)

    # -- renaming and dropping columns (writer/columns.py; column-mapped tables) -----------
    def rename_column(self, old: str | Sequence[str], new: str) -> int:
        """``ALTER TABLE RENAME COLUMN old TO new`` on a column-mapped table
        (``delta.columnMapping.mode`` = ``name`` or ``id``; ``set_properties`` turns ``name``
        on for an existing table): one metadata commit, no file rewritten; the files keep the
        column under its physical name, and earlier versions keep the old name. ``old``: a
        column, or a field of a struct column as ``"s.a"`` or ``("s", "a")`` (``new`` is then
        the field's new name). Columns that bucket or index the table are refused
        (``IndexColumnChangeError``), and so is a table without column mapping
        (``InvalidOptionError`` saying how to turn it on); a partition column is renamed as
        Delta renames it (its files keep its physical name). Returns the new
        version."""
        from .writer import columns

        result = columns.rename_column(update_snapshot(self._snapshot), old, new)
        self._snapshot = result.snapshot
        return result.version

    def drop_columns(self, names: Sequence[str] | str) -> int:
        """``ALTER TABLE DROP COLUMNS`` on a column-mapped table: one metadata commit, the
        files keep the data and no reader sees it (earlier versions still do). ``names``:
        columns, or struct fields as ``"s.a"`` / ``("s", "a")``. Columns that bucket, index or
        partition the table, every column of the table and a struct's only field are refused
        (as Delta refuses dropping a partition column).
        Returns the new version."""
        from .writer import columns

        result = columns.drop_columns(update_snapshot(self._snapshot), names)
        self._snapshot = result.snapshot
        return result.version

    # -- maintenance (writer/maintenance.py, writer/lifecycle.py; docs/admin.md) ----------
    def optimize(self, mode: str = "quick", progress=None, spark=None, num_buckets: int | None = None) -> int:
        """Compact each bucket's small data files (``"quick"``: files under 32 MiB;
        ``"full"``: one file per bucket, also rewriting a lone file named without its
        bucket, see ``to_df(bucketed=True)``) and the index files that point at them, in one
        commit that changes no data (concurrent appends still commit). Returns the new
        version, or the current one when nothing needed compacting. ``progress``: an
        optional callable receiving one line of text per step. ``spark``: a SparkSession
        whose executors read and rewrite the files in one job (the driver plans and commits
        the same commit); None: the table's session (``for_path(spark=)``) if it has one,
        else rewritten in this process (``docs/admin.md``).

        ``num_buckets`` (with ``mode="full"``): a new bucket count. One commit changes the
        table's ``numBuckets``, rewrites every file into the new buckets and rebuilds every
        ACTIVE index (a second one compacts the buckets when the table was read in several
        batches). It conflicts as a metadata change does: concurrent writers fail, and so
        does this when another writer added files meanwhile (``ConcurrentAppendError``;
        ``docs/indexes.md``, "Choosing the bucket count")."""
        from .writer import maintenance

        rewrite, spark = None, self._session(spark)
        if spark is not None:
            from .spark.optimize import spark_rewrite

            rewrite = spark_rewrite(spark)
        result = maintenance.optimize(update_snapshot(self._snapshot), mode, progress=progress, rewrite=rewrite,
                                      num_buckets=num_buckets)
        return self._moved_to(result)

    def vacuum(self, retention_hours: float | None = None, dry_run: bool = False,
               enforce_retention: bool = True, progress=None):
        """Delete (or with ``dry_run`` list) the files no version inside the retention
        needs, and files of failed writes older than it; returns a ``VacuumResult``
        (``files``, ``bytes``, ``oldest_version_kept``). The retention defaults to, and
        may not go below unless ``enforce_retention=False``, the table property
        ``indexeddf.vacuum.minRetentionHours`` (168). Time travel to versions older
        than the retention may fail afterwards. The log is never touched."""
        from .writer import maintenance

        return maintenance.vacuum(self._snapshot, retention_hours, dry_run, enforce_retention, progress)

    def restore(self, version: int) -> int:
        """Commit a new version whose rows and indexes equal those of ``version``;
        returns it (or the current version when nothing differs). Raises
        ``VersionNotFoundError`` when files it needs were vacuumed."""
        from .writer import maintenance

        return self._moved_to(maintenance.restore(update_snapshot(self._snapshot), version))

    def drop_index(self, name: str) -> int:
        """Soft-drop an index (ACTIVE -> DELETING -> DELETED); its files are kept, so
        ``restore_index`` can bring it back. Returns the version of the last commit."""
        from .writer import lifecycle

        return self._moved_to(lifecycle.drop_index(update_snapshot(self._snapshot), name))

    def restore_index(self, name: str) -> int:
        """Bring a DELETED index back (RESTORING -> ACTIVE) with the files it had."""
        from .writer import lifecycle

        return self._moved_to(lifecycle.restore_index(update_snapshot(self._snapshot), name))

    def vacuum_index(self, name: str, progress=None) -> int:
        """Delete the files of a DELETED index for good (VACUUMING -> DELETED)."""
        from .writer import lifecycle

        return self._moved_to(lifecycle.vacuum_index(update_snapshot(self._snapshot), name, progress))

    def cancel_index(self, name: str, progress=None) -> int:
        """Return an index stuck in a transient state (its process died) to its last
        stable state and delete the partial files of the interrupted operation."""
        from .writer import lifecycle

        return self._moved_to(lifecycle.cancel_index(update_snapshot(self._snapshot), name, progress))

    def optimize_index(self, name: str, mode: str = "quick", progress=None, spark=None) -> int:
        """Merge an index's small files per index bucket (OPTIMIZING -> ACTIVE); ``mode``:
        ``"quick"`` (each bucket's files under 8 MiB) or ``"full"`` (one file per bucket,
        dropping entries of removed data files). ``spark``: a SparkSession whose executors
        merge the files, a task per group of index buckets, in one job (the driver
        commits); None: the table's session (``for_path(spark=)``) if it has one, else
        merged in this process (``docs/admin.md``). Returns the version of the last commit
        (the current one when nothing needed merging)."""
        from .writer import lifecycle

        compact, spark = None, self._session(spark)
        if spark is not None:
            from .spark.optimize import spark_compact

            compact = spark_compact(spark, progress)
        return self._moved_to(lifecycle.optimize_index(update_snapshot(self._snapshot), name, mode, progress, compact))

    def _moved_to(self, result) -> int:
        self._snapshot = update_snapshot(self._snapshot) if result is None else result.snapshot
        return self._snapshot.version


def _build(spark):
    """The index builder of an operation given ``spark``: None (this process) without one."""
    if spark is None:
        return None
    from .spark.maintenance import spark_build

    return spark_build(spark)
