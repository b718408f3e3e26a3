"""Spark-free reads of a snapshot's row batches into Arrow.

Files without a deletion vector are read through ``pyarrow.dataset`` (parallel, with
projection and filter pushdown; in a partitioned table each file's ``partitionValues``
become its partition expression, which fills the partition columns and lets a filter
skip the files of other partitions). Without a filter, files with one are read in the
same dataset read and their deleted rows dropped per file (cut by the files' row
counts); with a filter, a file with one is read by
:func:`indexeddf.format.datafiles.read_live_rows`, which drops the rows it deletes (a
dataset cannot), and filtered in memory. A column-mapped table's files are all read that
way (a dataset cannot rename their physical columns). Rows come in file write order
either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafiles import INT96_UNIT, missing_file, read_live_rows
from ..format.deletion_vectors import keep_mask
from ..format.snapshot import Snapshot
from ..spec.actions import AddFile
from ..spec.column_mapping import is_mapped, plain, table_schema
from ..spec.partitions import partition_expression
from ..spec.schema import check_columns
from .cache import deletion_vector_rows


def read_snapshot(snapshot: Snapshot, columns: Sequence[str] | None = None, filter: pc.Expression | None = None) -> pa.Table:
    """The rows of ``snapshot`` (files in write order), optionally projected and filtered."""
    schema = table_schema(snapshot.metadata)
    check_columns(schema.names, columns)
    files = snapshot.live_files()
    wanted = list(columns) if columns is not None else None
    if not files:
        empty = plain(schema).empty_table()
        return empty.select(wanted) if wanted is not None else empty
    if is_mapped(snapshot.metadata.configuration):
        # Files name their columns physically (or by field id): each is read and renamed
        # by format/datafiles.py, which a dataset cannot do.
        return _read_with_deletions(snapshot, files, schema, wanted, filter)
    if filter is None and any(a.deletionVector is not None for a in files):
        whole = _read_all_then_order(snapshot, files, schema, wanted)
        if whole is not None:
            return whole
    # Consecutive files with (or without) deletion vectors are read together, so a
    # table without any is one dataset read, as fast as before.
    parts = []
    for has_dv, run in groupby(files, key=lambda a: a.deletionVector is not None):
        read = _read_with_deletions if has_dv else _read_dataset
        parts.append(read(snapshot, list(run), schema, wanted, filter))
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _read_all_then_order(snapshot: Snapshot, files: list[AddFile], schema: pa.Schema,
                         columns: list[str] | None) -> pa.Table | None:
    """Without a filter: every file in one dataset read (a table changed by many small
    merges has hundreds of small files, most with a deletion vector; a read per file
    costs more than its rows), cut back into files by their row counts (``numRecords``:
    a file's physical rows, deleted ones included), each file's deleted rows dropped.
    None when a count is unknown or the counts do not add up (then files are read one
    by one)."""
    counts = [a.stats.numRecords if a.stats is not None else None for a in files]
    if any(c is None for c in counts):
        return None
    rows = _read_dataset(snapshot, files, schema, columns, None)
    if rows.num_rows != sum(counts):
        return None
    # One mask over all the rows and one filter: a filter per file cost more than the
    # read of hundreds of small files.
    keep, at = np.ones(rows.num_rows, dtype=bool), 0
    for a, n in zip(files, counts):
        deleted = _deleted(snapshot, a)
        if deleted is not None:
            keep[at:at + n] = keep_mask(n, deleted)
        at += n
    return rows if keep.all() else rows.filter(pa.array(keep))


def _live_rows(snapshot: Snapshot, files: list[AddFile], schema: pa.Schema, columns: list[str] | None) -> list:
    """The live rows of each of ``files`` (each has a deletion vector), two files at a time
    (Parquet decoding releases the GIL), in order."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda a: read_live_rows(snapshot.storage, a, schema, columns, version=snapshot.version,
                                                      deleted=_deleted(snapshot, a)), files))


def _deleted(snapshot: Snapshot, a: AddFile):
    """The rows ``a``'s deletion vector deletes (from the process's cache), or None."""
    if a.deletionVector is None:
        return None
    return deletion_vector_rows(snapshot.storage, snapshot.metadata.id, a.deletionVector)


def _read_dataset(snapshot: Snapshot, files: list[AddFile], schema: pa.Schema, columns: list[str] | None,
                  filter: pc.Expression | None) -> pa.Table:
    """Every row of ``files`` through ``pyarrow.dataset``, deletion vectors not applied
    (callers pass files without one, or drop the deleted rows themselves)."""
    import pyarrow.dataset as ds  # imported on use: it pulls in pandas, slow to import

    storage = snapshot.storage
    # The dataset casts each file's columns to ``schema`` and reads absent ones as NULL,
    # as format/datafiles.py does for the other readers; INT96 in Delta's microseconds.
    parquet = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT))
    try:
        paths = [storage.full(a.path) for a in files]
        if snapshot.metadata.partitionColumns:
            dataset = ds.FileSystemDataset.from_paths(
                paths, schema=schema, format=parquet, filesystem=storage.arrow_filesystem(),
                partitions=[partition_expression(a.partitionValues, schema) for a in files])
        else:
            dataset = ds.dataset(paths, schema=schema, format=parquet, filesystem=storage.arrow_filesystem())
        return dataset.to_table(columns=columns, filter=filter)
    except (FileNotFoundError, IsADirectoryError):
        raise _first_missing(snapshot, files) from None


def _read_with_deletions(snapshot: Snapshot, files: list[AddFile], schema: pa.Schema, columns: list[str] | None,
                         filter: pc.Expression | None) -> pa.Table:
    """The live rows of ``files`` (with a deletion vector, or of a column-mapped table), projected and filtered in
    memory. Without a filter only ``columns`` are read (a filter may name any column);
    files are read two at a time (Parquet decoding releases the GIL), in order."""
    import pyarrow.dataset as ds

    read = columns if filter is None else None
    rows = pa.concat_tables(_live_rows(snapshot, files, schema, read))
    if filter is None:
        return rows
    return ds.dataset(rows).to_table(columns=columns, filter=filter)


def _first_missing(snapshot: Snapshot, files):
    """The typed error for the first of ``files`` that storage lacks."""
    storage = snapshot.storage
    gone = next((a.path for a in files if not storage.exists(a.path)), files[0].path)
    return missing_file(storage, gone, snapshot.version)
