"""The Spark data source ``indexeddf``: batch reads, writes, time travel, pruning, errors.

Real local Spark (the session fixture), real files; every Spark answer is compared with
the rows that went in, or with ``IndexedTable.to_arrow`` (a Spark-free reader).
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import CorruptLogError, IndexedDFError, InvalidOptionError, SchemaMismatchError, TableExistsError
from indexeddf.spark import write as sw
from indexeddf.spark.source import IndexedReader
from indexeddf.spark.types import spark_schema

pytestmark = pytest.mark.spark

ALL_TYPES = StructType([
    StructField("b", BooleanType()),
    StructField("y", ByteType()),
    StructField("sh", ShortType()),
    StructField("i", IntegerType()),
    StructField("l", LongType()),
    StructField("f", FloatType()),
    StructField("d", DoubleType()),
    StructField("dec", DecimalType(10, 2)),
    StructField("wide", DecimalType(38, 6)),
    StructField("s", StringType()),
    StructField("bin", BinaryType()),
    StructField("dt", DateType()),
    StructField("ts", TimestampType()),
    StructField("ntz", TimestampNTZType()),
])


def all_types_rows(n: int, offset: int = 0) -> list[tuple]:
    rows = []
    for k in range(offset, offset + n):
        if k % 5 == 4:  # a row of nulls except the key columns
            rows.append((None, None, None, k % 3, None, None, None, None, None, f"k{k % 4}", None, None, None, None))
            continue
        rows.append((
            k % 2 == 0, (k % 200) - 100, k * 3 - 500, k % 3, k * 1_000_003 - 7, k / 4.0 - 3, k * 1.1e10,
            (decimal.Decimal(k * 7) / 100).quantize(decimal.Decimal("0.01")), decimal.Decimal(k) * decimal.Decimal("12345678901234567.000001"),
            f"k{k % 4}", bytes([k % 256, 0, 255]), dt.date(2020, 1, 1) + dt.timedelta(days=k),
            dt.datetime(2024, 1, 1, 12, 0) + dt.timedelta(seconds=k * 3607, microseconds=k),
            dt.datetime(1999, 12, 31, 23, 0) + dt.timedelta(minutes=k, microseconds=k * 3),
        ))
    return rows


def norm(value):
    """One representation for Spark's and Arrow's Python values (UTC session)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def rows_of(data) -> list[str]:
    """Sorted, comparable rows of a Spark DataFrame, Arrow table or list of tuples."""
    if isinstance(data, pa.Table):
        tuples = [tuple(r.values()) for r in data.to_pylist()]
    elif isinstance(data, list):
        tuples = data
    else:
        tuples = [tuple(r) for r in data.collect()]
    return sorted(repr(tuple(norm(v) for v in t)) for t in tuples)


