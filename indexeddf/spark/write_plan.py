"""Spark writes, step 1 on the driver: plan a write before any task runs.

:func:`plan_write` reads the table (or sees that it is missing), validates the options
and the DataFrame's schema, and fixes what the tasks write with (metadata, the indexes
to maintain) and the version the write is based on, in a :class:`WritePlan` that is
pickled to the executors. Errors are typed (``SchemaMismatchError``,
``InvalidOptionError``, ``TableExistsError``) and stop the job before any task runs.
The overview of a Spark write is in :mod:`indexeddf.spark.write`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import (
    InvalidOptionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedTypeError,
)
from ..format.snapshot import Snapshot, load_snapshot
from ..format.storage import TableStorage
from ..spec import config
from ..spec.actions import PRIMARY_INDEX, IndexEntry, Metadata
from ..spec.column_mapping import evolve
from ..spec.constraints import CHECKED_OPTION, checker_for
from ..spec.partitions import check_partition_columns
from ..spec.replace_where import parse_replace_where
from ..spec.schema import arrow_schema, check_index_types
from ..spec.schema_evolution import added_fields, merge_fields, overwrite_fields
from ..writer.data import conform
from ..writer.operations import indexed_columns, maintained_indexes
from . import options as so


@dataclass
class WritePlan:
    """What a write does, fixed on the driver before tasks run (pickled to executors)."""

    url: str
    storage_options: dict[str, Any]
    action: str
    """``create``, ``append``, ``overwrite`` or ``skip`` (ignore mode, or a txn already done)."""
    metadata_json: str
    """The metadata the rows are written with (new for ``create`` and schema changes)."""
    indexes_json: list[str]
    """The ``index`` entries whose entries tasks write (ACTIVE ones; ``primary`` on create)."""
    read_version: int | None = None
    """The version the write is based on (None when creating)."""
    new_metadata: bool = False
    """Whether the commit carries ``metadata_json`` (a write that changes the schema)."""
    add_columns: bool = False
    """``ALTER TABLE ADD COLUMNS`` (the private option ``_addColumns``): the commit holds only
    ``metadata_json``; tasks write nothing, whatever rows they get."""
    set_properties: dict[str, str] | None = None
    """``ALTER TABLE SET TBLPROPERTIES`` (the private option ``_setProperties``): the commit is
    ``IndexedTable.set_properties``'s (``comment`` is the table's description); tasks write nothing."""
    unset_properties: list[str] | None = None
    """``ALTER TABLE UNSET TBLPROPERTIES`` (``_unsetProperties``): the names to remove, as
    ``IndexedTable.unset_properties`` removes them (``comment``: the description)."""
    merge_schema: bool = False
    """``mergeSchema``: tasks write NULL for table columns the DataFrame lacks and widen
    narrower integer columns (``writer.data.conform(..., merge=True)``)."""
    replace_where: str | None = None
    """``replaceWhere``: the overwrite replaces only the rows this predicate selects; tasks
    check that each row they write makes it true (``changes/replace.py`` commits)."""
    checked_constraints: dict[str, str] | None = None
    """The table's CHECK constraints Spark's plan already checked with Catalyst (the private
    option ``_checkedConstraints``, name -> SQL); tasks check the others with the Python
    expressions (``spec/constraints.py``)."""
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    fail_if_exists: bool = False
    skip_if_exists: bool = False
    txn: tuple[str, int] | None = None
    result_file: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    dynamic_partitions: bool = False
    """Delta's dynamic partition overwrite (``writeTo(t).overwritePartitions()``, the private option
    ``_dynamicPartitionOverwrite``): the commit removes the live files of the partitions the
    tasks wrote rows into, and no other."""
    operation: str | None = None
    """The commit's operation name when the write is a statement of its own (Delta's
    ``REPLACE TABLE AS SELECT``, ...); None: the caller's (``WRITE``, ``STREAMING UPDATE``)."""

    @property
    def metadata_only(self) -> bool:
        """Whether the commit changes only the metadata (``ALTER TABLE``): tasks write nothing."""
        return self.add_columns or self.set_properties is not None or self.unset_properties is not None

    def storage(self) -> TableStorage:
        return TableStorage(self.url, self.storage_options)

    def metadata(self) -> Metadata:
        return Metadata.model_validate_json(self.metadata_json)

    def indexes(self) -> list[IndexEntry]:
        return [IndexEntry.model_validate_json(i) for i in self.indexes_json]


def load_or_none(storage: TableStorage, version: int | None = None) -> Snapshot | None:
    """The table's snapshot at ``version`` (newest by default), or None when there is no table."""
    try:
        return load_snapshot(storage, version)
    except TableNotFoundError:
        return None


