"""Write operations: create, append and overwrite, each one optimistic commit."""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, Sequence

import pyarrow as pa

from ..errors import InvalidOptionError, TableExistsError
from ..format.datafiles import read_live_rows
from ..format.log import list_log
from ..format.snapshot import Snapshot
from ..format.storage import TableStorage
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction, commit_create, write_metrics  # noqa: F401
from ..spec import config
from ..spec.actions import Action, AddFile, IndexEntry, IndexFile, Metadata, Txn
from ..spec.bucket_count import MAX_BUCKETS, default_num_buckets  # noqa: F401 - MAX_BUCKETS re-exported
from ..spec.change_data import DELETE, labelled
from ..spec.column_mapping import check_mode_change, evolve, table_schema
from ..spec.constraints import checker_for
from ..spec.features import change_data_feed_enabled, protocol_for, upgraded
from ..spec.partitions import check_partition_columns
from ..spec.schema_evolution import added_fields, check_schema_mode, merge_fields, overwrite_fields  # noqa: F401 - check_schema_mode re-exported
from .change_data import write_change_data
from .data import conform, table_fields, to_arrow_table
from .files import codec_of, page_size_of, write_bucketed_pieces
from .index_files import PRIMARY, DataPiece, build_index_files


def check_num_buckets(num_buckets) -> None:
    """Refuse a bucket count that is not an integer in 1..MAX_BUCKETS."""
    if not isinstance(num_buckets, int) or not 1 <= num_buckets <= MAX_BUCKETS:
        raise InvalidOptionError(f"num_buckets must be an integer in 1..{MAX_BUCKETS}, got {num_buckets!r}")


def create_table(
    storage: TableStorage,
    data: Any,
    index_columns: list[str],
    num_buckets: int | None,
    *,
    name: str | None = None,
    description: str | None = None,
    properties: dict[str, str] | None = None,
    partition_by: Sequence[str] = (),
) -> CommitResult:
    """Write version 0: protocol, metadata and the first rows (``partition_by``: the
    table's Delta partition columns, PROTOCOL.md §18). ``num_buckets`` None: chosen from the
    rows' size in memory (``spec/bucket_count.py``)."""
    if num_buckets is not None:
        check_num_buckets(num_buckets)
    if list_log(storage)[0]:
        raise TableExistsError(
            f"a table already exists at {storage.url}; open it with IndexedTable.for_path, "
            "or use overwrite() to replace its content"
        )
    table = to_arrow_table(data)
    index_columns = list(index_columns)
    fields = table_fields(table, index_columns)
    table = conform(table, fields)
    configuration = config.validate(properties or {})
    if num_buckets is None:
        num_buckets = default_num_buckets(table.nbytes, configuration)
    metadata = evolve(Metadata(
        id=str(uuid.uuid4()),
        name=name,
        description=description,
        schema=fields,
        indexColumns=tuple(index_columns),
        numBuckets=num_buckets,
        configuration=configuration,
        createdTime=int(time.time() * 1000),
        partitionColumns=check_partition_columns(partition_by, [f.name for f in fields]),
    ))
    primary = IndexEntry(
        name=PRIMARY, columns=tuple(index_columns), kind="primary", state="ACTIVE",
        numBuckets=num_buckets, coveredVersion=0,
    )
    written: list[str] = []
    try:
        adds, index_files = write_rows(storage, metadata, [primary], table, written)
    except BaseException:
        _cleanup(storage, written)
        raise
    primary = primary.model_copy(update={"files": tuple(index_files[PRIMARY])})
    params = {"indexColumns": index_columns, "numBuckets": num_buckets}
    return commit_create(storage, [protocol_for(metadata.schema_, metadata.configuration), metadata, *adds, primary], params, written, write_metrics(adds))


