"""Row batches: bucket rows by the index columns and write one Parquet file per bucket."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import secrets
import time
import uuid
from collections.abc import Container
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import SchemaMismatchError
from ..format.storage import TableStorage
from ..spec import config
from ..spec.actions import AddFile, FileStats
from ..spec.bucketing import bucket_ids, bucket_ids_and_key_hash
from ..spec.column_mapping import physical_names, to_physical
from ..spec.partitions import constant_column, partition_dir, serialize_value
from ..spec.schema import dictionary_columns

MAX_STRING_STAT = 64
"""String min/max longer than this are left out of the statistics (a cut max is wrong)."""
_WRITE_THREADS = 4


def new_data_file(bucket: int, directory: str | None = None) -> tuple[str, int]:
    """A new row-batch file of ``bucket``: its unique relative path and its file id.

    The file id is 63 random bits, known before the commit (index files can refer to
    it) and unique with overwhelming probability; the transaction refuses a commit
    whose id is already in use. ``directory``: a partitioned table's partition directory
    (``a=1/b=x``, as Delta writers lay files out), which replaces ``data/bucket=NNNNN``.
    """
    u = uuid.uuid4()
    if directory is not None:
        return f"{directory}/part-{u.hex}_{bucket:05d}.parquet", secrets.randbits(63)
    # The _NNNNN suffix is where Spark's bucketed file scans read a file's bucket from
    # (spark/bucketed.py); indexeddf itself takes it from the add action.
    return f"data/bucket={bucket:05d}/part-{u.hex}_{bucket:05d}.parquet", secrets.randbits(63)


def spark_orderable(schema: pa.Schema, columns: list[str]) -> bool:
    """Whether sorting ``columns`` with Arrow (ascending, nulls first) gives exactly Spark's
    ascending order: integers, decimals, booleans, dates, timestamps, and strings and
    binaries (both compare bytes, unsigned). Floating point is left out: Spark orders NaN
    last and -0.0 equal to 0.0, Arrow does not."""
    def ok(t: pa.DataType) -> bool:
        return (pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t) or pa.types.is_date(t)
                or pa.types.is_timestamp(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_binary(t) or pa.types.is_large_binary(t))
    return bool(columns) and all(ok(schema.field(c).type) for c in columns)


def split_by_bucket(table: pa.Table, index_columns: list[str], num_buckets: int,
                    by_key: bool) -> list[tuple[int, pa.Table]]:
    """The rows of each non-empty bucket, ordered within a bucket by the index columns when
    ``by_key`` (only for :func:`spark_orderable` columns; ties keep input order), else by the
    key hash.

    Both orders put every row of a key next to each other, so a lookup decodes one row
    group per key and file. Key order also lets a bucketed Spark scan of single-file
    buckets report its ordering, so a merge join on the key sorts only the other side
    (the ``indexeddf.sorted`` tag, PROTOCOL.md §4.3.1). Readers rely on the order only
    through that tag.
    """
    if table.num_rows == 0:
        return []
    columns = [table.column(c) for c in index_columns]
    if by_key:
        buckets = bucket_ids(columns, num_buckets)
        key_order = pc.sort_indices(table.select(index_columns),
                                    sort_keys=[(c, "ascending", "at_start") for c in index_columns]).to_numpy()
        order = key_order[np.argsort(buckets[key_order], kind="stable")]  # both sorts are stable
    else:
        buckets, hashes = bucket_ids_and_key_hash(columns, num_buckets)
        order = np.lexsort((hashes, buckets))  # lexsort is stable
    counts = np.bincount(buckets, minlength=num_buckets)
    ordered = table.take(pa.array(order))
    out, start = [], 0
    for b in np.flatnonzero(counts):
        n = int(counts[b])
        out.append((int(b), ordered.slice(start, n)))
        start += n
    return out


def write_bucketed_pieces(
    storage: TableStorage,
    table: pa.Table,
    index_columns: list[str],
    num_buckets: int,
    row_group_bytes: int,
    written: list[str],
    partition_columns: tuple[str, ...] = (),
    schema: pa.Schema | None = None,
    compression: str = "zstd",
    page_size: int = 0,
) -> list[tuple[AddFile, pa.Table]]:
    """Write ``table`` as one Parquet file per touched bucket (per partition and bucket in a
    table partitioned by ``partition_columns``); each file's ``add`` action and its rows in
    file order (for indexing; with the partition columns, which the file itself lacks).
    ``schema``: the table's ``file_schema`` (``spec/column_mapping.py``), whose physical
    names files, stats and ``partitionValues`` use in a column-mapped table. ``compression``:
    the Parquet codec (``indexeddf.parquet.compressionCodec``, :func:`codec_of`); ``page_size``:
    bytes a data page (:func:`page_options`).

    Each path is appended to ``written`` before its file is created, so the caller can
    delete every file of a failed write.
    """
    ordered = spark_orderable(table.schema, index_columns)
    parts = [(b, rows, None) for b, rows in split_by_bucket(table, index_columns, num_buckets, ordered)]
    if partition_columns:
        missing = [c for c in partition_columns if c not in table.column_names]
        if missing:
            raise SchemaMismatchError(
                f"the table is partitioned by {list(partition_columns)}: the rows lack partition column(s) {missing}, "
                "and a partitioned table keeps its partition columns", missing)
        parts = [(b, piece, values) for values, rows in split_by_partition(table, partition_columns)
                 for b, piece in split_by_bucket(rows, index_columns, num_buckets, ordered)]
    if not parts:
        return []
    per_group = rows_per_group(table, row_group_bytes)
    physical = physical_names(schema) if schema is not None else {}
    stored_values = [None if v is None else {physical.get(c, c): t for c, t in v.items()} for _, _, v in parts]
    files = [new_data_file(b) if v is None else new_data_file(b, partition_dir(list(v), v))
             for (b, _, _), v in zip(parts, stored_values)]
    written.extend(path for path, _ in files)

    def write_one(i: int) -> tuple[AddFile, pa.Table]:
        bucket, rows, values = parts[i]
        if values is None:
            return write_file(storage, files[i], bucket, rows, per_group, index_columns, ordered, schema,
                              compression, page_size), rows
        # Delta's layout: a partitioned table's files hold no partition column; the add's
        # partitionValues give every row's value.
        stored = rows.drop_columns(list(partition_columns))
        add = write_file(storage, files[i], bucket, stored, per_group, index_columns, ordered, schema, compression,
                         page_size)
        # The rows as readers will see them (an empty string partition reads as NULL).
        for c in partition_columns:
            at = rows.schema.get_field_index(c)
            rows = rows.set_column(at, rows.schema.field(at), constant_column(values[c], rows.schema.field(at).type,
                                                                              rows.num_rows, c))
        return add.model_copy(update={"partitionValues": stored_values[i]}), rows

    if len(parts) == 1:
        return [write_one(0)]
    with ThreadPoolExecutor(min(_WRITE_THREADS, len(parts))) as pool:
        return list(pool.map(write_one, range(len(parts))))


def split_by_partition(table: pa.Table, columns: tuple[str, ...]) -> list[tuple[dict[str, str | None], pa.Table]]:
    """The rows of each partition of ``table`` (by ``columns``), with the partition's values
    serialized as Delta's ``partitionValues`` (NULL, empty strings and empty binaries are NULL),
    in order of first appearance; rows keep their order within a partition."""
    serialized = list(zip(*[[serialize_value(v, table.schema.field(c).type) for v in table.column(c).to_pylist()]
                            for c in columns]))
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(serialized):
        groups.setdefault(key, []).append(i)
    return [(dict(zip(columns, key)), table.take(pa.array(rows, pa.int64()))) for key, rows in groups.items()]


def write_file(storage: TableStorage, file: tuple[str, int], bucket: int, rows: pa.Table, rows_per_group: int,
               bloom_columns: list[str] = (), ordered: bool = False, schema: pa.Schema | None = None,
               compression: str = "zstd", page_size: int = 0) -> AddFile:
    """Write one row-batch file (``file``: path and id) and describe it as an ``add`` action;
    ``ordered`` says the rows are in index-column order (:func:`split_by_bucket`).
    ``schema``: the table's ``file_schema``; in a column-mapped table the file's columns and
    the stats take the physical names, and each column its Parquet field id. ``compression``:
    the Parquet codec (:func:`codec_of`); ``page_size``: bytes a data page (:func:`page_options`).

    ``bloom_columns`` (the table's index columns) get a Parquet bloom filter per row
    group, so any Parquet reader (Spark, DuckDB, Trino, ...) skips the row groups
    of a file that cannot hold a key it looks for, index or no index.
    """
    rel, file_id = file
    if schema is not None:
        names = physical_names(schema)
        rows, bloom_columns = to_physical(rows, schema), [names.get(c, c) for c in bloom_columns]
    buf = io.BytesIO()
    pq.write_table(rows, buf, row_group_size=rows_per_group, compression=compression,
                   # Dictionaries for strings only: numbers written plain are about as small
                   # under zstd, and decode faster (docs/benchmarks.md, data bytes per row).
                   use_dictionary=repeating_columns(rows.slice(0, rows_per_group), dictionary_columns(rows.schema)),
                   column_encoding=delta_encoded(rows.schema, bloom_columns),
                   bloom_filter_options=bloom_options(rows, bloom_columns, rows_per_group, ordered),
                   **page_options(page_size))
    data = buf.getvalue()
    storage.write_bytes(rel, data)
    return AddFile(
        path=rel,
        size=len(data),
        modificationTime=int(time.time() * 1000),
        bucket=bucket,
        fileId=file_id,
        stats=file_stats(rows),
        sorted=ordered,
    )


def codec_of(configuration: dict[str, str]) -> str:
    """The codec a table's new data files are written with (its
    ``indexeddf.parquet.compressionCodec``, as pyarrow names it)."""
    return config.get(configuration, "indexeddf.parquet.compressionCodec")


def page_size_of(configuration: dict[str, str]) -> int:
    """Bytes of a data page of new data files (``indexeddf.parquet.pageSize``; 0: the writer's
    default pages, no page index)."""
    return config.get(configuration, "indexeddf.parquet.pageSize")


def page_options(page_size: int) -> dict:
    """The Parquet writer's options for data pages of about ``page_size`` bytes (0: its default
    pages), with the page index, which tells a reader where each page of a column starts and its
    first row: :mod:`indexeddf.format.pages` then reads a few rows by their pages. The writer
    ends a page once a batch of rows (1,024) brings it past the size: a column of 64-character
    strings gets pages of 1,024 rows at 64 KB, a sorted key column pages of whole row groups."""
    if not page_size:
        return {}
    return {"write_page_index": True, "data_page_size": page_size}


def repeating_columns(rows: pa.Table, columns: list[str]) -> list[str]:
    """Those of ``columns`` (string and binary) whose values repeat in ``rows`` (at most half
    of them distinct; a writer passes its first row group): a dictionary pays there. Of a
    column of mostly distinct values (ids, hashes, free text) Parquet writers build a
    dictionary a row group holds whole, which for 64-character random strings makes the
    file's encoding about half slower, the file larger and its decoding twice as slow."""
    return [c for c in columns if pc.count_distinct(rows.column(c)).as_py() * 2 <= max(1, rows.num_rows)]


