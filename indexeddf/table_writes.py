"""``TableWrites``: the changing half of ``IndexedTable``'s API.

Writing rows (append, overwrite, a selective overwrite), changing them (update, merge,
delete: the change engine of ``changes/``), and adding columns: what ``docs/changes.md`` and
``docs/schema.md`` cover. ``IndexedTable`` (``table.py``) inherits these methods, as it
inherits ``TableAdmin``'s; they work on ``self._snapshot`` and the properties
``IndexedTable`` defines (``index_columns``, ``num_buckets``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from .errors import InvalidOptionError
from .format.snapshot import load_snapshot, update_snapshot
from .spark import is_spark_dataframe as _is_spark
from .writer import operations


class TableWrites:
    """Writing and changing a table's rows (mixed into :class:`~indexeddf.IndexedTable`)."""

    def update(self, updates: dict[str, str] | None = None, predicate: str | None = None, *,
               txn: tuple[str, int] | None = None, spark=None):
        """``UPDATE table SET column = expression, ... [WHERE predicate]``, as delta-rs's
        ``DeltaTable.update``: ``updates`` maps columns to SQL expressions over the row
        (``{"v": "v + 1", "s": "upper(s)"}``), ``predicate`` is SQL text (every row when
        None). One commit: copy on write, or deletion vectors when the table has
        ``delta.enableDeletionVectors = true`` (docs/changes.md); the index finds the rows when
        the predicate fixes its columns. Returns the metrics (``version``: the version committed, None when no
        row matched). An update of an index column moves the row to its new bucket.

        ``spark``: a SparkSession with the JVM connector runs it as Spark SQL's ``UPDATE
        indexeddf.`<path>` SET ... WHERE ...``: Catalyst evaluates the expressions (every Spark
        function and UDF, where the engine takes a documented subset) and Spark's tasks write
        the files. Without the connector, with ``txn``, or on a table with ``storage_options``,
        the in-process engine runs it.

        Called with no arguments it keeps its old meaning, :meth:`update_incremental`
        (deprecated: call that instead).
        """
        if updates is None and predicate is None and txn is None and spark is None:
            warnings.warn("IndexedTable.update() with no arguments is deprecated: call update_incremental() to move "
                          "to the newest version; update(updates=..., predicate=...) changes rows",
                          DeprecationWarning, stacklevel=2)
            return self.update_incremental()
        if spark is not None:
            from .spark import statements

            metrics = self._run_elsewhere(lambda snap: statements.run(
                spark, snap, "UPDATE", statements.update_sql(statements.table_name(snap), updates or {}, predicate), txn)
                if statements.runs_through_spark(spark, snap) else None)
            if metrics is not None:
                return metrics
        from .changes import update_rows

        return self._run_change(update_rows(updates or {}, predicate), txn)

    def merge(self, source: Any, predicate: str, source_alias: str = "source", target_alias: str = "target", *,
              txn: tuple[str, int] | None = None, schema_mode: str | None = None):
        """``MERGE INTO`` this table ``USING source ON predicate``: returns a
        :class:`~indexeddf.changes.TableMerger` to add ``when_*`` clauses to, then
        ``execute()`` (delta-rs's names). ``source``: a ``pyarrow.Table``, pandas or Spark
        DataFrame. A Spark DataFrame on a session with the JVM connector runs as Spark SQL's
        ``MERGE INTO`` (Catalyst evaluates every expression, Spark's tasks write; ``schema_mode=
        "merge"``: ``MERGE WITH SCHEMA EVOLUTION``); with ``txn``, ``storage_options`` or no
        connector it is written by Spark's tasks to the table's staging folder and the
        in-process engine runs the merge (read back one bucket at a time when the predicate
        fixes the bucketing columns; docs/changes.md).
        ``predicate``: SQL over ``target_alias``'s and ``source_alias``'s columns; when it equates every index column with a source
        column, the index finds the matched rows and only the files holding them are
        rewritten (or given deletion vectors, with ``delta.enableDeletionVectors = true``).
        ``txn=(app id, version)`` makes the merge idempotent. ``schema_mode="merge"``
        (delta-rs's name): with ``*_all`` clauses, the source's columns the table lacks
        are added to its schema in the same commit (docs/schema.md)."""
        from .changes import TableMerger

        if _is_spark(source):  # staged by Spark's tasks when the merge runs, never collected
            from .spark.merge_source import SparkSource

            source = SparkSource(source)
        return TableMerger(self, source, predicate, source_alias, target_alias, txn, schema_mode)

    def _run_elsewhere(self, run) -> dict | None:
        """Run a change outside the engine: ``run(snapshot)`` (the newest version) returns
        its metrics, or None when it cannot (then nothing ran)."""
        snap = update_snapshot(self._snapshot)
        metrics = run(snap)
        self._snapshot = snap if metrics is None else update_snapshot(snap)
        return metrics

    def _run_change(self, make_change, txn: tuple[str, int] | None = None) -> dict:
        """Run the change ``make_change(snapshot)`` describes on the newest version."""
        from .changes.engine import execute

        snap = update_snapshot(self._snapshot)
        change = make_change(snap)
        if txn is not None:
            change.txn = operations.check_txn(txn)
        result, metrics = execute(snap, change)
        self._snapshot = update_snapshot(snap) if result is None else result.snapshot
        return metrics.as_dict()

    def append(self, data: Any, txn: tuple[str, int] | None = None, schema_mode: str | None = None) -> int:
        """Append rows; returns the new version.

        ``txn=(app_id, version)`` makes the append idempotent: when that app id has
        already committed this version (or a later one) nothing is written and the
        current version is returned. Concurrent appends rebase on each other.
        A Spark DataFrame is written by Spark's tasks after ``repartition(num_buckets,
        *index_columns)``, so each task writes one file (``docs/spark.md``).

        ``schema_mode="merge"`` (delta-rs's name) evolves the schema in the same commit:
        the data's new columns are added at the end, table columns the data lacks are
        written as NULL, ``byte``/``short`` columns widen to ``integer``. Refused before
        anything is written: other type changes, a name differing from a column's only by
        case, data without the index columns (``docs/schema.md``). Without it the data
        must match the table's schema (``SchemaMismatchError``).
        """
        if _is_spark(data):
            return self._write_spark(data, "append", txn, schema_mode=operations.check_schema_mode(schema_mode, False))
        result = operations.append(update_snapshot(self._snapshot), data, txn, schema_mode)
        self._snapshot = result.snapshot
        return result.version

    def overwrite(self, data: Any, txn: tuple[str, int] | None = None, overwrite_schema: bool = False,
                  schema_mode: str | None = None, predicate: str | None = None) -> int:
        """Replace every row; returns the new version. Earlier versions stay readable.

        ``schema_mode="overwrite"`` (or ``overwrite_schema=True``) replaces the table's
        schema with the data's (the columns of the table's indexes must still be there);
        ``schema_mode="merge"`` adds the data's new columns and keeps the others, as for
        :meth:`append`. See ``docs/schema.md``.

        ``predicate`` (delta-rs's name in ``write_deltalake``; Delta's ``replaceWhere``
        option) replaces only the rows it selects: SQL text in Spark syntax, such as
        ``"day = '2026-11-01'"``. Every row of ``data`` must make it true, else
        :class:`~indexeddf.errors.ReplaceWhereMismatchError` and nothing is written. A
        predicate on partition columns only removes whole files; any other deletes the
        rows it selects as :meth:`delete` does. One commit; the schema stays as it is.
        """
        operations.check_schema_mode(schema_mode, True)
        if overwrite_schema:
            if schema_mode == "merge":
                raise InvalidOptionError("overwrite_schema=True means schema_mode='overwrite'; give one of the two")
            schema_mode = "overwrite"
        if predicate is not None:
            return self._replace_where(data, predicate, txn, schema_mode)
        if _is_spark(data):
            return self._write_spark(data, "overwrite", txn, schema_mode=schema_mode)
        result = operations.overwrite(update_snapshot(self._snapshot), data, txn, schema_mode=schema_mode)
        self._snapshot = result.snapshot
        return result.version

    def _replace_where(self, data: Any, predicate: str, txn, schema_mode: str | None) -> int:
        """``overwrite(data, predicate=...)``: a selective overwrite (``changes/replace.py``)."""
        if schema_mode is not None:
            raise InvalidOptionError(
                f"an overwrite with a predicate keeps the table's schema; schema_mode={schema_mode!r} cannot go "
                "with it (change the schema first: schema_mode='merge' on an append, or add_columns)")
        if not isinstance(predicate, str) or not predicate.strip():
            raise InvalidOptionError(f"predicate must be SQL text such as \"day = '2026-11-01'\", got {predicate!r}")
        if _is_spark(data):
            return self._write_spark(data, "overwrite", txn, replace_where=predicate)
        from .changes.replace import replace_where

        snap = update_snapshot(self._snapshot)
        result = replace_where(snap, predicate, data, txn=None if txn is None else operations.check_txn(txn))
        self._snapshot = update_snapshot(snap) if result is None else result.snapshot
        return self._snapshot.version

    def add_columns(self, columns: Sequence[Any]) -> int:
        """``ALTER TABLE ADD COLUMNS``: add ``columns`` at the end of the schema, in one
        commit of a new ``metaData``; no data file is written or rewritten, and the rows
        already in the table read the new columns as NULL (in every Delta reader).

        ``columns``: ``pyarrow.Field`` objects (nullable; a ``b"comment"`` key in the
        field's metadata is the column's comment) or ``(name, type)`` /
        ``(name, type, comment)`` tuples, type being a ``pyarrow.DataType`` or a type
        name (``"long"``, ``"decimal(10,2)"``). Comments are kept as Delta keeps them,
        under ``"comment"`` in the column's metadata (``column_comments``). Refused
        (``SchemaEvolutionError`` subclasses): a name that exists, or differs from an
        existing one only by case; a NOT NULL column. Returns the new version.
        """
        result = operations.add_columns(update_snapshot(self._snapshot), columns)
        self._snapshot = result.snapshot
        return result.version

    @property
    def column_comments(self) -> dict[str, str]:
        """The comment of each column that has one (``COMMENT`` in SQL, ``add_columns``)."""
        return {f.name: f.comment for f in self._snapshot.metadata.schema_ if f.comment}

    def _write_spark(self, df, mode: str, txn, schema_mode: str | None = None, replace_where: str | None = None) -> int:
        """Append or overwrite from a Spark DataFrame: written by Spark's tasks, one commit."""
        from .spark import write_dataframe

        options = {} if replace_where is None else {"replaceWhere": replace_where}
        if txn is not None:
            app_id, txn_version = operations.check_txn(txn)
            options.update(txnAppId=app_id, txnVersion=str(txn_version))
        if schema_mode == "overwrite":
            options["overwriteSchema"] = "true"
        elif schema_mode == "merge":
            options["mergeSchema"] = "true"
        storage = self._snapshot.storage
        version = write_dataframe(
            df, storage.url, mode, index_columns=self.index_columns, num_buckets=self.num_buckets,
            storage_options=storage.storage_options, options=options,
        )
        self._snapshot = update_snapshot(self._snapshot) if version is None else load_snapshot(storage, version)
        return self._snapshot.version

    def delete(self, predicate=None, *, spark=None) -> int:
        """``DELETE FROM table [WHERE predicate]``: ``predicate`` is SQL text in Spark
        syntax, any condition (``"user_id = 42"``, ``"v % 1000 = 0 OR s LIKE 'a%'"``), or
        a pyarrow expression; None deletes every row. One commit, copy on write or deletion
        vectors as for :meth:`update` (a pyarrow expression: copy on write); earlier
        versions keep the rows; the index finds the files when the predicate fixes its
        columns. Returns the new version, or the current one when nothing matched.

        ``spark``: a SparkSession with the JVM connector runs a SQL predicate as Spark SQL's
        ``DELETE FROM indexeddf.`<path>` WHERE ...`` (Catalyst evaluates it, Spark's tasks
        write), as :meth:`update` does; otherwise the in-process engine runs it.
        """
        if spark is not None and (predicate is None or isinstance(predicate, str)):
            from .spark import statements

            metrics = self._run_elsewhere(lambda snap: statements.run(
                spark, snap, "DELETE", statements.delete_sql(statements.table_name(snap), predicate))
                if statements.runs_through_spark(spark, snap) else None)
            if metrics is not None:
                return self._snapshot.version
        if predicate is not None and not isinstance(predicate, str):  # a pyarrow expression
            snap = update_snapshot(self._snapshot)
            result = operations.delete_rows(snap, predicate, None)
            self._snapshot = update_snapshot(snap) if result is None else result.snapshot
            return self._snapshot.version
        from .changes import delete_matching

        self._run_change(delete_matching(predicate))
        return self._snapshot.version
