"""A connector point lookup reads its few rows of a data row group straight from the pages
(``DataPages.java``) and gives exactly what Spark's own Parquet reader gives: files of the
project's writer, and the same rows rewritten by pyarrow with other settings (data pages v1
and v2, dictionaries on and off and given up mid-chunk, DELTA encodings, RLE booleans, no
compression, snappy, zstd, gzip, many small pages a row group, required columns). Keys are
chosen at the start, middle and end of every row group and in the file's last page.

Spark is the oracle: ``spark.read.parquet`` of the same data files, read once a table (the
lookup with a condition on another column filtered by Spark the same way). The
connector's counter of data row group reads (``Diagnostics.dataGroupReads()``: by pages, by
Spark's reader after the page path declined) shows which path answered: the supported files
never fall back, the unsupported ones (a type Spark's reader converts, an encoding not read
here, a file whose dates and timestamps Spark's reader rebases) always do, and still answer the same.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connector_helpers import jvm_cache_clear, jvm_diagnostic
from connector_helpers import read as load

import indexeddf
from indexeddf import IndexedTable

pytestmark = pytest.mark.spark

N = 3000


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


def _rows(n: int, seed: int = 0) -> pa.Table:
    """Every type the page path reads, with NULLs in all but ``k``, ``i8`` and ``u``; keys in
    pairs (``k = i // 2``): a key's two rows may straddle a row group's or a page's end."""
    rng = np.random.default_rng(seed)

    def nulls(values, every, t):
        return pa.array([None if i % every == 0 else v for i, v in enumerate(values)], t)

    doubles = rng.normal(size=n)
    doubles[5], doubles[7], doubles[8] = math.nan, -0.0, math.inf  # not at multiples of 3 (NULLs)
    return pa.table({
        "k": pa.array([i // 2 for i in range(n)], pa.int64()),
        "i32": nulls(rng.integers(-2**31, 2**31, n).tolist(), 7, pa.int32()),
        "i16": nulls(rng.integers(-2**15, 2**15, n).tolist(), 11, pa.int16()),
        "i8": pa.array(rng.integers(-128, 128, n).tolist(), pa.int8()),
        "l": nulls(rng.integers(-2**62, 2**62, n).tolist(), 5, pa.int64()),
        "f": nulls(rng.random(n).astype(np.float32).tolist(), 13, pa.float32()),
        "d": nulls(doubles.tolist(), 3, pa.float64()),
        "b": nulls([i % 3 != 0 for i in range(n)], 17, pa.bool_()),
        "s": nulls([f"s{i % 10}" for i in range(n)], 4, pa.string()),  # repeating: the writer's dictionary
        "u": pa.array([f"unique-{i}-{'x' * (i % 23)}-é{rng.integers(1 << 40)}" for i in range(n)], pa.string()),
        "bin": nulls([bytes(rng.integers(0, 256, i % 20).astype(np.uint8)) for i in range(n)], 9, pa.binary()),
        "day": nulls([dt.date(1970, 1, 1) + dt.timedelta(days=int(x)) for x in rng.integers(-20000, 20000, n)], 6,
                     pa.date32()),
        "ts": nulls([dt.datetime(1960, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=int(x))
                     for x in rng.integers(0, 3 * 10**15, n)], 8, pa.timestamp("us", tz="UTC")),
    })


COLUMNS = _rows(10).column_names
DELTA = {"k": "DELTA_BINARY_PACKED", "i32": "DELTA_BINARY_PACKED", "i16": "DELTA_BINARY_PACKED",
         "i8": "DELTA_BINARY_PACKED", "l": "DELTA_BINARY_PACKED", "day": "DELTA_BINARY_PACKED", "ts": "DELTA_BINARY_PACKED",
         "s": "DELTA_BYTE_ARRAY", "u": "DELTA_LENGTH_BYTE_ARRAY", "bin": "DELTA_BYTE_ARRAY", "b": "RLE"}
DELTA_2 = {**DELTA, "s": "DELTA_LENGTH_BYTE_ARRAY", "u": "DELTA_BYTE_ARRAY", "bin": "DELTA_LENGTH_BYTE_ARRAY"}

REWRITES = {
    # The rows of each data file written again by pyarrow (same order: the index's row ordinals
    # hold), with these settings and rows a row group.
    "v1-plain-snappy-small-pages": (500, dict(use_dictionary=False, compression="snappy", data_page_version="1.0",
                                              data_page_size=256, write_batch_size=16)),
    "v2-dictionary-zstd-small-pages": (400, dict(use_dictionary=True, compression="zstd", data_page_version="2.0",
                                                 data_page_size=512, write_batch_size=32)),
    "v1-dictionary-given-up-gzip": (700, dict(use_dictionary=True, dictionary_pagesize_limit=128, compression="gzip",
                                              data_page_version="1.0", data_page_size=300, write_batch_size=8)),
    "v2-delta-uncompressed": (600, dict(use_dictionary=False, column_encoding=DELTA, compression="none",
                                        data_page_version="2.0", data_page_size=300, write_batch_size=8)),
    "v1-delta-zstd": (None, dict(use_dictionary=False, column_encoding=DELTA_2, compression="zstd",
                                 data_page_version="1.0", data_page_size=1024, write_batch_size=64)),
    "v2-required-columns-snappy": (333, dict(use_dictionary=["s", "u"], compression="snappy", data_page_version="2.0",
                                             data_page_size=200, write_batch_size=4, required=["k", "i8", "u"])),
    "v1-one-row-group-default-pages": (N, dict(compression="zstd")),
}

FALLBACKS = {
    # Files the page path declines: Spark's reader reads them, as before.
    "float-byte-stream-split": dict(use_dictionary=False, column_encoding={"f": "BYTE_STREAM_SPLIT",
                                                                          "d": "BYTE_STREAM_SPLIT"}),
    "short-as-plain-int32": dict(cast={"i16": pa.int32()}),  # a short column Spark's reader converts from int
    "timestamp-millis": dict(cast={"ts": pa.timestamp("ms", tz="UTC")}),  # Spark's reader makes them micros
    # Written by Spark 2.4 (the file says so): Spark's reader rebases its dates and timestamps.
    "legacy-datetimes": dict(metadata={"org.apache.spark.version": "2.4.8"}),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A table of the project's writer: two buckets, row groups of a few hundred rows."""
    path = tmp_path_factory.mktemp("pages") / "t"
    IndexedTable.create(str(path), _rows(N), index_columns=["k"], num_buckets=2,
                        properties={"indexeddf.targetRowGroupBytes": "16384"})
    return path


def _data_files(path) -> list[str]:
    return [str(path / a.path) for a in IndexedTable.for_path(str(path)).snapshot.live_files()]


def _copy(written, tmp_path):
    path = tmp_path / "t"
    shutil.copytree(written, path)
    return path


def _rewrite(path, rows_per_group, options: dict) -> None:
    options = dict(options)
    required, cast, metadata = options.pop("required", ()), options.pop("cast", {}), options.pop("metadata", None)
    for f in _data_files(path):
        rows = pq.ParquetFile(f).read()  # one file (read_table would add the bucket=... folder as a column)
        schema = pa.schema([pa.field(c.name, cast.get(c.name, c.type), nullable=c.name not in required) for c in rows.schema])
        rows = rows.cast(schema, safe=False).replace_schema_metadata(metadata)  # safe=False: micros to millis
        pq.write_table(rows, f, row_group_size=rows_per_group or rows.num_rows, **options)


def _keys(path) -> list[int]:
    """The keys at the start, middle and end of every row group of every data file and in each
    file's last page."""
    keys = set()
    for f in _data_files(path):
        meta = pq.ParquetFile(f).metadata
        k = pq.ParquetFile(f).read(columns=["k"]).column("k").to_pylist()
        start = 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            keys.update(k[start + i] for i in (0, 1, n // 2, n - 1) if 0 <= i < n)
            start += n
        keys.update(k[-3:])
    return sorted(keys)


def _values(rows) -> list[str]:
    """Rows as comparable text, in one order (repr: NaN equals NaN, -0.0 is not 0.0)."""
    return sorted(repr(tuple(r[c] for c in COLUMNS)) for r in rows)


def _reads(spark) -> tuple[int, int]:
    pages, spark_reader = (int(x) for x in list(jvm_diagnostic(spark, "dataGroupReads"))[:2])
    return pages, spark_reader


def _check(spark, path) -> tuple[int, int]:
    """Lookups through the connector of every key of :func:`_keys` (a quarter alone, the others
    three in an IN list), of three keys far apart in an IN list (two files' worth), of a key no
    file holds, and of a key with a condition on another column, each equal to Spark's read of
    the data files (``spark.read.parquet``: its rows of the keys, read once, and the last
    lookup's filter run by Spark); the data row group reads by pages and by Spark's reader they
    took, at least one a lookup that found rows."""
    jvm_cache_clear(spark, "Footers")
    df = load(spark, path).select(*COLUMNS)
    oracle = spark.read.parquet(*_data_files(path)).select(*COLUMNS)
    by_key: dict[int, list] = {}
    for row in oracle.collect():
        by_key.setdefault(row["k"], []).append(row)
    keys = _keys(path)
    some = [keys[0], keys[len(keys) // 2], keys[-1]]
    # Every fourth key alone; the three after it in one IN list (the next positions of the same
    # row group or the next one: one read of several rows, on the pages too). Half the queries.
    lookups = [(f"k = {x}", by_key[x]) for x in keys[::4]] + [
        (f"k IN ({', '.join(map(str, group))})", [r for x in group for r in by_key[x]])
        for group in (keys[i + 1:i + 4] for i in range(0, len(keys), 4)) if group] + [
        (f"k IN ({', '.join(map(str, some))})", [r for x in some for r in by_key[x]]),
        (f"k = {N}", []),
        (f"k = {keys[1]} AND d > 0", oracle.where(f"k = {keys[1]} AND d > 0").collect())]
    before = _reads(spark)
    for where, want in lookups:
        jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
        got = df.where(where).collect()
        assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == jobs, where  # on the driver
        assert _values(got) == _values(want), where
    assert all(len(by_key[x]) == 2 for x in keys)  # every key has two rows
    after = _reads(spark)
    pages, fell_back = after[0] - before[0], after[1] - before[1]
    # Each lookup that found rows read at least one data row group, by one path or the other.
    assert pages + fell_back >= sum(1 for _, want in lookups if want), (pages, fell_back)
    return pages, fell_back


def test_the_writers_files_are_read_by_pages(spark, written):
    pages, fell_back = _check(spark, written)
    assert pages > 50 and fell_back == 0, (pages, fell_back)


def test_the_writers_small_pages_and_snappy_are_read_by_pages(spark, tmp_path):
    path = tmp_path / "t"
    IndexedTable.create(str(path), _rows(N, seed=1), index_columns=["k"], num_buckets=3,
                        properties={"indexeddf.targetRowGroupBytes": "32768", "indexeddf.parquet.pageSize": "1kb",
                                    "indexeddf.parquet.compressionCodec": "snappy"})
    pages, fell_back = _check(spark, path)
    assert pages > 20 and fell_back == 0, (pages, fell_back)


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_pyarrows_files_are_read_by_pages(spark, written, tmp_path, name):
    path = _copy(written, tmp_path)
    rows_per_group, options = REWRITES[name]
    _rewrite(path, rows_per_group, options)
    pages, fell_back = _check(spark, path)
    assert pages > 5 and fell_back == 0, (pages, fell_back)


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_what_the_pages_do_not_read_falls_back_to_sparks_reader(spark, written, tmp_path, name):
    path = _copy(written, tmp_path)
    _rewrite(path, 500, FALLBACKS[name])
    pages, fell_back = _check(spark, path)
    assert pages == 0 and fell_back > 10, (pages, fell_back)


def test_lookups_at_once_decode_their_own_pages(spark, tmp_path):
    """Point lookups running at the same time, from several threads, on snappy files (whose
    decompressors keep state): each decodes its own pages. Read options shared by every
    thread once shared their decompressors, and a lookup could lose a row or fall back."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "t"
    IndexedTable.create(str(path), _rows(N, seed=2), index_columns=["k"], num_buckets=6,
                        properties={"indexeddf.targetRowGroupBytes": "16384",
                                    "indexeddf.parquet.compressionCodec": "snappy"})
    jvm_cache_clear(spark, "Footers")
    df = load(spark, path).select(*COLUMNS)
    by_key: dict[int, list] = {}
    for row in spark.read.parquet(*_data_files(path)).select(*COLUMNS).collect():
        by_key.setdefault(row["k"], []).append(row)
    keys = _keys(path)
    groups = [keys[i::40] for i in range(40)]  # keys of every bucket in each IN list

    def lookup(group):
        got = df.where(f"k IN ({', '.join(map(str, group))})").collect()
        return group, got

    before = _reads(spark)
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            for group, got in pool.map(lookup, groups):
                assert _values(got) == _values([r for x in group for r in by_key[x]]), group
    pages, fell_back = (a - b for a, b in zip(_reads(spark), before))
    assert pages > 100 and fell_back == 0, (pages, fell_back)
