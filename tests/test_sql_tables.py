"""Statements on tables ``IndexedDFCatalog`` loads (``IndexedDFTable``), as Delta users type them:
``df.writeTo(name).append()`` / ``.overwrite(condition)``, ``TRUNCATE TABLE`` (Delta's ``TRUNCATE``
commit, removing every row), ``SHOW PARTITIONS`` of a partitioned table, ``DESCRIBE TABLE indexeddf.`/path```, and
reads that keep the version a DataFrame loaded. Rows are checked with delta-rs and DuckDB's delta
extension.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402

pytestmark = pytest.mark.spark


def duck(path: str) -> list[tuple]:
    return sorted(duckdb_delta().execute(f"SELECT id, v FROM delta_scan('{path}')").fetchall())


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / "tables")
    IndexedTable.create(path, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), index_columns=["id"],
                        num_buckets=4)
    spark.sql(f"CREATE TABLE v2_rows USING indexeddf LOCATION '{path}'")
    yield path
    spark.sql("DROP TABLE IF EXISTS v2_rows")


def test_write_to_appends_and_overwrites_through_the_writer(spark, table):
    path = table
    loaded = spark.table("v2_rows")  # keeps version 0
    spark.createDataFrame([(4, "d"), (5, "e")], "id long, v string").writeTo("v2_rows").append()
    assert IndexedTable.for_path(path).history()[0].operation == "WRITE"
    assert duck(path) == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
    assert loaded.count() == 3
    spark.createDataFrame([(9, "z")], "id long, v string").writeTo("v2_rows").overwrite(F.col("id") >= 4)
    assert duck(path) == [(1, "a"), (2, "b"), (3, "c"), (9, "z")]
    spark.createDataFrame([(7, "q")], "id long, v string").writeTo(f"indexeddf.`{path}`").overwrite(F.lit(True))
    assert duck(path) == [(7, "q")]
    assert sorted(tuple(r) for r in spark.table("v2_rows").collect()) == [(7, "q")]
    assert IndexedTable.for_path(path).index_columns == ["id"]
    # Schema changes other than ADD COLUMNS are refused, not made to the catalog entry alone.
    with pytest.raises(Exception) as refused:
        spark.sql("ALTER TABLE v2_rows RENAME COLUMN v TO w")
    assert isinstance(indexeddf.spark.typed_error(refused.value), InvalidOptionError)
    assert spark.table("v2_rows").columns == ["id", "v"]


def test_write_to_create_makes_a_table(spark, tmp_path):
    spark.sql("DROP TABLE IF EXISTS v2_created")
    try:
        (spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").writeTo("v2_created")
         .using("indexeddf").option("indexColumns", "id").create())
        location = spark.sql("DESCRIBE TABLE EXTENDED v2_created").where("col_name = 'Location'").first()[1]
        path = location.removeprefix("file:")
        assert duck(path) == [(1, "a"), (2, "b")] and IndexedTable.for_path(path).index_columns == ["id"]
    finally:
        spark.sql("DROP TABLE IF EXISTS v2_created")


def test_truncate_table_is_one_commit_removing_every_row(spark, table):
    path = table
    before = IndexedTable.for_path(path).version
    assert spark.sql("TRUNCATE TABLE v2_rows").collect() == []
    t = IndexedTable.for_path(path)
    assert t.version == before + 1 and t.to_arrow().num_rows == 0
    dt = DeltaTable(path)
    assert dt.to_pyarrow_table().num_rows == 0
    # Delta's TRUNCATE commit: no parameters, the files it removed.
    last = dt.history(1)[0]
    assert (last["operation"], last.get("operationParameters", {})) == ("TRUNCATE", {})
    assert int(last["operationMetrics"]["numRemovedFiles"]) == DeltaTable(path, version=before).get_add_actions().num_rows
    assert spark.sql("SELECT count(*) FROM v2_rows VERSION AS OF 0").first()[0] == 3


def test_show_partitions_and_describe_a_path(spark, tmp_path):
    path = str(tmp_path / "parts")
    (spark.createDataFrame([(1, "a", "x"), (2, "b", "y"), (3, "c", "x")], "id long, v string, day string")
     .write.format("indexeddf").option("indexColumns", "id").partitionBy("day").save(path))
    spark.sql(f"CREATE TABLE v2_parts USING indexeddf LOCATION '{path}'")
    try:
        want = sorted(f"day={d}" for d in duckdb_delta().execute(
            f"SELECT DISTINCT day FROM delta_scan('{path}')").fetchnumpy()["day"])
        assert [r[0] for r in spark.sql("SHOW PARTITIONS v2_parts").collect()] == want == ["day=x", "day=y"]
        assert [r[0] for r in spark.sql("SHOW PARTITIONS v2_parts PARTITION (day = 'y')").collect()] == ["day=y"]
        described = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE indexeddf.`{path}`").collect()}
        assert described["id"] == "bigint" and described["day"] == "string"
        assert described["Part 0"] == "day" and described["Part 1"] == "bucket(16, id)"
    finally:
        spark.sql("DROP TABLE IF EXISTS v2_parts")


def test_spark_bucketing_clauses_are_the_index_columns_and_bucket_count(spark):
    names = ("v2_clustered", "v2_bucketed")
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    try:
        spark.sql("CREATE TABLE v2_clustered USING indexeddf CLUSTERED BY (id) INTO 8 BUCKETS "
                  "AS SELECT id, id % 3 AS k FROM range(20)")
        spark.range(20).selectExpr("id", "id % 3 AS k").write.format("indexeddf").bucketBy(8, "id").saveAsTable(
            "v2_bucketed")
        for name in names:
            described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
            assert described["Part 0"] == "bucket(8, id)"
            path = described["Location"].removeprefix("file:")
            t = IndexedTable.for_path(path)
            assert (t.index_columns, t.num_buckets) == (["id"], 8)
            assert duckdb_delta().execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0] == 20
        with pytest.raises(Exception) as twice:
            spark.sql("CREATE TABLE v2_clash USING indexeddf OPTIONS (indexColumns 'k') CLUSTERED BY (id) INTO 8 "
                      "BUCKETS AS SELECT id, id % 3 AS k FROM range(20)")
        assert isinstance(indexeddf.spark.typed_error(twice.value), InvalidOptionError)
    finally:
        for name in (*names, "v2_clash"):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
