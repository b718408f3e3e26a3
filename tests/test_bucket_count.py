"""The bucket count a table gets when its creator does not give one (``spec/bucket_count.py``),
and changing it with ``optimize(mode="full", num_buckets=n)``; every answer checked against
DuckDB's Delta reader and delta-rs."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pytest

from indexeddf import IndexedTable
from indexeddf.errors import InvalidOptionError
from indexeddf.spec import config
from indexeddf.spec.bucket_count import DEFAULT_NUM_BUCKETS, MAX_DEFAULT_BUCKETS, default_num_buckets
from indexeddf.spec.bucketing import bucket_ids

sys.path.insert(0, os.path.dirname(__file__))
from oracles import duckdb_delta  # noqa: E402

MIB = 1 << 20
SMALL_TARGET = {"indexeddf.buckets.targetFileSize": "4kb"}
"""A target small enough that a few thousand rows need more than 16 buckets."""


def rows(n: int, start: int = 0) -> pa.Table:
    k = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"k": k, "v": pa.array([f"value-{i:08d}" for i in k], pa.string())})


def duckdb_rows(path: str) -> list[tuple]:
    return duckdb_delta().execute(f"SELECT k, v FROM delta_scan('{path}') ORDER BY k").fetchall()


def delta_rs_rows(path: str) -> list[tuple]:
    deltalake = pytest.importorskip("deltalake")
    t = deltalake.DeltaTable(path).to_pyarrow_table().select(["k", "v"]).sort_by("k")
    return list(zip(t.column("k").to_pylist(), t.column("v").to_pylist()))


# -- the rule ---------------------------------------------------------------------------------
def test_the_rule_keeps_16_for_small_or_unknown_sizes():
    assert default_num_buckets(None) == DEFAULT_NUM_BUCKETS == 16
    assert default_num_buckets(0) == 16
    assert default_num_buckets(1) == 16
    assert default_num_buckets(16 * 256 * MIB) == 16  # exactly the target a bucket


def test_the_rule_doubles_past_the_target_and_stops_at_the_cap():
    assert default_num_buckets(16 * 256 * MIB + 1) == 32
    assert default_num_buckets(100 << 30) == 512  # 400 buckets of 256 MiB, rounded up to a power of two
    assert default_num_buckets(256 << 30) == 1024
    assert default_num_buckets(1 << 50) == MAX_DEFAULT_BUCKETS == 1024


def test_the_target_property_sets_the_rule():
    assert default_num_buckets(40 * MIB, {"indexeddf.buckets.targetFileSize": "1mb"}) == 64
    assert default_num_buckets(40 * MIB, {"indexeddf.buckets.targetFileSize": str(MIB)}) == 64
    assert default_num_buckets(40 * MIB, {"indexeddf.buckets.targetFileSize": "1GB"}) == 16


def test_the_target_property_takes_deltas_sizes_and_refuses_others():
    assert config.parse_byte_size("128mb") == 128 * MIB
    assert config.parse_byte_size("1g") == 1 << 30
    assert config.parse_byte_size(" 4096 ") == 4096
    for bad in ("0", "-1", "1.5mb", "12 parsecs", ""):
        with pytest.raises(InvalidOptionError, match="targetFileSize"):
            config.validate({"indexeddf.buckets.targetFileSize": bad})


# -- creating a table -------------------------------------------------------------------------
def test_small_data_keeps_16_buckets(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(1000), ["k"])
    assert t.num_buckets == 16


def test_a_small_target_gives_more_buckets_that_every_engine_reads(tmp_path):
    path = str(tmp_path / "t")
    data = rows(5000)
    t = IndexedTable.create(path, data, ["k"], properties=SMALL_TARGET)
    want = default_num_buckets(data.nbytes, SMALL_TARGET)
    assert t.num_buckets == want > 16
    assert {a.bucket for a in t.snapshot.live_files()} == set(range(want))
    expected = list(zip(data.column("k").to_pylist(), data.column("v").to_pylist()))
    assert duckdb_rows(path) == expected
    assert delta_rs_rows(path) == expected
    found = t.lookup([3, 4999, 77, 10_000])
    assert sorted(found.column("k").to_pylist()) == [3, 77, 4999]
    # The count is chosen once: an append (here of far more data) keeps it.
    t.append(rows(20_000, start=5000))
    assert IndexedTable.for_path(path).num_buckets == want
    assert IndexedTable.for_path(path).lookup([20_000]).column("v").to_pylist() == ["value-00020000"]


def test_an_explicit_count_wins_over_the_rule(tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows(5000), ["k"], num_buckets=3, properties=SMALL_TARGET)
    assert t.num_buckets == 3


def test_convert_chooses_the_count_from_the_files_bytes(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(5000))
    target = {"indexeddf.buckets.targetFileSize": "1kb"}  # Parquet: about half the Arrow bytes
    t = IndexedTable.convert(path, ["k"], properties=target)
    size = sum(a.size for a in t.snapshot.live_files())
    assert t.num_buckets == default_num_buckets(size, target) > 16
    assert sorted(t.lookup([17, 4321]).column("k").to_pylist()) == [17, 4321]


# -- from Spark -------------------------------------------------------------------------------
def test_a_spark_write_chooses_the_count_from_its_plans_size(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 5000).selectExpr("id AS k", "format_string('value-%08d', id) AS v")
    (df.write.format("indexeddf").option("indexColumns", "k")
     .option("indexeddf.buckets.targetFileSize", "4kb").save(path))
    estimate = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # py4j gives an int
    t = IndexedTable.for_path(path)
    assert t.num_buckets == default_num_buckets(estimate, SMALL_TARGET) > 16
    expected = [(i, f"value-{i:08d}") for i in range(5000)]
    assert duckdb_rows(path) == expected
    assert sorted(t.lookup([0, 4999]).column("k").to_pylist()) == [0, 4999]
    # Small data through Spark keeps 16, and an append keeps the table's count.
    small = str(tmp_path / "small")
    df.limit(10).write.format("indexeddf").option("indexColumns", "k").save(small)
    assert IndexedTable.for_path(small).num_buckets == 16
    df.write.format("indexeddf").mode("append").save(small)
    assert IndexedTable.for_path(small).num_buckets == 16


def test_create_from_a_spark_dataframe_chooses_the_count(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 5000).selectExpr("id AS k", "format_string('value-%08d', id) AS v")
    t = IndexedTable.create(path, df, ["k"], properties=SMALL_TARGET)
    assert t.num_buckets > 16
    assert {a.bucket for a in t.snapshot.live_files()} <= set(range(t.num_buckets))
    assert duckdb_rows(path) == [(i, f"value-{i:08d}") for i in range(5000)]


# -- changing the count with optimize ---------------------------------------------------------
def table_of_many_files(path: str, num_buckets: int = 4) -> IndexedTable:
    """A table of 4 commits (several files a bucket) with a secondary index on ``v``."""
    t = IndexedTable.create(path, rows(1000), ["k"], num_buckets=num_buckets)
    for start in (1000, 2000, 3000):
        t.append(rows(1000, start))
    t.create_index("by_v", ["v"])
    return t


def assert_bucketed(path: str, t: IndexedTable) -> None:
    """Every live file holds exactly rows of its bucket under the table's count, read by pyarrow."""
    import pyarrow.parquet as pq

    for add in t.snapshot.live_files():
        keys = pq.read_table(os.path.join(path, add.path), columns=["k"]).column("k")
        assert 0 <= add.bucket < t.num_buckets
        assert set(bucket_ids([keys], t.num_buckets).tolist()) == {add.bucket}, add.path