def data_files(path) -> set[str]:
    """Every Parquet file under the table root: data files and index files."""
    root = Path(path)
    return {str(p.relative_to(path)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    indexeddf.register(spark)
    return spark


def read(spark, path, **options):
    reader = spark.read.format("indexeddf")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


# -- round trips ---------------------------------------------------------------------------
def test_round_trip_every_type_with_nulls(spark, tmp_path):
    path = str(tmp_path / "all types")
    first, second = all_types_rows(40), all_types_rows(25, offset=40)
    (spark.createDataFrame(first, ALL_TYPES).write.format("indexeddf")
     .option("indexColumns", "i,s").option("numBuckets", 5).mode("overwrite").save(path))
    spark.createDataFrame(second, ALL_TYPES).write.format("indexeddf").mode("append").save(path)

    table = IndexedTable.for_path(path)
    assert table.version == 1 and table.index_columns == ["i", "s"] and table.num_buckets == 5
    assert [f.name for f in table.schema] == ALL_TYPES.names
    expected = rows_of(first + second)
    df = read(spark, path)
    assert df.schema == ALL_TYPES  # the log's types map one to one onto Spark's
    assert rows_of(df) == expected
    assert rows_of(table.to_arrow()) == expected
    assert rows_of(table.to_df(spark)) == expected
    # Every file sits in the bucket Spark's own hash assigns to its rows.
    spark_buckets = (
        table.to_df(spark)
        .select(F.expr("pmod(hash(i, s), 5)").alias("bucket"), F.input_file_name().alias("file"))
        .distinct().collect()
    )
    for r in spark_buckets:
        assert f"bucket={r.bucket:05d}" in r.file
    # Spark's writes maintain the primary index, as Python appends do.
    assert table.snapshot.indexes["primary"].coveredVersion == 1
    for key in [(1, "k1"), (0, "k0"), (2, "k3")]:
        want = [r for r in first + second if (r[3], r[9]) == key]
        assert rows_of(table.lookup([key])) == rows_of(want)


def test_empty_dataframes(spark, tmp_path):
    path = str(tmp_path / "empty")
    empty = spark.createDataFrame([], ALL_TYPES)
    empty.write.format("indexeddf").option("indexColumns", "l").mode("append").save(path)
    table = IndexedTable.for_path(path)
    assert table.version == 0 and table.num_buckets == 16 and table.snapshot.live_files() == []
    df = read(spark, path)
    assert df.schema == ALL_TYPES and df.count() == 0
    assert table.to_df(spark).schema == ALL_TYPES and table.to_df(spark).count() == 0
    assert table.to_arrow().num_rows == 0

    rows = all_types_rows(10)
    spark.createDataFrame(rows, ALL_TYPES).write.format("indexeddf").mode("append").save(path)
    empty.write.format("indexeddf").mode("append").save(path)  # commits, adds nothing
    assert rows_of(read(spark, path)) == rows_of(rows)
    assert IndexedTable.for_path(path).version == 2


def test_native_scan_projection_and_special_paths(spark, tmp_path):
    path = str(tmp_path / "odd [name] {x}*?")
    df = spark.range(50).selectExpr("id", "id % 3 as g")
    table = IndexedTable.create(path, df, index_columns=["id"], num_buckets=4)
    assert sorted(r.id for r in table.to_df(spark, columns=["id"]).collect()) == list(range(50))
    assert table.to_df(spark, columns=["g"]).columns == ["g"]
    with pytest.raises(SchemaMismatchError, match="unknown columns"):
        table.to_df(spark, columns=["nope"])
    # Only the snapshot's files: a stray Parquet file in data/ is not read.
    stray = Path(path) / "data" / "bucket=00000" / "part-stray.parquet"
    pq.write_table(pa.table({"id": pa.array([999], pa.int64()), "g": pa.array([0], pa.int64())}), stray)
    assert table.to_df(spark).count() == 50
    assert read(spark, path).count() == 50


def test_process_local_storage_is_refused(spark):
    url = "memory://indexeddf-spark/t"
    table = IndexedTable.create(url, pa.table({"k": [1, 2]}), index_columns=["k"], num_buckets=2)
    with pytest.raises(InvalidOptionError, match="Hadoop"):
        table.to_df(spark)
    # Spark's Python workers are other processes: they cannot see this process's memory.
    with pytest.raises(Exception, match="InvalidOptionError: .*in-memory filesystem"):
        read(spark, url).count()
    with pytest.raises(InvalidOptionError, match="in-memory filesystem"):
        table.append(spark.range(3).selectExpr("id as k"))


# -- to_df: the connector's read of a version -----------------------------------------------
def live_parquet(spark, table: IndexedTable, version=None):
    """``spark.read.parquet`` of a version's live files with the table's schema (the read
    to_df made before it was the connector's; right for tables without deletion vectors,
    partitions or column mapping)."""
    from indexeddf.spark.native import hadoop_path

    snap = table.snapshot_at(version)
    paths = [hadoop_path(snap.storage, a.path) for a in snap.live_files()]
    return spark.read.schema(spark_schema(snap.metadata.schema_)).parquet(*paths)


def _plan_text(df) -> str:
    return df._jdf.queryExecution().toString()


def test_to_df_is_the_connectors_read_of_its_version(spark, tmp_path):
    assert indexeddf.register(spark) == "connector"
    path = str(tmp_path / "plain [table] *")
    rows = lambda lo, hi: pa.table({"k": pa.array([i % 37 for i in range(lo, hi)], pa.int64()),  # noqa: E731
                                    "v": pa.array(range(lo, hi), pa.int64())})
    table = IndexedTable.create(path, rows(0, 300), index_columns=["k"], num_buckets=4)
    table.append(rows(300, 500))
    assert not any(a.deletionVector for a in table.snapshot.live_files())
    for bucketed in (False, True):
        df = table.to_df(spark, bucketed=bucketed)
        plan = _plan_text(df)
        # The connector's relation (its file index over the version's files), not a Parquet
        # read of the files listed in Python.
        assert "SnapshotFileIndex" in plan and "InMemoryFileIndex" not in plan, plan
        assert df.schema == live_parquet(spark, table).schema
        assert rows_of(df) == rows_of(live_parquet(spark, table)) == rows_of(table.to_arrow())
        assert rows_of(table.to_df(spark, version=0, columns=["v"], bucketed=bucketed)) == rows_of(
            live_parquet(spark, table, 0).select("v"))
    # The connector's rules apply: a key equality is an index lookup on the driver.
    lookup = table.to_df(spark).where("k = 5")
    assert "LocalTableScan" in lookup._jdf.queryExecution().executedPlan().toString()
    assert rows_of(lookup) == rows_of(live_parquet(spark, table).where("k = 5"))


def test_a_to_df_dataframe_keeps_its_version_while_another_writer_appends(spark, tmp_path):
    import threading

    path = str(tmp_path / "moving")
    rows = lambda lo, hi: pa.table({"k": pa.array([i % 11 for i in range(lo, hi)], pa.int64()),  # noqa: E731
                                    "v": pa.array(range(lo, hi), pa.int64())})
    table = IndexedTable.create(path, rows(0, 100), index_columns=["k"], num_buckets=4)
    table.append(rows(100, 150))
    df, agg = table.to_df(spark), table.to_df(spark).groupBy("k").count()
    want, want_agg = rows_of(live_parquet(spark, table)), rows_of(live_parquet(spark, table).groupBy("k").count())
    writer = IndexedTable.for_path(path)  # another writer of the same table
    stop, appended = threading.Event(), []

    def append_while_reading():
        lo = 1000
        while not stop.is_set() and len(appended) < 20:
            appended.append(writer.append(rows(lo, lo + 10)))
            lo += 10

    thread = threading.Thread(target=append_while_reading)
    thread.start()
    try:
        for _ in range(2):
            assert rows_of(df) == want and rows_of(agg) == want_agg and df.count() == 150
    finally:
        stop.set()
        thread.join()
    assert appended and IndexedTable.for_path(path).version == table.version + len(appended)
    assert rows_of(df) == want and df.where("k = 3").count() == sum(1 for i in range(150) if i % 11 == 3)
    newest = IndexedTable.for_path(path).to_df(spark)
    assert newest.count() == 150 + 10 * len(appended)


# -- time travel ----------------------------------------------------------------------------
def test_time_travel_by_version_and_timestamp(spark, tmp_path):
    path = str(tmp_path / "tt")
    versions = [list(range(0, 10)), list(range(10, 15)), list(range(100, 103))]
    spark.range(0, 10).write.format("indexeddf").option("indexColumns", "id").option("numBuckets", 3).mode("overwrite").save(path)
    time.sleep(0.01)
    spark.range(10, 15).write.format("indexeddf").mode("append").save(path)
    time.sleep(0.01)
    spark.range(100, 103).write.format("indexeddf").mode("overwrite").save(path)

    table = IndexedTable.for_path(path)
    stamps = {h.version: h.timestamp for h in table.history()}
    expected = [versions[0], versions[0] + versions[1], versions[2]]
    for v in range(3):
        ids = lambda df: sorted(r.id for r in df.collect())  # noqa: E731
        assert ids(read(spark, path, versionAsOf=v)) == expected[v]
        assert ids(table.to_df(spark, version=v)) == expected[v]
        ts = stamps[v].strftime("%Y-%m-%d %H:%M:%S.%f")
        assert ids(read(spark, path, timestampAsOf=ts)) == expected[v]
        assert ids(table.to_df(spark, timestamp=ts)) == expected[v]
    assert sorted(r.id for r in read(spark, path).collect()) == expected[2]
    # A DataFrame pinned to a version stays there while the table moves on.
    pinned = read(spark, path, versionAsOf=1)
    spark.range(7, 8).write.format("indexeddf").mode("append").save(path)
    assert pinned.count() == 15 and read(spark, path).count() == 4
    with pytest.raises(Exception, match="VersionNotFoundError"):
        read(spark, path, versionAsOf=99).count()
    with pytest.raises(Exception, match="InvalidOptionError"):
        read(spark, path, versionAsOf=1, timestampAsOf="2020-01-01").count()


# -- filtered reads -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_table(spark, tmp_path_factory):
    """600 rows bucketed by (k long, s string) into 8 buckets, some keys null."""
    path = str(tmp_path_factory.mktemp("pruning") / "t")
    df = spark.range(600).selectExpr(
        "CASE WHEN id % 50 = 7 THEN NULL ELSE id % 40 END as k",
        "CASE WHEN id % 3 = 0 THEN 'a' WHEN id % 3 = 1 THEN 'b' ELSE NULL END as s",
        "id as v",
    )
    df.repartition(3).write.format("indexeddf").option("indexColumns", "k,s").option("numBuckets", 8).mode("overwrite").save(path)
    return path


@pytest.mark.parametrize("where", [
    "k = 5 AND s = 'a'",
    "k IN (1, 2, 3) AND s IN ('a', 'b')",
    "k = 5",  # only one of the two index columns: no pruning, same answer
    "k <=> NULL AND s = 'b'",
    "k IS NULL AND s IS NULL",
    "k = 5 AND s = 'zzz'",
    "k = 1000 AND s = 'a'",
    "k = 5 AND s = 'a' AND v > 100",
    "k = 5 AND k = 6 AND s = 'a'",
    "(k = 5 OR k = 6) AND s = 'a'",
    "k = CAST('7' AS INT) AND s = 'b'",
])
def test_filtered_reads_equal_the_native_scan(spark, keyed_table, where):
    got = sorted(r.v for r in read(spark, keyed_table).where(where).collect())
    full = sorted(r.v for r in IndexedTable.for_path(keyed_table).to_df(spark).where(where).collect())
    assert got == full


def test_partitions_are_buckets_split_by_size_whatever_the_query(keyed_table):
    table = IndexedTable.for_path(keyed_table)
    schema = spark_schema(table.snapshot.metadata.schema_)
    parts = IndexedReader(table.snapshot, schema, sw.TASK_FLUSH_BYTES).partitions()
    assert [p.bucket for p in parts] == sorted({a.bucket for a in table.snapshot.live_files()}) == list(range(8))
    # A tiny partition size splits a bucket's files one per partition.
    parts = IndexedReader(table.snapshot, schema, 1).partitions()
    assert len(parts) == len(table.snapshot.live_files()) and all(len(p.paths) == 1 for p in parts)
    # The reader takes no filter: Spark 4.3 would reuse a filter-specific plan for other queries.
    assert "pushFilters" not in vars(IndexedReader)


# -- writes -----------------------------------------------------------------------------------
def test_save_modes(spark, tmp_path):
    path = str(tmp_path / "modes")
    df = spark.range(5)
    with pytest.raises(Exception, match="InvalidOptionError.*indexColumns"):
        df.write.format("indexeddf").mode("append").save(path)
    assert not Path(path, "_delta_log").exists()
    df.write.format("indexeddf").option("indexColumns", "id").option("saveMode", "errorifexists").mode("append").save(path)
    with pytest.raises(Exception, match="TableExistsError: a table already exists"):
        df.write.format("indexeddf").option("saveMode", "errorIfExists").mode("append").save(path)
    df.write.format("indexeddf").option("saveMode", "ignore").mode("append").save(path)
    assert IndexedTable.for_path(path).version == 0
    # Spark itself refuses its own ErrorIfExists / Ignore modes for Python data sources; the JVM
    # connector (which owns "indexeddf" in this session) handles them, then writes through Python.
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("indexeddf_python").mode("ignore").save(path)
    df.write.format("indexeddf").mode("ignore").save(path)
    with pytest.raises(Exception, match="TableExistsError: a table already exists"):
        df.write.format("indexeddf").mode("errorifexists").save(path)
    assert IndexedTable.for_path(path).version == 0
    spark.range(5, 8).write.format("indexeddf").mode("append").save(path)
    spark.range(100, 102).write.format("indexeddf").mode("overwrite").save(path)
    table = IndexedTable.for_path(path)
    assert sorted(table.to_arrow()["id"].to_pylist()) == [100, 101]
    assert [(h.operation, h.parameters.get("mode")) for h in table.history()] == [
        ("WRITE", "Overwrite"), ("WRITE", "Append"), ("CREATE TABLE", "errorifexists")]
    # overwriteSchema replaces the schema (the index column stays).
    stale = read(spark, path)
    spark.range(3).selectExpr("id", "'x' as extra").write.format("indexeddf").option("overwriteSchema", "true").mode("overwrite").save(path)
    assert IndexedTable.for_path(path).schema.names == ["id", "extra"]
    assert read(spark, path).columns == ["id", "extra"]
    # A DataFrame reads the version it was loaded at, schema and all.
    assert stale.columns == ["id"] and sorted(r.id for r in stale.collect()) == [100, 101]
    with pytest.raises(Exception, match="SchemaMismatchError"):
        spark.read.format("indexeddf").schema("id long").load(path).count()
    assert spark.read.format("indexeddf").schema("id long, extra string").load(path).count() == 3


def test_idempotent_batch_writes(spark, tmp_path):
    path = str(tmp_path / "txn")
    table = IndexedTable.create(path, spark.range(3), index_columns=["id"], num_buckets=2)
    assert table.version == 0
    assert table.append(spark.range(3, 6), txn=("job", 1)) == 1
    assert table.append(spark.range(3, 6), txn=("job", 1)) == 1  # a retry: nothing written
    w = spark.range(6, 9).write.format("indexeddf").option("txnAppId", "job").option("txnVersion", 1).mode("append")
    w.save(path)
    assert table.append(spark.range(6, 9), txn=("job", 2)) == 2
    assert sorted(IndexedTable.for_path(path).to_arrow()["id"].to_pylist()) == list(range(9))
    assert IndexedTable.for_path(path).snapshot.txn_version("job") == 2


def test_indexed_table_accepts_spark_dataframes(spark, tmp_path):
    path = str(tmp_path / "api")
    df = spark.range(200).selectExpr("id % 37 as user_id", "id as event").repartition(5)
    table = IndexedTable.create(path, df, index_columns=["user_id"], num_buckets=4,
                                name="events", properties={"owner": "me", "indexeddf.checkpointInterval": "3"})
    assert table.version == 0 and table.snapshot.metadata.name == "events"
    assert table.properties == {"owner": "me", "indexeddf.checkpointInterval": "3"}
    # Spark's hash partitioning is the bucketing: partition i of repartition(n, key) is bucket i.
    parts = df.repartition(4, "user_id").select(
        F.spark_partition_id().alias("p"), F.expr("pmod(hash(user_id), 4)").alias("b")).distinct().collect()
    assert all(r.p == r.b for r in parts) and len(parts) == 4
    # Repartitioned by the index columns first: exactly one file per non-empty bucket.
    assert len(table.snapshot.live_files()) == 4
    assert table.append(df) == 1
    assert len(table.snapshot.live_files()) == 8
    # The same frame written directly: each of its 5 tasks writes up to one file per bucket.
    df.write.format("indexeddf").mode("append").save(path)
    table.update_incremental()
    assert table.version == 2 and 8 < len(table.snapshot.live_files()) <= 8 + 5 * 4
    assert table.overwrite(spark.range(10).selectExpr("id as user_id", "id as event")) == 3
    assert sorted(table.to_arrow()["event"].to_pylist()) == list(range(10))
    with pytest.raises(TableExistsError):
        IndexedTable.create(path, df, index_columns=["user_id"])
    with pytest.raises(SchemaMismatchError, match="'event' is missing"):
        table.append(spark.range(3).selectExpr("id as user_id"))
    assert table.version == 3 and IndexedTable.for_path(path).version == 3


def test_errors_are_typed_and_visible(spark, tmp_path):
    path = str(tmp_path / "errors")
    IndexedTable.create(path, pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}), index_columns=["id"])
    before = data_files(path)
    with pytest.raises(Exception) as info:
        spark.range(3).selectExpr("id", "id as name").write.format("indexeddf").mode("append").save(path)
    assert "SchemaMismatchError" in str(info.value) and "'name' is long, the table has string" in str(info.value)
    with pytest.raises(Exception) as info:
        spark.range(3).write.format("indexeddf").option("numBucket", 4).mode("append").save(path)
    assert "InvalidOptionError: unknown option 'numbucket'" in str(info.value)
    with pytest.raises(Exception) as info:
        read(spark, path, versionAsof=0, colour="red").count()
    assert "InvalidOptionError: unknown option 'colour'" in str(info.value)
    with pytest.raises(Exception, match="InvalidOptionError: .*one table location"):
        spark.read.format("indexeddf").load([path, path]).count()
    with pytest.raises(Exception, match="InvalidOptionError: .*1..65536"):
        spark.range(3).write.format("indexeddf").option("indexColumns", "id").option("numBuckets", 0).mode("append").save(str(tmp_path / "new"))
    with pytest.raises(Exception, match="SchemaMismatchError: index columns \\['nope'\\]"):
        spark.range(3).write.format("indexeddf").option("indexColumns", "nope").mode("append").save(str(tmp_path / "new"))
    with pytest.raises(Exception, match="InvalidOptionError: .* is bucketed by \\['id'\\]"):
        spark.range(3).selectExpr("id", "'x' as name").write.format("indexeddf").option("indexColumns", "name").mode("append").save(path)
    with pytest.raises(Exception, match="TableNotFoundError"):
        read(spark, tmp_path / "missing").count()
    assert IndexedTable.for_path(path).version == 0 and data_files(path) == before
    # A first commit without its metaData line: both replays name that file.
    lost = str(tmp_path / "lost")
    IndexedTable.create(lost, pa.table({"id": pa.array([1], pa.int64())}), index_columns=["id"])
    first = os.path.join(lost, "_delta_log", "00000000000000000000.json")
    with open(first) as f:
        kept = [line for line in f if '"metaData"' not in line]
    with open(first, "w") as f:
        f.writelines(kept)
    named = "CorruptLogError: .*_delta_log/00000000000000000000.json: version 0 has no protocol or metaData"
    with pytest.raises(Exception, match=named):
        read(spark, lost).count()
    with pytest.raises(CorruptLogError, match=named.split(": ", 1)[1]):
        IndexedTable.for_path(lost)


