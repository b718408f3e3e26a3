"""Spark writes, step 3 on the driver: commit the files of all tasks, or abort.

:func:`commit_plan` makes ONE log commit through :class:`Transaction` (blind append;
overwrite reads everything), or ``commit_create`` for a new table. Streaming
micro-batches commit with ``txn=(txnAppId, batchId)``: a batch the table already holds
is dropped. :func:`abort_write` deletes everything the tasks of a write created,
through the staging manifests and the abort marker (PROTOCOL.md §2.5); after a commit
``_clean_staging`` drops the manifests and the files of task attempts whose results
Spark dropped. The overview of a Spark write is in :mod:`indexeddf.spark.write`.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from ..errors import IndexedDFError, TableExistsError
from ..format.snapshot import Snapshot, load_snapshot
from ..format.storage import TableStorage
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction, commit_create
from ..spec.actions import Action, AddFile, IndexEntry, IndexFile, Metadata, Txn
from ..spec.features import protocol_for, upgraded, with_table_features
from ..writer.operations import KEEP, commit_files, set_properties, write_metrics
from .write_plan import WritePlan, load_or_none
from .write_task import ABORTED, FilesMessage, staging_path


def files_messages(messages: Iterable[Any]) -> list[FilesMessage]:
    """The tasks' messages (Spark passes None for tasks that produced none)."""
    return [m for m in messages if isinstance(m, FilesMessage)]


def gather_files(msgs: list[FilesMessage]) -> tuple[list[AddFile], dict[str, list[IndexFile]], list[str]]:
    """The ``add`` actions, index files per index and written paths of all tasks."""
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
    msgs = files_messages(messages)
    adds, index_files, written = gather_files(msgs)
    storage = plan.storage()
    operation = plan.operation or operation
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
        latest = load_or_none(storage)
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
            return commit_create(storage, [protocol_for(plan.metadata().schema_, plan.metadata().configuration), plan.metadata(), *adds, primary, *txn_actions],
                                 params, [], write_metrics(adds), operation=plan.operation or "CREATE TABLE")
        except TableExistsError:
            existing = load_snapshot(storage)
            if plan.skip_if_exists:
                delete_uncommitted(storage, written)
                return None
            m, ours = existing.metadata, plan.metadata()
            same = (m.schema_, tuple(m.indexColumns), m.numBuckets, m.partitionColumns) == \
                (ours.schema_, tuple(ours.indexColumns), ours.numBuckets, ours.partitionColumns)
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
    if plan.action == "replace":
        return _commit_replace(base, plan, adds, index_files, written, operation, params)
    if plan.add_columns:  # a metadata-only commit, as IndexedTable.add_columns makes
        return Transaction(base, "ADD COLUMNS", params, read_buckets=()).commit([plan.metadata()])
    if plan.set_properties is not None or plan.unset_properties is not None:
        return _commit_properties(base, plan.set_properties or {}, plan.unset_properties or [])
    if plan.dynamic_partitions:
        return _commit_dynamic(base, adds, index_files, written, operation, params, txn_actions)
    if plan.replace_where is not None:  # the tasks checked their rows against it
        from ..changes.model import Inserted
        from ..changes.replace import replace_where

        return replace_where(base, plan.replace_where, written=Inserted(adds=adds, index_files=index_files,
                                                                        written=list(written)), txn=txn)
    return _commit_existing(base, plan.action, plan.metadata() if plan.new_metadata else None, plan.indexes(),
                            adds, index_files, written, operation, params, txn_actions, txn, commit_empty)


def _commit_replace(base: Snapshot, plan: WritePlan, adds, index_files, written, operation, params) -> CommitResult:
    """``REPLACE TABLE`` / ``CREATE OR REPLACE TABLE`` of an existing table, as Delta commits
    it: the new ``metaData`` (schema, partitioning, index columns, properties), a ``remove`` of
    every live file, the new rows; the primary index (with the new index columns) and the kept
    secondary indexes start afresh with the tasks' entries, the other ACTIVE indexes are
    dropped. The protocol is upgraded when the new properties or types need it, never
    downgraded. It read the whole table: a concurrent change fails it."""
    metadata = plan.metadata()
    new = protocol_for(metadata.schema_, metadata.configuration)
    wanted = set(new.readerFeatures or ()) | set(new.writerFeatures or ())
    protocol = upgraded(with_table_features(base.protocol, wanted) if wanted else base.protocol,
                        metadata.configuration)
    now = int(time.time() * 1000)
    actions: list[Action] = [protocol] if protocol != base.protocol else []
    actions += [metadata, *(a.removal(now) for a in base.live_files())]
    rebuilt = plan.indexes()
    for i in rebuilt:
        old = base.indexes.get(i.name)
        actions.append(i.model_copy(update={
            "files": tuple(index_files.get(i.name, ())), "coveredVersion": -1,
            "removedFiles": tuple(f.path for f in old.files) if old is not None else ()}))
    names = {i.name for i in rebuilt}
    actions += [i.model_copy(update={"state": "DELETED", "files": (), "removedFiles": ()})
                for i in base.indexes.values() if i.name not in names and i.state == "ACTIVE"]
    metrics = write_metrics(adds)
    metrics["numRemovedFiles"] = len(base.files)
    transaction = Transaction(base, operation, params, read_buckets=ALL_BUCKETS)
    transaction.written_paths = list(written)
    return transaction.commit([*actions, *adds], metrics)


