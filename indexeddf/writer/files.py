"""Row batches: bucket rows by the index columns and write one Parquet file per bucket."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import secrets
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..format.storage import TableStorage
from ..spec.actions import AddFile, FileStats
from ..spec.bucketing import bucket_ids, key_hash
from ..spec.schema import dictionary_columns

MAX_STRING_STAT = 64
"""String min/max longer than this are left out of the statistics (a cut max is wrong)."""
_WRITE_THREADS = 4


def new_data_file(bucket: int) -> tuple[str, int]:
    """A new row-batch file of ``bucket``: its unique relative path and its file id.

    The file id is 63 random bits, known before the commit (index files can refer to
    it) and unique with overwhelming probability; the transaction refuses a commit
    whose id is already in use.
    """
    u = uuid.uuid4()
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
    buckets = bucket_ids(columns, num_buckets)
    if by_key:
        key_order = pc.sort_indices(table.select(index_columns),
                                    sort_keys=[(c, "ascending", "at_start") for c in index_columns]).to_numpy()
        order = key_order[np.argsort(buckets[key_order], kind="stable")]  # both sorts are stable
    else:
        order = np.lexsort((key_hash(columns), buckets))  # lexsort is stable
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
) -> list[tuple[AddFile, pa.Table]]:
    """Write ``table`` as one Parquet file per touched bucket; each file's ``add`` action
    and its rows in file order (for indexing).

    Each path is appended to ``written`` before its file is created, so the caller can
    delete every file of a failed write.
    """
    ordered = spark_orderable(table.schema, index_columns)
    parts = split_by_bucket(table, index_columns, num_buckets, ordered)
    if not parts:
        return []
    per_group = rows_per_group(table, row_group_bytes)
    files = [new_data_file(b) for b, _ in parts]
    written.extend(path for path, _ in files)

    def write_one(i: int) -> tuple[AddFile, pa.Table]:
        bucket, rows = parts[i]
        return write_file(storage, files[i], bucket, rows, per_group, index_columns, ordered), rows

    if len(parts) == 1:
        return [write_one(0)]
    with ThreadPoolExecutor(min(_WRITE_THREADS, len(parts))) as pool:
        return list(pool.map(write_one, range(len(parts))))


def write_file(storage: TableStorage, file: tuple[str, int], bucket: int, rows: pa.Table, rows_per_group: int,
               bloom_columns: list[str] = (), ordered: bool = False) -> AddFile:
    """Write one row-batch file (``file``: path and id) and describe it as an ``add`` action;
    ``ordered`` says the rows are in index-column order (:func:`split_by_bucket`).

    ``bloom_columns`` (the table's index columns) get a Parquet bloom filter per row
    group, so any Parquet reader (Spark, DuckDB, Trino, ...) skips the row groups
    of a file that cannot hold a key it looks for, index or no index.
    """
    rel, file_id = file
    buf = io.BytesIO()
    pq.write_table(rows, buf, row_group_size=rows_per_group, compression="zstd",
                   # Dictionaries for strings only: numbers written plain are about as small
                   # under zstd, and decode faster (docs/benchmarks.md, data bytes per row).
                   use_dictionary=dictionary_columns(rows.schema),
                   bloom_filter_options=bloom_options(rows, bloom_columns, rows_per_group))
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


BLOOM_FPP = 0.01
"""False-positive rate of the bloom filters on index columns (about 1.2 bytes a distinct key)."""


def bloom_options(rows: pa.Table, columns, rows_per_group: int) -> dict | None:
    """pyarrow's ``bloom_filter_options`` for ``columns`` of ``rows``: each row group's
    filter sized for the distinct values it can hold (the file's distinct count, at most
    a row group's rows), at :data:`BLOOM_FPP`."""
    import pyarrow.compute as pc

    names = [c for c in columns if c in rows.column_names and not pa.types.is_boolean(rows.schema.field(c).type)]
    if not names or rows.num_rows == 0:
        return None
    return {c: {"ndv": max(1, min(pc.count_distinct(rows[c]).as_py(), rows_per_group)), "fpp": BLOOM_FPP} for c in names}


def rows_per_group(table: pa.Table, row_group_bytes: int) -> int:
    """Rows per Parquet row group so that one holds about ``row_group_bytes`` of ``table``."""
    bytes_per_row = max(1, table.nbytes // max(1, table.num_rows))
    return max(1, row_group_bytes // bytes_per_row)


def file_stats(rows: pa.Table) -> FileStats:
    """numRecords and, per column, min, max and null count, as Delta's ``stats``
    (PROTOCOL.md, "Statistics"): any Delta reader skips files with them, so a value
    is written only where its rendering is exact (see :func:`stat_value`)."""
    mins, maxs, nulls = {}, {}, {}
    for name, col in zip(rows.column_names, rows.columns):
        nulls[name] = col.null_count
        if col.null_count == len(col) or not _has_stats(col):
            continue
        mm = pc.min_max(col)
        lo, hi = stat_value(mm["min"].as_py()), stat_value(mm["max"].as_py())
        if lo is not None and hi is not None:
            mins[name], maxs[name] = lo, hi
    return FileStats(numRecords=rows.num_rows, minValues=mins, maxValues=maxs, nullCount=nulls)


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