def append(snapshot: Snapshot, data: Any, txn: tuple[str, int] | None = None,
           schema_mode: str | None = None) -> CommitResult:
    """Add rows as new files in one blind-append commit (rebases over other appends).

    ``schema_mode="merge"``: columns the table lacks are added (``evolved_fields``), in
    the same commit; a commit that changes the schema does not rebase over concurrent
    data changes (``ConcurrentSchemaChangeError``)."""
    check_schema_mode(schema_mode, overwrite=False)
    data = to_arrow_table(data)
    new_fields = evolved_fields(snapshot, data.schema, schema_mode)
    return _write_commit(snapshot, data, "WRITE", {"mode": "Append"}, (), txn, remove_all=False,
                         new_fields=new_fields, merge=schema_mode == "merge")


def overwrite(snapshot: Snapshot, data: Any, txn: tuple[str, int] | None = None, overwrite_schema: bool = False,
              schema_mode: str | None = None) -> CommitResult:
    """Replace every row of the table in one commit.

    It reads the whole table, so a concurrent append or delete makes it fail with a
    conflict error rather than silently keep or drop the other writer's rows.
    ``schema_mode="overwrite"`` (or ``overwrite_schema=True``) replaces the schema with
    the data's; ``"merge"`` adds the data's new columns and keeps the others.
    """
    check_schema_mode(schema_mode, overwrite=True)
    if overwrite_schema:
        if schema_mode == "merge":
            raise InvalidOptionError("overwrite_schema=True means schema_mode='overwrite'; give one of the two")
        schema_mode = "overwrite"
    data = to_arrow_table(data)
    new_fields = evolved_fields(snapshot, data.schema, schema_mode)
    return _write_commit(snapshot, data, "WRITE", {"mode": "Overwrite"}, ALL_BUCKETS, txn, remove_all=True,
                         new_fields=new_fields, merge=schema_mode == "merge")


def indexed_columns(snapshot: Snapshot) -> list[str]:
    """The columns of every index of the table that still exists (not DELETED)."""
    return list(dict.fromkeys(c for i in snapshot.indexes.values() if i.state != "DELETED" for c in i.columns))


def evolved_fields(snapshot: Snapshot, data: pa.Schema, schema_mode: str | None):
    """The table schema a write of data with schema ``data`` commits with, under
    ``schema_mode`` (None: the table's own; the data is checked against it later)."""
    meta = snapshot.metadata
    if schema_mode == "merge":
        return merge_fields(meta.schema_, data, meta.indexColumns, indexed_columns(snapshot))
    if schema_mode == "overwrite":
        return overwrite_fields(meta.schema_, data, meta.indexColumns, indexed_columns(snapshot))
    return None


def add_columns(snapshot: Snapshot, columns: Any) -> CommitResult:
    """``ALTER TABLE ADD COLUMNS``: one commit of a new ``metaData`` with ``columns``
    appended to the schema (``spec.schema_evolution.added_fields``); no data file is
    written or rewritten, rows already in the table read the new columns as NULL."""
    fields = added_fields(snapshot.metadata.schema_, columns)
    new = fields[len(snapshot.metadata.schema_):]
    metadata = evolve(snapshot.metadata, fields)
    params = {"columns": [{"name": f.name, "type": f.type, **({"comment": f.comment} if f.comment else {})}
                          for f in new]}
    return Transaction(snapshot, "ADD COLUMNS", params, read_buckets=()).commit([metadata])


def _write_commit(snapshot, data, operation, params, read_buckets, txn, *, remove_all, new_fields=None,
                  merge=False) -> CommitResult:
    if txn is not None:
        app_id, txn_version = check_txn(txn)
        done = snapshot.txn_version(app_id)
        if done is not None and done >= txn_version:
            return CommitResult(snapshot.version, snapshot, duplicate=True)
        params = {**params, "txnAppId": app_id, "txnVersion": txn_version}
    metadata = snapshot.metadata
    new_metadata = None
    if new_fields is not None and new_fields != metadata.schema_:
        metadata = new_metadata = evolve(metadata, new_fields)
        params = {**params, "mergeSchema" if merge else "overwriteSchema": True}
    table = conform(to_arrow_table(data), metadata.schema_, merge=merge)
    checker_for(metadata).check(table)  # the table's CHECK constraints, before anything is written
    transaction = Transaction(snapshot, operation, params, read_buckets=read_buckets)
    indexes = maintained_indexes(snapshot, rebuild=remove_all)
    try:
        adds, index_files = write_rows(snapshot.storage, metadata, indexes, table, transaction.written_paths)
    except BaseException:
        transaction.abort()
        raise
    txn_actions = [] if txn is None else [Txn(appId=app_id, version=txn_version, lastUpdated=int(time.time() * 1000))]
    return commit_files(transaction, adds, index_files, replace=indexes if remove_all else None,
                        new_metadata=new_metadata, txn_actions=txn_actions)