def plan_write(options: Any, spark_schema, overwrite: bool, streaming: bool) -> WritePlan:
    """Validate a write against the table as it is now; raises typed errors."""
    what = "writeStream.format('indexeddf')" if streaming else "write.format('indexeddf')"
    opts = so.parse_options(options, so.STREAM_OPTIONS if streaming else so.WRITE_OPTIONS, what)
    url = so.option_path(opts)
    storage = so.shared_storage(url, so.storage_options(opts))
    props = so.table_properties(opts)

    save_mode = str(opts.get("saveMode", "overwrite" if overwrite else "append")).strip().lower()
    if save_mode not in so.SAVE_MODES:
        raise InvalidOptionError(f"saveMode must be one of {', '.join(so.SAVE_MODES)}, got {opts.get('saveMode')!r}")
    if overwrite != (save_mode == "overwrite"):
        raise InvalidOptionError(
            f"saveMode={save_mode} contradicts mode('{'overwrite' if overwrite else 'append'}'); "
            "saveMode errorifexists/ignore go with mode('append')"
        )
    overwrite_schema = so.bool_option(opts, "overwriteSchema")
    if overwrite_schema and not overwrite:
        raise InvalidOptionError("overwriteSchema=true needs mode('overwrite')")
    # Delta's precedence: on an overwrite, overwriteSchema replaces the schema whatever
    # mergeSchema (or the session's autoMerge, which the connector passes as it) says.
    merge_schema = so.bool_option(opts, "mergeSchema") and not overwrite_schema
    replace_where = _replace_where_option(opts, overwrite, overwrite_schema or merge_schema)

    txn = None
    app_id = (opts.get("txnAppId") or "").strip()
    if streaming:
        if not app_id:
            raise InvalidOptionError(
                "writeStream.format('indexeddf') through the Python data source needs option('txnAppId', "
                "'<stable id of this query>'): micro-batches commit with txn=(txnAppId, batchId), which makes a "
                "replayed batch a no-op, and Spark gives a Python stream writer no query id. Keep it the same "
                "across restarts of the query, and unique per query writing the table; the JVM connector's sink "
                "(indexeddf.configure) uses the streaming query's id when it is not given, as Delta's does."
            )
    else:
        txn_version = so.int_option(opts, "txnVersion", None, 0)
        if bool(app_id) != (txn_version is not None):
            raise InvalidOptionError("give txnAppId and txnVersion together (an idempotent batch write)")
        if app_id:
            txn = (app_id, txn_version)
    checked = _checked_option(opts.get(CHECKED_OPTION))
    common = dict(url=url, storage_options=storage.storage_options, txn=txn,
                  result_file=opts.get("_commitResultFile") or None, replace_where=replace_where,
                  checked_constraints=checked)

    snapshot = load_or_none(storage)
    if opts.get(REPLACE_TABLE_OPTION):
        return _plan_replace(opts, spark_schema, snapshot, props, common)
    if snapshot is None:
        raw_cols = opts.get("indexColumns")
        if not raw_cols:
            raise InvalidOptionError(
                f"there is no table at {url} and creating one needs the columns to bucket by: "
                "add .option('indexColumns', 'col1,col2') (and optionally .option('numBuckets', 16))"
            )
        index_columns = so.index_columns_option(raw_cols)
        num_buckets = so.new_table_buckets(opts, props)
        fields = so.fields_of(spark_schema)
        missing = [c for c in index_columns if c not in [f.name for f in fields]]
        if missing:
            raise SchemaMismatchError(
                f"index columns {missing} are not in the DataFrame (columns: {[f.name for f in fields]})", missing
            )
        check_index_types(fields, index_columns)
        partition_by = check_partition_columns(so.partition_by_option(opts) or (), [f.name for f in fields])
        metadata = evolve(Metadata(
            id=str(uuid.uuid4()), name=opts.get("name"), description=opts.get("description"),
            schema=fields, indexColumns=tuple(index_columns), numBuckets=num_buckets,
            configuration=props, createdTime=int(time.time() * 1000), partitionColumns=partition_by,
        ))
        primary = IndexEntry(name=PRIMARY_INDEX, columns=tuple(index_columns), kind="primary", state="ACTIVE",
                             numBuckets=num_buckets, coveredVersion=0)
        return WritePlan(
            action="create", metadata_json=metadata.model_dump_json(by_alias=True),
            indexes_json=[primary.model_dump_json()],
            fail_if_exists=save_mode in ("errorifexists", "error"), skip_if_exists=save_mode == "ignore",
            parameters={"mode": save_mode, "indexColumns": index_columns, "numBuckets": num_buckets,
                        **({"partitionBy": list(partition_by)} if partition_by else {})},
            **common,
        )

    meta = snapshot.metadata
    if save_mode in ("errorifexists", "error"):
        raise TableExistsError(
            f"a table already exists at {url} (saveMode={save_mode}); use mode('append') or "
            "mode('overwrite') to write into it"
        )
    for name in ("name", "description", "tableProperties"):
        if opts.get(name) is not None:
            raise InvalidOptionError(f"option {name} can only be set when the table is created; {url} exists")
    if props:
        raise InvalidOptionError(f"table properties {sorted(props)} can only be set when the table is created; {url} exists")
    _check_layout_options(opts, meta, url)
    base = dict(read_version=snapshot.version, **common)
    done = None if txn is None else snapshot.txn_version(txn[0])
    if save_mode == "ignore" or (done is not None and done >= txn[1]):
        return WritePlan(action="skip", metadata_json=meta.model_dump_json(by_alias=True), indexes_json=[],
                         parameters={"mode": save_mode}, **base)

    changes = so.property_changes(opts)
    if changes is not None:
        return _plan_properties(snapshot, changes, base)
    if opts.get("_addColumns"):
        fields = added_fields(meta.schema_, spark_columns(opts["_addColumns"]))
        new = fields[len(meta.schema_):]
        return WritePlan(
            action="append", metadata_json=evolve(meta, fields).model_dump_json(by_alias=True),
            indexes_json=[], new_metadata=True, add_columns=True,
            parameters={"columns": [{"name": f.name, "type": f.type, **({"comment": f.comment} if f.comment else {})}
                                    for f in new]},
            **base,
        )
    new_metadata = False
    # Every column of a Spark write is nullable in the table (as Delta makes them).
    data_schema = so.arrow_schema_of(spark_schema)
    data_schema = pa.schema([f.with_nullable(True) for f in data_schema])
    if overwrite and overwrite_schema:
        fields = overwrite_fields(meta.schema_, data_schema, meta.indexColumns, indexed_columns(snapshot))
    elif merge_schema:
        fields = merge_fields(meta.schema_, data_schema, meta.indexColumns, indexed_columns(snapshot))
    else:
        fields = meta.schema_
    if fields != meta.schema_:
        meta, new_metadata = evolve(meta, fields), True
    # Check the DataFrame's columns against the table now, before any task runs.
    conform(data_schema.empty_table(), meta.schema_, merge=merge_schema)
    if replace_where is not None:
        parse_replace_where(replace_where, arrow_schema(meta.schema_), meta.partitionColumns)
    checker_for(meta, checked).compiled()  # a constraint the tasks cannot evaluate: refused now
    # Delta ignores dynamic partition overwrite on an unpartitioned table: a plain overwrite.
    dynamic = overwrite and so.bool_option(opts, "_dynamicPartitionOverwrite") and bool(meta.partitionColumns)
    if dynamic and (new_metadata or replace_where is not None):
        raise InvalidOptionError("overwritePartitions() (dynamic partition overwrite) replaces the partitions its "
                                 "rows fall in: it takes no replaceWhere, overwriteSchema or mergeSchema")
    # A selective overwrite keeps the indexes (its rows are added to them as an append's).
    indexes = maintained_indexes(snapshot, rebuild=overwrite and replace_where is None and not dynamic)
    lost = [i.name for i in indexes if any(c not in [f.name for f in meta.schema_] for c in i.columns)]
    if lost:
        raise SchemaMismatchError(f"the new schema drops columns of the indexes {lost}; delete those indexes first", lost)
    return WritePlan(
        action="overwrite" if overwrite else "append", metadata_json=meta.model_dump_json(by_alias=True),
        indexes_json=[i.model_dump_json() for i in indexes], new_metadata=new_metadata, merge_schema=merge_schema,
        dynamic_partitions=dynamic,
        parameters={"mode": "Overwrite" if overwrite else "Append",
                    **({"partitionBy": json.dumps(list(meta.partitionColumns)), "isDynamicPartitionOverwrite": "true"}
                       if dynamic else {}),
                    **({"mergeSchema" if merge_schema else "overwriteSchema": True} if new_metadata else {})},
        **base,
    )


