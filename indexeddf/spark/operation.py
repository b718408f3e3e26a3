"""Delta's maintenance statements and the index statements from Spark SQL, run by the Python
API in the driver's Python.

``OPTIMIZE``, ``VACUUM`` and ``RESTORE`` on an indexeddf table, ``CREATE INDEX``,
``DROP INDEX`` and ``REFRESH INDEX``, ``TRUNCATE TABLE``, and ``CONVERT TO INDEXEDDF`` of a Delta
table (the JVM connector's parser, ``io.indexeddf.spark.plan.TableOperationCommand``), and
``ALTER TABLE ... RENAME COLUMN`` / ``DROP COLUMNS`` (``io.indexeddf.spark.plan.ColumnChanges``) reach
Python as a write through this data
source with the private option ``_operation``: a JSON object naming the ``operation`` and its
parameters. The write's tasks carry one empty row and write nothing; its commit, on the
driver, runs what ``IndexedTable.optimize`` / ``vacuum`` / ``restore`` / ``create_index`` /
``drop_index`` / ``refresh`` run (the same functions of ``indexeddf.writer``; this module sits
below ``indexeddf.table``, which imports ``indexeddf.spark``) and leaves Delta's result values
as JSON in the file ``_commitResultFile`` names, which the command turns into rows. An error is
the operation's own typed error. ``CREATE INDEX``, ``REFRESH INDEX`` and ``CONVERT ... INDEX BY``
take two writes: this commit begins the operation (a conversion commits nothing yet) and plans
its build, and a second write (operation ``indexBuild``, a task a core) reads the data files,
hashes, sorts and writes the index files in its tasks and commits (``index_statements.py``); ``OPTIMIZE``
plans here, and the command reads and writes this source to rewrite the files in Spark's tasks
(operation ``optimizeMerge``, ``optimize_statement.py``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import InvalidOptionError, SchemaMismatchError
from . import optimize_statement as ost
from . import options as so

OPERATION_OPTION = "_operation"
"""Private write option: the maintenance statement to run (a JSON object)."""

OPERATION_OPTIONS = ["path", "storageOptions", OPERATION_OPTION, "_commitResultFile"]
OPERATIONS = ("optimize", "vacuum", "restore", "createIndex", "dropIndex", "refreshIndex", "renameColumn",
              "dropColumns", "addConstraint", "dropConstraint", "convert", "convertParquet", "truncate", "indexBuild",
              "optimizeMerge")

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
"""Delta's session conf that lets VACUUM go below the table's retention (the JVM reads it)."""


def is_operation(options: Any) -> bool:
    """Whether a write's options carry a maintenance statement."""
    return any(k.lower() == OPERATION_OPTION.lower() for k in dict(options))


def operation_writer(options: Any) -> "OperationWriter":
    """The writer that runs the statement at its commit (options checked on the driver)."""
    opts = so.parse_options(options, OPERATION_OPTIONS, "a maintenance statement")
    spec = so.json_option(opts, OPERATION_OPTION, OPERATIONS)
    if spec["operation"] == "indexBuild":  # an index statement's build, on executors
        from .index_statements import build_writer

        return build_writer(so.option_path(opts), so.storage_options(opts),
                            spec | {"resultFile": opts.get("_commitResultFile")})
    if spec["operation"] == "optimizeMerge":  # OPTIMIZE's merge stage, on executors
        return ost.MergeWriter(so.option_path(opts), so.storage_options(opts), spec["plan"],
                               opts.get("_commitResultFile"))
    return OperationWriter(so.option_path(opts), so.storage_options(opts), spec, opts.get("_commitResultFile"))


class OperationWriter(DataSourceArrowWriter):
    """Tasks write nothing; the commit runs the statement's operation once, on the driver."""

    def __init__(self, url: str, storage_options: dict[str, Any], spec: dict, result_file: str | None):
        self.url, self.storage_options, self.spec, self.result_file = url, storage_options, spec, result_file

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        result = run_operation(self.url, self.storage_options, self.spec)
        if self.result_file:
            with open(self.result_file, "w") as f:
                json.dump(result, f)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