def commit_files(
    transaction: Transaction,
    adds: list[AddFile],
    index_files: dict[str, list[IndexFile]],
    *,
    replace: list[IndexEntry] | None = None,
    new_metadata: Metadata | None = None,
    txn_actions: Iterable[Action] = (),
) -> CommitResult:
    """Commit new rows, written as ``adds`` with their entries ``index_files``, in ``transaction``.

    Without ``replace`` the commit appends: ``index_files`` are appended to their
    indexes. With ``replace`` (the indexes the rows were written for) it overwrites:
    every live file of the transaction's snapshot is removed and each of those indexes
    starts afresh with ``index_files`` (:func:`replace_all_actions`). ``new_metadata``
    (a schema change) goes first, ``txn_actions`` last. Serves the Python writes here
    and the Spark driver's commit (``indexeddf.spark.write_commit``).
    """
    snapshot = transaction.snapshot
    actions: list[Action] = [new_metadata] if new_metadata is not None else []
    metrics = write_metrics(adds)
    index_appends = index_files
    if replace is not None:
        actions += replace_all_actions(snapshot, replace, index_files)
        metrics["numRemovedFiles"] = len(snapshot.files)
        index_appends = {}
    return transaction.commit([*actions, *adds, *txn_actions], metrics, index_appends)


def replace_all_actions(snapshot: Snapshot, indexes: list[IndexEntry], index_files: dict[str, list[IndexFile]]) -> list[Action]:
    """What an overwrite commits besides its new files: a ``remove`` of every live file,
    and each of ``indexes`` started afresh with ``index_files`` (the old entries point
    only at removed files)."""
    now = int(time.time() * 1000)
    actions: list[Action] = [
        a.removal(now) for a in snapshot.live_files()
    ]
    for i in indexes:
        old = snapshot.indexes.get(i.name, i)
        actions.append(old.model_copy(update={
            "files": tuple(index_files.get(i.name, ())), "removedFiles": tuple(f.path for f in old.files),
            "coveredVersion": -1,
        }))
    return actions


def maintained_indexes(snapshot: Snapshot, rebuild: bool = False) -> list[IndexEntry]:
    """The indexes a write of new rows must add entries to.

    ACTIVE indexes, when the table's ``indexeddf.index.autoRefresh`` is on (or always
    when ``rebuild``: an overwrite starts every ACTIVE index afresh).
    """
    if not rebuild and not config.get(snapshot.metadata.configuration, "indexeddf.index.autoRefresh"):
        return []
    return [i for i in snapshot.indexes.values() if i.state == "ACTIVE"]


def write_rows(
    storage: TableStorage, metadata: Metadata, indexes: list[IndexEntry], table: pa.Table, written: list[str],
) -> tuple[list[AddFile], dict[str, list[IndexFile]]]:
    """Write rows as bucketed data files (in their partitions) plus their entries in each of
    ``indexes``."""
    row_group_bytes = config.get(metadata.configuration, "indexeddf.targetRowGroupBytes")
    pieces = write_bucketed_pieces(storage, table, list(metadata.indexColumns), metadata.numBuckets,
                                   row_group_bytes, written, metadata.partitionColumns, table_schema(metadata),
                                   codec_of(metadata.configuration), page_size_of(metadata.configuration))
    data = [DataPiece(add.fileId, rows) for add, rows in pieces]
    index_files = {
        i.name: build_index_files(storage, i.name, list(i.columns), i.numBuckets, data, written) for i in indexes
    }
    return [add for add, _ in pieces], index_files


