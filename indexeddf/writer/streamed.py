"""Data files written a row group at a time: the rows a change keeps of a file, copied
into a new file without holding either file in memory.

A copy-on-write change removes each file holding a changed row and writes the rows it
keeps as a new file. Read whole, a bucket's file is what bounds the change's memory, and
a bucket's file grows with the table (1.9M rows a bucket at 60M rows and 32 buckets).
Copied a row group at a time, memory is bounded by a row group: the kept rows stay in
their bucket, partition and order, so the new file is the old one minus the changed rows
(``indexeddf.sorted`` kept), and its index entries are the old file's, minus the dropped
rows, at the kept rows' new ordinals (no key hashed again).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..format.datafiles import iter_live_row_groups, open_parquet
from ..format.deletion_vectors import read_deletion_vector
from ..format.storage import TableStorage
from ..spec import config
from ..spec.actions import AddFile, IndexEntry, IndexFile, Metadata
from ..spec.column_mapping import physical_names, to_physical
from ..spec.deletion_vectors import unique_sorted
from ..spec.partitions import partition_dir
from ..spec.schema import dictionary_columns
from .files import (
    BLOOM_FPP,
    StatsAccumulator,
    codec_of,
    delta_encoded,
    footer_stats_columns,
    new_data_file,
    page_options,
    page_size_of,
    repeating_columns,
    rows_per_group,
)
from .index_files import DataPiece, build_index_files, carried_entries


class StreamedFile:
    """One new data file of ``bucket`` written in pieces (:meth:`write`, then :meth:`close`),
    with the statistics, bloom filters and row groups :func:`files.write_file` gives a file
    written at once. ``schema``: the rows' (logical names), with the table's column mapping
    (``spec/column_mapping.py``) when it has one: the file then stores physical names and
    field ids, as every file of such a table does. The Parquet writer opens with the first
    rows, so a file that gets none is never created."""

    def __init__(self, storage: TableStorage, file: tuple[str, int], bucket: int, schema: pa.Schema,
                 row_group_bytes: int, bloom_columns, expected_rows: int, ordered: bool, compression: str = "zstd",
                 page_size: int = 0):
        self.storage, (self.path, self.file_id), self.bucket = storage, file, bucket
        self.schema, self.row_group_bytes, self.ordered = schema, row_group_bytes, ordered
        self.compression, self.page_size = compression, page_size
        names = physical_names(schema)
        self.bloom_columns = [names.get(c, c) for c in bloom_columns if c in schema.names
                              and not pa.types.is_boolean(schema.field(c).type)]
        self.stored = to_physical(schema.empty_table(), schema).schema
        self.expected_rows = max(1, expected_rows)
        self.stats = StatsAccumulator()
        # Statistics the Parquet writer computes anyway are taken from the footer at close.
        self._footer = footer_stats_columns(self.stored)
        self._sink = self._writer = None
        self._per_group = 0
        self._pending: list[pa.Table] = []  # rows :meth:`append` holds until a row group is full
        self._pending_rows = 0

    def write(self, rows: pa.Table) -> None:
        """Append ``rows`` (of :attr:`schema`) to the file."""
        if rows.num_rows == 0:
            return
        rows = to_physical(rows, self.schema)
        if self._writer is None:
            self._open(rows)
        self._writer.write_table(rows, row_group_size=self._per_group)
        self.stats.add(rows, footer=self._footer)

    def append(self, rows: pa.Table) -> None:
        """Append ``rows`` (of :attr:`schema`), held until they fill a whole row group (the
        rest at :meth:`close`): for a caller whose pieces are smaller than a row group, where
        :meth:`write` would make each piece a row group of its own."""
        if rows.num_rows == 0:
            return
        if not self._per_group:  # sized by the first rows, as write sizes them
            self._per_group = rows_per_group(rows, self.row_group_bytes)
        self._pending.append(rows)
        self._pending_rows += rows.num_rows
        if self._pending_rows < self._per_group:
            return
        held = pa.concat_tables(self._pending)
        full = held.num_rows - held.num_rows % self._per_group
        self.write(held.slice(0, full))
        self._pending = [held.slice(full)] if full < held.num_rows else []
        self._pending_rows = held.num_rows - full

    def _open(self, first: pa.Table) -> None:
        if not self._per_group:
            self._per_group = rows_per_group(first, self.row_group_bytes)
        # Sized for the distinct keys a row group can hold, as write_file sizes them.
        ndv = max(1, min(self.expected_rows, self._per_group))
        bloom = {c: {"ndv": ndv, "fpp": BLOOM_FPP} for c in self.bloom_columns} or None
        self._sink = self.storage.open_output(self.path)
        self._writer = pq.ParquetWriter(self._sink, self.stored, compression=self.compression,
                                        use_dictionary=repeating_columns(first, dictionary_columns(self.stored)),
                                        column_encoding=delta_encoded(self.stored, self.bloom_columns),
                                        bloom_filter_options=bloom, **page_options(self.page_size))

    def close(self) -> AddFile | None:
        """Finish the file: its ``add`` action, or None when no row was written."""
        if self._pending:
            self.write(pa.concat_tables(self._pending))
            self._pending, self._pending_rows = [], 0
        if self._writer is None:
            return None
        self._writer.close()
        missing = self.stats.add_footer(self._writer.writer.metadata, self._footer)
        size = self._sink.tell()
        self._sink.close()
        if missing:  # strings too long for the footer: those row groups' columns read back
            written = open_parquet(self.storage, self.path)
            for name, groups in missing.items():
                for g in groups:
                    # By its column index: a name with a dot would read as a nested column's path.
                    column = written.reader.read_row_group(g, column_indices=[self._footer[name]]).column(0)
                    self.stats.add_bounds(name, column)
        return AddFile(path=self.path, size=size, modificationTime=int(time.time() * 1000),
                       bucket=self.bucket, fileId=self.file_id, stats=self.stats.stats(), sorted=self.ordered)

    def abort(self) -> None:
        """Close what is open after a failure (the caller deletes the written paths)."""
        for closing in (self._writer, self._sink):
            if closing is not None:
                try:
                    closing.close()
                except Exception:  # noqa: BLE001 - the failure being handled is the one to report
                    pass


def copy_kept_rows(storage: TableStorage, metadata: Metadata, indexes: list[IndexEntry], add: AddFile,
                   schema: pa.Schema, drop: np.ndarray, written: list[str], version: int | None = None,
                   use_threads: bool = True) -> tuple[AddFile | None, dict[str, list[IndexFile]], int]:
    """Copy the live rows of ``add`` (a bucketed file) but those at the ordinals ``drop``
    into a new file of the same bucket and partition, a row group at a time, with its
    entries in each of ``indexes``; ``schema``: the table's after the change (columns it
    adds are written as NULL). Returns the new file's ``add`` (None when no row is kept),
    its index files, and the number of rows copied."""
    partition = tuple(metadata.partitionColumns)
    stored = pa.schema([f for f in schema if f.name not in partition])
    # The file's own values: keyed by physical names in a column-mapped table, as its folder is.
    directory = partition_dir(list(add.partitionValues), add.partitionValues) if partition else None
    file = new_data_file(add.bucket, directory)
    written.append(file[0])
    out = StreamedFile(storage, file, add.bucket, stored, config.get(metadata.configuration,
                       "indexeddf.targetRowGroupBytes"), metadata.indexColumns, add.stats.numRecords
                       if add.stats is not None else 0, add.sorted, codec_of(metadata.configuration),
                       page_size_of(metadata.configuration))
    # Indexes holding the file's entries carry them over; any other hashes the kept keys.
    hashed = [i for i in indexes if not any(add.fileId in f.fileIds for f in i.files)]
    key_columns = [c for c in schema.names if any(c in i.columns for i in hashed)]
    keys, copied = [], 0
    # The file's deletion vector, read once: the row groups leave its rows out, and the
    # carried index entries drop them too.
    deleted = None
    if add.deletionVector is not None:
        deleted = read_deletion_vector(storage, add.deletionVector).astype(np.int64)
    dropped = unique_sorted(drop.astype(np.int64))
    gone = np.zeros(int(dropped[-1]) + 1 if dropped.size else 0, dtype=bool)
    gone[dropped] = True
    try:
        for ordinals, rows in iter_live_row_groups(storage, add, schema, version=version, deleted=deleted,
                                                   use_threads=use_threads):
            near = ordinals[ordinals < len(gone)]
            if near.size and gone[near].any():
                keep = np.ones(len(ordinals), dtype=bool)
                keep[:len(near)] = ~gone[near]  # ordinals ascend: the ones below len(gone) come first
                rows = rows.filter(pa.array(keep))
            out.write(rows.select(stored.names))
            if hashed:
                keys.append(rows.select(key_columns))
            copied += rows.num_rows
        new = out.close()
    except BaseException:
        out.abort()
        raise
    if new is None:
        return None, {}, 0
    if partition:
        new = new.model_copy(update={"partitionValues": dict(add.partitionValues)})
    if deleted is not None:  # rows deleted before are not in the copy either
        dropped = np.union1d(dropped, deleted)
    index_files = {i.name: carried_entries(storage, i.name, i.files, add.fileId, new.fileId, dropped, written, version)
                   for i in indexes if i not in hashed}
    if hashed:
        piece = [DataPiece(new.fileId, pa.concat_tables(keys))]  # the keys only: 8 bytes a row for a bigint key
        index_files |= {i.name: build_index_files(storage, i.name, list(i.columns), i.numBuckets, piece, written)
                        for i in hashed}
    return new, index_files, copied
