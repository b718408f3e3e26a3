"""Spark SQL's ``DELETE FROM``, ``UPDATE`` and ``MERGE INTO`` on an indexeddf table.

The connector's analysis rule (``ResolveChanges``) lets Spark resolve the statement, then
writes through this data source with the option ``changeSpec``: the statement as JSON, its
conditions and assignments as Spark SQL text (a MERGE's names qualified ``target.`` and
``source.``), in the shape of :mod:`indexeddf.changes`. The write is:

1. executors (:meth:`ChangeWriter.write`): a MERGE's source rows, as Spark computed them
   (with every expression over the source's columns alone already evaluated, as extra
   columns), are staged as Parquet files in ``data/_staging/<write id>/``; DELETE and
   UPDATE have no rows;
2. driver (:meth:`ChangeWriter.commit`): the change engine runs the statement on the
   newest version, the same engine as ``IndexedTable.merge / update / delete``: the index
   finds the rows where it can, copy-on-write or deletion vectors, one commit. The staged
   files are deleted whatever happens (also on :meth:`ChangeWriter.abort`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..changes import delete_matching, merge_change, update_rows
from ..changes.clauses import Clause
from ..changes.engine import execute
from ..errors import InvalidOptionError
from ..format.snapshot import load_snapshot
from . import options as so
from .write_task import staging_path

CHANGE_OPTION = "changeSpec"
"""The option that makes a write of ``indexeddf_python`` a change statement."""
RESULT_OPTION = "_commitResultFile"
"""A local file the commit writes the change's version and metrics to, as JSON (the
connector's command returns them as Delta's result row)."""
CHANGE_OPTIONS = ["path", "storageOptions", CHANGE_OPTION, RESULT_OPTION]


@dataclass
class StagedSource(WriterCommitMessage):
    """The source files one task staged."""

    paths: list[str]
    num_rows: int


def is_change(options: Any) -> bool:
    """Whether a write's options carry a change statement."""
    return any(k.lower() == CHANGE_OPTION.lower() for k in dict(options))


def change_writer(options: Any, schema) -> "ChangeWriter":
    """The writer of a change statement (its options parsed and checked on the driver)."""
    opts = so.parse_options(options, CHANGE_OPTIONS, "a change statement")
    try:
        spec = json.loads(opts[CHANGE_OPTION])
    except ValueError as e:
        raise InvalidOptionError(f"the option {CHANGE_OPTION} is not JSON: {e}") from None
    if spec.get("operation") not in ("DELETE", "UPDATE", "MERGE"):
        raise InvalidOptionError(f"{CHANGE_OPTION}: unknown operation {spec.get('operation')!r}")
    return ChangeWriter(so.option_path(opts), so.storage_options(opts), spec, so.arrow_schema_of(schema),
                        opts.get(RESULT_OPTION))


class ChangeWriter(DataSourceArrowWriter):
    """Stages a MERGE's source rows in the tasks, runs the change in the commit."""

    def __init__(self, url: str, storage_options: dict[str, Any], spec: dict, schema: pa.Schema,
                 result_file: str | None = None):
        self.url, self.storage_options, self.spec, self.schema = url, storage_options, spec, schema
        self.result_file = result_file
        self.write_id = uuid.uuid4().hex

    def _storage(self):
        return so.shared_storage(self.url, self.storage_options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedSource:
        """Stage this task's source rows (nothing for DELETE / UPDATE)."""
        if self.spec["operation"] != "MERGE":
            for _ in iterator:
                pass
            return StagedSource([], 0)
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return StagedSource([], 0)
        rows = pa.Table.from_batches(batches).cast(self.schema)
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink)
        rel = staging_path(self.write_id, f"source-{uuid.uuid4().hex}.parquet")
        self._storage().write_bytes(rel, sink.getvalue().to_pybytes())
        return StagedSource([rel], rows.num_rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Run the change on the newest version, then drop the staged source."""
        storage = self._storage()
        try:
            paths = [p for m in messages if isinstance(m, StagedSource) for p in m.paths]
            source = _read_source(storage, paths, self.schema) if self.spec["operation"] == "MERGE" else None
            snapshot = load_snapshot(storage)
            _, metrics = execute(snapshot, change_of(self.spec, source)(snapshot))
            if self.result_file:
                with open(self.result_file, "w") as f:
                    json.dump({"version": metrics.version, "metrics": metrics.as_dict()}, f)
        finally:
            _drop_staging(storage, self.write_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop the staged source; nothing was committed."""
        _drop_staging(self._storage(), self.write_id)


def change_of(spec: dict, source: pa.Table | None):
    """The engine's change (a function of the snapshot) for a statement's JSON."""
    operation = spec["operation"]
    if operation == "DELETE":
        return delete_matching(spec.get("predicate"))
    if operation == "UPDATE":
        return update_rows(spec.get("updates") or {}, spec.get("predicate"))
    # "all": a clause written with * in a MERGE that evolves the schema ("schemaMode": "merge",
    # WITH SCHEMA EVOLUTION or autoMerge): every source column by name, new ones included.
    clauses = [Clause(c["when"], c["action"], c.get("predicate"), dict(c.get("updates") or {}),
                      all_columns=bool(c.get("all")))
               for c in spec.get("clauses", [])]
    return merge_change(source, spec["predicate"], clauses, spec.get("sourceAlias", "source"),
                        spec.get("targetAlias", "target"), spec.get("schemaMode"))


def _read_source(storage, paths: list[str], schema: pa.Schema) -> pa.Table:
    tables = [pq.read_table(pa.BufferReader(storage.read_bytes(p))) for p in paths]
    return pa.concat_tables([t.cast(schema) for t in tables]) if tables else schema.empty_table()


def _drop_staging(storage, write_id: str) -> None:
    # Every file in the folder, also those of task attempts whose results Spark dropped.
    folder = staging_path(write_id)
    for name in storage.list_names(folder):
        storage.delete(f"{folder}/{name}")
    if storage.is_local:
        try:
            storage.fs.rmdir(storage.full(folder))
        except OSError:
            pass