REPLACE_TABLE_OPTION = "_replaceTable"
"""Private write option of ``REPLACE TABLE`` / ``CREATE OR REPLACE TABLE`` (the connector's
staged table): a JSON object with ``operation`` (Delta's operation name), ``orCreate`` and
``isManaged``."""


def _plan_replace(opts: dict[str, str], spark_schema, snapshot: Snapshot | None, props: dict[str, str],
                  common: dict) -> WritePlan:
    """Delta's ``REPLACE TABLE`` / ``CREATE OR REPLACE TABLE [AS SELECT]``: the DataFrame's
    rows, schema, partitioning and the statement's properties replace the table's in one new
    version (the history, and time travel to older versions, stay), with Delta's operation
    name. The index columns and bucket count are the statement's (``CLUSTERED BY``,
    ``OPTIONS``), else the table's. A missing table is created (``CREATE OR REPLACE``) or is
    ``TableNotFoundError`` (``REPLACE``). ACTIVE secondary indexes whose columns remain are
    rebuilt with the new rows; the others are dropped (``DELETED``, as ``drop_index``)."""
    try:
        spec = json.loads(opts[REPLACE_TABLE_OPTION])
    except ValueError as e:
        raise InvalidOptionError(f"the option {REPLACE_TABLE_OPTION} is not JSON: {e}") from None
    operation = str(spec.get("operation") or "REPLACE TABLE")
    url = common["url"]
    if snapshot is None and not spec.get("orCreate"):
        raise TableNotFoundError(f"{operation}: there is no table at {url} to replace; CREATE OR REPLACE TABLE "
                                 "creates it")
    fields = so.fields_of(spark_schema)
    names = [f.name for f in fields]
    raw_cols = opts.get("indexColumns")
    if raw_cols:
        index_columns = so.index_columns_option(raw_cols)
    elif snapshot is not None and all(c in names for c in snapshot.metadata.indexColumns):
        index_columns = list(snapshot.metadata.indexColumns)
    else:
        raise InvalidOptionError(
            f"{operation} of {url} needs the columns to bucket by" + (
                f" (the table's index columns {list(snapshot.metadata.indexColumns)} are not in the new schema)"
                if snapshot is not None else "")
            + ": add CLUSTERED BY (col) INTO n BUCKETS, or OPTIONS (indexColumns 'col')")
    missing = [c for c in index_columns if c not in names]
    if missing:
        raise SchemaMismatchError(f"index columns {missing} are not in the new schema (columns: {names})", missing)
    check_index_types(fields, index_columns)
    num_buckets = (so.new_table_buckets(opts, props) if snapshot is None
                   else so.int_option(opts, "numBuckets", snapshot.metadata.numBuckets, 1, so.MAX_BUCKETS))
    partition_by = check_partition_columns(so.partition_by_option(opts) or (), names)
    metadata = evolve(Metadata(
        id=str(uuid.uuid4()), name=opts.get("name"), description=opts.get("description"),
        schema=fields, indexColumns=tuple(index_columns), numBuckets=num_buckets,
        configuration=props, createdTime=int(time.time() * 1000), partitionColumns=partition_by,
    ))
    # Delta's parameters of CREATE / REPLACE TABLE, and the index's.
    parameters = {"isManaged": "true" if spec.get("isManaged") else "false", "description": metadata.description,
                  "partitionBy": json.dumps(list(partition_by)), "clusterBy": "[]",
                  "properties": json.dumps(props, separators=(",", ":")),
                  "indexColumns": index_columns, "numBuckets": num_buckets}
    primary = IndexEntry(name=PRIMARY_INDEX, columns=tuple(index_columns), kind="primary", state="ACTIVE",
                         numBuckets=num_buckets, coveredVersion=0 if snapshot is None else -1)
    if snapshot is None:
        return WritePlan(action="create", metadata_json=metadata.model_dump_json(by_alias=True),
                         indexes_json=[primary.model_dump_json()], parameters=parameters, operation=operation,
                         **common)
    kept = [i for i in maintained_indexes(snapshot, rebuild=True)
            if i.name != PRIMARY_INDEX and all(c in names for c in i.columns)]
    return WritePlan(action="replace", metadata_json=metadata.model_dump_json(by_alias=True),
                     indexes_json=[i.model_dump_json() for i in [primary, *kept]], read_version=snapshot.version,
                     new_metadata=True, parameters=parameters, operation=operation, **common)


