"""Spark writes into a table: the batch and streaming writers of the ``indexeddf`` source.

One write, in PySpark's Python data source API:

1. Driver, planning (:func:`plan_write`): read the table (or see that it is missing),
   validate the options and the DataFrame's schema, and fix what the tasks write with
   (metadata, the indexes to maintain) and the version the write is based on. Errors
   are typed (``SchemaMismatchError``, ``InvalidOptionError``, ``TableExistsError``)
   and stop the job before any task runs.
2. Executors (:func:`write_task`): conform the Arrow batches to the table schema and
   write them like ``operations.append`` does (``write_rows``: one data file per touched
   bucket per ~128 MB of input, plus the entries of every maintained index). The
   ``add`` actions and index files go back to the driver in a :class:`FilesMessage`.
3. Driver (:func:`commit_plan`): ONE log commit through :class:`Transaction` (blind
   append; overwrite reads everything), or ``commit_create`` for a new table.

Nothing a failed job wrote stays behind, even from tasks Spark killed while they were
still writing (their results never reach the driver). Each task, once its files are
written, records them in a manifest ``data/_staging/<write id>/<uuid>.json`` and then
looks for the abort marker ``data/_staging/<write id>/_ABORTED``; ``abort`` first
creates the marker, then deletes the files of every manifest. A task that looked
before the marker existed wrote its manifest before that, so ``abort`` finds it; one
that looks after deletes its own files. A commit removes the manifests (and files of
task attempts whose results were dropped). Readers never list ``data/``.

Streaming micro-batches commit with ``txn=(txnAppId, batchId)``: a batch that the
table already holds (a replay after a crash between our commit and Spark's offset
commit) is dropped, so every micro-batch lands exactly once.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ..errors import IndexedDFError, InvalidOptionError, SchemaMismatchError, TableExistsError, TableNotFoundError
from ..format.snapshot import Snapshot, load_snapshot
from ..format.storage import TableStorage
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction, commit_create
from ..spec.actions import PRIMARY_INDEX, Action, AddFile, IndexEntry, IndexFile, Metadata, Protocol, Txn
from . import spark_options as so
from .data import conform
from .operations import maintained_indexes, replace_all_actions, write_metrics, write_rows

TASK_FLUSH_BYTES = 128 * 1024 * 1024
"""A write task buffers this many bytes of Arrow input before it writes files."""
STAGING_DIR = "data/_staging"
ABORTED = "_ABORTED"


# -- the plan ------------------------------------------------------------------------------
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
    """Whether the commit carries ``metadata_json`` (an overwrite that changes the schema)."""
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    fail_if_exists: bool = False
    skip_if_exists: bool = False
    txn: tuple[str, int] | None = None
    result_file: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    def storage(self) -> TableStorage:
        return TableStorage(self.url, self.storage_options)

    def metadata(self) -> Metadata:
        return Metadata.model_validate_json(self.metadata_json)

    def indexes(self) -> list[IndexEntry]:
        return [IndexEntry.model_validate_json(i) for i in self.indexes_json]


def _load_or_none(storage: TableStorage, version: int | None = None) -> Snapshot | None:
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

    txn = None
    app_id = (opts.get("txnAppId") or "").strip()
    if streaming:
        if not app_id:
            raise InvalidOptionError(
                "writeStream.format('indexeddf') needs option('txnAppId', '<stable id of this query>'): "
                "micro-batches commit with txn=(txnAppId, batchId), which makes a replayed batch a no-op. "
                "Keep it the same across restarts of the query, and unique per query writing the table."
            )
    else:
        txn_version = so.int_option(opts, "txnVersion", None, 0)
        if bool(app_id) != (txn_version is not None):
            raise InvalidOptionError("give txnAppId and txnVersion together (an idempotent batch write)")
        if app_id:
            txn = (app_id, txn_version)
    common = dict(url=url, storage_options=storage.storage_options, txn=txn,
                  result_file=opts.get("_commitResultFile") or None)

    snapshot = _load_or_none(storage)
    if snapshot is None:
        raw_cols = opts.get("indexColumns")
        if not raw_cols:
            raise InvalidOptionError(
                f"there is no table at {url} and creating one needs the columns to bucket by: "
                "add .option('indexColumns', 'col1,col2') (and optionally .option('numBuckets', 16))"
            )
        index_columns = so.index_columns_option(raw_cols)
        num_buckets = so.int_option(opts, "numBuckets", so.DEFAULT_NUM_BUCKETS, 1, so.MAX_BUCKETS)
        fields = so.fields_of(spark_schema)
        missing = [c for c in index_columns if c not in [f.name for f in fields]]
        if missing:
            raise SchemaMismatchError(
                f"index columns {missing} are not in the DataFrame (columns: {[f.name for f in fields]})", missing
            )
        metadata = Metadata(
            id=str(uuid.uuid4()), name=opts.get("name"), description=opts.get("description"),
            schema=fields, indexColumns=tuple(index_columns), numBuckets=num_buckets,
            configuration=props, createdTime=int(time.time() * 1000),
        )
        primary = IndexEntry(name=PRIMARY_INDEX, columns=tuple(index_columns), kind="primary", state="ACTIVE",
                             numBuckets=num_buckets, coveredVersion=0)
        return WritePlan(
            action="create", metadata_json=metadata.model_dump_json(by_alias=True),
            indexes_json=[primary.model_dump_json()],
            fail_if_exists=save_mode in ("errorifexists", "error"), skip_if_exists=save_mode == "ignore",
            parameters={"mode": save_mode, "indexColumns": index_columns, "numBuckets": num_buckets},
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

    new_metadata = False
    if overwrite and overwrite_schema:
        fields = so.fields_of(spark_schema)
        names = [f.name for f in fields]
        missing = [c for c in meta.indexColumns if c not in names]
        if missing:
            raise SchemaMismatchError(
                f"overwriteSchema keeps the index columns {list(meta.indexColumns)}, but {missing} "
                "are not in the DataFrame", missing,
            )
        if fields != meta.schema_:
            meta, new_metadata = meta.model_copy(update={"schema_": fields}), True
    else:
        # Check the DataFrame's columns against the table now, before any task runs.
        conform(so.arrow_schema_of(spark_schema).empty_table(), meta.schema_)
    indexes = maintained_indexes(snapshot, rebuild=overwrite)
    lost = [i.name for i in indexes if any(c not in [f.name for f in meta.schema_] for c in i.columns)]
    if lost:
        raise SchemaMismatchError(f"the new schema drops columns of the indexes {lost}; delete those indexes first", lost)
    return WritePlan(
        action="overwrite" if overwrite else "append", metadata_json=meta.model_dump_json(by_alias=True),
        indexes_json=[i.model_dump_json() for i in indexes], new_metadata=new_metadata,
        parameters={"mode": "Overwrite" if overwrite else "Append", **({"overwriteSchema": True} if new_metadata else {})},
        **base,
    )


def _check_layout_options(opts: dict[str, str], meta: Metadata, url: str) -> None:
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


# -- executors -----------------------------------------------------------------------------
@dataclass
class FilesMessage(WriterCommitMessage):
    """What one write task produced (actions as JSON; picklable without pydantic state)."""

    adds: list[str]
    index_files: dict[str, list[str]]
    """New index files per index name."""
    written: list[str]
    """Every path the task created (data and index files)."""
    write_id: str
    action: str
    read_version: int | None
    num_rows: int = 0


def _staging(write_id: str, name: str = "") -> str:
    return f"{STAGING_DIR}/{write_id}/{name}" if name else f"{STAGING_DIR}/{write_id}"


def write_task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> FilesMessage:
    """Write the task's rows; on any failure delete what it wrote and re-raise."""
    if plan.action == "skip":
        return FilesMessage([], {}, [], plan.write_id, plan.action, plan.read_version)
    storage = plan.storage()
    metadata, indexes = plan.metadata(), plan.indexes()
    written: list[str] = []
    adds: list[AddFile] = []
    index_files: dict[str, list[IndexFile]] = {i.name: [] for i in indexes}
    rows = 0
    buffer: list[pa.RecordBatch] = []
    size = 0

    def flush() -> None:
        nonlocal buffer, size, rows
        if not buffer:
            return
        table = conform(pa.Table.from_batches(buffer), metadata.schema_)
        buffer, size = [], 0
        rows += table.num_rows
        new_adds, new_index = write_rows(storage, metadata, indexes, table, written)
        adds.extend(new_adds)
        for name, files in new_index.items():
            index_files[name].extend(files)

    manifest = None
    try:
        for batch in batches:
            if batch.num_rows:
                buffer.append(batch)
                size += batch.nbytes
                if size >= TASK_FLUSH_BYTES:
                    flush()
        flush()
        if written:
            manifest = _staging(plan.write_id, f"{uuid.uuid4().hex}.json")
            storage.write_bytes(manifest, json.dumps(written).encode())
            if storage.exists(_staging(plan.write_id, ABORTED)):
                raise IndexedDFError(f"write {plan.write_id} to {plan.url} was aborted; this task's files are deleted")
    except BaseException:
        for rel in written + ([manifest] if manifest else []):
            storage.delete(rel)
        raise
    return FilesMessage(
        [a.model_dump_json() for a in adds],
        {name: [f.model_dump_json() for f in files] for name, files in index_files.items() if files},
        written, plan.write_id, plan.action, plan.read_version, rows,
    )