def test_optimize_changes_the_bucket_count(tmp_path):
    path = str(tmp_path / "t")
    t = table_of_many_files(path)
    before, old_version = duckdb_rows(path), t.version
    version = t.optimize(mode="full", num_buckets=8)
    t = IndexedTable.for_path(path)
    assert version == t.version == old_version + 1  # one batch: one commit
    assert t.num_buckets == 8 and t.snapshot.indexes["primary"].numBuckets == 8
    assert t.snapshot.indexes["by_v"].numBuckets == 4  # a secondary index keeps its own count
    assert sorted(a.bucket for a in t.snapshot.live_files()) == list(range(8))  # one file a bucket
    assert_bucketed(path, t)
    assert duckdb_rows(path) == before == delta_rs_rows(path)
    assert t.history()[0].operation == "OPTIMIZE"
    # Lookups through both rebuilt indexes, now and at the version before.
    assert sorted(t.lookup([5, 3999, 4000]).column("k").to_pylist()) == [5, 3999]
    assert t.lookup(["value-00002500"], index="by_v").column("k").to_pylist() == [2500]
    assert "index files read: 1 " in t.explain("k = 7")  # answered from one bucket of the index
    old = IndexedTable.for_path(path, version=old_version)
    assert old.num_buckets == 4 and old.lookup([7]).column("v").to_pylist() == ["value-00000007"]
    # An append afterwards goes to the new buckets.
    t.append(rows(500, 4000))
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 8
    assert_bucketed(path, t)
    assert t.lookup([4321]).column("v").to_pylist() == ["value-00004321"]
    assert len(duckdb_rows(path)) == len(delta_rs_rows(path)) == 4500


