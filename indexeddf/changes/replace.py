"""A selective overwrite in one commit: Delta's ``replaceWhere``, delta-rs's
``write_deltalake(..., mode="overwrite", predicate=...)``.

The new rows must all make the predicate true (:mod:`indexeddf.spec.replace_where`).
What goes depends on the predicate:

- every top-level conjunct names partition columns only: the files whose partition
  values make it true are removed whole (no file is read), as Delta's metadata-only
  delete does;
- otherwise the rows it selects are deleted exactly as ``DELETE WHERE`` deletes them
  (the change engine: the index finds the files when the predicate fixes its columns,
  files are rewritten or given deletion vectors), reading only the files whose partition
  values do not rule the predicate out.

Either way the new rows are written (in their partitions and buckets, with the entries
of the maintained indexes) and committed with the removals as ONE ``WRITE`` commit, so
no reader sees the table without both. The transaction read every bucket: a concurrent
removal of a file it read fails it, blind appends rebase under ``WriteSerializable``.
"""

from __future__ import annotations

import time
from typing import Any

from ..format.snapshot import Snapshot
from ..format.transaction import ALL_BUCKETS, CommitResult, Transaction
from ..spec.actions import Txn
from ..spec.column_mapping import table_schema
from ..spec.constraints import checker_for
from ..spec.replace_where import ReplaceWhere, parse_replace_where
from ..spec.schema import arrow_schema
from ..writer.data import conform, to_arrow_table
from ..writer.operations import maintained_indexes, write_metrics, write_rows
from .clauses import DELETE, MATCHED, Clause
from .engine import execute
from .model import Change, Inserted
from .statements import fixed_keys


def parse(snapshot: Snapshot, predicate: str) -> ReplaceWhere:
    """``predicate`` parsed against the table of ``snapshot`` (typed errors)."""
    meta = snapshot.metadata
    return parse_replace_where(predicate, arrow_schema(meta.schema_), meta.partitionColumns)


def replace_where(snapshot: Snapshot, predicate: str, data: Any = None, written: Inserted | None = None,
                  txn: tuple[str, int] | None = None) -> CommitResult | None:
    """Replace the rows of ``snapshot``'s table that ``predicate`` (Spark SQL) selects with
    ``data`` (a pyarrow Table or pandas DataFrame; every row must make the predicate
    true), or with the files a Spark write's tasks wrote (``written``: they checked
    their rows). One commit; None when nothing was committed (nothing selected and
    nothing to write, or the ``txn`` was committed before)."""
    where = parse(snapshot, predicate)
    inserted = written or Inserted()
    if data is not None:
        rows = conform(to_arrow_table(data), snapshot.metadata.schema_)
        where.check_rows(rows)
        checker_for(snapshot.metadata).check(rows)
        inserted = Inserted(rows=rows)
    params = {"mode": "Overwrite", "predicate": predicate}
    if txn is not None:
        done = snapshot.txn_version(txn[0])
        if done is not None and done >= txn[1]:
            return CommitResult(snapshot.version, snapshot, duplicate=True)
        params.update(txnAppId=txn[0], txnVersion=txn[1])
    if where.partition_only:
        return _replace_files(snapshot, where, inserted, txn, params)
    schema = table_schema(snapshot.metadata)  # partitionValues are keyed by physical names when mapped
    change = Change("WRITE", params, [Clause(MATCHED, DELETE, predicate)], fixed=fixed_keys(predicate, snapshot),
                    txn=txn, inserted=inserted, candidates=lambda files: where.may_select(files, schema))
    result, _ = execute(snapshot, change)
    return result


def _replace_files(snapshot: Snapshot, where: ReplaceWhere, inserted: Inserted, txn, params) -> CommitResult | None:
    """The partition-only case: whole files out, the new rows in, one commit."""
    removed = where.selects(snapshot.live_files(), table_schema(snapshot.metadata))
    tx = Transaction(snapshot, "WRITE", params, read_buckets=ALL_BUCKETS)
    tx.written_paths.extend(inserted.written)
    adds, index_files = list(inserted.adds), dict(inserted.index_files)
    if inserted.rows is not None and inserted.rows.num_rows:
        try:
            adds, index_files = write_rows(snapshot.storage, snapshot.metadata, maintained_indexes(snapshot),
                                           inserted.rows, tx.written_paths)
        except BaseException:
            tx.abort()
            raise
    if not adds and not removed:
        tx.abort()
        return None
    now = int(time.time() * 1000)
    actions = [a.removal(now) for a in removed] + adds
    if txn is not None:
        actions.append(Txn(appId=txn[0], version=txn[1], lastUpdated=now))
    metrics = write_metrics(adds) | {
        "numRemovedFiles": len(removed), "numAddedFiles": len(adds),
        "numRemovedBytes": sum(a.size for a in removed),
    }
    return tx.commit(actions, metrics, {k: v for k, v in index_files.items() if v})

