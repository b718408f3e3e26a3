"""The Python API's changes with Spark run as Spark SQL statements (``spark/statements.py``):
``t.merge(spark_df, ...)`` as ``MERGE INTO``, ``t.update(..., spark=)`` as ``UPDATE``,
``t.delete(..., spark=)`` as ``DELETE FROM``. Catalyst evaluates every expression, so what the
in-process engine refuses (``sha2``, ``date_add`` over the target's columns) works; every
change equals DuckDB's on the previous version; the commit is Delta's MERGE / UPDATE / DELETE
with its metrics, which the call returns. What a statement cannot carry (``txn``,
``storage_options``, a session without the connector) keeps the engine.

Which path ran is told by pass-through spies at the module boundary: ``statements.run``
(the statement), ``SparkSource.stage`` and ``changes.engine.execute`` (the engine)."""

from __future__ import annotations

import os
import sys

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from test_changes import SCHEMA, Duck, ordered, rows  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.changes import engine  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402
from indexeddf.spark import statements  # noqa: E402
from indexeddf.spark.merge_source import SparkSource  # noqa: E402

pytestmark = pytest.mark.spark

DDL = "k bigint, v bigint, s string"


@pytest.fixture
def ran(monkeypatch):
    """The paths the changes took, in order: ``("sql", operation)``, ``"staged"`` (a Spark
    source staged for the engine), ``("engine", operation)``."""
    paths: list = []
    run, stage, execute = statements.run, SparkSource.stage, engine.execute

    def spy_run(spark, snapshot, operation, sql, txn=None):
        paths.append(("sql", operation))
        return run(spark, snapshot, operation, sql, txn)

    def spy_stage(self, *args, **kwargs):
        paths.append("staged")
        return stage(self, *args, **kwargs)

    def spy_execute(snapshot, change, *args, **kwargs):
        paths.append(("engine", change.operation))
        return execute(snapshot, change, *args, **kwargs)

    monkeypatch.setattr(statements, "run", spy_run)
    monkeypatch.setattr(SparkSource, "stage", spy_stage)
    monkeypatch.setattr(engine, "execute", spy_execute)
    return paths


def _table(tmp_path, vectors: bool, **kwargs):
    path = str(tmp_path / "t")
    first = rows(list(range(0, 80, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()}, **kwargs)
    return path, t, Duck(first)


def _same(path: str, duck: Duck) -> None:
    want = ordered(duck.rows())
    assert ordered(IndexedTable.for_path(path).to_arrow()) == want
    assert ordered(duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()) == want


@pytest.mark.parametrize("vectors", [False, True])
def test_merge_of_a_spark_source_is_spark_sql_and_takes_what_the_engine_refuses(spark, tmp_path, ran, vectors):
    path, t, duck = _table(tmp_path, vectors)
    src = rows(list(range(30, 110, 3)), 500, "b")

    def build(m):
        return (m.when_matched_update({"s": "sha2(t.s, 256)", "v": "t.v + s.v"}, "t.k % 4 = 0")
                .when_matched_delete("date_add(DATE '2020-01-01', CAST(t.k AS INT)) > DATE '2020-03-01'")
                .when_not_matched_insert({"k": "s.k", "s": "sha2(s.s, 256)"}, "s.k < 100")
                .when_not_matched_by_source_update({"v": "datediff(date_add(DATE '2020-01-01', CAST(t.v AS INT)), "
                                                         "DATE '2020-01-01') * 10"}, "t.k < 20"))
    with pytest.raises(InvalidOptionError, match="sha2"):  # the engine's subset: an Arrow source
        build(t.merge(src, "t.k = s.k", "s", "t")).execute()
    assert ran == [("engine", "MERGE")] and IndexedTable.for_path(path).version == 0
    ran.clear()

    df = spark.createDataFrame(src.to_pylist(), DDL).repartition(3)
    m = build(t.merge(df, "t.k = s.k", source_alias="s", target_alias="t")).execute()
    assert ran == [("sql", "MERGE")]
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED AND t.k % 4 = 0 THEN UPDATE SET s = sha256(t.s), v = t.v + s.v "
             "WHEN MATCHED AND DATE '2020-01-01' + CAST(t.k AS INTEGER) > DATE '2020-03-01' THEN DELETE "
             "WHEN NOT MATCHED AND s.k < 100 THEN INSERT (k, s) VALUES (s.k, sha256(s.s)) "
             "WHEN NOT MATCHED BY SOURCE AND t.k < 20 THEN UPDATE SET v = t.v * 10", src)
    _same(path, duck)

    # Delta's MERGE in the history, with its metrics: the ones the call returned.
    entry = IndexedTable.for_path(path).history(1)[0]
    assert entry.operation == "MERGE" and m["version"] == entry.version == 1 and t.version == 1
    assert entry.parameters["predicate"] == "(target.k = source.k)"  # Spark's text, named as the SQL path names them
    assert [c["actionType"] for c in entry.parameters["matchedPredicates"]] == ["update", "delete"]
    om = entry.metrics
    assert (m["num_source_rows"], m["num_target_rows_updated"], m["num_target_rows_deleted"],
            m["num_target_rows_inserted"]) == (om["numSourceRows"], om["numTargetRowsUpdated"],
                                               om["numTargetRowsDeleted"], om["numTargetRowsInserted"])
    assert m["num_source_rows"] == src.num_rows
    before, keys = set(range(0, 80, 2)), set(src.column("k").to_pylist())
    assert m["num_target_rows_updated"] == len({k for k in before & keys if k % 4 == 0}
                                               | {k for k in before - keys if k < 20})
    assert m["num_target_rows_inserted"] == len({k for k in keys - before if k < 100})
    assert m["num_deletion_vectors_added"] == (om["numTargetDeletionVectorsAdded"]) and (
        m["num_deletion_vectors_added"] > 0) == vectors
    assert set(m) == set(t.merge(src, "t.k = s.k", "s", "t").when_matched_delete("s.k < 0").execute())
    assert spark.sql("SHOW VIEWS").where("viewName LIKE 'indexeddf_merge_source_%'").count() == 0


