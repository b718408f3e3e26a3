"""Spark SQL's ``DELETE FROM``, ``UPDATE`` and ``MERGE INTO`` on an indexeddf table.

The connector's analysis rule (``ResolveChanges``) lets Spark resolve the statement, then
writes through this data source with the option ``changeSpec``: the statement as JSON, its
conditions and assignments as Spark SQL text (a MERGE's names qualified ``target.`` and
``source.``), in the shape of :mod:`indexeddf.changes`. The write is:

1. executors (:meth:`ChangeWriter.write`): a MERGE's source rows, as Spark computed them
   (with every expression over the source's columns alone already evaluated, as extra
   columns), are staged as Parquet files in ``data/_staging/<write id>/``, or, when a
   task's rows are small (the usual case: Spark sends this path only sources it estimates
   small), sent back in the task's commit message as Arrow IPC, which saves a write and a
   read of the storage per bucket; DELETE and UPDATE have no rows. When the ON condition fixes every bucketing column of the table
   by equality with source columns, each task stages its rows by the table's bucket
   (Spark's hash of the source keys in the table's types, as ``changes/parts.py`` and a
   DataFrame source do), one file per bucket it holds rows of;
2. driver (:meth:`ChangeWriter.commit`): the change engine runs the statement on the
   newest version, the same engine as ``IndexedTable.merge / update / delete``: the index
   finds the rows where it can, copy-on-write or deletion vectors, one commit. A source
   staged by bucket in files is read one bucket's part at a time (never whole in the
   driver), as long as the newest version still allows it (else it is read whole); a
   source carried whole in the messages runs in one pass. The staged files
   are deleted whatever happens (also on :meth:`ChangeWriter.abort`).
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import IndexedDFError
from ..format.snapshot import Snapshot, load_snapshot
from ..spec.bucketing import bucket_ids
from ..spec.schema import arrow_schema
from . import options as so
from .change_tasks import ChangedBuckets, abort_buckets, commit_buckets, in_tasks, write_buckets
from .task_actions import txn_of

if TYPE_CHECKING:
    from ..changes.parts import PartedSource

# The engine, the SQL parser and the staging reader load where they run (a task, or a
# commit that runs the change), not with this module: Spark's driver-side workers that plan
# the write and commit it import it, and start cold after an idle minute.

CHANGE_OPTION = "changeSpec"
"""The option that makes a write of ``indexeddf_python`` a change statement."""
RESULT_OPTION = "_commitResultFile"
"""A local file the commit writes the change's version and metrics to, as JSON (the
connector's command returns them as Delta's result row)."""
CHANGE_OPTIONS = ["path", "storageOptions", CHANGE_OPTION, RESULT_OPTION]


INLINE_BYTES = 4 << 20
"""A task whose source rows take at most this many bytes in Arrow sends them back in its
commit message instead of staging them as files."""


@dataclass
class StagedSource(WriterCommitMessage):
    """The source pieces one task staged, and each piece's bucket and rows (bucket -1: rows
    of any bucket). A piece is a staged file (its path) or, when ``inline`` holds it, Arrow
    IPC bytes carried in the message (its path then names no file)."""

    paths: list[str]
    num_rows: int
    buckets: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    inline: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class StagingBuckets:
    """How tasks stage a MERGE source by the table's bucket: the source columns equal to
    the table's bucketing columns (in their order), those columns' table types, and the
    bucket count."""

    source_columns: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    num_buckets: int

    def of(self, rows: pa.Table) -> np.ndarray | None:
        """Each row's bucket; None when a key does not fit the table's type exactly (the
        task then stages its rows unbucketed)."""
        try:
            keys = [rows.column(c).cast(t) for c, t in zip(self.source_columns, self.types)]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        return bucket_ids(keys, self.num_buckets)


def is_change(options: Any) -> bool:
    """Whether a write's options carry a change statement."""
    return any(k.lower() == CHANGE_OPTION.lower() for k in dict(options))


def change_writer(options: Any, schema) -> "ChangeWriter":
    """The writer of a change statement (its options parsed and checked on the driver)."""
    opts = so.parse_options(options, CHANGE_OPTIONS, "a change statement")
    spec = so.json_option(opts, CHANGE_OPTION, ("DELETE", "UPDATE", "MERGE"))
    writer = ChangeWriter(so.option_path(opts), so.storage_options(opts), spec, so.arrow_schema_of(schema),
                          opts.get(RESULT_OPTION))
    if spec["operation"] == "MERGE" and not in_tasks(spec):  # bucket tasks take the buckets of the version read
        try:
            writer.staging = staging_buckets(load_snapshot(writer._storage()), spec, writer.schema)
        except IndexedDFError:
            pass  # the commit raises it, where a change's errors are raised
    return writer


def staging_buckets(snapshot: Snapshot, spec: dict, schema: pa.Schema) -> StagingBuckets | None:
    """How a MERGE's tasks stage its source (``schema``) by bucket at ``snapshot``; None
    when the change must see the whole source (``changes.parts.bucket_keys``)."""
    from ..changes.parts import bucket_keys

    change = change_of(spec, schema.empty_table())(snapshot)
    keys = bucket_keys(snapshot, change)
    if keys is None:
        return None
    table = arrow_schema(snapshot.metadata.schema_)
    return StagingBuckets(tuple(keys), tuple(table.field(c).type for c in snapshot.metadata.indexColumns),
                          snapshot.metadata.numBuckets)


