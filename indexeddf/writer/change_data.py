"""Writing a commit's change data (Delta's change data feed): the rows a MERGE, UPDATE or
DELETE changed, each with its ``_change_type``, as Parquet files under ``_change_data/``
(in partition folders for a partitioned table, without the partition columns, as Delta
writes them), named by ``cdc`` actions of the same commit. Column-mapped tables' files use
the physical column names and field ids, as their data files do.

A file's rows are grouped by bucket (of the table's index columns, as data files are
bucketed) and ordered by the index columns within a bucket; a row group holds consecutive
buckets (a small change's few rows stay one group: each group costs every read of the file),
and the footer's :data:`~indexeddf.spec.change_data.ROW_GROUP_BUCKETS` names each group's
first and last bucket (a file of one bucket also carries it in the ``cdc`` action's tags, as
an ``add`` does). A read of some keys' changes (``IndexedTable.changes(keys=...)``) then
decodes only the row groups of its keys' buckets whose statistics admit a key, while the
whole feed stays a few files a commit (:class:`ChangeDataBuffer` gathers a change's rows).
The files stay Delta's: the table's columns plus ``_change_type``, nothing else."""

from __future__ import annotations

import io
import json
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..format.storage import TableStorage
from ..spec.actions import CdcFile
from ..spec.change_data import CHANGE_DATA_DIR, CHANGE_TYPE, ROW_GROUP_BUCKETS
from ..spec.column_mapping import physical_names, plain, to_physical
from ..spec.delta import TAG_BUCKET, TAG_SORTED
from ..spec.partitions import partition_dir
from .files import spark_orderable, split_by_bucket, split_by_partition

CHANGE_ROW_GROUP_ROWS = 16_384
"""Rows per row group of a change data file at most: a key's read decodes one group of its
bucket (a few hundred KB), however large the change."""
CHANGE_GROUP_MIN_ROWS = 4_096
"""Rows a row group gathers (from consecutive buckets) before the next bucket starts a new
one: reading a row group has a fixed cost (about what decoding 4,000 rows costs), which a
group a bucket would pay 32 times for a 1,000-row MERGE."""
CHANGE_BUFFER_BYTES = 64 << 20
"""Change data a change holds before writing it (:class:`ChangeDataBuffer`): a change
smaller than this writes one change data file (a partition), a larger one a file each time
this much has gathered, so memory stays bounded by it, not by the change."""


def write_change_data(storage: TableStorage, metadata, schema: pa.Schema, changes: list[pa.Table],
                      written: list[str]) -> list[CdcFile]:
    """Write ``changes`` (tables of the table's columns, named as ``schema``, the table's
    ``file_schema``, plus :data:`CHANGE_TYPE`) as change data files: one a partition, its
    rows grouped by bucket and ordered by key (see the module docstring). Each path is
    appended to ``written`` before its file is created (the transaction deletes them when it
    does not commit). The ``cdc`` actions."""
    changes = [c for c in changes if c.num_rows]
    if not changes:
        return []
    shape = pa.schema([*plain(schema), pa.field(CHANGE_TYPE, pa.string())])
    rows = pa.concat_tables([c.select(shape.names).cast(shape) for c in changes])
    parts = metadata.partitionColumns
    physical = physical_names(schema)
    out = []
    for values, part in (split_by_partition(rows, parts) if parts else [(None, rows)]):
        stored_values = {} if values is None else {physical.get(c, c): v for c, v in values.items()}
        folder = CHANGE_DATA_DIR if values is None else f"{CHANGE_DATA_DIR}/{partition_dir(list(stored_values), stored_values)}"
        path = f"{folder}/cdc-{uuid.uuid4()}.c000.snappy.parquet"
        pieces, ordered = _by_bucket(part, metadata)
        if parts:
            pieces = [(b, piece.drop_columns(list(parts))) for b, piece in pieces]
        data = _parquet([(b, to_physical(piece, schema)) for b, piece in pieces])
        written.append(path)
        storage.write_bytes(path, data)
        buckets = {b for b, _ in pieces}
        tags = None
        if len(buckets) == 1 and None not in buckets:
            tags = {TAG_BUCKET: str(next(iter(buckets))), **({TAG_SORTED: "true"} if ordered else {})}
        out.append(CdcFile(path=path, partitionValues=stored_values, size=len(data), tags=tags))
    return out