@pytest.mark.parametrize("vectors", [False, True])
def test_update_and_delete_with_spark_are_spark_sql(spark, tmp_path, ran, vectors):
    path, t, duck = _table(tmp_path, vectors)
    with pytest.raises(InvalidOptionError, match="sha2"):  # without spark=: the engine
        t.update({"s": "sha2(s, 256)"}, "k < 10")
    assert ran == [("engine", "UPDATE")]
    ran.clear()

    m = t.update({"s": "sha2(s, 256)", "v": "v + k"}, "k < 10 OR s LIKE 'a3%'", spark=spark)
    duck.run("UPDATE target SET s = sha256(s), v = v + k WHERE k < 10 OR s LIKE 'a3%'")
    _same(path, duck)
    entry = IndexedTable.for_path(path).history(1)[0]
    assert entry.operation == "UPDATE" and m["version"] == entry.version == t.version == 1
    assert m["num_target_rows_updated"] == entry.metrics["numUpdatedRows"] == 5 + 5
    assert m["num_source_rows"] == 0 and m["num_target_rows_inserted"] == 0

    version = t.delete("date_add(DATE '2020-01-01', CAST(v AS INT)) > DATE '2020-01-25' AND k % 3 <> 0",
                       spark=spark)
    duck.run("DELETE FROM target WHERE DATE '2020-01-01' + CAST(v AS INTEGER) > DATE '2020-01-25' AND k % 3 <> 0")
    _same(path, duck)
    assert version == t.version == 2 and IndexedTable.for_path(path).history(1)[0].operation == "DELETE"

    # Nothing matches: nothing committed, the version stays.
    assert t.update({"v": "v + 1"}, "k > 1000", spark=spark)["version"] is None
    assert t.delete("k > 1000", spark=spark) == 2
    # No predicate: every row.
    assert t.delete(spark=spark) == 3 and IndexedTable.for_path(path).to_arrow().num_rows == 0
    assert ran == [("sql", "UPDATE"), ("sql", "DELETE"), ("sql", "UPDATE"), ("sql", "DELETE"), ("sql", "DELETE")]


def test_a_typed_error_of_the_statement_is_raised_as_itself(spark, tmp_path, ran):
    path, t, _ = _table(tmp_path, False)
    df = spark.createDataFrame([(4, 1, "x"), (4, 2, "y")], DDL)
    with pytest.raises(InvalidOptionError, match="multiple source rows matched"):
        t.merge(df, "t.k = s.k", "s", "t").when_matched_update_all().execute()
    with pytest.raises(InvalidOptionError, match="only the last"):
        t.merge(df, "t.k = s.k", "s", "t").when_matched_delete().when_matched_update_all().execute()
    assert IndexedTable.for_path(path).version == 0
    assert ran == [("sql", "MERGE")]