def test_a_table_read_in_several_batches_is_compacted_in_a_second_commit(tmp_path, monkeypatch):
    from indexeddf.writer import maintenance

    path = str(tmp_path / "t")
    t = table_of_many_files(path)
    before, old_version = duckdb_rows(path), t.version
    monkeypatch.setattr(maintenance, "OPTIMIZE_BATCH_BYTES", 1)  # every old file is a batch of its own
    t.optimize(mode="full", num_buckets=2)
    t = IndexedTable.for_path(path)
    assert t.version == old_version + 2
    assert sorted(a.bucket for a in t.snapshot.live_files()) == [0, 1]
    assert_bucketed(path, t)
    assert duckdb_rows(path) == before
    assert sorted(t.lookup([0, 1, 2, 3999]).column("k").to_pylist()) == [0, 1, 2, 3999]


def test_changing_the_count_of_an_empty_table(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(0), ["k"])
    t.optimize(mode="full", num_buckets=32)
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 32
    t.append(rows(100))
    assert_bucketed(path, IndexedTable.for_path(path))
    assert delta_rs_rows(path) == duckdb_rows(path)


def test_a_bucket_count_change_is_refused_where_it_cannot_hold(tmp_path):
    t = table_of_many_files(str(tmp_path / "t"))
    with pytest.raises(InvalidOptionError, match="mode='full'"):
        t.optimize(mode="quick", num_buckets=8)
    with pytest.raises(InvalidOptionError, match="num_buckets"):
        t.optimize(mode="full", num_buckets=0)
    t.optimize(mode="full", num_buckets=4)  # the count it has: a plain full optimize
    assert IndexedTable.for_path(t.path).num_buckets == 4


def test_a_concurrent_append_and_a_bucket_count_change_do_not_both_commit(tmp_path):
    """Delta's rules for a metadata change: the append that lost fails (MetadataChangedError);
    the change that lost to an append fails (ConcurrentAppendError), as the appended files
    carry the old buckets. Either way nothing of the loser stays and the rows are right."""
    from indexeddf.errors import ConcurrentAppendError, MetadataChangedError
    from indexeddf.writer import maintenance, operations

    path = str(tmp_path / "t")
    t = table_of_many_files(path)
    # The change read version v; an append commits v + 1 first.
    read = t.snapshot
    IndexedTable.for_path(path).append(rows(10, 5000))
    with pytest.raises(ConcurrentAppendError):
        maintenance.optimize(read, "full", num_buckets=8)
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 4 and len(duckdb_rows(path)) == 4010
    on_disk = {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(os.path.join(path, "data")) for f in fs}
    assert on_disk == {a.path for a in t.snapshot.live_files()}  # the failed change's files were deleted
    # The append read version v; the change commits v + 1 first.
    read = t.snapshot
    IndexedTable.for_path(path).optimize(mode="full", num_buckets=8)
    with pytest.raises(MetadataChangedError):
        operations.append(read, rows(10, 6000))
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 8 and len(duckdb_rows(path)) == 4010
    assert_bucketed(path, t)