# -- failures leave nothing behind ---------------------------------------------------------------
def failing_frame(spark, n=400):
    """Two partitions: the first finishes quickly; the second fails on its last row."""
    @F.udf("long")
    def boom(x):
        if x == n - 1:
            time.sleep(1.5)  # let the other task write its files first
            raise ValueError("boom on row %d" % x)
        return x

    return spark.range(0, n, 1, 2).select(boom("id").alias("id"), (F.col("id") * 2).alias("v"))


def test_failed_task_leaves_no_commit_and_no_files(spark, tmp_path):
    path = str(tmp_path / "fail")
    with pytest.raises(Exception, match="boom on row"):
        failing_frame(spark).write.format("indexeddf").option("indexColumns", "id").mode("append").save(path)
    assert not Path(path, "_delta_log").exists() and _eventually(lambda: data_files(path) == set())

    spark.range(10).selectExpr("id", "id * 2 as v").write.format("indexeddf").option("indexColumns", "id").mode("append").save(path)
    before = data_files(path)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="boom on row"):
            failing_frame(spark).write.format("indexeddf").mode(mode).save(path)
        assert IndexedTable.for_path(path).version == 0 and _eventually(lambda: data_files(path) == before)


def _eventually(check, timeout: float = 30.0) -> bool:
    """True once ``check()`` holds. A failed job returns while Spark is still stopping
    its other tasks; such a task finds the job aborted and deletes its own files."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_task_files_are_deleted_by_abort_and_kept_by_commit(tmp_path):
    """The writer protocol without Spark's scheduler: write tasks, then abort or commit."""
    path = str(tmp_path / "proto")
    IndexedTable.create(path, pa.table({"id": pa.array([0], pa.int64())}), index_columns=["id"], num_buckets=4)
    initial = data_files(path)  # one data file and its primary-index file
    schema = StructType([StructField("id", LongType())])
    batch = pa.record_batch([pa.array(range(1, 100), pa.int64())], names=["id"])

    plan = sw.plan_write({"path": path}, schema, overwrite=False, streaming=False)
    msgs = [sw.write_task(plan, iter([batch])), sw.write_task(plan, iter([]))]
    assert len(data_files(path) - initial) == 4 + 4  # data and index files of 4 buckets
    sw.IndexedBatchWriter(plan).abort(msgs + [None])
    assert data_files(path) == initial and IndexedTable.for_path(path).version == 0
    # A task still running when the job was aborted removes its own files.
    with pytest.raises(IndexedDFError, match="aborted"):
        sw.write_task(plan, iter([batch]))
    assert data_files(path) == initial

    plan = sw.plan_write({"path": path}, schema, overwrite=False, streaming=False)
    msgs = [sw.write_task(plan, iter([batch]))]
    sw.write_task(plan, iter([batch]))  # an attempt whose result Spark dropped (e.g. speculation)
    sw.IndexedBatchWriter(plan).commit(msgs + [None])
    table = IndexedTable.for_path(path)
    assert table.version == 1 and sorted(table.to_arrow()["id"].to_pylist()) == list(range(100))
    assert table.snapshot.indexes["primary"].coveredVersion == 1  # the primary index covers the new rows
    assert table.lookup([5]).num_rows == 1
    assert len(data_files(path) - initial) == 8  # the dropped attempt's files are gone
    # An abort after a commit (Spark aborts when commit raises) never deletes committed files.
    sw.IndexedBatchWriter(plan).abort(msgs)
    assert len(data_files(path) - initial) == 8 and table.to_arrow().num_rows == 100