# -- driver: commit / abort ----------------------------------------------------------------------
def _messages(messages: Iterable[Any]) -> list[FilesMessage]:
    return [m for m in messages if isinstance(m, FilesMessage)]


def _gather(msgs: list[FilesMessage]) -> tuple[list[AddFile], dict[str, list[IndexFile]], list[str]]:
    adds = [AddFile.model_validate_json(a) for m in msgs for a in m.adds]
    index_files: dict[str, list[IndexFile]] = {}
    for m in msgs:
        for name, files in m.index_files.items():
            index_files.setdefault(name, []).extend(IndexFile.model_validate_json(f) for f in files)
    return adds, index_files, [p for m in msgs for p in m.written]


def commit_plan(plan: WritePlan, messages: list[Any], operation: str = "WRITE",
                txn: tuple[str, int] | None = None, commit_empty: bool = True) -> CommitResult | None:
    """Commit the files of all tasks in ONE log entry; None when nothing was committed.

    ``txn`` overrides the plan's (streams pass ``(txnAppId, batchId)``);
    ``commit_empty=False`` skips a commit that would add no file (empty micro-batches).
    """
    msgs = _messages(messages)
    adds, index_files, written = _gather(msgs)
    storage = plan.storage()
    try:
        result = _commit(plan, storage, adds, index_files, written, operation, txn or plan.txn, commit_empty)
    except BaseException:
        abort_write(storage, {plan.write_id} | {m.write_id for m in msgs}, written)
        raise
    # The commit stands; what follows is cleanup and must not fail the job.
    try:
        _clean_staging(storage, {plan.write_id} | {m.write_id for m in msgs}, written)
    except Exception:  # noqa: BLE001
        pass
    _write_result(plan, result)
    return result