def _plan_properties(snapshot: Snapshot, changes: tuple[dict[str, str], list[str], bool], base: dict) -> WritePlan:
    """``ALTER TABLE SET / UNSET TBLPROPERTIES``: checked here against the table as it is
    (typed errors before any task runs); the commit applies them to the version it commits on."""
    updates, names, if_exists = changes
    meta = snapshot.metadata
    conf = meta.configuration
    if names:
        absent = [n for n in names if n not in conf and not (n == "comment" and meta.description is not None)]
        if absent and not if_exists:
            raise InvalidOptionError(
                f"cannot unset {absent}: not set on this table (set: {sorted(conf)}); UNSET TBLPROPERTIES IF EXISTS "
                "ignores names that are not set")
        names = [n for n in names if n not in absent]
    validated = config.validate({k: v for k, v in updates.items() if k != "comment"}, protocol=True)
    if "comment" in updates:
        validated["comment"] = updates["comment"]
    if not validated and not names:  # UNSET IF EXISTS of names that are not set: nothing to commit
        return WritePlan(action="skip", metadata_json=meta.model_dump_json(by_alias=True), indexes_json=[],
                         parameters={}, **base)
    return WritePlan(action="append", metadata_json=meta.model_dump_json(by_alias=True), indexes_json=[],
                     set_properties=validated if validated else None, unset_properties=names if names else None,
                     parameters={}, **base)