def check_txn(txn) -> tuple[str, int]:
    """``txn`` as an (app id, version) pair, checked: a non-empty string and an int >= 0."""
    try:
        app_id, version = txn
    except (TypeError, ValueError):
        raise InvalidOptionError(f"txn must be an (app id, version) pair, got {txn!r}") from None
    if not isinstance(app_id, str) or not app_id or not isinstance(version, int) or version < 0:
        raise InvalidOptionError(f"txn must be (non-empty str, int >= 0), got {txn!r}")
    return app_id, version


def _cleanup(storage: TableStorage, written: list[str]) -> None:
    for rel in written:
        storage.delete(rel)


KEEP = object()
"""``set_properties(description=KEEP)``: the table's description stays as it is."""


def set_properties(snapshot: Snapshot, updates: dict[str, str] | None = None, removals: list[str] | None = None,
                   description: Any = KEEP) -> CommitResult:
    """Change table properties in one metadata commit (``SET TBLPROPERTIES``).

    ``description``: the table's new description (``metaData.description``; None removes it),
    which SQL sets as the property ``comment``; :data:`KEEP` leaves it. Like every metadata
    change it fails concurrent writers that read the old metadata (``MetadataChangedError``),
    and fails itself when it loses to one.
    """
    if not updates and not removals and description is KEEP:
        raise InvalidOptionError("set_properties needs at least one property (unset_properties at least one name)")
    conf = dict(snapshot.metadata.configuration)
    updates = config.validate(updates or {}, protocol=True)
    asked = {k: int(updates.pop(k)) for k in config.PROTOCOL_PROPERTIES if k in updates}
    conf.update(updates)
    unknown = [k for k in (removals or []) if k not in conf]
    if unknown:
        raise InvalidOptionError(f"cannot unset {unknown}: not set on this table (set: {sorted(conf)})")
    for k in removals or []:
        del conf[k]
    fields = check_mode_change(snapshot.metadata.configuration, conf, snapshot.metadata.schema_)
    changed = {"configuration": conf} if description is KEEP else {"configuration": conf, "description": description}
    metadata = evolve(snapshot.metadata.model_copy(update=changed), fields)
    shown = {**updates, **{k: str(v) for k, v in asked.items()}}
    params: dict[str, Any] = {"properties": shown} if shown else {"removed": list(removals or [])}
    if description is not KEEP:
        params.setdefault("properties", {})["comment"] = description
    op = "SET TBLPROPERTIES" if shown or (description is not KEEP and description is not None) \
        else "UNSET TBLPROPERTIES"
    # A property that needs a table feature upgrades the protocol in the same commit, as
    # Delta does (unsetting it keeps the feature: dropping one is Delta's DROP FEATURE).
    protocol = upgraded(snapshot.protocol, conf)
    _check_asked_protocol(protocol, asked)
    upgrade: list[Action] = [protocol] if protocol != snapshot.protocol else []
    return Transaction(snapshot, op, params, read_buckets=()).commit([*upgrade, metadata])


def _check_asked_protocol(protocol, asked: dict[str, int]) -> None:
    """Delta's ``delta.minReaderVersion`` / ``delta.minWriterVersion`` in a ``SET TBLPROPERTIES``:
    taken when the protocol the commit gives the table (``protocol``) has those versions already,
    refused otherwise (indexeddf upgrades a protocol only for a property that needs a feature)."""
    have = {"delta.minReaderVersion": protocol.minReaderVersion, "delta.minWriterVersion": protocol.minWriterVersion}
    above = {k: v for k, v in asked.items() if v > have[k]}
    if above:
        raise InvalidOptionError(
            f"{', '.join(f'{k} = {v}' for k, v in above.items())}: the table's protocol would be reader "
            f"{protocol.minReaderVersion} / writer {protocol.minWriterVersion}. indexeddf raises a protocol only "
            "for a property that needs a table feature (delta.columnMapping.mode = name: reader 2 / writer 5; "
            "delta.enableDeletionVectors = true: reader 3 / writer 7); set that property, with or without these")


