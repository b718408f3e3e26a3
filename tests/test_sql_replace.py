"""Delta's replace statements on indexeddf tables, as Delta users type them: ``CREATE OR REPLACE
TABLE t (...) USING indexeddf``, ``REPLACE TABLE t ... [AS SELECT]``, ``CREATE OR REPLACE TABLE t
... AS SELECT`` and ``df.writeTo(t).createOrReplace()`` / ``.replace()``. A replace is a new
version of the table (its history and older versions stay), with Delta's operation name; a
missing table is created by ``CREATE OR REPLACE`` and refused by ``REPLACE``. ``writeTo(t)
.overwritePartitions()`` is Delta's dynamic partition overwrite.

Rows, schema, partitioning, properties and history are checked with delta-rs and DuckDB's delta
extension, older versions with delta-rs's time travel.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.errors import AnalysisException

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402

pytestmark = pytest.mark.spark


def typed(spark, statement: str):
    """Run ``statement``; the typed indexeddf error it fails with, else None."""
    try:
        spark.sql(statement).collect()
    except Exception as e:  # noqa: BLE001
        return indexeddf.spark.typed_error(e)
    return None


@pytest.fixture
def entry(spark, tmp_path):
    """A catalog entry ``rep`` over a table of 6 rows (index ``k``, 2 buckets) with a secondary
    index on ``v``; yields its path."""
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    path = str(tmp_path / "rep")
    t = IndexedTable.create(path, pa.table({"k": list(range(6)), "v": [f"a{i}" for i in range(6)]}), ["k"], 2)
    t.create_index("by_v", ["v"])
    spark.sql(f"CREATE TABLE rep USING indexeddf LOCATION '{path}'")
    yield path
    spark.sql("DROP TABLE IF EXISTS rep")


def test_create_or_replace_as_select_is_a_new_version_with_delta_s_operation(spark, entry):
    path = entry
    before = DeltaTable(path).version()
    spark.sql("CREATE OR REPLACE TABLE rep USING indexeddf PARTITIONED BY (p) CLUSTERED BY (id) INTO 4 BUCKETS "
              "COMMENT 'replaced' TBLPROPERTIES ('delta.appendOnly' = 'false') "
              "AS SELECT id, id * 10 AS w, CAST(id % 2 AS STRING) AS p FROM range(5)")
    dt = DeltaTable(path)
    assert dt.version() == before + 1
    assert sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "w": i * 10, "p": str(i % 2)} for i in range(5)]
    assert dt.metadata().partition_columns == ["p"] and dt.metadata().description == "replaced"
    assert dt.metadata().configuration == {"delta.appendOnly": "false", "indexeddf.indexColumns": '["id"]',
                                           "indexeddf.numBuckets": "4"}
    last = dt.history(1)[0]
    assert last["operation"] == "CREATE OR REPLACE TABLE AS SELECT"
    params = last["operationParameters"]
    assert json.loads(params["partitionBy"]) == ["p"] and json.loads(params["properties"]) == {
        "delta.appendOnly": "false"}
    assert params["isManaged"] == "false" and last["isBlindAppend"] is False
    # The old version stays readable, by delta-rs and by Spark's time travel.
    assert sorted(DeltaTable(path, version=before).to_pyarrow_table().column("k").to_pylist()) == list(range(6))
    assert sorted(r.k for r in spark.sql(f"SELECT k FROM rep VERSION AS OF {before}").collect()) == list(range(6))
    t = IndexedTable.for_path(path)
    assert t.index_columns == ["id"] and t.num_buckets == 4
    # The secondary index's column is gone: the index is dropped, not left pointing at removed files.
    assert {i.name: i.state for i in t.indexes()} == {"primary": "ACTIVE", "by_v": "DELETED"}
    assert t.lookup([3]).to_pylist() == [{"id": 3, "w": 30, "p": "1"}]


def test_replace_table_with_columns_empties_it_and_keeps_the_secondary_index(spark, entry):
    path = entry
    spark.sql("REPLACE TABLE rep (k BIGINT, v STRING, extra INT) USING indexeddf")
    dt = DeltaTable(path)
    assert dt.to_pyarrow_table().num_rows == 0
    assert [f.name for f in dt.schema().fields] == ["k", "v", "extra"]
    last = dt.history(1)[0]
    assert last["operation"] == "REPLACE TABLE" and int(last["operationMetrics"]["numRemovedFiles"]) > 0
    # Without CLUSTERED BY the table keeps its index columns and bucket count; by_v's column stays.
    t = IndexedTable.for_path(path)
    assert (t.index_columns, t.num_buckets) == (["k"], 2)
    assert {i.name: i.state for i in t.indexes()} == {"primary": "ACTIVE", "by_v": "ACTIVE"}
    spark.sql("INSERT INTO rep VALUES (7, 'b7', 1)")
    assert IndexedTable.for_path(path).lookup(["b7"], index="by_v").to_pylist() == [{"k": 7, "v": "b7", "extra": 1}]
    rows = duckdb_delta().execute(f"SELECT k, v, extra FROM delta_scan('{path}')").fetchall()
    assert rows == [(7, "b7", 1)]


def test_replace_of_a_missing_table_fails_and_create_or_replace_creates_it(spark, tmp_path):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("REPLACE TABLE no_such_rep (a INT) USING indexeddf")
    path = str(tmp_path / "fresh")
    spark.sql(f"CREATE OR REPLACE TABLE indexeddf.`{path}` USING indexeddf CLUSTERED BY (id) INTO 2 BUCKETS "
              "AS SELECT id, 'x' AS s FROM range(3)")
    dt = DeltaTable(path)
    assert dt.version() == 0 and dt.history()[0]["operation"] == "CREATE OR REPLACE TABLE AS SELECT"
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2]
    # Without CLUSTERED BY on a new table there is nothing to bucket by: a typed error.
    error = typed(spark, f"CREATE OR REPLACE TABLE indexeddf.`{tmp_path / 'other'}` USING indexeddf AS SELECT 1 AS a")
    assert isinstance(error, InvalidOptionError) and "CLUSTERED BY" in str(error)


def test_write_to_create_or_replace_and_replace(spark, tmp_path):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    spark.sql("DROP TABLE IF EXISTS rep_v2")
    try:
        (spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").writeTo("rep_v2")
         .using("indexeddf").option("indexColumns", "id").createOrReplace())
        location = spark.sql("DESCRIBE TABLE EXTENDED rep_v2").where("col_name = 'Type' OR col_name = 'Location'")
        described = {r[0]: r[1] for r in location.collect()}
        assert described["Type"] == "MANAGED"
        path = described["Location"].removeprefix("file:")
        spark.createDataFrame([(5, 1.5)], "n long, x double").writeTo("rep_v2").option("indexColumns", "n").replace()
        dt = DeltaTable(path)
        assert [h["operation"] for h in dt.history()] == [
            "REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE AS SELECT"]
        assert dt.to_pyarrow_table().to_pylist() == [{"n": 5, "x": 1.5}]
        assert DeltaTable(path, version=0).to_pyarrow_table().num_rows == 2
        assert spark.table("rep_v2").columns == ["n", "x"]
    finally:
        spark.sql("DROP TABLE IF EXISTS rep_v2")


def test_replace_refusals_are_typed(spark, entry, tmp_path):
    version = DeltaTable(entry).version()
    error = typed(spark, f"CREATE OR REPLACE TABLE rep USING indexeddf LOCATION '{tmp_path / 'elsewhere'}' "
                         "AS SELECT 1 AS k")
    assert isinstance(error, InvalidOptionError) and "LOCATION" in str(error)
    assert DeltaTable(entry).version() == version  # nothing committed


def test_write_to_overwrite_partitions_replaces_the_partitions_it_writes(spark, tmp_path):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    path = str(tmp_path / "dpo")
    data = pa.table({"k": [1, 2, 3, 4], "v": ["a", "b", "c", "d"], "day": ["x", "y", "x", "z"]})
    IndexedTable.create(path, data, ["k"], 2, partition_by=["day"])
    (spark.createDataFrame([(9, "n", "y"), (8, "m", "w")], "k long, v string, day string")
     .writeTo(f"indexeddf.`{path}`").overwritePartitions())
    # Delta's dynamic partition overwrite: partitions y (replaced) and w (new); x and z untouched.
    rows = sorted(duckdb_delta().execute(f"SELECT k, v, day FROM delta_scan('{path}')").fetchall())
    assert rows == [(1, "a", "x"), (3, "c", "x"), (4, "d", "z"), (8, "m", "w"), (9, "n", "y")]
    last = DeltaTable(path).history(1)[0]
    assert last["operation"] == "WRITE" and last["operationParameters"]["isDynamicPartitionOverwrite"] == "true"
    assert IndexedTable.for_path(path).lookup([9, 2]).to_pylist() == [{"k": 9, "v": "n", "day": "y"}]