def _checked_option(raw: str | None) -> dict[str, str] | None:
    """The constraints the option ``_checkedConstraints`` says Spark's plan checked (a JSON object)."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise InvalidOptionError(f"the option {CHECKED_OPTION} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidOptionError(f"the option {CHECKED_OPTION} is a JSON object (name -> SQL), got {raw!r}")
    return {str(k): str(v) for k, v in value.items()}


def _replace_where_option(opts: dict[str, str], overwrite: bool, schema_change: bool) -> str | None:
    """The ``replaceWhere`` predicate (None when not given); refused outside an overwrite
    or with a schema change, which Delta would ignore it for or apply it wrongly."""
    text = opts.get("replaceWhere")
    if text is None:
        return None
    if not overwrite:
        raise InvalidOptionError("replaceWhere replaces the rows it selects: it needs mode('overwrite')")
    if schema_change:
        raise InvalidOptionError("replaceWhere keeps the table's schema: drop overwriteSchema / mergeSchema, or "
                                 "change the schema in a write of its own")
    if not text.strip():
        raise InvalidOptionError("replaceWhere is empty: give a predicate such as \"day = '2026-11-01'\"")
    return text


def _check_layout_options(opts: dict[str, str], meta: Metadata, url: str) -> None:
    partition_by = so.partition_by_option(opts)
    if partition_by is not None and tuple(partition_by) != tuple(meta.partitionColumns):
        raise InvalidOptionError(
            f"partitionBy({', '.join(partition_by)}): " + (
                f"the table is partitioned by {list(meta.partitionColumns)}; name those columns, in that order, or "
                "drop partitionBy(...): rows are written in their partitions either way" if meta.partitionColumns
                else f"{url} exists and is not partitioned, and indexeddf does not repartition a table; drop "
                "partitionBy(...) (indexeddf tables are bucketed by their index columns)"))
    if opts.get("indexColumns"):
        cols = so.index_columns_option(opts["indexColumns"])
        if tuple(cols) != tuple(meta.indexColumns):
            raise InvalidOptionError(
                f"{url} is bucketed by {list(meta.indexColumns)}, not {cols}; drop the indexColumns "
                "option or write to a new path"
            )
    n = so.int_option(opts, "numBuckets", None, 1, so.MAX_BUCKETS)
    if n is not None and n != meta.numBuckets:
        raise InvalidOptionError(
            f"{url} has {meta.numBuckets} buckets, not {n}; drop the numBuckets option or write to a new path"
        )


def spark_columns(raw: str) -> list[pa.Field]:
    """The columns of ``ALTER TABLE ADD COLUMNS`` from Spark's JSON of them (a ``StructType``;
    a comment is ``"comment"`` in a field's metadata) as pyarrow fields for ``added_fields``."""
    from ..spec.schema import arrow_type
    from ..spec.types import NestedTypeError, check_type_value, type_text

    try:
        fields = json.loads(raw)["fields"]
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidOptionError(f"_addColumns is not a Spark schema in JSON: {e}") from None
    out = []
    for f in fields:
        try:
            check_type_value(f.get("type"), str(f.get("name")))
        except NestedTypeError as e:
            raise UnsupportedTypeError(f"_addColumns: {e}", [str(f.get("name"))]) from None
        comment = (f.get("metadata") or {}).get("comment")
        out.append(pa.field(f["name"], arrow_type(type_text(f["type"])), nullable=bool(f.get("nullable", True)),
                            metadata={"comment": comment} if isinstance(comment, str) and comment else None))
    return out
