"""Indexing a Delta table that another engine wrote, in place (``IndexedTable.convert``).

Nothing of the data is rewritten. One commit adds indexeddf's settings to the table's
``metaData.configuration`` (index columns, bucket count, any properties given) and the
primary index over every live file. The files keep no bucket (they carry no
``indexeddf.bucket`` tag): readers treat each as holding rows of every bucket until
``optimize(mode="full")`` rewrites them into buckets. Other Delta writers may keep
appending; their files are unindexed appends, found by hybrid scans and indexed by
``refresh``.
"""

from __future__ import annotations

from ..errors import TableExistsError
from ..format.snapshot import Snapshot
from ..format.transaction import CommitResult, Transaction
from ..spec import config
from ..spec.actions import IndexEntry
from ..spec.features import check_writable
from . import lifecycle
from .index_files import INDEX_DIR, PRIMARY
from .index_ops import validate_columns
from .lifecycle import Progress
from .operations import check_num_buckets


def convert_table(snapshot: Snapshot, index_columns: list[str], num_buckets: int,
                  properties: dict[str, str] | None = None, progress: Progress = None) -> CommitResult:
    """Index the Delta table read as ``snapshot`` (loaded with ``unindexed_ok``) by
    ``index_columns`` into ``num_buckets`` buckets: one commit, the data untouched."""
    if snapshot.metadata.indexColumns:
        raise TableExistsError(
            f"{snapshot.storage.url} is already an indexeddf table (indexed by {list(snapshot.metadata.indexColumns)}); "
            "open it with IndexedTable.for_path"
        )
    check_num_buckets(num_buckets)
    columns = list(index_columns)
    validate_columns(snapshot, columns)
    check_writable(snapshot.protocol, snapshot.metadata, snapshot.storage.url)
    conf = {**snapshot.metadata.configuration, **config.validate(properties or {})}
    metadata = snapshot.metadata.model_copy(
        update={"indexColumns": tuple(columns), "numBuckets": num_buckets, "configuration": conf})
    entry = IndexEntry(name=PRIMARY, columns=tuple(columns), kind="primary", state="ACTIVE",
                       numBuckets=num_buckets, coveredVersion=snapshot.version)
    tx = Transaction(snapshot, "CONVERT", {"indexColumns": columns, "numBuckets": num_buckets}, read_buckets=())
    try:
        files = lifecycle.build_files(snapshot, entry, snapshot.live_files(), tx.written_paths,
                                      f"{INDEX_DIR}/{PRIMARY}", progress)
    except BaseException:
        tx.abort()
        raise
    entry = entry.model_copy(update={"files": tuple(files)})
    return tx.commit([metadata, entry], {"numIndexFiles": len(files), "numIndexedRows": sum(f.numEntries for f in files)})