def _by_bucket(rows: pa.Table, metadata) -> tuple[list[tuple[int | None, pa.Table]], bool]:
    """The rows of each bucket, ordered by the index columns (by key hash where Arrow's
    order is not Spark's), and whether that order is the key's. A table without index
    columns (none to bucket by) keeps its rows as one piece of no bucket."""
    columns = list(metadata.indexColumns)
    if not columns or any(c not in rows.column_names for c in columns):
        return [(None, rows)], False
    ordered = spark_orderable(rows.schema, columns)
    return split_by_bucket(rows, columns, metadata.numBuckets, ordered), ordered


def _parquet(pieces: list[tuple[int | None, pa.Table]]) -> bytes:
    """One Parquet file of ``pieces`` (in bucket order), in row groups of consecutive buckets,
    each group's first and last bucket in the footer (:data:`ROW_GROUP_BUCKETS`)."""
    groups = _row_groups(pieces)
    ranges = [None if parts[0][0] is None else [parts[0][0], parts[-1][0]] for parts in groups]
    schema = pieces[0][1].schema.with_metadata({ROW_GROUP_BUCKETS: json.dumps(ranges)})
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, compression="snappy") as w:
        for parts in groups:
            rows = pa.concat_tables([p for _, p in parts]).replace_schema_metadata(schema.metadata)
            w.write_table(rows, row_group_size=max(1, rows.num_rows))  # one row group
    return buf.getvalue()


def _row_groups(pieces: list[tuple[int | None, pa.Table]]) -> list[list[tuple[int | None, pa.Table]]]:
    """The row groups of a file: slices of the pieces, at most :data:`CHANGE_ROW_GROUP_ROWS`
    rows each, a bucket joining the group before it while that has fewer than
    :data:`CHANGE_GROUP_MIN_ROWS` rows and room for it."""
    groups: list[list[tuple[int | None, pa.Table]]] = []
    rows = 0
    for b, piece in pieces:
        for at in range(0, piece.num_rows, CHANGE_ROW_GROUP_ROWS):
            part = piece.slice(at, CHANGE_ROW_GROUP_ROWS)
            if groups and rows < CHANGE_GROUP_MIN_ROWS and rows + part.num_rows <= CHANGE_ROW_GROUP_ROWS:
                groups[-1].append((b, part))
                rows += part.num_rows
            else:
                groups.append([(b, part)])
                rows = part.num_rows
    return groups


class ChangeDataBuffer:
    """A change's change data, gathered from the threads that handle its files and written
    in few files: when :data:`CHANGE_BUFFER_BYTES` have gathered, and at :meth:`flush`. A
    change touching every bucket then writes one file, not one a touched data file (the
    whole feed reads a few files a version)."""

    def __init__(self, storage: TableStorage, metadata, schema: pa.Schema, written: list[str],
                 limit: int = CHANGE_BUFFER_BYTES):
        self._storage, self._metadata, self._schema, self._written = storage, metadata, schema, written
        self._limit, self._lock = limit, threading.Lock()
        self._parts: list[pa.Table] = []
        self._bytes = 0
        self._actions: list[CdcFile] = []

    def add(self, changes: list[pa.Table]) -> None:
        """Keep ``changes`` (as :func:`write_change_data` takes them); write what has
        gathered once it reaches the limit."""
        full = None
        with self._lock:
            self._parts += [c for c in changes if c.num_rows]
            self._bytes += sum(c.nbytes for c in changes)
            if self._bytes >= self._limit:
                full, self._parts, self._bytes = self._parts, [], 0
        if full:
            actions = write_change_data(self._storage, self._metadata, self._schema, full, self._written)
            with self._lock:
                self._actions += actions

    def flush(self) -> list[CdcFile]:
        """Write what is left; the ``cdc`` actions of every file written."""
        with self._lock:
            rest, self._parts, self._bytes = self._parts, [], 0
        actions = write_change_data(self._storage, self._metadata, self._schema, rest, self._written)
        with self._lock:
            self._actions += actions
            return list(self._actions)