def _commit(plan: WritePlan, storage: TableStorage, adds, index_files, written, operation, txn, commit_empty):
    if plan.action == "skip":
        delete_uncommitted(storage, written)
        latest = _load_or_none(storage)
        return None if latest is None else CommitResult(latest.version, latest, duplicate=True)
    txn_actions: list[Action] = []
    params = dict(plan.parameters)
    if txn is not None:
        txn_actions = [Txn(appId=txn[0], version=txn[1], lastUpdated=int(time.time() * 1000))]
        params.update(txnAppId=txn[0], txnVersion=txn[1])

    if plan.action == "create":
        if not adds and not commit_empty:
            return None
        primary = plan.indexes()[0]
        primary = primary.model_copy(update={"files": tuple(index_files.get(primary.name, ()))})
        try:
            return commit_create(storage, [Protocol(), plan.metadata(), *adds, primary, *txn_actions],
                                 params, [], write_metrics(adds))
        except TableExistsError:
            existing = load_snapshot(storage)
            if plan.skip_if_exists:
                delete_uncommitted(storage, written)
                return None
            m, ours = existing.metadata, plan.metadata()
            same = (m.schema_, tuple(m.indexColumns), m.numBuckets) == (ours.schema_, tuple(ours.indexColumns), ours.numBuckets)
            if plan.fail_if_exists or params.get("mode") == "overwrite" or not same:
                raise TableExistsError(
                    f"another writer created a table at {storage.url} while this write ran; nothing was "
                    "written. Check the table and retry."
                ) from None
            # Same layout: the files fit; append them to the table that won.
            params["mode"] = "Append"
            return _commit_existing(existing, "append", None, [], adds, index_files, written, operation,
                                    params, txn_actions, txn, commit_empty)

    base = load_snapshot(storage, plan.read_version)
    return _commit_existing(base, plan.action, plan.metadata() if plan.new_metadata else None, plan.indexes(),
                            adds, index_files, written, operation, params, txn_actions, txn, commit_empty)


