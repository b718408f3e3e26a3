"""Writing a commit's change data (Delta's change data feed): the rows a MERGE, UPDATE or
DELETE changed, each with its ``_change_type``, as Parquet files under ``_change_data/``
(in partition folders for a partitioned table, without the partition columns, as Delta
writes them), named by ``cdc`` actions of the same commit. Column-mapped tables' files use
the physical column names and field ids, as their data files do."""

from __future__ import annotations

import io
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..format.storage import TableStorage
from ..spec.actions import CdcFile, RemoveFile
from ..spec.change_data import CHANGE_DATA_DIR, CHANGE_TYPE
from ..spec.column_mapping import physical_names, plain, to_physical
from ..spec.partitions import partition_dir
from .files import split_by_partition


def write_change_data(storage: TableStorage, metadata, schema: pa.Schema, changes: list[pa.Table],
                      written: list[str]) -> list[CdcFile]:
    """Write ``changes`` (tables of the table's columns, named as ``schema``, the table's
    ``file_schema``, plus :data:`CHANGE_TYPE`) as change data files: one a partition (one in
    all for an unpartitioned table). Each path is appended to ``written`` before its file is
    created (the transaction deletes them when it does not commit). The ``cdc`` actions."""
    changes = [c for c in changes if c.num_rows]
    if not changes:
        return []
    shape = pa.schema([*plain(schema), pa.field(CHANGE_TYPE, pa.string())])
    rows = pa.concat_tables([c.select(shape.names).cast(shape) for c in changes])
    parts = metadata.partitionColumns
    physical = physical_names(schema)
    out = []
    for values, piece in (split_by_partition(rows, parts) if parts else [(None, rows)]):
        stored_values = {} if values is None else {physical.get(c, c): v for c, v in values.items()}
        folder = CHANGE_DATA_DIR if values is None else f"{CHANGE_DATA_DIR}/{partition_dir(list(stored_values), stored_values)}"
        path = f"{folder}/cdc-{uuid.uuid4()}.c000.snappy.parquet"
        if parts:
            piece = piece.drop_columns(list(parts))
        buf = io.BytesIO()
        pq.write_table(to_physical(piece, schema), buf, compression="snappy")
        data = buf.getvalue()
        written.append(path)
        storage.write_bytes(path, data)
        out.append(CdcFile(path=path, partitionValues=stored_values, size=len(data)))
    return out


CHUNK_BYTES = 64 << 20
"""The change data a :class:`ChangeData` holds before it writes a file: the bound of its memory."""


class ChangeData:
    """A change's change data, gathered across the files it changes (from several threads) and
    written as few files: a file a partition each time :data:`CHUNK_BYTES` of rows gathered, and
    the rest at :meth:`flush`. One file a commit instead of one a changed data file: a reader of
    the feed opens each file (delta-rs, Spark and ``IndexedTable.changes`` alike), and the writer
    saves a file's write per changed file. Memory stays bounded by a chunk."""

    def __init__(self, storage: TableStorage, metadata, schema: pa.Schema, written: list[str]):
        self.storage, self.metadata, self.schema, self.written = storage, metadata, schema, written
        self._lock = threading.Lock()
        self._pending: list[pa.Table] = []
        self._bytes = 0

    def add(self, changes: list[pa.Table]) -> list[CdcFile]:
        """Gather ``changes`` (as :func:`write_change_data` takes them); the ``cdc`` actions of the
        files written when the gathered rows reached a chunk (none otherwise)."""
        changes = [c for c in changes if c.num_rows]
        with self._lock:
            self._pending += changes
            self._bytes += sum(c.nbytes for c in changes)
            if self._bytes < CHUNK_BYTES:
                return []
        return self.flush()

    def flush(self) -> list[CdcFile]:
        """Write what is gathered; its ``cdc`` actions."""
        with self._lock:
            pending, self._pending, self._bytes = self._pending, [], 0
        return write_change_data(self.storage, self.metadata, self.schema, pending, self.written)


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
