"""The Python API's changes run as Spark SQL statements: ``IndexedTable.merge(spark_df, ...)``,
``t.update(..., spark=spark)`` and ``t.delete(..., spark=spark)`` on a session with the JVM
connector.

The builder's clauses, predicates and assignments are Spark SQL text already; this module
writes the equivalent statement (``MERGE INTO indexeddf.`<path>` AS t USING <view> AS s ON
... WHEN ...``, ``UPDATE ... SET ... WHERE ...``, ``DELETE FROM ... WHERE ...``) and runs it
with ``spark.sql``: the connector's command plans it, Catalyst evaluates every expression,
executors write the outcome and the driver commits once (docs/spark-tables.md), exactly as
the same statement typed in SQL. A DataFrame source is a temporary view of a unique name,
dropped afterwards whatever happens.

``txn=(app_id, version)`` runs the statement with Delta's ``txnAppId`` / ``txnVersion``
session confs, which the connector's changes commit as a ``txn`` action. What a statement
cannot reach keeps the in-process engine (``changes/``, with a Spark source staged by
:mod:`.merge_source`): a table with fsspec ``storage_options`` or on a store Spark's Hadoop
filesystems cannot open; a session without the connector. :func:`runs_through_spark` decides.

The metrics returned are the engine's (:class:`~indexeddf.changes.ChangeMetrics`, delta-rs's
names), read back from the statement's commit (its ``operationMetrics``, Delta's names).
"""

from __future__ import annotations

import uuid

from ..changes.clauses import DELETE, INSERT, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, UPDATE, Clause
from ..changes.model import ChangeMetrics
from ..errors import InvalidOptionError
from ..format.log import list_log, read_commit_info
from ..format.snapshot import Snapshot
from ..spec.delta import TXN_APP_ID_CONF, TXN_VERSION_CONF
from .native import hadoop_path, reads_through_connector

_WHEN = {MATCHED: "WHEN MATCHED", NOT_MATCHED: "WHEN NOT MATCHED", NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE"}


def runs_through_spark(spark, snapshot: Snapshot) -> bool:
    """Whether a change of ``snapshot``'s table from ``spark`` runs as a Spark SQL statement:
    the session (under Spark Connect, its server) has the JVM connector, and the table needs
    no fsspec ``storage_options`` and lives where Spark's Hadoop filesystems reach it."""
    if spark is None or not reads_through_connector(spark, snapshot):
        return False
    try:
        table_name(snapshot)
    except InvalidOptionError:  # memory:// and the like: only this process sees the table
        return False
    return True


def table_name(snapshot: Snapshot) -> str:
    """``indexeddf.`<path>```: the table as the connector's SQL names it (by its location)."""
    location = hadoop_path(snapshot.storage, "", glob_escaped=False).rstrip("/")
    return f"indexeddf.{quoted(location)}"


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def merge_sql(table: str, view: str, predicate: str, clauses: list[Clause], source_alias: str,
              target_alias: str, schema_evolution: bool = False) -> str:
    """``MERGE [WITH SCHEMA EVOLUTION] INTO table AS t USING view AS s ON predicate WHEN ...``,
    the clauses in their order (``*_all``: ``UPDATE SET *`` / ``INSERT *``)."""
    for when in _WHEN:
        kind = [c for c in clauses if c.when == when]
        if any(c.predicate is None for c in kind[:-1]):  # the engine's refusal, typed, before Spark's parser
            raise InvalidOptionError(
                f"only the last {_WHEN[when]} clause may omit its condition: the ones after an unconditional "
                "clause could never apply; give the earlier clauses a predicate")
    head = "MERGE WITH SCHEMA EVOLUTION INTO" if schema_evolution else "MERGE INTO"
    parts = [f"{head} {table} AS {quoted(target_alias)} USING {quoted(view)} AS {quoted(source_alias)} "
             f"ON {predicate}"]
    for c in clauses:
        when = _WHEN[c.when] + ("" if c.predicate is None else f" AND ({c.predicate})")
        if c.action == DELETE:
            parts.append(f"{when} THEN DELETE")
        elif c.action == UPDATE:
            parts.append(f"{when} THEN UPDATE SET " + ("*" if c.all_columns else _assignments(c.updates)))
        elif c.action == INSERT:
            if c.all_columns:
                parts.append(f"{when} THEN INSERT *")
            else:
                columns = ", ".join(quoted(k) for k in c.updates)
                values = ", ".join(f"({v})" for v in c.updates.values())
                parts.append(f"{when} THEN INSERT ({columns}) VALUES ({values})")
    return " ".join(parts)


def update_sql(table: str, updates: dict[str, str], predicate: str | None) -> str:
    """``UPDATE table SET column = expression, ... [WHERE predicate]``."""
    if not updates:
        raise InvalidOptionError("update needs updates={column: SQL expression}")
    for column, expression in updates.items():
        if not isinstance(column, str) or not isinstance(expression, str):
            raise InvalidOptionError(f"updates map column names to SQL text, got {column!r}: {expression!r}")
    return f"UPDATE {table} SET {_assignments(updates)}" + _where(predicate)


def delete_sql(table: str, predicate: str | None) -> str:
    """``DELETE FROM table [WHERE predicate]``."""
    return f"DELETE FROM {table}" + _where(predicate)


def _assignments(updates: dict[str, str]) -> str:
    return ", ".join(f"{quoted(k)} = ({v})" for k, v in updates.items())


def _where(predicate: str | None) -> str:
    if predicate is None:
        return ""
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidOptionError(f"a predicate is SQL text such as \"k = 5\", got {predicate!r}")
    return f" WHERE {predicate}"


def merge(snapshot: Snapshot, df, predicate: str, clauses: list[Clause], source_alias: str, target_alias: str,
          schema_mode: str | None = None, txn: tuple[str, int] | None = None) -> dict:
    """Run the MERGE of ``df`` (a Spark DataFrame) into the table as Spark SQL; its metrics."""
    spark = df.sparkSession
    view = f"indexeddf_merge_source_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        sql = merge_sql(table_name(snapshot), view, predicate, clauses, source_alias, target_alias,
                        schema_evolution=schema_mode == "merge")
        return run(spark, snapshot, "MERGE", sql, txn)
    finally:
        spark.catalog.dropTempView(view)