class ChangeWriter(DataSourceArrowWriter):
    """Stages a MERGE's source rows in the tasks, runs the change in the commit."""

    def __init__(self, url: str, storage_options: dict[str, Any], spec: dict, schema: pa.Schema,
                 result_file: str | None = None):
        self.url, self.storage_options, self.spec, self.schema = url, storage_options, spec, schema
        self.result_file = result_file
        self.write_id = uuid.uuid4().hex
        self.staging: StagingBuckets | None = None

    def _storage(self):
        return so.shared_storage(self.url, self.storage_options)

    def staging_at(self, snapshot: Snapshot) -> StagingBuckets | None:
        """How this MERGE's source splits by the buckets of ``snapshot`` (None: it does not)."""
        return staging_buckets(snapshot, self.spec, self.schema)

    def change_of(self, snapshot: Snapshot):
        """The engine's change for this statement at ``snapshot``, with no source rows yet."""
        return change_of(self.spec, self.schema.empty_table())(snapshot)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedSource | ChangedBuckets:
        """Stage this task's source rows (nothing for DELETE / UPDATE), or run the MERGE on
        the task's buckets when the connector partitioned the source by bucket (:mod:`.change_tasks`)."""
        if in_tasks(self.spec):
            return write_buckets(self, iterator)
        if self.spec["operation"] != "MERGE":
            for _ in iterator:
                pass
            return StagedSource([], 0)
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return StagedSource([], 0)
        rows = pa.Table.from_batches(batches).cast(self.schema)
        staged = StagedSource([], 0)
        inline = rows.nbytes <= INLINE_BYTES
        buckets = self.staging.of(rows) if self.staging is not None else None
        if buckets is None:
            return self._stage(staged, -1, rows, inline)
        order = np.argsort(buckets, kind="stable")
        rows, buckets = rows.take(pa.array(order)), buckets[order]
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        for s, e in zip(starts, np.r_[starts[1:], len(buckets)]):
            self._stage(staged, int(buckets[s]), rows.slice(s, e - s), inline)
        return staged

    def _stage(self, staged: StagedSource, bucket: int, rows: pa.Table, inline: bool) -> StagedSource:
        """Stage ``rows`` (of ``bucket``, -1: any) as one piece, noted in ``staged``: in the
        message when ``inline`` (the task's rows are small), else as a staged file."""
        from .write_task import staging_path

        sink = pa.BufferOutputStream()
        rel = staging_path(self.write_id, f"bucket={bucket}-{uuid.uuid4().hex}.parquet")
        if inline:
            with pa.ipc.new_stream(sink, rows.schema) as out:
                out.write_table(rows)
            staged.inline[rel] = sink.getvalue().to_pybytes()
        else:
            pq.write_table(rows, sink)
            self._storage().write_bytes(rel, sink.getvalue().to_pybytes())
        staged.paths.append(rel)
        staged.buckets.append(bucket)
        staged.rows.append(rows.num_rows)
        staged.num_rows += rows.num_rows
        return staged

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Run the change on the newest version, then drop the staged source (or, when the
        tasks ran it, commit their actions on the version the plan read)."""
        if in_tasks(self.spec):
            commit_buckets(self, messages)
            return
        from ..changes.engine import execute
        from .write_task import drop_staging

        storage = self._storage()
        try:
            snapshot = load_snapshot(storage)
            if self.spec["operation"] == "MERGE":
                source = self._source(storage, snapshot, [m for m in messages if isinstance(m, StagedSource)])
                whole = isinstance(source, pa.Table)
                change = change_of(self.spec, source if whole else self.schema.empty_table())(snapshot)
                change.source = source
            else:
                change = change_of(self.spec, None)(snapshot)
            change.txn = txn_of(self.spec)
            _, metrics = execute(snapshot, change)
            if self.result_file:
                with open(self.result_file, "w") as f:
                    json.dump({"version": metrics.version, "metrics": metrics.as_dict()}, f)
        finally:
            drop_staging(storage, self.write_id)

    def _source(self, storage, snapshot: Snapshot, staged: list[StagedSource]) -> PartedSource | pa.Table:
        """The staged source: a part a bucket when every task staged by bucket, the newest
        version still buckets the source the same way and some piece is a file, else the
        rows, read whole (pieces carried in the messages are in memory already, and the
        engine runs a whole small source in one pass, as the Python API's merge does)."""
        from ..changes.parts import staged_parts
        files = [(b, p, n) for m in staged for b, p, n in zip(m.buckets, m.paths, m.rows)]
        inline = {p: data for m in staged for p, data in m.inline.items()}
        read = functools.partial(_read_pieces, storage, inline, self.schema)
        parted = (self.staging is not None and files and all(b >= 0 for b, _, _ in files)
                  and len(inline) < len(files)
                  and staging_buckets(snapshot, self.spec, self.schema) == self.staging)
        if not parted:
            return read([p for _, p, _ in files])
        return staged_parts(self.schema, files, read)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop the staged source (or the files the tasks wrote); nothing was committed."""
        from .write_task import drop_staging

        abort_buckets(self._storage(), messages)
        drop_staging(self._storage(), self.write_id)


def _read_pieces(storage, inline: dict[str, bytes], schema: pa.Schema, paths: list[str]) -> pa.Table:
    """Staged pieces as one table of ``schema``: those carried in messages decoded, the
    others read from their staged files."""
    tables = [pa.ipc.open_stream(inline[p]).read_all().cast(schema) for p in paths if p in inline]
    files = [p for p in paths if p not in inline]
    if files:
        from .write_task import read_staged

        tables.append(read_staged(storage, files, schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def change_of(spec: dict, source: pa.Table | None):
    """The engine's change (a function of the snapshot) for a statement's JSON."""
    from ..changes import delete_matching, merge_change, update_rows
    from ..changes.clauses import Clause

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
