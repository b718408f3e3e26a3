"""Reading the table's data files as the table's schema, whoever wrote them.

A Delta table's files need not hold the types the table declares: Spark writes
timestamps as INT96 (nanoseconds, no time zone) or as TIMESTAMP_MILLIS, other writers
store decimals as int32/int64 or dictionary-encode them, and a file written before a
column was added (by any engine) lacks that column. Every reader of the project (full
reads, lookups, hybrid scans, the Python data source, maintenance) reads through this
module, so every one of them returns the table's schema:

- a column the file lacks reads as NULL;
- a column of another physical type is cast to the table's type (nested ones field by
  field; timestamps to microseconds in UTC, as Delta defines ``timestamp``; INT96 is
  read as microseconds, so dates outside the nanosecond range do not overflow);
- a partitioned table's files lack the partition columns: each reads as the value the
  file's ``add.partitionValues`` names (``spec/partitions.py``), whatever the file holds;
- in a table with column mapping (``spec/column_mapping.py``) a file's columns have
  their physical names (or field ids): the schema readers pass is the table's
  :func:`~indexeddf.spec.column_mapping.file_schema`, which names them, and rows come
  back under the logical names, nested fields too, as do ``partitionValues`` (keyed by
  physical name);
- a file the log names but storage lacks raises :class:`MissingFileError` naming the
  file and the version;
- the rows a file's deletion vector deletes are not in the table: :func:`read_live_rows`
  drops them (:func:`live_mask` for readers that need the rows' ordinals in the file).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import MissingFileError
from ..spec.actions import AddFile
from ..spec.arrays import distinct
from ..spec.column_mapping import logical_column, physical_name, plain, resolve
from ..spec.partitions import constant_column
from ..spec.types import has_timestamp
from . import pages
from .deletion_vectors import keep_mask, read_deletion_vector
from .footers import CompactFooter, read_footer
from .storage import TableStorage

INT96_UNIT = "us"
"""The unit INT96 timestamps are read in: Delta's timestamps are microseconds."""

Columnar = pa.Table | pa.RecordBatch


def missing_file(storage: TableStorage, path: str, version: int | None) -> MissingFileError:
    """The typed error for a data file the log names at ``version`` but storage lacks."""
    at = f" at version {version}" if version is not None else ""
    return MissingFileError(
        f"{storage.full(path)} is missing, but the table's log names it{at}. It was deleted outside indexeddf, "
        "or by a vacuum of versions older than the retention: read a newer version, or restore the file."
    )


def read_named_file(storage: TableStorage, path: str, version: int | None = None) -> bytes:
    """The bytes of a file the log names (an index file, a staged list); a missing one
    raises :class:`MissingFileError` naming it and the version."""
    try:
        return storage.read_bytes(path)
    except (FileNotFoundError, IsADirectoryError):  # a folder where the log names a file: no file
        raise missing_file(storage, path, version) from None


def open_parquet(storage: TableStorage, path: str, version: int | None = None,
                 metadata: pq.FileMetaData | None = None, read_dictionary: Sequence[str] | None = None) -> pq.ParquetFile:
    """The data file ``path`` (relative to the table root) opened for reading; a missing
    file raises :class:`MissingFileError`. ``read_dictionary`` may name columns the file
    lacks when ``metadata`` (its footer) is given."""
    if read_dictionary and metadata is not None:
        present = set(metadata.schema.to_arrow_schema().names)
        read_dictionary = [c for c in read_dictionary if c in present]
    try:
        return pq.ParquetFile(storage.full(path), filesystem=storage.arrow_filesystem(), metadata=metadata,
                              read_dictionary=read_dictionary, coerce_int96_timestamp_unit=INT96_UNIT)
    except (FileNotFoundError, IsADirectoryError):  # a folder where the log names a file: no file
        raise missing_file(storage, path, version) from None


def open_footer(storage: TableStorage, path: str, version: int | None = None) -> CompactFooter:
    """The footer of the Parquet file ``path`` (relative to the table root), kept compact
    (:mod:`.footers`); a missing file raises :class:`MissingFileError`."""
    try:
        with storage.arrow_filesystem().open_input_file(storage.full(path)) as source:
            return read_footer(source)
    except (FileNotFoundError, IsADirectoryError):
        raise missing_file(storage, path, version) from None


def file_columns(pf: pq.ParquetFile, columns: Sequence[str], schema: pa.Schema) -> list[str]:
    """The file's names of those of ``columns`` (of ``schema``) that the file holds (a file
    may predate a column; a column-mapped table's files name them physically)."""
    found = (resolve(pf.schema_arrow, schema.field(c)) for c in columns)
    return [c for c in found if c is not None]