def _commit_existing(base: Snapshot, action: str, new_metadata: Metadata | None, indexes: list[IndexEntry],
                     adds, index_files, written, operation, params, txn_actions, txn, commit_empty):
    storage = base.storage
    if txn is not None:
        latest = _load_or_none(storage) or base
        done = latest.txn_version(txn[0])
        if done is not None and done >= txn[1]:
            delete_uncommitted(storage, written)
            return CommitResult(latest.version, latest, duplicate=True)
    overwrite = action == "overwrite"
    if not adds and not overwrite and not commit_empty:
        return None
    actions: list[Action] = [new_metadata] if new_metadata is not None else []
    index_appends: dict[str, list[IndexFile]] = {}
    metrics = write_metrics(adds)
    if overwrite:
        actions += replace_all_actions(base, indexes, index_files)
        metrics["numRemovedFiles"] = len(base.files)
    else:
        index_appends = index_files
    actions += adds + txn_actions
    transaction = Transaction(base, operation, params, read_buckets=ALL_BUCKETS if overwrite else ())
    transaction.written_paths = list(written)
    return transaction.commit(actions, metrics, index_appends)


def delete_uncommitted(storage: TableStorage, paths: list[str]) -> None:
    """Delete the files of a write that did not commit.

    If the log references any of its data files (live or removed), the write did commit
    (and something failed afterwards): then nothing is deleted, so committed data and
    the index files older versions need are never lost.
    """
    if not paths:
        return
    try:
        snap = _load_or_none(storage)
    except IndexedDFError:
        return  # cannot tell what is committed: leave the files (vacuum removes orphans)
    if snap is not None and any(p in snap.files or p in snap.tombstones for p in paths):
        return
    for rel in paths:
        storage.delete(rel)


def _manifest_paths(storage: TableStorage, write_id: str) -> tuple[list[str], list[str]]:
    """The manifests of a write and the paths they list."""
    names = [n for n in storage.list_names(_staging(write_id)) if n.endswith(".json")]
    paths: list[str] = []
    for name in names:
        try:
            paths += json.loads(storage.read_bytes(_staging(write_id, name)))
        except (FileNotFoundError, ValueError):
            pass
    return [_staging(write_id, n) for n in names], paths


def abort_write(storage: TableStorage, write_ids: set[str], written: list[str]) -> None:
    """Delete everything the tasks of these writes created; late tasks delete their own."""
    paths, manifests = list(written), []
    for write_id in write_ids:
        storage.write_bytes(_staging(write_id, ABORTED), b"")
        found, listed = _manifest_paths(storage, write_id)
        manifests += found
        paths += listed
    delete_uncommitted(storage, list(dict.fromkeys(paths)))
    for rel in manifests:
        storage.delete(rel)


def _clean_staging(storage: TableStorage, write_ids: set[str], committed: list[str]) -> None:
    """After a commit: drop the manifests, and the files of task attempts whose results
    Spark dropped (no commit can name them)."""
    keep = set(committed)
    for write_id in write_ids:
        manifests, listed = _manifest_paths(storage, write_id)
        for rel in listed:
            if rel not in keep:
                storage.delete(rel)
        for rel in manifests:
            storage.delete(rel)
        if storage.is_local:
            try:
                storage.fs.rmdir(storage.full(_staging(write_id)))
            except OSError:
                pass