def test_spark_optimize_changes_the_bucket_count(spark, tmp_path):
    path = str(tmp_path / "t")
    t = table_of_many_files(path)
    before = duckdb_rows(path)
    t.optimize(mode="full", num_buckets=8, spark=spark)
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 8 and t.snapshot.indexes["primary"].numBuckets == 8
    assert sorted(a.bucket for a in t.snapshot.live_files()) == list(range(8))
    assert_bucketed(path, t)
    assert duckdb_rows(path) == before == delta_rs_rows(path)
    assert sorted(t.lookup([5, 3999]).column("k").to_pylist()) == [5, 3999]
    assert t.lookup(["value-00002500"], index="by_v").column("k").to_pylist() == [2500]
    # Spark reads it bucketed by the new count.
    got = spark.read.format("indexeddf").load(path).where("k = 2500").select("v").collect()
    assert [r.v for r in got] == ["value-00002500"]


def test_the_command_changes_the_bucket_count(tmp_path):
    import json
    import subprocess

    path = str(tmp_path / "t")
    table_of_many_files(path)
    before = duckdb_rows(path)
    r = subprocess.run([sys.executable, "-m", "indexeddf.cli", "--json", "optimize", path, "--mode", "full",
                        "--num-buckets", "8"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["committed"]
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 8 and duckdb_rows(path) == before
    assert_bucketed(path, t)


def test_a_partitioned_table_changes_its_bucket_count_inside_its_partitions(tmp_path):
    path = str(tmp_path / "t")
    data = rows(2000).append_column("p", pa.array([["a", "b", "c"][i % 3] for i in range(2000)], pa.string()))
    t = IndexedTable.create(path, data, ["k"], num_buckets=4, partition_by=["p"])
    t.append(data.slice(0, 100).set_column(0, "k", pa.array(np.arange(5000, 5100), pa.int64())))
    before = duckdb_delta().execute(f"SELECT k, v, p FROM delta_scan('{path}') ORDER BY k").fetchall()
    t.optimize(mode="full", num_buckets=8)
    t = IndexedTable.for_path(path)
    assert t.num_buckets == 8
    assert_bucketed(path, t)
    # One file per (partition, bucket), each in its partition.
    pairs = [(a.partitionValues["p"], a.bucket) for a in t.snapshot.live_files()]
    assert len(pairs) == len(set(pairs)) == 3 * 8
    assert duckdb_delta().execute(f"SELECT k, v, p FROM delta_scan('{path}') ORDER BY k").fetchall() == before
    assert sorted(t.lookup([1, 5050]).column("p").to_pylist()) == ["b", "c"]


def test_create_table_as_select_chooses_the_count(spark, tmp_path):
    path = str(tmp_path / "ctas")
    spark.sql("DROP TABLE IF EXISTS bucket_count_ctas")
    try:
        spark.sql(f"CREATE TABLE bucket_count_ctas USING indexeddf OPTIONS (indexColumns 'k') "
                  f"TBLPROPERTIES ('indexeddf.buckets.targetFileSize' = '4kb') LOCATION '{path}' "
                  "AS SELECT id AS k, format_string('value-%08d', id) AS v FROM range(5000)")
        t = IndexedTable.for_path(path)
        assert t.num_buckets > 16
        assert t.properties["indexeddf.buckets.targetFileSize"] == "4kb"
        assert duckdb_rows(path) == [(i, f"value-{i:08d}") for i in range(5000)]
        assert spark.sql("SELECT v FROM bucket_count_ctas WHERE k = 4321").collect()[0].v == "value-00004321"
    finally:
        spark.sql("DROP TABLE IF EXISTS bucket_count_ctas")
