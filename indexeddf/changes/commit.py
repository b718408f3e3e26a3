"""Committing a change: its actions in one commit, with Delta's operationMetrics, its
``txn`` and (for a MERGE) the change data files dropped where Delta writes none.

Kept apart from :mod:`.engine` (which finds and rewrites rows) and light to import: a Spark
statement whose tasks ran the engine commits through this in the driver's commit worker, a
Python process Spark starts afresh after an idle minute, which then loads no reader, writer or
expression code.
"""

from __future__ import annotations

import time

from ..format.snapshot import Snapshot
from ..format.storage import TableStorage
from ..format.transaction import CommitResult, Transaction, write_metrics
from ..spec.actions import AddFile, CdcFile, RemoveFile, Txn
from .model import ChangeMetrics


def commit_change(snapshot: Snapshot, tx: Transaction, actions: list, index_files: dict, metrics: ChangeMetrics,
                  started: float, operation: str, txn: tuple[str, int] | None = None,
                  new_metadata=None) -> tuple[CommitResult | None, ChangeMetrics]:
    """Commit a change's actions once (nothing when there are none): ``new_metadata`` (the
    schema it evolves to) with them, its ``txn``, its metrics."""
    actions = drop_inserts_only(snapshot.storage, actions, tx.written_paths)  # the whole commit's, not a part's
    if new_metadata is not None and actions:
        actions.insert(0, new_metadata)  # the new schema, in the same commit as the rows that need it
    metrics.execution_time_ms = ms_since(started)
    if not actions:
        tx.abort()
        return None, metrics
    if txn is not None:
        app_id, txn_version = txn
        tx.parameters = {**tx.parameters, "txnAppId": app_id, "txnVersion": txn_version}
        actions.append(Txn(appId=app_id, version=txn_version, lastUpdated=int(time.time() * 1000)))
    adds = [a for a in actions if isinstance(a, AddFile)]
    result = tx.commit(actions, commit_metrics(operation, metrics, adds), index_files)
    metrics.version = result.version
    metrics.execution_time_ms = ms_since(started)
    return result, metrics

def commit_metrics(operation: str, m: ChangeMetrics, adds: list[AddFile]) -> dict:
    """Delta's operationMetrics names for the commit (DELETE and UPDATE have their own),
    and the written files' counts every write of the project records."""
    written = write_metrics(adds)
    if operation == "DELETE":
        return {**written, "numDeletedRows": m.num_target_rows_deleted, "numRemovedFiles": m.num_target_files_removed,
                "numAddedFiles": m.num_target_files_added, "numCopiedRows": m.num_target_rows_copied,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    if operation == "WRITE":  # a selective overwrite (replaceWhere): Delta's WRITE metrics
        return {**written, "numRemovedFiles": m.num_target_files_removed, "numDeletedRows": m.num_target_rows_deleted,
                "numCopiedRows": m.num_target_rows_copied, "numAddedFiles": m.num_target_files_added,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    if operation == "UPDATE":
        return {**written, "numUpdatedRows": m.num_target_rows_updated, "numRemovedFiles": m.num_target_files_removed,
                "numAddedFiles": m.num_target_files_added, "numCopiedRows": m.num_target_rows_copied,
                "numDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms}
    return {**written,
        "numSourceRows": m.num_source_rows, "numTargetRowsInserted": m.num_target_rows_inserted,
        "numTargetRowsUpdated": m.num_target_rows_updated, "numTargetRowsDeleted": m.num_target_rows_deleted,
        "numTargetRowsCopied": m.num_target_rows_copied, "numOutputRows": m.num_output_rows,
        "numTargetFilesAdded": m.num_target_files_added, "numTargetFilesRemoved": m.num_target_files_removed,
        "numTargetDeletionVectorsAdded": m.num_deletion_vectors_added, "executionTimeMs": m.execution_time_ms,
        "scanTimeMs": m.scan_time_ms, "rewriteTimeMs": m.rewrite_time_ms,
    }


def drop_inserts_only(storage: TableStorage, actions: list, written: list[str]) -> list:
    """``actions`` without their ``cdc`` ones when the commit removes no file (an insert-only
    MERGE, or one whose source matched nothing it changes): as Delta's MERGE, which writes no
    change data for a commit that only adds rows, since a reader of a commit without ``cdc``
    actions reads its added files as inserts (docs/PROTOCOL.md §4.10). Every changed or deleted
    row removes its file (a deletion vector removes and adds it back), so such a commit's change
    data holds inserts only: its files are deleted here, and dropped from ``written``."""
    if any(isinstance(a, RemoveFile) for a in actions):
        return actions
    dropped = {a.path for a in actions if isinstance(a, CdcFile)}
    for path in dropped:
        storage.delete(path)
    written[:] = [p for p in written if p not in dropped]
    return [a for a in actions if not isinstance(a, CdcFile)]


def ms_since(since: float) -> int:
    """Milliseconds since ``since`` (a ``time.perf_counter()``)."""
    return int((time.perf_counter() - since) * 1000)