def run_operation(url: str, storage_options: dict[str, Any], spec: dict) -> dict:
    """Run ``spec``'s operation on the newest version of the table at ``url``; returns Delta's
    result values."""
    from ..format.snapshot import load_snapshot
    from ..format.storage import TableStorage

    operation = spec["operation"]
    if operation in ("addConstraint", "dropConstraint"):
        return _constraint_statement(TableStorage(url, storage_options or None), operation, spec)
    if operation == "convertParquet":
        from ..writer.convert import convert_parquet

        storage = TableStorage(url, storage_options or None)
        convert_parquet(storage, [(c, t) for c, t in spec.get("partitions") or []], bool(spec.get("collectStats")))
        if not spec.get("columns"):
            return {}
        operation = "convert"
    if operation == "convert":
        return _convert(load_snapshot(TableStorage(url, storage_options or None), unindexed_ok=True), spec)
    snapshot = load_snapshot(TableStorage(url, storage_options or None))
    if operation == "optimize":
        return _optimize(snapshot, spec.get("where"), bool(spec.get("onExecutors")))
    if operation == "vacuum":
        return _vacuum(snapshot, spec)
    if operation == "restore":
        return _restore(snapshot, spec)
    if operation in ("renameColumn", "dropColumns"):
        return _column_statement(snapshot, operation, spec)
    if operation == "truncate":
        return _truncate(snapshot)
    return _index_statement(snapshot, operation, spec)


def _after(snapshot, result):
    """The newest snapshot after an operation that returned ``result`` (None: it committed nothing)."""
    from ..format.snapshot import update_snapshot

    return update_snapshot(snapshot) if result is None else result.snapshot


def _optimize(before, where: str | None = None, on_executors: bool = False) -> dict:
    """``OPTIMIZE [WHERE partition predicate]``: ``IndexedTable.optimize()`` (mode quick) of the
    partitions the predicate selects (all without one), with Delta's metrics. ``on_executors``
    (the connector's form): when there are files to rewrite, only the plan of the job that
    rewrites them (``optimize_statement.py``)."""
    from ..writer import maintenance

    start = int(time.time() * 1000)
    if on_executors:
        begun = ost.begin_optimize(before, where, start)
        if begun is not None:
            return begun
    considered = maintenance.optimized_files(before, where)
    after = _after(before, maintenance.optimize(before, "quick", where=where))
    return ost.optimize_result(before, after, considered, start)


def _vacuum(snapshot, spec: dict) -> dict:
    """``VACUUM``: ``IndexedTable.vacuum``; the files it deleted (or would delete)."""
    from ..writer import maintenance

    enforce = bool(spec.get("enforceRetention", True))
    try:
        result = maintenance.vacuum(snapshot, spec.get("retentionHours"), bool(spec.get("dryRun")), enforce)
    except InvalidOptionError as e:
        if enforce and "minRetentionHours" in str(e):
            raise InvalidOptionError(
                f"{e} From Spark SQL, as in Delta: SET {RETENTION_CHECK_CONF} = false lets VACUUM go below it."
            ) from None
        raise
    return {"path": snapshot.storage.url, "files": list(result.files), "bytes": result.bytes}


def _restore(before, spec: dict) -> dict:
    """``RESTORE``: ``IndexedTable.restore(version)``, with Delta's result columns."""
    from ..writer import maintenance

    version = spec.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidOptionError(f"RESTORE needs a version, got {version!r}")
    after = _after(before, maintenance.restore(before, version))
    removed, restored = ost.changed_files(before, after)
    return {
        "table_size_after_restore": after.size_bytes(), "num_of_files_after_restore": len(after.live_files()),
        "num_removed_files": len(removed), "num_restored_files": len(restored),
        "removed_files_size": sum(a.size for a in removed), "restored_files_size": sum(a.size for a in restored),
    }


def _truncate(snapshot) -> dict:
    """``TRUNCATE TABLE``, as Delta commits it: one commit (operation ``TRUNCATE``, no parameters,
    metrics ``numRemovedFiles`` and ``executionTimeMs``) that removes every live file; every
    ACTIVE index starts afresh, empty, as after an overwrite with no rows. An empty table gets no
    commit. ``delta.appendOnly`` refuses it (``UnsupportedFeatureError``)."""
    from ..format.transaction import ALL_BUCKETS, Transaction
    from ..writer.operations import maintained_indexes, replace_all_actions

    start = time.monotonic()
    live = snapshot.live_files()
    if not live:
        return {"version": snapshot.version}
    actions = replace_all_actions(snapshot, maintained_indexes(snapshot, rebuild=True), {})
    metrics = {"numRemovedFiles": len(live), "executionTimeMs": int((time.monotonic() - start) * 1000)}
    result = Transaction(snapshot, "TRUNCATE", {}, read_buckets=ALL_BUCKETS).commit(actions, metrics)
    return {"version": result.version}