# Delta's session confs that make a statement idempotent (the connector's changes read them).
TXN_CONFS = (TXN_APP_ID_CONF, TXN_VERSION_CONF)


def run(spark, snapshot: Snapshot, operation: str, sql: str, txn: tuple[str, int] | None = None) -> dict:
    """Run a change statement on ``snapshot``'s table (its newest version, as the engine's
    changes do); the engine's metrics of the commit it made (``version`` None: nothing
    changed). ``txn=(app_id, version)``: the statement runs with Delta's ``txnAppId`` /
    ``txnVersion`` session confs set (and then restored), so its commit carries that ``txn``
    and a version of the app committed before changes nothing. A typed error raised in Spark's
    Python workers is raised again as itself."""
    from . import typed_error

    before = {k: spark.conf.get(k, None) for k in TXN_CONFS} if txn is not None else {}
    try:
        if txn is not None:
            app_id, version = txn
            spark.conf.set(TXN_CONFS[0], str(app_id))
            spark.conf.set(TXN_CONFS[1], str(int(version)))
        result = spark.sql(sql).collect()[0].asDict()
    except Exception as e:  # noqa: BLE001 - re-raised typed when possible
        typed = typed_error(e)
        if typed is not None:
            raise typed from e
        raise
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    return _metrics(snapshot, operation, result)


# The counts of a commit's operationMetrics (Delta's names) that the result row gives too:
# they tell the statement's commit from a concurrent writer's.
_RESULT = {"MERGE": {"num_updated_rows": "numTargetRowsUpdated", "num_deleted_rows": "numTargetRowsDeleted",
                     "num_inserted_rows": "numTargetRowsInserted"},
           "UPDATE": {"num_affected_rows": "numUpdatedRows"},
           "DELETE": {"num_affected_rows": "numDeletedRows"}}
# delta-rs's name <- Delta's, per operation.
_NAMES = {
    "MERGE": {"num_source_rows": "numSourceRows", "num_target_rows_inserted": "numTargetRowsInserted",
              "num_target_rows_updated": "numTargetRowsUpdated", "num_target_rows_deleted": "numTargetRowsDeleted",
              "num_target_rows_copied": "numTargetRowsCopied", "num_output_rows": "numOutputRows",
              "num_target_files_added": "numTargetFilesAdded", "num_target_files_removed": "numTargetFilesRemoved",
              "num_deletion_vectors_added": "numTargetDeletionVectorsAdded", "execution_time_ms": "executionTimeMs",
              "scan_time_ms": "scanTimeMs", "rewrite_time_ms": "rewriteTimeMs"},
    "UPDATE": {"num_target_rows_updated": "numUpdatedRows", "num_target_rows_copied": "numCopiedRows",
               "num_output_rows": "numOutputRows", "num_target_files_added": "numAddedFiles",
               "num_target_files_removed": "numRemovedFiles", "num_deletion_vectors_added": "numDeletionVectorsAdded",
               "execution_time_ms": "executionTimeMs"},
    "DELETE": {"num_target_rows_deleted": "numDeletedRows", "num_target_rows_copied": "numCopiedRows",
               "num_output_rows": "numOutputRows", "num_target_files_added": "numAddedFiles",
               "num_target_files_removed": "numRemovedFiles", "num_deletion_vectors_added": "numDeletionVectorsAdded",
               "execution_time_ms": "executionTimeMs"},
}


def _metrics(snapshot: Snapshot, operation: str, result: dict) -> dict:
    """The engine's metrics of the statement's commit: the first commit after ``snapshot``'s
    version of this operation whose counts are the result row's (none when the row counts
    nothing: a change that changes no row commits nothing). Two concurrent changes of the
    same operation and counts cannot be told apart; their metrics are the same but for the
    files and times."""
    metrics = ChangeMetrics(rows_found_by="scan")  # Spark's scan of the target (with its own pruning)
    want = {delta: int(result.get(col) or 0) for col, delta in _RESULT[operation].items()}
    if not any(want.values()):
        return metrics.as_dict()
    commits, _ = list_log(snapshot.storage)
    for v in (c for c in commits if c > snapshot.version):
        info = read_commit_info(snapshot.storage, v)
        if info is None or info.operation != operation:
            continue
        om = dict(info.operationMetrics)
        if all(int(om.get(k, -1)) == n for k, n in want.items()):
            for name, delta in _NAMES[operation].items():
                setattr(metrics, name, int(om.get(delta, 0)))
            metrics.version = v
            return metrics.as_dict()
    # Not found (the log's commit was cleaned up meanwhile): the result row's counts, no version.
    by_delta = {delta: name for name, delta in _NAMES[operation].items()}
    for delta, n in want.items():
        setattr(metrics, by_delta[delta], n)
    return metrics.as_dict()
