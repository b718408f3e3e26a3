"""Writing a commit's change data (Delta's change data feed): the rows a MERGE, UPDATE or
DELETE changed, each with its ``_change_type``, as Parquet files under ``_change_data/``
(in partition folders for a partitioned table, without the partition columns, as Delta
writes them), named by ``cdc`` actions of the same commit. Column-mapped tables' files use
the physical column names and field ids, as their data files do."""

from __future__ import annotations

import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..format.storage import TableStorage
from ..spec.actions import CdcFile
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