def _convert(snapshot, spec: dict) -> dict:
    """``CONVERT TO INDEXEDDF``: ``IndexedTable.convert`` (the Delta table indexed in place, in one
    commit). With ``onExecutors`` (the connector's form) and data to index, only the plan of the
    build its job runs (``index_statements.begin_convert``; the build write's commit converts).
    Idempotent as Delta's ``CONVERT TO DELTA``: a table indexed by the same columns
    already is left as it is; by other columns it is ``TableExistsError``."""
    from ..writer.convert import convert_table

    columns = list(spec.get("columns") or [])
    if not columns:
        raise InvalidOptionError("CONVERT TO INDEXEDDF needs INDEX BY (columns)")
    if list(snapshot.metadata.indexColumns) == columns:
        return {"version": snapshot.version}
    num_buckets = spec.get("numBuckets") or None  # None: from the table's bytes
    if spec.get("onExecutors") and snapshot.live_files():
        # The connector's form: plan here, the primary index built by its job's tasks.
        from .index_statements import begin_convert

        return begin_convert(snapshot, columns, num_buckets, int(spec.get("cores") or 1))
    return {"version": convert_table(snapshot, columns, num_buckets).version}


def _index_statement(snapshot, operation: str, spec: dict) -> dict:
    """``CREATE INDEX [IF NOT EXISTS]``, ``DROP INDEX [IF EXISTS]``, ``REFRESH INDEX``: the
    Python API's ``create_index``, ``drop_index`` and ``refresh``; the version afterwards.
    With ``onExecutors`` (the connector's form), ``CREATE INDEX`` and ``REFRESH INDEX`` only
    begin here and return the plan of the build its tasks run (``index_statements.py``)."""
    from ..errors import IndexExistsError, IndexNotFoundError
    from ..writer import index_ops, lifecycle

    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidOptionError(f"an index statement needs an index name, got {name!r}")
    result = None
    try:
        if spec.get("onExecutors") and operation in ("createIndex", "refreshIndex"):
            # The connector's two-write form: begin here, the build by a second write's tasks.
            from .index_statements import begin_build

            begun = begin_build(snapshot, operation, spec)
            if begun is not None:
                return begun
        if operation == "createIndex":
            result = index_ops.create_index(snapshot, name, list(spec.get("columns") or []), spec.get("numBuckets"))
        elif operation == "dropIndex":
            result = lifecycle.drop_index(snapshot, name)
        else:
            result = index_ops.refresh_index(snapshot, name, spec.get("mode") or "incremental")
    except IndexExistsError:
        if not spec.get("ifNotExists"):
            raise
    except IndexNotFoundError:
        if not spec.get("ifExists"):
            raise
    return {"version": _after(snapshot, result).version}


def _column_statement(snapshot, operation: str, spec: dict) -> dict:
    """``ALTER TABLE ... RENAME COLUMN a TO b`` and ``DROP COLUMN[S] [IF EXISTS] (c, ...)``: the
    Python API's ``rename_column`` / ``drop_columns`` (``writer/columns.py``), each column a
    field's path (names as Spark resolved them, or as written on ``indexeddf.`/path``` without
    the catalog: matched without case then, as Spark matches them). ``IF EXISTS`` leaves out
    columns the table lacks (nothing to drop: no commit); the version afterwards."""
    from ..writer import columns

    if operation == "renameColumn":
        new = spec.get("newName")
        result = columns.rename_column(snapshot, columns.column_path(snapshot, spec.get("column")), new)
        return {"version": result.version}
    paths = []
    for c in spec.get("columns") or []:
        try:
            paths.append(columns.column_path(snapshot, c))
        except SchemaMismatchError:  # column_path's only error for a column the table lacks
            if not spec.get("ifExists"):
                raise
    if not paths:
        if spec.get("ifExists"):  # every column named is missing (Spark leaves them out): nothing to drop
            return {"version": snapshot.version}
        raise InvalidOptionError("ALTER TABLE ... DROP COLUMNS needs at least one column")
    return {"version": columns.drop_columns(snapshot, paths).version}


def _constraint_statement(storage, operation: str, spec: dict) -> dict:
    """``ALTER TABLE ... ADD CONSTRAINT name CHECK (expr)``: ``IndexedTable.add_constraint`` on
    the version whose rows the connector checked with Catalyst (``checkedVersion``; the commit
    reads every file, so a write committed since fails it); ``DROP CONSTRAINT [IF EXISTS]``:
    ``drop_constraint``. The version afterwards."""
    from ..format.snapshot import load_snapshot
    from ..writer import operations

    name, table = spec.get("name"), spec.get("table")
    if not isinstance(name, str) or not name:
        raise InvalidOptionError(f"a constraint statement needs a constraint name, got {name!r}")
    if operation == "addConstraint":
        version = spec.get("checkedVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidOptionError(f"ADD CONSTRAINT needs the version whose rows were checked, got {version!r}")
        snapshot = load_snapshot(storage, version)
        result = operations.add_constraint(snapshot, {name: str(spec.get("expression") or "")}, checked=True,
                                           table_name=table)
        return {"version": result.version}
    snapshot = load_snapshot(storage)
    result = operations.drop_constraint(snapshot, name, not spec.get("ifExists"), table_name=table)
    return {"version": _after(snapshot, result).version}
