"""``IndexedTable``: the Python API of one table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .errors import InvalidOptionError, TableExistsError
from .format.log import list_log
from .format.snapshot import Snapshot, load_snapshot, update_snapshot
from .format.storage import TableStorage
from .format.timetravel import version_at
from .optimizer import planner
from .reader import lookup as lookup_mod
from .reader.direct import read_snapshot
from .spark import is_spark_dataframe as _is_spark
from .spec import config
from .spec.bucket_count import default_num_buckets
from .spec.schema import arrow_schema
from .table_admin import HistoryEntry, IndexInfo, TableAdmin
from .table_writes import TableWrites
from .writer import operations

__all__ = ["IndexedTable", "HistoryEntry", "IndexInfo"]


class IndexedTable(TableWrites, TableAdmin):
    """A table on a data lake: versioned, bucketed by its index columns, with history.

    Open one with :meth:`for_path` or make one with :meth:`create`. An instance shows
    one version (``version``); writes always commit on top of the newest version and
    move the instance to the version they created.
    """

    # Writes and changes of rows (append, overwrite, update, merge, delete, add_columns) are
    # inherited from TableWrites (table_writes.py); history, indexes, properties and
    # maintenance (optimize, vacuum, restore, the index lifecycle) from TableAdmin
    # (table_admin.py).

    def __init__(self, snapshot: Snapshot, spark: Any = None):
        self._snapshot = snapshot
        self._spark = spark  # the session maintenance runs on when a call names none

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str,
        data: Any,
        index_columns: Sequence[str],
        num_buckets: int | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        properties: dict[str, str] | None = None,
        storage_options: dict[str, Any] | None = None,
        partition_by: Sequence[str] = (),
    ) -> "IndexedTable":
        """Create a table at ``path`` from its first rows (version 0).

        ``data``: a ``pyarrow.Table``, ``pyarrow.RecordBatchReader``, pandas DataFrame or
        Spark DataFrame (may have no rows; its schema becomes the table's; from Spark every
        column is nullable). A Spark DataFrame is written by its executors (see
        ``docs/spark.md``). ``index_columns``: the
        columns rows are bucketed by; ``num_buckets``: how many buckets (1..65536); None
        chooses it from the data's size: enough that a bucket holds about the property
        ``indexeddf.buckets.targetFileSize`` (256 MiB), a power of two from 16 to 1024
        (``docs/indexes.md``, "Choosing the bucket count").
        ``properties``: table properties (see ``docs/options.md``). ``partition_by``: Delta
        partition columns (each file then holds one value of each, in a ``col=value``
        directory; docs/PROTOCOL.md §18), from any of these. Raises
        ``TableExistsError`` when a table is already there.
        """
        if _is_spark(data):
            from .spark import plan_size_bytes, write_dataframe

            if list_log(TableStorage(path, storage_options))[0]:
                raise TableExistsError(
                    f"a table already exists at {path}; open it with IndexedTable.for_path, "
                    "or use overwrite() to replace its content"
                )
            if num_buckets is None:
                num_buckets = default_num_buckets(plan_size_bytes(data), config.validate(properties or {}))
            version = write_dataframe(
                data, path, "append", index_columns=list(index_columns), num_buckets=num_buckets,
                storage_options=storage_options,
                options={"indexColumns": json.dumps(list(index_columns)), "numBuckets": str(num_buckets),
                         "saveMode": "errorifexists", "name": name, "description": description,
                         "tableProperties": json.dumps(properties) if properties else None,
                         "__partition_columns": json.dumps(list(partition_by)) if partition_by else None},
            )
            return cls.for_path(path, version=version, storage_options=storage_options)
        storage = TableStorage(path, storage_options)
        result = operations.create_table(
            storage, data, list(index_columns), num_buckets,
            name=name, description=description, properties=properties, partition_by=partition_by,
        )
        return cls(result.snapshot)

    @classmethod
    def convert(
        cls,
        path: str,
        index_columns: Sequence[str],
        num_buckets: int | None = None,
        *,
        properties: dict[str, str] | None = None,
        storage_options: dict[str, Any] | None = None,
        progress: Any = None,
        spark: Any = None,
    ) -> "IndexedTable":
        """Index, in place, a Delta table that another engine wrote (delta-rs, Spark with
        Delta, ...): one commit adds the indexeddf settings (``index_columns``,
        ``num_buckets``: None chooses it from the live files' bytes as ``create`` does,
        ``properties``) to its metaData and a primary index over its live
        files. No data file is rewritten; they carry no bucket, so reads treat each as
        holding rows of any bucket until ``optimize(mode="full")`` rewrites them into
        buckets. Other Delta writers may keep appending: their files are unindexed
        appends (hybrid scans find their rows, ``refresh`` indexes them).

        ``progress``: called with a line of text as the index is built. ``spark``: a
        SparkSession whose executors read, hash, sort and write the primary index's files
        in one job, as ``create_index(spark=)`` does (the driver commits); None builds it in
        this process (``docs/admin.md``). Raises ``TableNotFoundError`` when there is no Delta table, ``TableExistsError`` when it
        is indexed already, ``UnsupportedFeatureError`` naming a Delta feature indexeddf
        does not implement (column mapping, nested columns, ...). Deletion vectors are
        read: the index skips the rows they delete. A partitioned table keeps its
        partitions: every reader takes the partition columns from the files'
        ``partitionValues``, and writes put each row in its partition (PROTOCOL.md §18).
        """
        from .writer.convert import convert_table

        build = None  # None: the index is built in this process
        if spark is not None:
            from .spark.maintenance import spark_build

            build = spark_build(spark)
        storage = TableStorage(path, storage_options)
        snapshot = load_snapshot(storage, unindexed_ok=True)
        result = convert_table(snapshot, list(index_columns), num_buckets, properties, progress, build=build)
        return cls(result.snapshot, spark)

    @staticmethod
    def upgrade(path: str, storage_options: dict[str, Any] | None = None, progress: Any = None):
        """Turn a table of indexeddf's first layout (``_indexeddf_log/``) into a Delta
        table in place, no data rewritten: every version still in the old log keeps its
        number, actions, timestamp and indexes; old checkpoints become Delta checkpoints.
        File statistics keep min/max only where both layouts render them alike (integers,
        strings, dates). The old log is left untouched. Stop the table's writers first.
        Returns an ``UpgradeResult`` (``commits``, ``checkpoints``: versions written);
        ``progress``: called with a line of text per version.
        """
        from .format.upgrade import upgrade

        return upgrade(TableStorage(path, storage_options), progress)

    @classmethod
    def for_path(
        cls,
        path: str,
        version: int | None = None,
        timestamp: Any = None,
        storage_options: dict[str, Any] | None = None,
        spark: Any = None,
    ) -> "IndexedTable":
        """Open the table at ``path``: the newest version, or ``version``, or the version
        current at ``timestamp`` (datetime, ISO 8601 string, or ms since the epoch; UTC
        when no zone is given). Raises ``TableNotFoundError`` when there is no table.

        ``spark``: a SparkSession that the table's heavy maintenance runs on when a call
        names none (``create_index``, ``refresh``, ``optimize``, ``optimize_index``: their
        work as Spark jobs, the commits in this process; ``docs/admin.md``); a call's own
        ``spark=`` wins. None: they run in this process unless a call passes one.
        """
        storage = TableStorage(path, storage_options)
        return cls(_load(storage, version, timestamp), spark)

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

    def update_incremental(self) -> "IndexedTable":
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

    def changes(self, start_version: int | None = None, end_version: int | None = None,
                columns: Sequence[str] | None = None, *, keys: Any = None, index: str | None = None,
                start_timestamp: Any = None, end_timestamp: Any = None) -> pa.Table:
        """The table's change data feed (Delta's ``table_changes``) from ``start_version`` to
        ``end_version`` (default: the newest), both included, as a ``pyarrow.Table``: the
        table's columns (``columns`` of them) plus ``_change_type`` (``insert``, ``delete``,
        ``update_preimage``, ``update_postimage``), ``_commit_version`` (int64) and
        ``_commit_timestamp`` (timestamp, UTC). ``start_timestamp`` / ``end_timestamp`` give
        the range by time instead (the first version committed at or after the start, the
        last at or before the end).

        A version's changes are its change data files when it wrote any (every MERGE, UPDATE
        and DELETE does while ``delta.enableChangeDataFeed`` is true), else its added and
        removed files, as Delta's reader reads them. ``MissingChangeDataError`` when a version
        of the range did not record its changes (the property was not true there),
        ``VersionNotFoundError`` when the start is past the newest version. Built from the
        per-file batches of :meth:`changes_batches`.

        ``keys``: only the changes of those keys (as :meth:`lookup` takes them: scalars for a
        one-column index, tuples for several; ``[None]`` asks for the NULL key) on the columns of
        ``index`` (default: the primary index, the table's index columns): exactly the rows
        of the whole feed whose key columns equal a key, read from the files of the keys'
        buckets only and, in those, the row groups whose statistics admit a key.
        ``IndexNotFoundError`` for an unknown index, ``SchemaMismatchError`` for a key that
        is no value of its column."""
        from .reader.changes import change_batches, empty_changes, version_range
        from .spec.column_mapping import file_schema

        storage = self._snapshot.storage
        start, end = version_range(storage, start_version, end_version, start_timestamp, end_timestamp)
        batches = list(change_batches(storage, start, end, columns, self._key_filter(end, keys, index), self._snapshot))
        if batches:
            return pa.concat_tables(batches)
        at_end = self._snapshot if end == self._snapshot.version else load_snapshot(storage, end, unindexed_ok=True)
        schema = file_schema(at_end.metadata.schema_, at_end.metadata.configuration)
        return empty_changes(schema, list(schema.names if columns is None else columns))

    def changes_batches(self, start_version: int | None = None, end_version: int | None = None,
                        columns: Sequence[str] | None = None, *, keys: Any = None, index: str | None = None,
                        start_timestamp: Any = None, end_timestamp: Any = None):
        """:meth:`changes` as an iterator of ``pyarrow.Table``, one per file read (a change
        data file, or an added or removed data file): memory bounded by a file. The range
        and the keys are checked before the first batch, and every version's feed before
        the first file is read.

        A table object held across new commits (a pipeline's) reads their feed from its
        own metadata and the commits' lines, without replaying the log (``docs/pipelines.md``)."""
        from .reader.changes import change_batches, version_range

        storage = self._snapshot.storage
        start, end = version_range(storage, start_version, end_version, start_timestamp, end_timestamp)
        return change_batches(storage, start, end, columns, self._key_filter(end, keys, index), self._snapshot)

    def _key_filter(self, end: int, keys: Any, index: str | None):
        """The :class:`~indexeddf.reader.change_keys.KeyFilter` of ``changes(keys=, index=)``,
        typed by the schema and indexes of version ``end`` (None: no keys, the whole feed)."""
        from .reader.change_keys import KeyFilter

        if keys is None:
            if index is not None:
                raise InvalidOptionError("index= names the index of keys=: give keys too")
            return None
        snap = self._snapshot if end == self._snapshot.version else load_snapshot(
            self._snapshot.storage, end, unindexed_ok=True)
        entry = planner.index_for_lookup(snap, index)
        table = planner.keys_table(keys, entry.columns, arrow_schema(snap.metadata.schema_))
        return KeyFilter(table, tuple(entry.columns) == tuple(snap.metadata.indexColumns))

    def to_df(self, spark, version: int | None = None, timestamp: Any = None, columns: Sequence[str] | None = None,
              bucketed: bool = False):
        """The rows of a version as a Spark DataFrame, bound to that version.

        With the JVM connector on the session (``indexeddf.configure``; under Spark
        Connect, on the server) it is the connector's read of the version,
        ``spark.read.format("indexeddf").option("versionAsOf", v).load(path)``: Spark's
        Parquet reader over exactly the version's live files (column pruning, pushed
        filters, deletion vectors applied, partition values from the log, column mapping),
        the table's bucketing reported to Spark (a join or aggregation on the index
        columns does not shuffle this side; a key equality reads one bucket) and the
        connector's index lookups and indexed joins. ``bucketed`` changes nothing then:
        the connector tells Spark the bucketing wherever the files allow (not with
        floating-point index columns, or files without their bucket in their name), and
        Spark reads the scan plainly where the bucketing spares no shuffle.

        Without the connector (no JDK), or for a table opened with ``storage_options``
        (which only Python uses), Spark's Parquet reader gets the snapshot's live files
        listed here; ``bucketed=True`` then builds a bucketed relation over them where
        possible (not on a Spark Connect client), and a version with deletion vectors, or
        of a partitioned or column-mapped table, is read by the Python data source.
        The table must be where Spark's Hadoop filesystems can read it (a local disk,
        HDFS, S3, GCS, Azure); ``InvalidOptionError`` otherwise (e.g. memory://). See
        docs/spark.md.
        """
        from .spark.native import native_scan

        return native_scan(spark, self.snapshot_at(version, timestamp), columns, bucketed=bucketed)

    # -- lookups -------------------------------------------------------------------
    def lookup(
        self,
        keys: Any,
        columns: Sequence[str] | None = None,
        version: int | None = None,
        index: str | None = None,
    ) -> pa.Table:
        """Rows whose index key equals one of ``keys``, without Spark.

        ``keys``: scalars for a one-column index, tuples for a composite one (or a
        table/dict of key columns); ``None`` finds NULL keys. ``index``: the index name
        (default: the primary index, on the table's index columns). Reads only the
        touched buckets' index and row groups, plus data files the index does not
        cover yet; answers equal a filter over ``to_arrow`` of the same version.
        """
        snap = self.snapshot_at(version)
        # Time travel: a newer state of the index may serve the older version better.
        latest = update_snapshot(self._snapshot) if version is not None else None
        plan = planner.plan_keys(snap, keys, index, latest)
        return lookup_mod.run_plan(snap, plan, list(columns) if columns is not None else None)

    def explain(self, predicate: str, version: int | None = None) -> str:
        """What a query with this SQL predicate reads, and why (or why no index helps)."""
        from .optimizer.explain import explain_predicate

        return explain_predicate(self.snapshot_at(version), predicate)

    @staticmethod
    def _schema_of(snap: Snapshot) -> pa.Schema:
        return arrow_schema(snap.metadata.schema_)

    # -- joins (docs/joins.md) -----------------------------------------------------
    def join(self, df, on=None, how: str = "inner", **options):
        """Join the Spark DataFrame ``df`` with this table; the table is the pre-built side.

        Returns exactly what ``df.join(self.to_df(spark, version), on, how)`` returns
        (``how``: inner, left or semi; with ``left_on`` (this table's columns) and
        ``right_on`` (df's): ``df.join(table_df, <keys equal>, how)``). ``options``: those
        of :class:`~indexeddf.spark.join.JoinOptions` (``left_on``, ``right_on``,
        ``strategy``, ``version``, ``broadcast_threshold_rows``, ``partitions``, ``columns``,
        ``spark_join_ratio``); with ``columns`` the result equals the join with
        ``self.to_df(spark, columns=...)``. See ``docs/joins.md``.
        """
        from .spark.join import JoinOptions, plan_join
        from .spark.join_exec import execute

        o = JoinOptions.of(options)
        snap = self.snapshot_at(o.version)
        return execute(plan_join(snap, df, on, how, o), snap, df)

    def explain_join(self, df, on=None, how: str = "inner", **options) -> str:
        """Which strategy :meth:`join` with these arguments uses, and why (may run the small
        job that collects df's distinct keys, as ``join`` itself would)."""
        from .spark.join import JoinOptions, describe, plan_join

        o = JoinOptions.of(options)
        snap = self.snapshot_at(o.version)
        return describe(plan_join(snap, df, on, how, o), snap)

    def join_table(self, other: "IndexedTable", on=None, how: str = "inner", *, left_on=None, right_on=None,
                   spark=None, version: int | None = None, other_version: int | None = None):
        """Join another table with this one, bucket by bucket when both are bucketed on the
        keys alike (same key types and bucket count): neither is shuffled.

        Equals ``other.to_df(spark).join(self.to_df(spark), on, how)`` (``other`` plays the
        DataFrame of :meth:`join`; ``left_on`` names this table's keys). ``spark`` defaults
        to the active session.
        """
        from pyspark.sql import SparkSession

        from .spark.join_exec import join_tables

        spark = spark or SparkSession.getActiveSession()
        if spark is None:
            raise InvalidOptionError("join_table needs a Spark session: pass spark=")
        _, out = join_tables(self.snapshot_at(version), other.snapshot_at(other_version), spark, on, how,
                             left_on=left_on, right_on=right_on)
        return out

    def __repr__(self) -> str:
        return f"IndexedTable({self.path!r}, version={self.version})"


def _load(storage: TableStorage, version: int | None, timestamp: Any) -> Snapshot:
    if version is not None and timestamp is not None:
        raise InvalidOptionError("give version or timestamp, not both")
    if timestamp is not None:
        version = version_at(storage, timestamp)
    return load_snapshot(storage, version)