def delta_encoded(schema: pa.Schema, key_columns) -> dict[str, str] | None:
    """Parquet's ``DELTA_BINARY_PACKED`` for the integer index columns (every Parquet reader
    decodes it: Spark's vectorized reader, DuckDB, delta-rs): a bucket's file is in key
    order, so the differences are small. A change, a lookup and a join read these columns
    of every row group they touch; at 625,000 rows a file, the key column takes 0.55 MB
    instead of 0.8 MB and decodes in half the time (5.3 ms against 10.6 ms)."""
    columns = {c: "DELTA_BINARY_PACKED" for c in key_columns
               if c in schema.names and pa.types.is_integer(schema.field(c).type)}
    return columns or None


BLOOM_FPP = 0.01
"""False-positive rate of the bloom filters on index columns (about 1.2 bytes a distinct key)."""


def bloom_options(rows: pa.Table, columns, rows_per_group: int, ordered: bool = False) -> dict | None:
    """pyarrow's ``bloom_filter_options`` for ``columns`` of ``rows``: each row group's
    filter sized for the distinct values it can hold (the file's distinct count, at most
    a row group's rows), at :data:`BLOOM_FPP`. ``ordered``: the rows are in the order of
    ``columns`` (:func:`split_by_bucket`), so the first column's distinct values are counted
    in one pass over neighbours instead of a hash table."""
    names = [c for c in columns if c in rows.column_names and not pa.types.is_boolean(rows.schema.field(c).type)]
    if not names or rows.num_rows == 0:
        return None
    first = columns[0] if ordered and columns else None
    return {c: {"ndv": max(1, min(_distinct(rows[c], c == first), rows_per_group)), "fpp": BLOOM_FPP} for c in names}