def delete_rows(snapshot: Snapshot, predicate, buckets: set[int] | None = None) -> CommitResult | None:
    """Delete the rows matching ``predicate`` (SQL string or pyarrow expression), copy on write.

    Files that hold a matching row are rewritten without it (removes and adds in one
    commit); files whose every row matches are only removed. ``buckets``: the only
    buckets that can hold matching rows (the planner's ``data_buckets``; None: all),
    the only ones read. Returns None (and
    commits nothing) when no row matches. It reads the buckets it rewrites: a blind
    append to one of them meanwhile counts as after it (``WriteSerializable``, the
    default), or fails it with ``ConcurrentAppendError`` (``delta.isolationLevel =
    Serializable``).
    """
    import pyarrow.compute as pc

    from ..spec.predicate import parse_predicate

    schema = table_schema(snapshot.metadata)
    if isinstance(predicate, str):
        expression, text = parse_predicate(predicate, schema).expression, predicate
    else:
        expression, text = predicate, str(predicate)
    candidates = [a for a in snapshot.live_files() if buckets is None or a.bucket is None or a.bucket in buckets]
    storage = snapshot.storage
    transaction = Transaction(snapshot, "DELETE", {"predicate": text}, read_buckets={a.bucket for a in candidates})
    removes, kept_tables, deleted_rows = [], [], 0
    now = int(time.time() * 1000)
    feed = change_data_feed_enabled(snapshot.metadata.configuration)
    for add in candidates:
        rows = read_live_rows(storage, add, schema, version=snapshot.version)
        hit = pc.fill_null(_evaluate(rows, expression), False)
        n = pc.sum(hit).as_py() or 0
        if n == 0:
            continue
        deleted_rows += n
        removes.append(add.removal(now))
        if feed:  # the change data feed: the deleted rows, a file's at a time
            try:
                removes += write_change_data(storage, snapshot.metadata, schema, [labelled(rows.filter(hit), DELETE)],
                                             transaction.written_paths)
            except BaseException:
                transaction.abort()
                raise
        kept = rows.filter(pc.invert(hit))
        if kept.num_rows:
            kept_tables.append(kept)
    if not removes:
        return None
    indexes = maintained_indexes(snapshot)
    try:
        table = pa.concat_tables(kept_tables) if kept_tables else schema.empty_table()
        adds, index_files = write_rows(storage, snapshot.metadata, indexes, table, transaction.written_paths)
    except BaseException:
        transaction.abort()
        raise
    metrics = write_metrics(adds) | {"numRemovedFiles": len(removes), "numDeletedRows": deleted_rows}
    return transaction.commit([*removes, *adds], metrics, index_files)


def _evaluate(rows: pa.Table, expression):
    """The boolean column of ``expression`` over ``rows`` (null where SQL gives null)."""
    import pyarrow.dataset as ds

    try:
        return ds.dataset(rows).to_table(columns={"m": expression}).column("m")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidOptionError(f"cannot evaluate the predicate on the table's columns: {e}") from None


