"""Spark SQL's ``MERGE WITH SCHEMA EVOLUTION INTO`` (and a plain MERGE with the session's
``spark.indexeddf.schema.autoMerge.enabled``, as Delta's autoMerge applies to MERGE): the
source's columns the table lacks join it in the MERGE's own commit through the ``*`` clauses,
against DuckDB running the same MERGE on a table given the column first (ALTER then MERGE),
and delta-rs and DuckDB's delta extension reading the log."""

from __future__ import annotations

import os
import sys

import deltalake
import pyarrow as pa
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from test_changes import Duck, rows  # noqa: E402
from test_merge_schema import ordered, with_w  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402

pytestmark = pytest.mark.spark
AUTO_MERGE = "spark.indexeddf.schema.autoMerge.enabled"
NAMES = ["k", "v", "s", "w"]
DUCK_UPSERT = ("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
               "WHEN MATCHED THEN UPDATE SET k = s.k, v = s.v, s = s.s, w = s.w "
               "WHEN NOT MATCHED THEN INSERT (k, v, s, w) VALUES (s.k, s.v, s.s, s.w)")


@pytest.fixture
def registered(spark):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    return spark


def source_view(spark, table: pa.Table, name: str = "src") -> None:
    spark.createDataFrame(table.to_pylist(), ", ".join(f"{f.name} {'bigint' if f.name in 'kv' else 'string'}"
                                                       for f in table.schema)).createOrReplaceTempView(name)


def sql_rows(spark, sql: str) -> list:
    try:
        return [r.asDict() for r in spark.sql(sql).collect()]
    except Exception as e:
        typed = indexeddf.spark.typed_error(e)
        if typed is None:
            raise
        raise typed from None