def _commit_dynamic(base: Snapshot, adds, index_files, written, operation, params, txn_actions) -> CommitResult:
    """Delta's dynamic partition overwrite: one commit that removes every live file of the
    partitions the new files are in (NULL partitions included, Delta's null-tolerant equality)
    and adds the new files, whose index entries are appended as an append's. It read those
    partitions: a concurrent change to the table fails it."""
    touched = {tuple(sorted(a.partitionValues.items())) for a in adds}
    now = int(time.time() * 1000)
    removes = [a.removal(now) for a in base.live_files() if tuple(sorted(a.partitionValues.items())) in touched]
    metrics = write_metrics(adds)
    metrics["numRemovedFiles"] = len(removes)
    transaction = Transaction(base, operation, params, read_buckets=ALL_BUCKETS)
    transaction.written_paths = list(written)
    return transaction.commit([*removes, *adds, *txn_actions], metrics, index_files)


def _commit_properties(base: Snapshot, updates: dict[str, str], names: list[str]) -> CommitResult:
    """``ALTER TABLE SET / UNSET TBLPROPERTIES`` as ``IndexedTable.set_properties`` commits it; the
    SQL property ``comment`` is the table's description, as in Delta."""
    updates = dict(updates)
    description: Any = KEEP
    if "comment" in updates:
        description = updates.pop("comment")
    if "comment" in names:
        names = [n for n in names if n != "comment"]
        description = None
    return set_properties(base, updates=updates, removals=names, description=description)


def _commit_existing(base: Snapshot, action: str, new_metadata: Metadata | None, indexes: list[IndexEntry],
                     adds, index_files, written, operation, params, txn_actions, txn, commit_empty):
    storage = base.storage
    if txn is not None:
        latest = load_or_none(storage) or base
        done = latest.txn_version(txn[0])
        if done is not None and done >= txn[1]:
            delete_uncommitted(storage, written)
            return CommitResult(latest.version, latest, duplicate=True)
    overwrite = action == "overwrite"
    if not adds and not overwrite and not commit_empty:
        return None
    transaction = Transaction(base, operation, params, read_buckets=ALL_BUCKETS if overwrite else ())
    transaction.written_paths = list(written)
    return commit_files(transaction, adds, index_files, replace=indexes if overwrite else None,
                        new_metadata=new_metadata, txn_actions=txn_actions)


def delete_uncommitted(storage: TableStorage, paths: list[str]) -> None:
    """Delete the files of a write that did not commit.

    If the log references any of its data files or deletion vector files (live or
    removed), the write did commit (and something failed afterwards, e.g. Spark aborts a
    write whose commit raised after the log entry landed): then nothing is deleted, so
    committed data, deletion vectors and the index files older versions need are never
    lost. A change that only deletes rows writes deletion vector files and no data file.
    """
    if not paths:
        return
    try:
        snap = load_or_none(storage)
    except IndexedDFError:
        return  # cannot tell what is committed: leave the files (vacuum removes orphans)
    if snap is not None and any(p in snap.files or p in snap.tombstones for p in paths):
        return
    if snap is not None and set(paths) & _vector_files(snap):
        return
    for rel in paths:
        storage.delete(rel)


def _vector_files(snap: Snapshot) -> set[str]:
    """The deletion vector files (``u`` descriptors) of a snapshot's live and removed files."""
    files = list(snap.files.values()) + list(snap.tombstones.values())
    return {a.deletionVector.relative_path for a in files
            if a.deletionVector is not None and a.deletionVector.storageType == "u"}


def _manifest_paths(storage: TableStorage, write_id: str) -> tuple[list[str], list[str]]:
    """The manifests of a write and the paths they list."""
    names = [n for n in storage.list_names(staging_path(write_id)) if n.endswith(".json")]
    paths: list[str] = []
    for name in names:
        try:
            paths += json.loads(storage.read_bytes(staging_path(write_id, name)))
        except (FileNotFoundError, ValueError):
            pass
    return [staging_path(write_id, n) for n in names], paths


def abort_write(storage: TableStorage, write_ids: set[str], written: list[str]) -> None:
    """Delete everything the tasks of these writes created; late tasks delete their own."""
    paths, manifests = list(written), []
    for write_id in write_ids:
        storage.write_bytes(staging_path(write_id, ABORTED), b"")
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
                storage.fs.rmdir(storage.full(staging_path(write_id)))
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