def test_the_default_aliases_and_backticked_names(spark, tmp_path, ran):
    path = str(tmp_path / "a `b` c")
    first = rows(list(range(10)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=2)
    df = spark.createDataFrame(rows([5, 6, 20], 100, "n").to_pylist(), DDL)
    m = t.merge(df, "target.k = source.k").when_matched_update_all().when_not_matched_insert_all().execute()
    assert ran == [("sql", "MERGE")] and m["num_target_rows_updated"] == 2 and m["num_target_rows_inserted"] == 1
    got = {r["k"]: r["v"] for r in IndexedTable.for_path(path).to_arrow().to_pylist()}
    assert got[5] == 100 and got[6] == 101 and got[20] == 102 and len(got) == 11


def test_txn_is_spark_sql_and_stays_idempotent(spark, tmp_path, ran):
    """``txn=(app, version)`` runs the statement with Delta's txnAppId / txnVersion confs: its
    commit carries the txn (delta-rs reads it), a retry of the same version changes nothing,
    and the session's confs are as they were after it."""
    path, t, duck = _table(tmp_path, True)
    src = rows(list(range(30, 90, 5)), 300, "c")
    spark_rows_path = str(tmp_path / "src")
    spark.createDataFrame(src.to_pylist(), DDL).write.parquet(spark_rows_path)
    df = spark.read.parquet(spark_rows_path)
    for _ in range(2):  # the retry commits nothing
        IndexedTable.for_path(path).merge(df, "t.k = s.k", "s", "t", txn=("pipe", 7)) \
            .when_matched_update_all().when_not_matched_insert_all().execute()
    assert ran == [("sql", "MERGE"), ("sql", "MERGE")]
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET "
             "k = s.k, v = s.v, s = s.s WHEN NOT MATCHED THEN INSERT (k, v, s) VALUES (s.k, s.v, s.s)", src)
    _same(path, duck)
    assert IndexedTable.for_path(path).version == 1
    assert DeltaTable(path).transaction_version("pipe") == 7
    assert spark.conf.get(statements.TXN_CONFS[0], None) is None
    ran.clear()
    t = IndexedTable.for_path(path)
    t.update({"v": "v * 2"}, "k < 10", txn=("pipe", 8), spark=spark)
    t.update({"v": "v * 2"}, "k < 10", txn=("pipe", 8), spark=spark)
    assert ran == [("sql", "UPDATE"), ("sql", "UPDATE")]
    duck.run("UPDATE target SET v = v * 2 WHERE k < 10")
    _same(path, duck)
    entry = IndexedTable.for_path(path).history()[0]
    assert entry.version == 2 and entry.parameters["txnAppId"] == "pipe" and entry.parameters["txnVersion"] == 8
    # As a Delta user types it: the confs, then the statement, on a small source (the engine's path).
    spark.sql(f"SET {statements.TXN_CONFS[0]} = pipe")
    spark.sql(f"SET {statements.TXN_CONFS[1]} = 8")
    try:
        spark.sql(f"DELETE FROM indexeddf.`{path}` WHERE k = 40")  # version 8 of pipe is in: nothing
        assert IndexedTable.for_path(path).version == 2
        spark.sql(f"SET {statements.TXN_CONFS[1]} = 9")
        spark.sql(f"MERGE INTO indexeddf.`{path}` t USING (SELECT 40L AS k, 1L AS v, 'x' AS s) s ON t.k = s.k "
                  "WHEN MATCHED THEN DELETE")
    finally:
        spark.conf.unset(statements.TXN_CONFS[0])
        spark.conf.unset(statements.TXN_CONFS[1])
    duck.run("DELETE FROM target WHERE k = 40")
    _same(path, duck)
    assert DeltaTable(path).transaction_version("pipe") == 9


def test_storage_options_keep_the_engine(spark, tmp_path, ran):
    path, t, duck = _table(tmp_path, False, storage_options={"auto_mkdir": True})
    src = rows(list(range(0, 20, 3)), 900, "d")
    t.merge(spark.createDataFrame(src.to_pylist(), DDL), "t.k = s.k", "s", "t").when_matched_delete().execute()
    t.delete("k > 70", spark=spark)
    assert ran == ["staged", ("engine", "MERGE"), ("engine", "DELETE")]
    duck.run("DELETE FROM target WHERE k IN (SELECT k FROM source_rows)", src)
    duck.run("DELETE FROM target WHERE k > 70")
    _same(path, duck)


def test_a_session_without_the_connector_keeps_the_engine(spark, tmp_path, ran, monkeypatch):
    from indexeddf.spark import session

    path, t, duck = _table(tmp_path, False)
    monkeypatch.setattr(session, "register_quietly", lambda spark: session.PYTHON)
    src = rows(list(range(10, 40, 4)), 700, "e")
    t.merge(spark.createDataFrame(src.to_pylist(), DDL), "t.k = s.k", "s", "t") \
        .when_matched_update({"v": "s.v"}).when_not_matched_insert_all().execute()
    t.update({"v": "v + 1"}, "k = 12", spark=spark)
    t.delete(pc.field("k") == 14, spark=spark)  # a pyarrow expression: the engine, whatever the session
    assert ran == ["staged", ("engine", "MERGE"), ("engine", "UPDATE")]
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v "
             "WHEN NOT MATCHED THEN INSERT (k, v, s) VALUES (s.k, s.v, s.s)", src)
    duck.run("UPDATE target SET v = v + 1 WHERE k = 12")
    duck.run("DELETE FROM target WHERE k = 14")
    _same(path, duck)
    assert SCHEMA.names == IndexedTable.for_path(path).schema.names