def read_file(storage: TableStorage, path: str, schema: pa.Schema, columns: Sequence[str] | None = None,
              version: int | None = None, partition: Mapping[str, str | None] | None = None,
              use_threads: bool = True) -> pa.Table:
    """Every row of one data file with ``columns`` (all when None), typed as ``schema``;
    ``partition``: the file's ``partitionValues`` (its add's). ``use_threads``: pyarrow decodes
    the columns on its threads; a caller reading files on threads of its own passes False."""
    wanted = list(schema.names if columns is None else columns)
    pf = open_parquet(storage, path, version)
    stored = _stored_columns(pf, wanted, schema, partition)
    if not stored and wanted:  # only partition columns: the row count is in the footer
        return conform(pa.table({"_": pa.nulls(pf.metadata.num_rows, pa.null())}), schema, wanted, partition=partition)
    return conform(pf.read(columns=stored, use_threads=use_threads), schema, wanted, partition=partition)


def _stored_columns(pf: pq.ParquetFile, wanted: list[str], schema: pa.Schema,
                    partition: Mapping[str, str | None] | None) -> list[str]:
    """The file's names of the ``wanted`` columns it holds (partition columns come from
    the log, not the file)."""
    return [c for c in file_columns(pf, wanted, schema) if not partition or c not in partition]


def read_live_rows(storage: TableStorage, add: AddFile, schema: pa.Schema, columns: Sequence[str] | None = None,
                   version: int | None = None, deleted: np.ndarray | None = None) -> pa.Table:
    """The rows of one data file that are in the table (its deletion vector's rows
    dropped), with ``columns`` (all when None), typed as ``schema``, in file order.
    ``deleted``: the rows of the file's deletion vector, when the caller has them."""
    rows = read_file(storage, add.path, schema, columns, version, add.partitionValues)
    if deleted is not None:
        return rows.filter(pa.array(keep_mask(rows.num_rows, deleted)))
    mask = live_mask(storage, add, rows.num_rows)
    return rows if mask is None else rows.filter(mask)


def iter_live_row_groups(storage: TableStorage, add: AddFile, schema: pa.Schema, columns: Sequence[str] | None = None,
                         version: int | None = None, deleted: np.ndarray | None = None, use_threads: bool = True,
                         min_rows: int = 0) -> Iterator[tuple[np.ndarray, pa.Table]]:
    """One data file's rows in the table, a Parquet row group at a time (memory bounded by
    a row group, not by the file): each group's live rows with ``columns`` (all when None),
    typed as ``schema``, and their ordinals in the file (int64, what a deletion vector and
    an index entry name). ``deleted``: the rows of the file's deletion vector, when the
    caller has read it already (else it is read here). ``use_threads``: pyarrow decodes a
    group's columns on its own threads; a caller that reads files on threads of its own
    passes False (two pools on two cores contend). ``min_rows``: consecutive row groups are
    read together until they hold at least this many rows (memory bounded by that many rows
    and a group): a caller that reads a few narrow columns pays each read's fixed cost less
    often."""
    wanted = list(schema.names if columns is None else columns)
    pf = open_parquet(storage, add.path, version)
    partition = add.partitionValues
    stored = _stored_columns(pf, wanted, schema, partition)
    rows_in_file = pf.metadata.num_rows  # the masks: a bit a row, not a file's rows
    mask = live_mask(storage, add, rows_in_file) if deleted is None else keep_mask(rows_in_file, deleted)
    start = 0
    for groups in _group_runs(pf.metadata, min_rows):
        n = sum(pf.metadata.row_group(i).num_rows for i in groups)
        if stored or not wanted:
            rows = pf.read_row_groups(groups, columns=stored, use_threads=use_threads)
        else:  # only partition columns: the row count is in the footer
            rows = pa.table({"_": pa.nulls(n, pa.null())})
        ordinals = np.arange(start, start + n, dtype=np.int64)
        rows = conform(rows, schema, wanted, partition=partition)
        if mask is not None:
            keep = mask[start:start + n]
            rows, ordinals = rows.filter(pa.array(keep)), ordinals[keep]
        start += n
        yield ordinals, rows


def _group_runs(meta, min_rows: int) -> Iterator[list[int]]:
    """The file's row groups in order, in runs of consecutive groups of at least ``min_rows``
    rows (the last run may hold fewer); a group alone when ``min_rows`` is 0."""
    run, rows = [], 0
    for i in range(meta.num_row_groups):
        run.append(i)
        rows += meta.row_group(i).num_rows
        if rows >= min_rows:
            yield run
            run, rows = [], 0
    if run:
        yield run


