"""What a change's Spark tasks and its commit share: the version the plan read (replayed once
per statement in each worker), actions as the tasks' messages carry them, the tasks' counts
summed, the change's ``txn``.

Light to import: the commit runs in the driver's commit worker, a Python process Spark starts
afresh after an idle minute, which should load no reader, writer or expression code for it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..changes.model import ChangeMetrics
from ..format.snapshot import Snapshot, load_snapshot
from ..spec.actions import AddFile, to_line
from ..spec.delta import LazyStats
from . import options as so

_SNAPSHOTS: dict[tuple, Snapshot] = {}
"""The snapshots this worker process replayed for the statements it wrote, newest last (the
key holds the statement's own result file, so no two statements share one)."""


def txn_of(spec: dict) -> tuple[str, int] | None:
    """A change's ``txn(appId, version)`` (Delta's ``spark.databricks.delta.write.txnAppId`` and
    ``txnVersion``, which the connector puts in its JSON), or None."""
    return None if spec.get("txnAppId") is None else (str(spec["txnAppId"]), int(spec["txnVersion"]))


def committed_before(snapshot: Snapshot, txn: tuple[str, int]) -> bool:
    """Whether the newest version already holds ``txn``'s app at its version or later."""
    done = load_snapshot(snapshot.storage).txn_version(txn[0])
    return done is not None and done >= txn[1]


def action_json(add: AddFile) -> str:
    """An add as a commit message carries it: the stats a checkpoint left as text (a file
    given a deletion vector keeps them) parsed first, since the model serializes only parsed
    statistics."""
    return _parsed(add).model_dump_json(by_alias=True)


def _parsed(action):
    if isinstance(action, AddFile) and isinstance(action.stats, LazyStats):
        return action.model_copy(update={"stats": action.stats.parsed()})
    return action


def action_line(action) -> str:
    """Any action as a commit message carries it (its log line; an add's stats parsed)."""
    return to_line(_parsed(action))


def version_read(url: str, storage_options: dict[str, Any], statement: str | None, version: int) -> Snapshot:
    """The version a statement's plan read, replayed once per statement in each worker
    process: a statement's tasks (one a bucket when the outcome is written where the join
    left it, or a few buckets each) run one after another in Spark's reused Python workers.
    ``statement`` tells statements apart (their result file)."""
    key = (url, json.dumps(storage_options, sort_keys=True, default=str), statement, version)
    snapshot = _SNAPSHOTS.pop(key, None)
    if snapshot is None:
        snapshot = load_snapshot(so.shared_storage(url, storage_options), version)
    _SNAPSHOTS[key] = snapshot
    while len(_SNAPSHOTS) > 2:
        _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))
    return snapshot


_COUNTS = ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
           "num_target_rows_copied", "num_output_rows", "num_target_files_added", "num_target_files_removed",
           "num_target_files_scanned", "num_deletion_vectors_added", "scan_time_ms", "rewrite_time_ms")
"""The metrics a task counts and the commit sums (the rest are the commit's own)."""


def task_metrics(messages: Iterable) -> ChangeMetrics:
    """The sum of the counts and times the tasks' messages carry (their ``metrics``)."""
    metrics = ChangeMetrics()
    for m in messages:
        for k, v in m.metrics.items():
            if k in _COUNTS:
                setattr(metrics, k, getattr(metrics, k) + v)
    return metrics