def _write_result(plan: WritePlan, result: CommitResult | None) -> None:
    """Tell ``IndexedTable`` which version the write made (the file is local to the driver)."""
    if not plan.result_file:
        return
    body = {"version": None, "duplicate": False}
    if result is not None:
        body = {"version": result.version, "duplicate": result.duplicate}
    try:
        with open(plan.result_file, "w") as f:
            json.dump(body, f)
    except OSError:
        pass  # the commit stands; the caller falls back to the newest version


# -- the Spark writer classes -----------------------------------------------------------------
class IndexedBatchWriter(DataSourceArrowWriter):
    """``df.write.format("indexeddf")``: tasks write bucketed files, the driver commits once."""

    def __init__(self, plan: WritePlan):
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_plan(self.plan, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        msgs = _messages(messages)
        abort_write(self.plan.storage(), {self.plan.write_id} | {m.write_id for m in msgs}, _gather(msgs)[2])


class IndexedStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("indexeddf")``: one commit per micro-batch, exactly once.

    Spark makes a new writer for each micro-batch's tasks and another one to commit
    it, each planned against the table as it is then. The commit takes the plan the
    tasks used from their messages (write id, action, base version), so the transaction
    checks every commit since that version (e.g. a metadata change).
    """

    def __init__(self, plan: WritePlan, app_id: str, overwrite: bool):
        self.plan = plan
        self.app_id = app_id
        self.overwrite = overwrite

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesMessage:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        msgs = _messages(messages)
        plans = {(m.write_id, m.action, m.read_version) for m in msgs}
        if len(plans) > 1:
            abort_write(self.plan.storage(), {m.write_id for m in msgs}, _gather(msgs)[2])
            raise IndexedDFError(f"the tasks of micro-batch {batchId} were planned differently: {plans}")
        plan = self.plan if not plans else _task_plan(self.plan, *plans.pop())
        commit_plan(plan, messages, "STREAMING UPDATE", txn=(self.app_id, int(batchId)), commit_empty=self.overwrite)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        msgs = _messages(messages)
        abort_write(self.plan.storage(), {m.write_id for m in msgs}, _gather(msgs)[2])


def _task_plan(current: WritePlan, write_id: str, action: str, read_version: int | None) -> WritePlan:
    """The plan the tasks wrote with, rebuilt on the committing driver."""
    if action == "create":
        if current.action == "create":
            return replace(current, write_id=write_id)
        # The table appeared while the batch ran (our previous batch, or another writer).
        # This driver's planning checked the DataFrame's columns and the bucketing options
        # against it; commit as a create, whose fallback appends when the layouts match.
        m = load_snapshot(current.storage()).metadata
        ours = m.model_copy(update={"schema_": tuple(f.model_copy(update={"nullable": True}) for f in m.schema_)})
        primary = IndexEntry(name=PRIMARY_INDEX, columns=m.indexColumns, kind="primary", state="ACTIVE",
                             numBuckets=m.numBuckets, coveredVersion=0)
        return replace(current, action="create", write_id=write_id, read_version=None,
                       metadata_json=ours.model_dump_json(by_alias=True), indexes_json=[primary.model_dump_json()],
                       fail_if_exists=False, skip_if_exists=False, parameters={"mode": "append"})
    snap = load_snapshot(current.storage(), read_version)
    indexes = maintained_indexes(snap, rebuild=action == "overwrite")
    return replace(current, action=action, write_id=write_id, read_version=read_version,
                   metadata_json=snap.metadata.model_dump_json(by_alias=True), new_metadata=False,
                   indexes_json=[i.model_dump_json() for i in indexes])


def batch_writer(options: Any, spark_schema, overwrite: bool) -> IndexedBatchWriter:
    """The writer of ``df.write.format("indexeddf")``."""
    return IndexedBatchWriter(plan_write(options, spark_schema, overwrite, streaming=False))


def stream_writer(options: Any, spark_schema, overwrite: bool) -> IndexedStreamWriter:
    """The writer of one micro-batch of ``writeStream.format("indexeddf")``."""
    plan = plan_write(options, spark_schema, overwrite, streaming=True)
    app_id = so.parse_options(options, so.STREAM_OPTIONS, "writeStream.format('indexeddf')")["txnAppId"].strip()
    return IndexedStreamWriter(plan, app_id, overwrite)