# -- two Spark applications ------------------------------------------------------------------------
TIMES, ROWS = 2, 50
"""What each of the two applications of :func:`two_applications` appends: batches, rows a batch."""


def two_applications(folder: str) -> None:
    """Two Spark applications (``spark_app.py append``) appending to one new table at once, in
    ``folder``; the second runs without PYSPARK_* and then runs a SQL DELETE on a table of its
    own. Prints their exit codes, stderr tails and the second's last line as one JSON line
    (``python test_spark_source.py FOLDER``: ``conftest.py`` starts it from the run's first
    test on, beside the tests)."""
    import json

    path = os.path.join(folder, "shared")
    IndexedTable.create(path, pa.table({"id": pa.array([], pa.int64()), "tag": pa.array([], pa.string())}),
                        index_columns=["id"], num_buckets=4)
    app = str(Path(__file__).with_name("spark_app.py"))
    bare = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    procs = [
        subprocess.Popen([sys.executable, app, "append", path, str(a), str(TIMES), str(ROWS),
                          *([os.path.join(folder, "deleted")] if a == 2 else [])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bare if a == 2 else None)
        for a in (1, 2)
    ]
    done = [p.communicate(timeout=240) for p in procs]
    print(json.dumps({"codes": [p.returncode for p in procs], "errors": [err[-3000:] for _, err in done],
                      "last": (done[1][0].strip().splitlines() or [""])[-1]}), flush=True)


def test_two_spark_applications_append_concurrently(two_apps):
    """Two Spark applications append to one table at once: every row lands once. The second
    is a pipeline run as ``.venv/bin/python job.py`` (no PYSPARK_PYTHON, no activated venv):
    the data source's Python side starts with this interpreter, not the system's, which a SQL
    DELETE it runs afterwards on a table of its own (rewritten in Python workers) proves."""
    import json

    done, folder = two_apps  # two_applications(folder), started with the run (conftest.py)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["codes"] == [0, 0], out["errors"]
    assert out["last"] == "rows left 6"  # the second application's DELETE
    table = IndexedTable.for_path(str(folder / "shared"))
    ids = table.to_arrow()["id"].to_pylist()
    expected = [(a * 1000 + b) * 1000 + r for a in (1, 2) for b in range(TIMES) for r in range(ROWS)]
    assert sorted(ids) == sorted(expected)  # every row exactly once
    assert table.version == 2 * TIMES
    assert sorted(pc.unique(table.to_arrow()["tag"]).to_pylist()) == sorted(f"{a}-{b}" for a in (1, 2) for b in range(TIMES))


def test_every_option_is_documented():
    from indexeddf.spark import options as so

    text = (Path(__file__).parent.parent / "docs" / "spark.md").read_text()
    for name in set(so.READ_OPTIONS + so.WRITE_OPTIONS + so.STREAM_OPTIONS) - {"path"}:
        if not name.startswith("_"):
            assert f"`{name}`" in text, name


def test_native_scan_locations():
    from types import SimpleNamespace

    from indexeddf.spark.native import hadoop_path

    def remote(url):
        return SimpleNamespace(is_local=False, url=url)

    assert hadoop_path(remote("s3://bucket/lake/t/"), "data/b=1/p.parquet") == "s3a://bucket/lake/t/data/b=1/p.parquet"
    assert hadoop_path(remote("gcs://bucket/t"), "x") == "gs://bucket/t/x"
    assert hadoop_path(remote("abfss://c@acct.dfs.core.windows.net/t"), "x") == "abfss://c@acct.dfs.core.windows.net/t/x"
    assert hadoop_path(remote("hdfs://nn:8020/t"), "x") == "hdfs://nn:8020/t/x"
    for url in ("memory://t", "http://host/t", "zip://t"):
        with pytest.raises(InvalidOptionError):
            hadoop_path(remote(url), "x")
    local = SimpleNamespace(is_local=True, full=lambda rel: "/tmp/a[1]/" + rel)
    assert hadoop_path(local, "p*.parquet") == "file:///tmp/a\\[1\\]/p\\*.parquet"


def test_spark_frames_convert_to_arrow_for_local_writes(spark, tmp_path):
    from indexeddf.writer import operations
    from indexeddf.writer.data import to_arrow_table

    df = spark.createDataFrame(all_types_rows(7), ALL_TYPES)
    assert rows_of(to_arrow_table(df)) == rows_of(all_types_rows(7))
    table = IndexedTable.create(str(tmp_path / "local"), pa.table({"id": pa.array([1], pa.int64())}), index_columns=["id"])
    result = operations.append(table.snapshot, spark.range(2, 5))  # collected, written by this process
    assert sorted(IndexedTable.for_path(str(tmp_path / "local"), version=result.version).to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]


def test_configure_points_spark_python_workers_at_this_interpreter(monkeypatch):
    """A venv's Python run without PYSPARK_PYTHON: the workers get this interpreter; a
    value the user gave (builder or environment) is kept."""
    import sys

    from pyspark.sql import SparkSession

    import indexeddf

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    fresh = SparkSession.Builder()
    assert indexeddf.configure(fresh)._options["spark.pyspark.python"] == sys.executable
    given = SparkSession.Builder().config("spark.pyspark.python", "/opt/python")
    assert indexeddf.configure(given)._options["spark.pyspark.python"] == "/opt/python"
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other")
    assert "spark.pyspark.python" not in indexeddf.configure(SparkSession.Builder())._options


def test_local_python_workers_start_with_indexeddf_imported(spark):
    """On a local master the workers are forked from indexeddf's daemon, which imported the
    task code (and pyarrow) before forking; a cluster master or a daemon the user named is left
    alone. Every Spark test of this suite runs its Python tasks in such workers."""
    import os

    from pyspark.sql import SparkSession

    import indexeddf
    from indexeddf.spark.daemon import preload

    assert spark.conf.get("spark.python.daemon.module") == "indexeddf.spark.daemon"

    def parent(batches):
        import pyarrow as pa
        cmd = open(f"/proc/{os.getppid()}/cmdline").read().replace("\0", " ")
        maps = open(f"/proc/{os.getppid()}/maps").read()
        for _ in batches:
            pass
        import pyspark
        yield pa.RecordBatch.from_pydict({"daemon": [cmd], "arrow": ["libarrow" in maps], "pyspark": [pyspark.__file__]})

    row = spark.range(0, 10, 1, 1).mapInArrow(parent, "daemon string, arrow boolean, pyspark string").collect()[0]
    assert "-m indexeddf.spark.daemon" in row.daemon and row.arrow  # loaded before the fork
    assert ".zip" not in row.pyspark  # pip's pyspark, compiled, not the zip Spark puts first
    assert preload() == []
    local = indexeddf.configure(SparkSession.Builder().master("local[2]"))._options
    assert local["spark.python.daemon.module"] == "indexeddf.spark.daemon"
    cluster = indexeddf.configure(SparkSession.Builder().master("spark://127.0.0.1:7077"))._options
    assert "spark.python.daemon.module" not in cluster
    named = indexeddf.configure(SparkSession.Builder().master("local").config("spark.python.daemon.module", "mine"))
    assert named._options["spark.python.daemon.module"] == "mine"


def test_the_daemon_prefers_the_installed_pyspark_to_its_own_zip(tmp_path):
    """Spark's pyspark.zip goes after the directories only when it is the zip of the pyspark
    installed in one of them; another installation's zip keeps its place."""
    from indexeddf.spark.daemon import installed_pyspark_first

    site = tmp_path / "site"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    own, other = site / "pyspark" / "python" / "lib" / "pyspark.zip", tmp_path / "spark" / "pyspark.zip"
    own.write_bytes(b"")
    path = [str(own), "/py4j.zip", str(site)]
    assert installed_pyspark_first(path) == ["/py4j.zip", str(site), str(own)]
    assert installed_pyspark_first([str(other), str(site)]) == [str(other), str(site)]
    assert installed_pyspark_first([str(own), "/nowhere"]) == [str(own), "/nowhere"]


PLANNER_MODULES = ["indexeddf.spark.source", "indexeddf.spark.change", "indexeddf.spark.apply",
                   "indexeddf.spark.write", "indexeddf.spark.operation", "indexeddf.spark.optimize_statement"]
"""What Spark's driver-side Python processes load for a statement: the source's class, each
statement's writer and the commits. They fork from PySpark's own daemon, not indexeddf's, and
start cold after an idle minute, so a pipeline's every statement imports these again."""


def test_planner_processes_load_no_task_code():
    """The modules Spark's planner processes import to create a write and commit it leave out
    what only the tasks run (the change engine's Arrow joins, which load pandas through
    pyarrow's datasets; the SQL parser, which only a predicate to parse needs): half a second
    of a cold MERGE's planning and again of its commit. The tasks' daemon still preloads them."""
    import json
    import subprocess

    from indexeddf.spark.daemon import PRELOADED

    heavy = ["pandas", "sqlglot", "pyarrow.acero", "pyarrow.dataset", "indexeddf.changes.rewrite"]
    code = (f"import sys, json, pyspark.sql.worker.commit_data_source_write\nfor m in {PLANNER_MODULES!r}: "
            f"__import__(m)\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
    tasks = {"indexeddf.changes.rewrite", "indexeddf.spark.apply", "indexeddf.spark.change", "indexeddf.spark.write"}
    assert tasks <= set(PRELOADED)


if __name__ == "__main__":
    two_applications(sys.argv[1])