def _distinct(column: pa.ChunkedArray, ordered: bool) -> int:
    """The number of distinct non-null values of ``column`` (``ordered``: equal values are
    neighbours). A bloom filter's size only, so NULLs may count as one more value."""
    if not ordered or len(column) < 2:
        return pc.count_distinct(column).as_py()
    values = column.combine_chunks()
    changes = pc.sum(pc.not_equal(values.slice(1), values.slice(0, len(values) - 1))).as_py()
    return 1 + (changes or 0)


def rows_per_group(table: pa.Table, row_group_bytes: int) -> int:
    """Rows per Parquet row group so that one holds about ``row_group_bytes`` of ``table``."""
    bytes_per_row = max(1, table.nbytes // max(1, table.num_rows))
    return max(1, row_group_bytes // bytes_per_row)


def file_stats(rows: pa.Table) -> FileStats:
    """numRecords and, per column, min, max and null count, as Delta's ``stats``
    (PROTOCOL.md, "Statistics"): any Delta reader skips files with them, so a value
    is written only where its rendering is exact (see :func:`stat_value`). Struct, array
    and map columns get none: Delta nests a struct's statistics per leaf, and nothing
    prunes by them (index and partition columns are top-level primitives)."""
    stats = StatsAccumulator()
    stats.add(rows)
    return stats.stats()


class StatsAccumulator:
    """A file's :func:`file_stats` gathered a batch of rows at a time, for a file written
    in pieces (the same statistics as of all its rows at once)."""

    def __init__(self) -> None:
        self.num_records = 0
        self.nulls: dict[str, int] = {}
        self.bounds: dict[str, tuple] = {}
        self.without: set[str] = set()
        """Columns some batch of which has no statistic (e.g. a NaN): none for the file."""

    def add(self, rows: pa.Table, footer: Container[str] = ()) -> None:
        """Take ``rows`` into the statistics; the columns in ``footer`` are taken later from the
        file's footer (:meth:`add_footer`), not from the rows."""
        self.num_records += rows.num_rows
        for name, col in zip(rows.column_names, rows.columns):
            if pa.types.is_nested(col.type) or name in footer:
                continue
            self.nulls[name] = self.nulls.get(name, 0) + col.null_count
            if name in self.without or col.null_count == len(col):
                continue
            if not _has_stats(col):
                self.without.add(name)
                continue
            self.add_bounds(name, col)

    def add_bounds(self, name: str, col: pa.ChunkedArray) -> None:
        """Take the min and max of ``col`` (a column with statistics) into ``name``'s bounds."""
        if col.null_count < len(col):
            mm = pc.min_max(col)
            self._bound(name, mm["min"].as_py(), mm["max"].as_py())

    def add_footer(self, metadata: pq.FileMetaData, columns: dict[str, int]) -> dict[str, list[int]]:
        """Take the null counts and bounds of ``columns`` (:func:`footer_stats_columns`: each
        top-level column's Parquet column index) from the footer of the file the rows were
        written to: the Parquet writer computed them already, row group by row group. Returns,
        per column, the row groups holding a value but no bounds there (a string longer than
        :data:`FOOTER_STAT_BYTES`): the caller reads those back into :meth:`add_bounds`."""
        missing: dict[str, list[int]] = {}
        for name, at in columns.items():
            for g in range(metadata.num_row_groups):
                group = metadata.row_group(g)
                st = group.column(at).statistics
                self.nulls[name] = self.nulls.get(name, 0) + st.null_count
                if st.has_min_max:
                    self._bound(name, st.min, st.max)
                elif st.null_count < group.num_rows:
                    missing.setdefault(name, []).append(g)
        return missing

    def _bound(self, name: str, lo, hi) -> None:
        if name in self.bounds:
            lo, hi = min(lo, self.bounds[name][0]), max(hi, self.bounds[name][1])
        self.bounds[name] = (lo, hi)

    def stats(self) -> FileStats:
        """The statistics of every row taken so far."""
        mins, maxs = {}, {}
        for name, (lo, hi) in self.bounds.items():
            lo, hi = stat_value(lo), stat_value(hi)
            if name not in self.without and lo is not None and hi is not None:
                mins[name], maxs[name] = lo, hi
        return FileStats(numRecords=self.num_records, minValues=mins, maxValues=maxs, nullCount=dict(self.nulls))


FOOTER_STAT_BYTES = 4096
"""The longest value whose bounds the Parquet writer puts in the footer (its
``max_statistics_size``): a row group with a longer string has none there."""


def footer_stats_columns(schema: pa.Schema) -> dict[str, int]:
    """The columns of ``schema`` whose statistics a file written in pieces takes from its
    footer (:meth:`StatsAccumulator.add_footer`), each with its Parquet column index (a
    nested column before it takes one a leaf): signed integers, dates and strings, whose
    Parquet bounds are Arrow's min and max (strings compared as unsigned bytes, as both do).
    Computed again from the rows, a piece at a time, they cost a sixth of a copied file's
    write on a table of 64-character strings."""
    def ok(t: pa.DataType) -> bool:
        return pa.types.is_signed_integer(t) or pa.types.is_date32(t) or pa.types.is_string(t) \
            or pa.types.is_large_string(t)
    out, leaf = {}, 0
    for f in schema:
        if ok(f.type):
            out[f.name] = leaf
        leaf += _leaves(f.type)
    return out


def _leaves(t: pa.DataType) -> int:
    """The Parquet (leaf) columns a column of type ``t`` is stored as."""
    if pa.types.is_struct(t):
        return sum(_leaves(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaves(t.key_type) + _leaves(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaves(t.value_type)
    return 1


def _has_stats(col) -> bool:
    """Columns whose min/max go into the stats: not binary, boolean or decimal (Delta
    renders decimals as JSON numbers, which a float would round), and floats only
    without NaN (min_max skips NaN, which Spark orders above every number)."""
    t = col.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return False
    if pa.types.is_floating(t):
        return not pc.any(pc.is_nan(col)).as_py()
    return True


def stat_value(v):
    """The JSON rendering of a statistic (Delta's), or None when it has none."""
    try:
        return _stat_value(v)
    except (OverflowError, ValueError):
        return None  # e.g. a date beyond what Python renders: no statistic rather than no write


def _stat_value(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        return None
    if isinstance(v, dt.datetime):
        # Microseconds, never cut to milliseconds: a cut max would let readers skip a
        # file holding the value. UTC instants end in Z; timestamp_ntz has no zone.
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc)
        text = v.replace(tzinfo=None).isoformat(timespec="microseconds")
        return text + "Z" if v.tzinfo is not None else text
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, str):
        return v if len(v) <= MAX_STRING_STAT else None
    return v
