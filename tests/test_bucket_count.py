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

sys.path.insert(0, os.path.dirname(__file__))
from oracles import duckdb_delta  # noqa: E402

MIB = 1 << 20
SMALL_TARGET = {"indexeddf.buckets.targetFileSize": "4kb"}
"""A target small enough that a few thousand rows need more than 16 buckets."""


def rows(n: int, start: int = 0) -> pa.Table:
    k = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"k": k, "v": pa.array([f"value-{i:08d}" for i in k])})


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