def read_rows_at(storage: TableStorage, add: AddFile, schema: pa.Schema, ordinals: np.ndarray,
                 version: int | None = None) -> pa.Table:
    """The rows of one data file at ``ordinals`` (their positions in the file, as a deletion
    vector names them), every column of ``schema``, in ascending ordinal order. Only the pages
    that hold one are decoded when the file has a page index with pages cut at the same rows in
    every column (:mod:`.pages`), else the row groups that hold one (memory bounded by those
    rows and a row group)."""
    wanted = distinct(np.asarray(ordinals, np.int64))
    pf = open_parquet(storage, add.path, version)
    stored = _stored_columns(pf, list(schema.names), schema, add.partitionValues)
    if not stored:  # every column from the log (partition values) or absent: only the count matters
        n = pf.metadata.num_rows
        if len(wanted) and wanted[-1] >= n:
            raise IndexError(f"{add.path} has {n} rows; a change named row {int(wanted[-1])}")
        return conform(pa.table({"_": pa.nulls(len(wanted), pa.null())}), schema, partition=add.partitionValues)
    meta = pf.metadata
    if not (meta.num_row_groups and meta.row_group(0).column(0).has_offset_index) or \
            len(wanted) * pages.SPARSE_ROWS > meta.num_rows:
        return _rows_by_groups(pf, add, schema, stored, wanted)  # no page index, or dense rows: the row groups
    with storage.arrow_filesystem().open_input_file(storage.full(add.path)) as source:
        try:
            rows = pages.rows_at(source, stored, wanted, _open_buffer)
        except IndexError as e:
            raise IndexError(f"{add.path}: {e}") from None
    return conform(rows if rows is not None else schema.empty_table(), schema, partition=add.partitionValues)


def _rows_by_groups(pf: pq.ParquetFile, add: AddFile, schema: pa.Schema, stored: list[str],
                    wanted: np.ndarray) -> pa.Table:
    """The rows at ``wanted`` (sorted, distinct) of a file read a row group at a time: only the
    row groups holding one (memory bounded by those rows and a row group)."""
    pieces, start, at = [], 0, 0
    for i in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(i).num_rows
        end = int(np.searchsorted(wanted, start + n))
        if end > at:
            group = pf.read_row_group(i, columns=stored)
            pieces.append(conform(group, schema, partition=add.partitionValues).take(pa.array(wanted[at:end] - start)))
        at, start = end, start + n
    if at != len(wanted):
        raise IndexError(f"{add.path} has {start} rows; a change named row {int(wanted[at])}")
    return pa.concat_tables(pieces) if pieces else conform(schema.empty_table(), schema)


def _open_buffer(data: pa.Buffer, metadata: pq.FileMetaData) -> pq.ParquetFile:
    """Parquet bytes in memory opened with their footer, as :func:`open_parquet` opens a file."""
    return pq.ParquetFile(pa.BufferReader(data), metadata=metadata, coerce_int96_timestamp_unit=INT96_UNIT)


def live_mask(storage: TableStorage, add: AddFile, num_rows: int) -> np.ndarray | None:
    """A boolean mask over the file's ``num_rows`` rows, True where a row is in the table;
    None when the file has no deletion vector (every row is)."""
    if add.deletionVector is None:
        return None
    return keep_mask(num_rows, read_deletion_vector(storage, add.deletionVector))


def conform(rows: Columnar, schema: pa.Schema, columns: Sequence[str] | None = None,
            keep_dictionary: bool = False, partition: Mapping[str, str | None] | None = None) -> Columnar:
    """``rows`` (a table or a batch read from one file) with exactly ``columns`` of
    ``schema`` (all when None) in that order and typed as the schema says: absent columns
    as NULL, other physical types cast. With ``keep_dictionary``, a dictionary-encoded
    column whose values already have the schema's type stays encoded (the lookup cache
    decodes only the rows it returns). ``partition``: the file's ``partitionValues``,
    which give its partition columns (a value for every row). The result has the logical
    names, and no field metadata, whatever names the file used."""
    names = list(schema.names if columns is None else columns)
    arrays = []
    for name in names:
        field = schema.field(name)
        physical = physical_name(field)
        if partition and physical in partition:
            arrays.append(constant_column(partition[physical], field.type, rows.num_rows, name))
            continue
        stored = resolve(rows.schema, field)
        if stored is None:
            arrays.append(pa.nulls(rows.num_rows, field.type))
            continue
        arrays.append(_as_type(logical_column(rows.column(stored), field), field.type, keep_dictionary))
    fields = list(plain(pa.schema([schema.field(n) for n in names])))
    if isinstance(rows, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    if keep_dictionary:  # the encoded columns keep their own (dictionary) type
        fields = [f.with_type(a.type) for f, a in zip(fields, arrays)]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _as_type(column, target: pa.DataType, keep_dictionary: bool):
    """``column`` as ``target``: unchanged when it already is (or is a dictionary of it and
    ``keep_dictionary``). Timestamps are cast unsafely: a finer unit (INT96's or Parquet's
    nanoseconds) is truncated to microseconds, as Spark reads it, and a file's naive
    timestamps are taken as UTC, as Delta readers take them."""
    t = column.type
    if t == target or (keep_dictionary and pa.types.is_dictionary(t) and t.value_type == target):
        return column
    # Nested columns cast field by field: Arrow matches struct fields by name and takes the
    # table's list and map field names (Spark and delta-rs name them otherwise).
    safe = not (has_timestamp(t) and has_timestamp(target))
    return column.cast(target, safe=safe)
