"""Writing a commit's change data (Delta's change data feed): the rows a MERGE, UPDATE or
DELETE changed, each with its ``_change_type``, as Parquet files under ``_change_data/``
(in partition folders for a partitioned table, without the partition columns, as Delta
writes them), named by ``cdc`` actions of the same commit. Column-mapped tables' files use
the physical column names and field ids, as their data files do.

Each file holds the rows of one bucket (of the table's index columns, as data files are
bucketed), ordered by the index columns, with the bucket in the ``cdc`` action's tags as an
``add`` carries it: a read of some keys' changes (``IndexedTable.changes(keys=...)``) opens
only its keys' buckets' files, and only the row groups whose statistics admit a key. The
files stay Delta's: the table's columns plus ``_change_type``, nothing else."""

from __future__ import annotations

import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..format.storage import TableStorage
from ..spec.actions import CdcFile
from ..spec.change_data import CHANGE_DATA_DIR, CHANGE_TYPE
from ..spec.column_mapping import physical_names, plain, to_physical
from ..spec.delta import TAG_BUCKET, TAG_SORTED
from ..spec.partitions import partition_dir
from .files import spark_orderable, split_by_bucket, split_by_partition

CHANGE_ROW_GROUP_ROWS = 16_384
"""Rows per row group of a change data file: a key's read decodes one group of its bucket's
file (a few hundred KB), however large the change; small changes stay one group a file."""


def write_change_data(storage: TableStorage, metadata, schema: pa.Schema, changes: list[pa.Table],
                      written: list[str]) -> list[CdcFile]:
    """Write ``changes`` (tables of the table's columns, named as ``schema``, the table's
    ``file_schema``, plus :data:`CHANGE_TYPE`) as change data files: one a partition and
    bucket, its rows ordered by the index columns (see the module docstring). Each path is appended to ``written`` before its file is
    created (the transaction deletes them when it does not commit). The ``cdc`` actions."""
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
        for bucket, piece, tags in _by_bucket(part, metadata):
            path = f"{folder}/cdc-{uuid.uuid4()}.c000.snappy.parquet"
            if parts:
                piece = piece.drop_columns(list(parts))
            buf = io.BytesIO()
            pq.write_table(to_physical(piece, schema), buf, compression="snappy", row_group_size=CHANGE_ROW_GROUP_ROWS)
            data = buf.getvalue()
            written.append(path)
            storage.write_bytes(path, data)
            out.append(CdcFile(path=path, partitionValues=stored_values, size=len(data), tags=tags))
    return out


def _by_bucket(rows: pa.Table, metadata) -> list[tuple[int | None, pa.Table, dict[str, str] | None]]:
    """The rows of each bucket, ordered by the index columns (by key hash where Arrow's
    order is not Spark's), and the tags of their file: its bucket, and whether it is in key
    order. A table without index columns (none to bucket by) keeps one untagged file."""
    columns = list(metadata.indexColumns)
    if not columns or any(c not in rows.column_names for c in columns):
        return [(None, rows, None)]
    ordered = spark_orderable(rows.schema, columns)
    tags = {TAG_SORTED: "true"} if ordered else {}
    return [(b, piece, {TAG_BUCKET: str(b), **tags})
            for b, piece in split_by_bucket(rows, columns, metadata.numBuckets, ordered)]