@pytest.mark.parametrize("how", ["WITH SCHEMA EVOLUTION", "autoMerge"])
@pytest.mark.parametrize("vectors", [False, True])
def test_the_star_clauses_add_the_source_columns_in_the_merge_commit(registered, conf, tmp_path, how, vectors):
    spark = registered
    path = str(tmp_path / "t")
    first = rows(list(range(0, 40, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    before = spark.read.format("indexeddf").load(path)
    source = with_w([4, 6, 100, 101], 500)
    source_view(spark, source)
    evolution = ""
    if how == "autoMerge":
        conf(AUTO_MERGE, "true")
    else:
        evolution = " WITH SCHEMA EVOLUTION"
    result = sql_rows(spark, f"MERGE{evolution} INTO indexeddf.`{path}` AS t USING src AS s ON t.k = s.k "
                             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert result == [{"num_affected_rows": 4, "num_updated_rows": 2, "num_deleted_rows": 0, "num_inserted_rows": 2}]
    duck = Duck(first)
    duck.run("ALTER TABLE target ADD COLUMN w VARCHAR")
    duck.run(DUCK_UPSERT, source)
    t = IndexedTable.for_path(path)
    assert t.version == 1 and t.schema.names == NAMES  # one commit, the column at the end
    assert t.history(1)[0].parameters.get("mergeSchema") is True
    want = ordered(duck.rows(), NAMES)
    assert ordered(t.to_arrow(), NAMES) == want
    got = [r.asDict() for r in spark.sql(f"SELECT * FROM indexeddf.`{path}`").collect()]
    assert ordered(pa.Table.from_pylist(got), NAMES) == want
    assert ordered(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table(), NAMES) == want
    if not vectors:
        assert ordered(deltalake.DeltaTable(path).to_pyarrow_table(), NAMES) == want
    # A DataFrame loaded before keeps its version and schema.
    assert before.columns == ["k", "v", "s"] and before.count() == first.num_rows
    # A second evolving MERGE with a condition on the * clause and an explicit insert.
    more = with_w([8, 10, 102], 900)
    source_view(spark, more)
    sql_rows(spark, f"MERGE{evolution} INTO indexeddf.`{path}` AS t USING src AS s ON t.k = s.k "
                    "WHEN MATCHED AND s.k > 8 THEN UPDATE SET * "
                    "WHEN NOT MATCHED THEN INSERT (k, w) VALUES (s.k, concat(s.w, '!'))")
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED AND s.k > 8 THEN UPDATE SET k = s.k, v = s.v, s = s.s, w = s.w "
             "WHEN NOT MATCHED THEN INSERT (k, w) VALUES (s.k, concat(s.w, '!'))", more)
    assert ordered(IndexedTable.for_path(path).to_arrow(), NAMES) == ordered(duck.rows(), NAMES)


def test_without_evolution_or_a_star_clause_the_schema_stays(registered, conf, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    source_view(spark, with_w([1, 50], 0))
    # A plain MERGE: Spark's * takes the table's columns, the source's others are left out.
    sql_rows(spark, f"MERGE INTO indexeddf.`{path}` t USING src s ON t.k = s.k "
                    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    t = IndexedTable.for_path(path)
    assert t.schema.names == ["k", "v", "s"] and t.lookup([50]).to_pylist() == [{"k": 50, "v": 1, "s": "n50"}]
    # Evolution with explicit assignments only: nothing to add (Delta's rule).
    sql_rows(spark, f"MERGE WITH SCHEMA EVOLUTION INTO indexeddf.`{path}` t USING src s ON t.k = s.k "
                    "WHEN MATCHED THEN UPDATE SET v = s.v + 100")
    t = IndexedTable.for_path(path)
    assert t.schema.names == ["k", "v", "s"] and t.lookup([1]).to_pylist() == [{"k": 1, "v": 100, "s": "n1"}]
    # autoMerge off again: a plain MERGE keeps the schema.
    conf(AUTO_MERGE, "false")
    sql_rows(spark, f"MERGE INTO indexeddf.`{path}` t USING src s ON t.k = s.k WHEN MATCHED THEN UPDATE SET *")
    assert IndexedTable.for_path(path).schema.names == ["k", "v", "s"]


def test_a_catalog_table_evolves_and_its_entry_reads_the_new_column(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    spark.sql("DROP TABLE IF EXISTS grown_by_merge")
    spark.sql(f"CREATE TABLE grown_by_merge USING indexeddf LOCATION '{path}'")
    try:
        source_view(spark, with_w([3, 60], 7))
        sql_rows(spark, "MERGE WITH SCHEMA EVOLUTION INTO grown_by_merge t USING src s ON t.k = s.k "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        assert IndexedTable.for_path(path).schema.names == NAMES
        got = sorted((r.k, r.w) for r in spark.sql("SELECT k, w FROM indexeddf.`%s` WHERE k IN (2, 3, 60)" % path)
                     .collect())
        assert got == [(2, None), (3, "w3"), (60, "w60")]
    finally:
        spark.sql("DROP TABLE IF EXISTS grown_by_merge")


def test_a_source_column_differing_only_by_case_is_refused_and_nothing_commits(registered, tmp_path):
    from indexeddf.errors import ColumnCaseConflictError

    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    spark.createDataFrame([(1, 5, "x")], "k bigint, V bigint, s string").createOrReplaceTempView("src")
    with pytest.raises(ColumnCaseConflictError):
        sql_rows(spark, f"MERGE WITH SCHEMA EVOLUTION INTO indexeddf.`{path}` t USING src s ON t.k = s.k "
                        "WHEN MATCHED THEN UPDATE SET *")
    assert IndexedTable.for_path(path).version == 0


def test_a_source_struct_with_a_new_field_evolves_the_struct_in_the_merge_commit(registered, tmp_path):
    """Through Spark's analyzer: the * clauses of MERGE WITH SCHEMA EVOLUTION add a struct's
    new field (Delta's rule for nested columns), old rows read it as NULL."""
    spark = registered
    path = str(tmp_path / "t")
    point = pa.struct([("a", pa.int64()), ("b", pa.string())])
    first = pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                      "p": pa.array([{"a": i, "b": f"b{i}"} for i in (1, 2, 3)], point)})
    IndexedTable.create(path, first, ["k"], num_buckets=2)
    spark.sql("SELECT 2L AS k, named_struct('a', 20L, 'b', 'B2', 'c', 'C2') AS p UNION ALL "
              "SELECT 9L, named_struct('a', 90L, 'b', 'B9', 'c', 'C9')").createOrReplaceTempView("nested_src")
    result = sql_rows(spark, f"MERGE WITH SCHEMA EVOLUTION INTO indexeddf.`{path}` AS t USING nested_src AS s "
                             "ON t.k = s.k WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert result == [{"num_affected_rows": 2, "num_updated_rows": 1, "num_deleted_rows": 0, "num_inserted_rows": 1}]
    t = IndexedTable.for_path(path)
    assert t.version == 1 and [f.name for f in t.schema.field("p").type] == ["a", "b", "c"]
    want = {1: {"a": 1, "b": "b1", "c": None}, 2: {"a": 20, "b": "B2", "c": "C2"},
            3: {"a": 3, "b": "b3", "c": None}, 9: {"a": 90, "b": "B9", "c": "C9"}}
    assert {r["k"]: r["p"] for r in t.to_arrow().to_pylist()} == want
    got = spark.sql(f"SELECT k, p FROM indexeddf.`{path}`").collect()
    assert {r.k: r.p.asDict() for r in got} == want
    theirs = duckdb_delta().execute(f"SELECT k, p FROM delta_scan('{path}')").to_arrow_table()
    assert {r["k"]: r["p"] for r in theirs.to_pylist()} == want