def add_constraint(snapshot: Snapshot, constraints: dict[str, str], *, checked: bool = False,
                   table_name: str | None = None) -> CommitResult:
    """``ALTER TABLE ADD CONSTRAINT name CHECK (expr)`` (delta-rs's ``alter.add_constraint``):
    one commit that sets ``delta.constraints.<name>`` for each of ``constraints`` (name -> SQL)
    and upgrades the protocol to hold them (writer 3, or the feature ``checkConstraints``).

    The table's rows are checked first, a file at a time: a constraint some rows break is
    refused with Delta's ``DELTA_NEW_CHECK_CONSTRAINT_VIOLATION`` (:class:`ConstraintViolationError`,
    naming how many), a name the table has with :class:`ConstraintExistsError`. ``checked``:
    the caller (Spark's ``ADD CONSTRAINT``, with Catalyst) already checked the rows of
    ``snapshot``'s version. The commit reads every file at Serializable isolation, so a write
    committed since (a blind append too) fails it with a conflict error, and it fails a write that
    read the version before it: no row escapes the check.
    """
    import pyarrow.compute as pc

    from ..errors import ConstraintExistsError, ConstraintViolationError
    from ..spec import constraints as cs

    if not isinstance(constraints, dict) or not constraints:
        raise InvalidOptionError("add_constraint needs a dict of at least one constraint: {name: SQL condition}")
    existing = {n.lower(): t for n, t in cs.constraints(snapshot.metadata.configuration).items()}
    named: dict[str, str] = {}
    for name, text in constraints.items():
        lower = cs.check_name(name)
        if not isinstance(text, str) or not text.strip():
            raise InvalidOptionError(f"CHECK constraint {name}: give a SQL condition such as 'v > 0', got {text!r}")
        if lower in existing or lower in named:
            old = existing.get(lower, named.get(lower))
            raise ConstraintExistsError(
                f"[DELTA_CONSTRAINT_ALREADY_EXISTS] Constraint '{lower}' already exists. Please delete the old "
                f"constraint first (drop_constraint / ALTER TABLE DROP CONSTRAINT).\nOld constraint:\n{old}")
        named[lower] = text.strip()
    if not checked:
        from ..format.datafiles import iter_live_row_groups
        from ..spec.schema import arrow_schema

        schema = arrow_schema(snapshot.metadata.schema_)
        compiled = [cs.compile_constraint(n, t, schema) for n, t in named.items()]
        bad = {c.name: 0 for c in compiled}
        used = sorted({col for c in compiled for col in c.condition.columns_used})
        stored = table_schema(snapshot.metadata)
        for add in snapshot.live_files():  # memory bounded by a row group
            for _, rows in iter_live_row_groups(snapshot.storage, add, stored, used or None, snapshot.version):
                for c in compiled:
                    bad[c.name] += pc.sum(c.violations(rows)).as_py() or 0 if rows.num_rows else 0
        for c in compiled:
            if bad[c.name]:
                where = table_name or snapshot.metadata.name or snapshot.storage.url
                raise ConstraintViolationError(cs.new_violation_message(bad[c.name], where, c.text), c.name, c.text,
                                               rows=bad[c.name])
    conf = dict(snapshot.metadata.configuration)
    conf.update({cs.key(n): t for n, t in named.items()})
    metadata = snapshot.metadata.model_copy(update={"configuration": conf})
    protocol = cs.with_constraints_feature(snapshot.protocol)
    upgrade: list[Action] = [protocol] if protocol != snapshot.protocol else []
    name, expr = next(iter(named.items())) if len(named) == 1 else (", ".join(named), " AND ".join(named.values()))
    # Serializable: rows any writer (a blind append too) committed after the checked version were not
    # checked against the new constraint, so the commit does not rebase over them.
    return Transaction(snapshot, "ADD CONSTRAINT", {"name": name, "expr": expr}, read_buckets=ALL_BUCKETS,
                       isolation="Serializable").commit([*upgrade, metadata])


def drop_constraint(snapshot: Snapshot, name: str, raise_if_not_exists: bool = True,
                    table_name: str | None = None) -> CommitResult | None:
    """``ALTER TABLE DROP CONSTRAINT [IF EXISTS] name`` (delta-rs's ``alter.drop_constraint``):
    one metadata commit without ``delta.constraints.<name>`` (the protocol keeps its feature, as
    in Delta). A name the table lacks raises :class:`ConstraintNotFoundError`, or with
    ``raise_if_not_exists=False`` commits nothing (None)."""
    from ..errors import ConstraintNotFoundError
    from ..spec import constraints as cs

    lower = cs.check_name(name)
    conf = dict(snapshot.metadata.configuration)
    stored = cs.stored_key(conf, lower)
    old = None if stored is None else conf.pop(stored)
    if old is None:
        if not raise_if_not_exists:
            return None
        where = table_name or snapshot.metadata.name or snapshot.storage.url
        raise ConstraintNotFoundError(
            f"[DELTA_CONSTRAINT_DOES_NOT_EXIST] Cannot drop nonexistent constraint {lower} from table {where}. "
            "To avoid throwing an error, use DROP CONSTRAINT IF EXISTS (raise_if_not_exists=False).")
    metadata = snapshot.metadata.model_copy(update={"configuration": conf})
    return Transaction(snapshot, "DROP CONSTRAINT", {"name": lower, "expr": old}, read_buckets=()).commit([metadata])
