"""Spark SQL's DELETE FROM, UPDATE and MERGE INTO on indexeddf tables, against DuckDB.

The statements are typed as a Spark user types them, on a catalog table
(``CREATE TABLE ... USING indexeddf LOCATION``) and on ``indexeddf.`/path```; DuckDB runs
the same statements on its copy of the rows, and every version must equal its answer
through ``to_arrow``, the connector's scan of the catalog table, ``lookup`` and DuckDB's
delta extension reading the log.
"""

from __future__ import annotations

import os
import re
import sys

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from oracles import duckdb_delta  # noqa: E402
from test_changes import SCHEMA, UPDATES, Duck, operations, ordered, rows  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture
def registered(spark):
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    return spark


def spark_rows(spark, table: pa.Table):
    return spark.createDataFrame(table.to_pylist(), "k bigint, v bigint, s string")


def run_sql(spark, sql: str) -> list:
    try:
        return [r.asDict() for r in spark.sql(sql).collect()]
    except Exception as e:  # the typed error the statement failed with, as the Python API raises it
        typed = indexeddf.spark.typed_error(e)
        if typed is None:
            raise
        raise typed from None


def spark_statement(spark, name: str, op) -> str | None:
    """The Spark SQL of a random operation (the Python API's strategy), or None for an append."""
    kind = op[0]
    if kind == "merge":
        _, keys, v0, clauses = op
        spark_rows(spark, rows(keys, 1000 + v0, "b")).createOrReplaceTempView("source_rows")
        return f"MERGE INTO {name} AS t USING source_rows AS s ON t.k = s.k " + " ".join(c.sql() for c in clauses)
    if kind == "update":
        updates, predicate = UPDATES[op[1]]
        sets = ", ".join(f"{c} = {e}" for c, e in updates.items())
        return f"UPDATE {name} SET {sets}" + (f" WHERE {predicate}" if predicate else "")
    if kind == "delete":
        return f"DELETE FROM {name} WHERE {op[1]}"
    return None


def duck_statement(op) -> tuple[str, pa.Table | None]:
    kind = op[0]
    if kind == "merge":
        _, keys, v0, clauses = op
        return ("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k " + " ".join(c.sql() for c in clauses),
                rows(keys, 1000 + v0, "b"))
    if kind == "update":
        updates, predicate = UPDATES[op[1]]
        sets = ", ".join(f"{c} = {e}" for c, e in updates.items())
        return f"UPDATE target SET {sets}" + (f" WHERE {predicate}" if predicate else ""), None
    if kind == "delete":
        return f"DELETE FROM target WHERE {op[1]}", None
    return "INSERT INTO target SELECT * FROM source_rows", rows(op[1], 500, "c")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operations, min_size=1, max_size=4), vectors=st.booleans(), by_path=st.booleans(),
       probes=st.lists(st.integers(0, 180), min_size=1, max_size=6))
def test_every_statement_equals_duckdb_running_it(registered, tmp_path_factory, ops, vectors, by_path, probes):
    spark = registered
    path = str(tmp_path_factory.mktemp("sqlchanges") / "t")
    first = rows(list(range(0, 50, 2)))
    t = IndexedTable.create(path, first, ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    t.create_index("by_s", ["s"], num_buckets=2)
    spark.sql("DROP TABLE IF EXISTS sql_changes")
    spark.sql(f"CREATE TABLE sql_changes USING indexeddf LOCATION '{path}'")
    name = f"indexeddf.`{path}`" if by_path else "sql_changes"
    duck = Duck(first)
    for op in ops:
        sql = spark_statement(spark, name, op)
        if sql is None:
            t.append(rows(op[1], 500, "c"))
        else:
            run_sql(spark, sql)
        duck.run(*duck_statement(op))
        want = ordered(duck.rows())
        assert ordered(IndexedTable.for_path(path).to_arrow()) == want, (sql, op)
        assert ordered(pa.Table.from_pylist([r.asDict() for r in spark.table("sql_changes").collect()],
                                            SCHEMA)) == want, sql
        probe = duck.rows(f"k IN ({', '.join(map(str, probes))})")
        assert ordered(IndexedTable.for_path(path).lookup(probes)) == ordered(probe), sql
        theirs = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
        assert ordered(theirs) == want, sql


def test_the_statements_go_through_the_index_in_one_commit_each(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(2000))), ["k"], num_buckets=16)
    spark.sql("DROP TABLE IF EXISTS ev")
    spark.sql(f"CREATE TABLE ev USING indexeddf LOCATION '{path}'")
    files = len(t.snapshot.live_files())
    spark_rows(spark, rows([5, 6, 9999], 7, "n")).createOrReplaceTempView("src")
    version = t.version
    result = run_sql(spark, "MERGE INTO ev USING src ON ev.k = src.k "
                            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    # Delta's result row.
    assert result == [{"num_affected_rows": 3, "num_updated_rows": 2, "num_deleted_rows": 0, "num_inserted_rows": 1}]
    entry = IndexedTable.for_path(path).history()[0]
    assert (entry.version, entry.operation) == (version + 1, "MERGE")
    m = entry.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numSourceRows"]) == (2, 1, 3)
    assert m["numTargetFilesRemoved"] <= 2 < files, m  # only the files holding keys 5 and 6
    assert entry.parameters["predicate"] == "(target.k = source.k)"
    assert entry.parameters["matchedPredicates"] == [{"actionType": "update"}]
    assert IndexedTable.for_path(path).lookup([5, 6, 9999]).sort_by("k").column("v").to_pylist() == [7, 8, 9]
    # The catalog entry reads the new version; so does a query of the path.
    assert spark.sql("SELECT v FROM ev WHERE k = 9999").collect()[0].v == 9
    assert run_sql(spark, "UPDATE ev SET v = v * 10 WHERE k = 5") == [{"num_affected_rows": 1}]
    assert run_sql(spark, f"DELETE FROM indexeddf.`{path}` WHERE k IN (6, 7, 123456)") == [{"num_affected_rows": 2}]
    assert [e.operation for e in IndexedTable.for_path(path).history()[:3]] == ["DELETE", "UPDATE", "MERGE"]
    got = spark.sql(f"SELECT k, v FROM indexeddf.`{path}` WHERE k IN (5, 6)").collect()
    assert [(r.k, r.v) for r in got] == [(5, 70)]
    assert run_sql(spark, "DELETE FROM ev") == [{"num_affected_rows": 1999}]  # no WHERE: every row
    assert IndexedTable.for_path(path).to_arrow().num_rows == 0


def test_spark_evaluates_every_expression(registered, tmp_path):
    """sha2 is a function the Python change engine does not evaluate: a statement from Spark
    is Spark's to evaluate, over the source's columns and the target's."""
    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    spark_rows(spark, rows([1, 50], 100, "n")).createOrReplaceTempView("src")
    run_sql(spark, f"MERGE INTO indexeddf.`{path}` AS t USING src ON t.k = CAST(src.k AS INT) "
                   "WHEN MATCHED AND length(sha2(src.s, 256)) = 64 THEN UPDATE SET s = sha2(src.s, 256), v = t.v + src.v "
                   "WHEN NOT MATCHED THEN INSERT (k, s) VALUES (src.k, sha2(src.s, 256))")
    got = {r["k"]: r for r in IndexedTable.for_path(path).lookup([1, 50]).to_pylist()}
    want = {r.k: r for r in spark.sql("SELECT k, sha2(s, 256) AS h FROM src").collect()}
    assert (got[1]["s"], got[1]["v"]) == (want[1].h, 1 + 100)
    assert (got[50]["s"], got[50]["v"]) == (want[50].h, None)
    # An UPDATE is Spark's to evaluate whole: sha2 over the target's own columns works.
    want = spark.sql("SELECT sha2('a2', 256) AS h").collect()[0].h
    assert run_sql(spark, f"UPDATE indexeddf.`{path}` SET s = sha2(s, 256) WHERE k = 2") == [{"num_affected_rows": 1}]
    assert IndexedTable.for_path(path).lookup([2]).column("s").to_pylist() == [want]
    # So is a MERGE: sha2 over the target's columns too.
    want = {r.k: r.h for r in spark.sql(f"SELECT k, sha2(s, 256) AS h FROM indexeddf.`{path}` WHERE k IN (1, 50)")
            .collect()}
    run_sql(spark, f"MERGE INTO indexeddf.`{path}` AS t USING src ON t.k = src.k "
                   "WHEN MATCHED THEN UPDATE SET s = sha2(t.s, 256)")
    got = {r["k"]: r["s"] for r in IndexedTable.for_path(path).lookup([1, 50]).to_pylist()}
    assert got == want


def test_refusals_are_typed_and_commit_nothing_and_subqueries_work(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(10))), ["k"], num_buckets=2)
    name = f"indexeddf.`{path}`"
    spark_rows(spark, rows([1, 1], 100, "n")).createOrReplaceTempView("dup")
    with pytest.raises(InvalidOptionError, match="multiple source rows matched"):
        run_sql(spark, f"MERGE INTO {name} t USING dup s ON t.k = s.k WHEN MATCHED THEN UPDATE SET *")
    t = IndexedTable.for_path(path)
    assert t.version == 0 and ordered(t.to_arrow()) == ordered(rows(list(range(10))))
    # The staged source rows of the failed MERGE are gone.
    staging = os.path.join(path, "data", "_staging")
    assert not os.path.isdir(staging) or not any(files for _, _, files in os.walk(staging))
    # A DELETE or UPDATE is Spark's to evaluate: a subquery in its condition works.
    assert run_sql(spark, f"DELETE FROM {name} WHERE k IN (SELECT k FROM dup)") == [{"num_affected_rows": 1}]
    assert run_sql(spark, f"UPDATE {name} AS t SET v = -v WHERE EXISTS (SELECT 1 FROM dup WHERE dup.k + 1 = t.k)") == [
        {"num_affected_rows": 1}]
    want = [(k, -k if k == 2 else k, s) for k, _, s in ordered(rows(list(range(10)))) if k != 1]
    assert ordered(IndexedTable.for_path(path).to_arrow()) == want


# A statement from an interpreter run without PYSPARK_PYTHON (a pipeline run as
# ``.venv/bin/python job.py``) is the second application of test_spark_source.py's
# test_two_spark_applications_append_concurrently: one Spark process for both proofs.


@pytest.mark.parametrize("inline", [True, False])
def test_a_merge_source_is_staged_by_bucket_and_read_a_bucket_at_a_time(tmp_path, monkeypatch, inline):
    """The tasks' side and the commit's side of a SQL MERGE's write, called as Spark calls
    them: each task stages its rows a piece per bucket (the table's bucketing of the source
    keys) in its message (small rows) or as files, the commit reads a bucket's part at a
    time, and the result is DuckDB's."""
    import json

    from indexeddf.changes.parts import PartedSource
    from indexeddf.spark import change as sql_change
    from indexeddf.spec.bucketing import bucket_ids

    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(0, 400, 2))), ["k"], num_buckets=8)
    spec = {"operation": "MERGE", "predicate": "target.k = source.k", "sourceAlias": "source",
            "targetAlias": "target",
            "clauses": [{"when": "matched", "action": "update", "all": False,
                         "updates": {"v": "source.v", "s": "source.s"}},
                        {"when": "not_matched", "action": "insert", "all": False,
                         "updates": {"k": "source.k", "v": "source.v", "s": "source.s"}}]}
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("k", LongType()), StructField("v", LongType()), StructField("s", StringType())])
    writer = sql_change.change_writer({"path": path, sql_change.CHANGE_OPTION: json.dumps(spec)}, schema)
    assert writer.staging is not None and writer.staging.num_buckets == 8
    if not inline:
        monkeypatch.setattr(sql_change, "INLINE_BYTES", 0)
    tasks = [rows(list(range(1, 300, 3)), 7, "x"), rows(list(range(300, 500, 5)), 9, "y")]
    messages = [writer.write(iter(task.to_batches(max_chunksize=17))) for task in tasks]
    staged = os.path.join(path, "data", "_staging", writer.write_id)
    for task, m in zip(tasks, messages):
        assert sorted(set(m.buckets)) == sorted(set(bucket_ids([task.column("k")], 8).tolist()))
        assert sum(m.rows) == m.num_rows == task.num_rows
        assert set(m.inline) == (set(m.paths) if inline else set())
    assert len(os.listdir(staged) if os.path.exists(staged) else []) == (0 if inline else sum(len(m.paths) for m in messages))
    source = writer._source(t.snapshot.storage, t.snapshot, messages)
    if inline:  # in memory already: the engine takes it whole
        assert isinstance(source, pa.Table) and source.num_rows == sum(task.num_rows for task in tasks)
    else:
        assert isinstance(source, PartedSource) and all(len(p.buckets) == 1 for p in source.parts)
        assert len(source.parts) == 8
    writer.commit(messages)
    duck = Duck(rows(list(range(0, 400, 2))))
    both = pa.concat_tables(tasks)
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v, "
             "s = s.s WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v, s.s)", both)
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows())
    assert not os.path.exists(staged) or not os.listdir(staged)  # the staged source is gone


BETWEENS = ["k BETWEEN 10 AND 20", "k NOT BETWEEN 5 AND 40", "v BETWEEN k AND k + 3",
            "s BETWEEN 'a1' AND 'a3'", "NOT (k BETWEEN 0 AND 9) AND v BETWEEN 20 AND 30"]


def test_between_as_spark_users_write_it(registered, tmp_path):
    """``BETWEEN`` and ``NOT BETWEEN`` in DELETE, UPDATE and a MERGE's clause conditions, on
    a catalog table and a path (every other statement): each version equals Spark's own
    evaluation of the same statement's rows on a Parquet copy of the previous version (NULLs in
    ``s``: a BETWEEN of NULL is NULL, so the row is neither deleted nor updated)."""
    spark = registered
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(50)), 3), ["k"], num_buckets=4)
    spark.sql("DROP TABLE IF EXISTS betweens")
    spark.sql(f"CREATE TABLE betweens USING indexeddf LOCATION '{path}'")
    names = ["betweens", f"indexeddf.`{path}`"]  # the catalog table and the path, in turn
    spark_rows(spark, rows(list(range(0, 60, 3)), 20, "b")).createOrReplaceTempView("between_src")

    def reference(query: str) -> list[tuple]:
        copy = str(tmp_path / f"copy-{IndexedTable.for_path(path).version}")
        IndexedTable.for_path(path).to_df(spark).write.parquet(copy)
        spark.read.parquet(copy).createOrReplaceTempView("t")
        return ordered(pa.Table.from_pylist([r.asDict() for r in spark.sql(query).collect()], SCHEMA))

    for i, p in enumerate(BETWEENS):
        want = reference(f"SELECT * FROM t WHERE NOT coalesce({p}, false)")
        run_sql(spark, f"DELETE FROM {names[i % 2]} WHERE {p}")
        assert ordered(IndexedTable.for_path(path).to_arrow()) == want, p
        t.append(rows(list(range(50)), 3))  # rows again for the next predicate
    for i, p in enumerate(BETWEENS):
        want = reference(f"SELECT k, CASE WHEN {p} THEN v * 2 ELSE v END AS v, s FROM t")
        run_sql(spark, f"UPDATE {names[(i + 1) % 2]} SET v = v * 2 WHERE {p}")
        assert ordered(IndexedTable.for_path(path).to_arrow()) == want, p
    # A MERGE (the target's keys are unique for this one): a clause condition with BETWEEN
    # over both sides, and one with NOT BETWEEN over the target alone.
    run_sql(spark, f"DELETE FROM {names[0]}")
    t.append(rows(list(range(50)), 3))
    src = "SELECT k, v, s FROM between_src"
    first = "coalesce(t.v BETWEEN s.v - 25 AND s.v, false)"
    second = "coalesce(t.k NOT BETWEEN 10 AND 40, false)"
    both = "t.k IS NOT NULL AND s.k IS NOT NULL"
    want = reference(
        f"SELECT coalesce(t.k, s.k) AS k, CASE WHEN t.k IS NULL OR ({both} AND {first}) THEN s.v ELSE t.v END AS v, "
        f"CASE WHEN t.k IS NULL THEN s.s ELSE t.s END AS s FROM t FULL OUTER JOIN ({src}) s ON t.k = s.k "
        f"WHERE NOT ({both} AND NOT {first} AND {second})")
    run_sql(spark, f"MERGE INTO {names[1]} AS t USING between_src AS s ON t.k = s.k "
                   "WHEN MATCHED AND t.v BETWEEN s.v - 25 AND s.v THEN UPDATE SET v = s.v "
                   "WHEN MATCHED AND t.k NOT BETWEEN 10 AND 40 THEN DELETE "
                   "WHEN NOT MATCHED THEN INSERT *")
    assert ordered(IndexedTable.for_path(path).to_arrow()) == want


def test_a_merge_from_a_small_parquet_source(registered, tmp_path):
    """A source Spark knows to be small (a Parquet view: the size an index join would take)
    still joins Spark's scan of the target, whose rows carry their file and ordinal."""
    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(300))), ["k"], num_buckets=4)
    src = str(tmp_path / "src.parquet")
    spark_rows(spark, rows([3, 150, 299, 5000], 9, "n")).write.parquet(src)
    spark.read.parquet(src).repartition(3).createOrReplaceTempView("small_src")
    got = run_sql(spark, f"MERGE INTO indexeddf.`{path}` t USING small_src s ON t.k = s.k "
                         "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *")
    assert got == [{"num_affected_rows": 4, "num_updated_rows": 3, "num_deleted_rows": 0, "num_inserted_rows": 1}]
    duck = Duck(rows(list(range(300))))
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v "
             "WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v, s.s)", rows([3, 150, 299, 5000], 9, "n"))
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows())


def test_writes_leave_the_sessions_arrow_batch_limit_as_it_was(registered, tmp_path):
    """The connector's writes send their rows to Python bounded by rows only, unless the session
    sets Spark's byte limit itself: either way the session's setting is the same afterwards."""
    from indexeddf.spark.session import ARROW_BATCH_BYTES

    spark = registered
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(list(range(50))), ["k"], num_buckets=2)
    duck = Duck(rows(list(range(50))))
    assert ARROW_BATCH_BYTES not in spark.conf.getAll
    run_sql(spark, f"UPDATE indexeddf.`{path}` SET v = v + 1 WHERE k BETWEEN 3 AND 9")
    spark_rows(spark, rows([100, 101], 1, "a")).write.format("indexeddf").mode("append").save(path)
    assert ARROW_BATCH_BYTES not in spark.conf.getAll
    spark.conf.set(ARROW_BATCH_BYTES, "1m")
    try:
        run_sql(spark, f"DELETE FROM indexeddf.`{path}` WHERE k < 5")
        assert spark.conf.getAll[ARROW_BATCH_BYTES] == "1m"
    finally:
        spark.conf.unset(ARROW_BATCH_BYTES)
    duck.run("UPDATE target SET v = v + 1 WHERE k BETWEEN 3 AND 9")
    duck.run("INSERT INTO target SELECT * FROM source_rows", rows([100, 101], 1, "a"))
    duck.run("DELETE FROM target WHERE k < 5")
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows())


@pytest.mark.parametrize("vectors", [False, True])
def test_a_small_source_runs_through_the_index_and_equals_sparks_plan(registered, tmp_path, conf, vectors):
    """A MERGE whose source Spark would broadcast, with only the expressions the change engine
    evaluates as Spark does over the target's columns, runs through the engine (the index
    finds the target's rows: only their files change) in one write task, the source of three
    partitions coalesced into it; run by the driver's commit
    (``spark.indexeddf.merge.oneTask.enabled = false``) or forced through Spark's plan
    (``spark.indexeddf.merge.engineMaxSourceBytes = -1``) the same MERGE gives the same table."""
    spark = registered
    src = str(tmp_path / "src.parquet")
    spark_rows(spark, rows(list(range(0, 400, 37)) + [1000, 1001], 5, "n")).write.parquet(src)
    spark.read.parquet(src).repartition(3).createOrReplaceTempView("small_src")
    statement = ("MERGE INTO indexeddf.`{path}` t USING small_src s ON t.k = s.k "
                 "WHEN MATCHED AND t.k BETWEEN 30 AND 200 AND s.s IS NOT NULL THEN UPDATE SET v = s.v, s = s.s "
                 "WHEN MATCHED AND t.v IN (0, 111, 222) THEN DELETE "
                 "WHEN NOT MATCHED AND s.k > 1000 THEN INSERT *")
    tables = []
    for how in ("task", "commit", "spark"):
        path = str(tmp_path / how)
        t = IndexedTable.create(path, rows(list(range(400))), ["k"], num_buckets=8,
                                properties={"delta.enableDeletionVectors": str(vectors).lower()})
        files = len(t.snapshot.live_files())
        conf("spark.indexeddf.merge.oneTask.enabled", str(how == "task").lower())
        if how == "spark":
            conf("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
        before = last_execution(spark)
        run_sql(spark, statement.format(path=path))
        plans = plans_since(spark, before)
        assert any("SparkChange" in p for p in plans) == (how == "spark")
        coalesced = any(re.search(r"^\(\d+\) Coalesce", p, re.M) for p in plans)
        assert coalesced == (how == "task")  # the source's partitions into the one task that runs it
        entry = IndexedTable.for_path(path).history()[0]
        assert entry.operation == "MERGE" and entry.parameters["predicate"] == "(target.k = source.k)"
        if how != "spark":
            assert entry.metrics["numSourceRows"] == 13
            assert entry.metrics["numTargetRowsDeleted"] + entry.metrics["numTargetRowsUpdated"] > 0
            assert vectors or entry.metrics["numTargetFilesRemoved"] < files  # only the files holding matches
        tables.append(ordered(IndexedTable.for_path(path).to_arrow()))
    duck = Duck(rows(list(range(400))))
    duck.run("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k "
             "WHEN MATCHED AND t.k BETWEEN 30 AND 200 AND s.s IS NOT NULL THEN UPDATE SET v = s.v, s = s.s "
             "WHEN MATCHED AND t.v IN (0, 111, 222) THEN DELETE "
             "WHEN NOT MATCHED AND s.k > 1000 THEN INSERT VALUES (s.k, s.v, s.s)",
             rows(list(range(0, 400, 37)) + [1000, 1001], 5, "n"))
    assert tables[0] == tables[1] == tables[2] == ordered(duck.rows())


def _executions(spark) -> list:
    """The SQL executions the session's status store keeps (the newest
    ``spark.sql.ui.retainedExecutions``: a long test run drops the oldest)."""
    runs = spark._jsparkSession.sharedState().statusStore().executionsList()
    return [runs.apply(i) for i in range(runs.size())]


def last_execution(spark) -> int:
    """The id of the newest SQL execution so far (-1: none)."""
    return max((e.executionId() for e in _executions(spark)), default=-1)


def plans_since(spark, after: int) -> list[str]:
    """The physical plans of the SQL executions after the one of id ``after``."""
    return [e.physicalPlanDescription() for e in _executions(spark) if e.executionId() > after]


def scans_of(spark, statement: str, path: str) -> tuple[int, set[str]]:
    """Runs ``statement``; returns how many file scans of the table at ``path`` the physical
    plans Spark ran for it hold (its SQL executions, from the session's status store: the
    change's outcome plan is one of them), and all their operators."""
    before = last_execution(spark)
    run_sql(spark, statement)
    plans = plans_since(spark, before)
    nodes = {m.group(1).strip() for d in plans for m in re.finditer(r"^\(\d+\) (\S+(?: \S+)?)", d, re.M)}
    details = [part for d in plans for part in re.split(r"\n(?=\(\d+\) )", d)]
    return sum(1 for part in details if re.match(r"\(\d+\) Scan parquet", part) and path in part), nodes


@pytest.mark.parametrize("vectors", [False, True])
def test_a_change_of_few_keys_reads_its_target_rows_through_the_index(registered, tmp_path, conf, vectors):
    """DELETE and UPDATE whose condition fixes the index column, and a MERGE with a small source
    on it (through Spark's plan, with a Python UDF the change engine cannot evaluate), read the
    target's rows through the index: the row groups that hold the keys, each row with its file
    and ordinal (Spark's ``_metadata``), and no scan of the table's files; the table equals
    DuckDB's after each statement."""
    spark = registered
    path = str(tmp_path / "t")
    first = rows(list(range(0, 6000, 2)))
    # A checkpoint at every version: the adds a change re-adds with a deletion vector come from
    # it (their stats still text), as on any table of ten commits or more.
    IndexedTable.create(path, first, ["k"], num_buckets=4,
                        properties={"delta.enableDeletionVectors": str(vectors).lower(),
                                    "indexeddf.targetRowGroupBytes": "2048", "indexeddf.checkpointInterval": "1"})
    spark.udf.register("plus_one", lambda x: None if x is None else x + 1, "bigint")
    conf("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
    source = rows([4, 10, 3000, 5998, 7001, 7003], 50, "m")
    spark_rows(spark, source).write.parquet(str(tmp_path / "src"))  # a source Spark knows is small
    spark.read.parquet(str(tmp_path / "src")).createOrReplaceTempView("few_src")
    name = f"indexeddf.`{path}`"
    duck = Duck(first)
    statements = [
        (f"DELETE FROM {name} WHERE k IN (2, 8, 4000) OR k = 5000", "DELETE FROM target WHERE k IN (2, 8, 4000, 5000)"),
        (f"UPDATE {name} SET v = v * 3, s = upper(s) WHERE k = 12 OR k IN (100, 104)",
         "UPDATE target SET v = v * 3, s = upper(s) WHERE k = 12 OR k IN (100, 104)"),
        (f"MERGE INTO {name} t USING few_src s ON t.k = s.k WHEN MATCHED AND s.k < 5000 THEN UPDATE SET v = plus_one(s.v) "
         "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
         "MERGE INTO target t USING source_rows s ON t.k = s.k WHEN MATCHED AND s.k < 5000 THEN UPDATE SET v = s.v + 1 "
         "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v, s.s)"),
    ]
    for ours, theirs in statements:
        scans, nodes = scans_of(spark, ours, path)
        assert scans == 0 and nodes & {"LocalTableScan", "Scan ExistingRDD"}, (ours, nodes)
        duck.run(theirs, source)
        assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows()), ours
    theirs = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert ordered(theirs) == ordered(duck.rows())
    # A condition off the index reads the table as Spark scans it: the same rows change.
    scans, _ = scans_of(spark, f"DELETE FROM {name} WHERE v = 33", path)
    duck.run("DELETE FROM target WHERE v = 33")
    assert scans == 1 and ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows())
    # A query of _metadata through the index gives what Spark's own scan gives.
    keys = "k IN (4, 10, 600, 3000, 5998, 7001)"
    query = (f"SELECT k, _metadata.file_path, _metadata.file_name, _metadata.file_size, _metadata.row_index, "
             f"_metadata.indexeddf_file_id FROM {name}")
    through_index = sorted(spark.sql(f"{query} WHERE {keys}").collect())
    conf("spark.indexeddf.driverLookup.enabled", "false")
    conf("spark.indexeddf.lookupTasks.enabled", "false")
    assert through_index == sorted(spark.sql(f"{query} WHERE {keys}").collect()) and len(through_index) == 5
    # The file id a change names its rows by is the log's id of the row's file.
    ids = {a.path.rsplit("/", 1)[-1]: a.fileId for a in IndexedTable.for_path(path).snapshot.live_files()}
    assert all(r.indexeddf_file_id == ids[r.file_name] for r in through_index), through_index


@pytest.mark.parametrize("source_rows", ["big", "declined"])
def test_a_merge_of_a_large_source_shuffles_only_the_source(registered, tmp_path, conf, source_rows):
    """A source too big to broadcast or to look up (``big``), or one whose keys would have the
    index read too much of the table (``declined``): the target is Spark's bucketed scan of
    the table and the join shuffles only the source to the table's buckets (the scan keeps its
    bucketing, which the connector drops wherever nothing above uses it). The outcome is
    written where the join leaves it, with no repartition by file, each bucket's changes by one
    task: here one task writes all four buckets' (``change.writeTasks=1``), a bucket at a time,
    still one new file a touched bucket; with ``bucketedOutcome.enabled=false`` it is
    repartitioned by file. Both equal DuckDB's MERGE."""
    spark = registered
    conf("spark.indexeddf.merge.engineMaxSourceBytes", "-1")
    conf("spark.sql.autoBroadcastJoinThreshold", "-1")  # the tiny target would be broadcast
    conf("spark.indexeddf.change.writeTasks", "1")
    if source_rows == "declined":
        conf("spark.indexeddf.indexedJoin.maxProbeBytes", "10m")
        conf("spark.indexeddf.lookup.maxReadFraction", "0")
    source = rows(list(range(0, 6000, 3)), 7, "w")
    spark_rows(spark, source).write.parquet(str(tmp_path / "src"))
    spark.read.parquet(str(tmp_path / "src")).createOrReplaceTempView("big_src")
    duck = Duck(rows(list(range(0, 4000, 2))))
    duck.run("MERGE INTO target t USING source_rows s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = t.v + s.v "
             "WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v, s.s)", source)
    for bucketed_outcome in ("true", "false"):
        conf("spark.indexeddf.change.bucketedOutcome.enabled", bucketed_outcome)
        path = str(tmp_path / f"t-{bucketed_outcome}")
        IndexedTable.create(path, rows(list(range(0, 4000, 2))), ["k"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": "true"})
        before = last_execution(spark)
        run_sql(spark, f"MERGE INTO indexeddf.`{path}` t USING big_src s ON t.k = s.k "
                       "WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT *")
        parts = [part for plan in plans_since(spark, before) for part in re.split(r"\n(?=\(\d+\) )", plan)]
        target = [p for p in parts if re.match(r"\(\d+\) Scan parquet", p) and path in p]
        assert target and all("Bucketed: true" in p for p in target), "\n".join(target)
        assert any(re.match(r"\(\d+\) SortMergeJoin", p) for p in parts)
        by_file = [p for p in parts if re.match(r"\(\d+\) Exchange", p) and "REPARTITION_BY_COL" in p]
        assert bool(by_file) == (bucketed_outcome == "false"), by_file
        assert any(re.match(r"\(\d+\) Coalesce", p) for p in parts) == (bucketed_outcome == "true"), "\n".join(parts)
        t = IndexedTable.for_path(path)
        assert ordered(t.to_arrow()) == ordered(duck.rows())
        if bucketed_outcome == "true":  # the updated and inserted rows: one file a bucket
            assert t.history(limit=1)[0].metrics["numTargetFilesAdded"] == 4


@pytest.mark.parametrize("vectors", [False, True])
def test_a_large_source_runs_in_the_write_tasks_a_bucket_at_a_time(registered, tmp_path, conf, vectors):
    """A MERGE whose source is too big for the driver and whose expressions over the target the
    change engine evaluates as Spark does: Spark evaluates the source (a key of another type, a
    Python UDF over the source), repartitions it by the table's bucket and coalesces the buckets
    into the write tasks (two here, for four buckets); each task runs the engine on its buckets,
    so no plan scans the table (expressions over the target: comparisons, ``coalesce``). Tables of two files a bucket, with and without deletion vectors,
    equal DuckDB's after each MERGE; a target row two source rows match fails the MERGE and
    commits nothing; with ``bucketTasks.enabled=false`` the same MERGE is Spark's join."""
    spark = registered
    conf("spark.indexeddf.merge.engineMaxSourceBytes", "1b")  # every source is "large"
    conf("spark.indexeddf.change.writeTasks", "2")
    spark.udf.register("times_two", lambda x: None if x is None else x * 2, "bigint")
    path = str(tmp_path / "t")
    first, more = rows(list(range(0, 3000, 2))), rows(list(range(1, 600, 2)), 5000, "x")
    IndexedTable.create(path, first, ["k"], num_buckets=4,
                        properties={"delta.enableDeletionVectors": str(vectors).lower()}).append(more)
    duck = Duck(pa.concat_tables([first, more]))
    source = rows(list(range(300, 3600, 3)) + [None], 11, "w")
    spark_rows(spark, source).selectExpr("CAST(k AS INT) AS k", "v", "s").write.parquet(str(tmp_path / "src"))
    spark.read.parquet(str(tmp_path / "src")).createOrReplaceTempView("large_src")
    duck.run("CREATE OR REPLACE TABLE large_src AS SELECT * FROM source_rows", source)
    statements = [
        ("MERGE INTO {t} t USING large_src s ON t.k = s.k WHEN MATCHED AND t.v > s.v AND t.v > 700 THEN DELETE "
         "WHEN MATCHED THEN UPDATE SET v = {double}, s = coalesce(t.s, s.s) WHEN NOT MATCHED AND s.v % 2 = 0 THEN INSERT *"),
        "MERGE INTO {t} t USING large_src s ON s.k = t.k AND s.v > 500 AND t.s IS NOT NULL WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *",
    ]
    for statement in statements:
        scans, nodes = scans_of(spark, statement.format(t=f"indexeddf.`{path}`", double="times_two(s.v)"), path)
        assert scans == 0 and "Coalesce" in nodes and "Exchange" in nodes and "SortMergeJoin" not in nodes, nodes
        duck.run(statement.format(t="target", double="s.v * 2").replace("INSERT *", "INSERT VALUES (s.k, s.v, s.s)")
                 .replace("UPDATE SET *", "UPDATE SET k = s.k, v = s.v, s = s.s"))
        assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows()), statement
    version = IndexedTable.for_path(path).version
    spark_rows(spark, rows([4, 4, 9000], 1, "d")).createOrReplaceTempView("twice_src")
    with pytest.raises(Exception, match="multiple source rows matched the same target row"):
        run_sql(spark, f"MERGE INTO indexeddf.`{path}` t USING twice_src s ON t.k = s.k WHEN MATCHED THEN UPDATE SET *")
    assert IndexedTable.for_path(path).version == version
    conf("spark.indexeddf.merge.bucketTasks.enabled", "false")
    scans, nodes = scans_of(spark, f"MERGE INTO indexeddf.`{path}` t USING large_src s ON t.k = s.k "
                                   "WHEN MATCHED THEN UPDATE SET v = t.v + 1", path)
    assert scans > 0, nodes
    duck.run("MERGE INTO target t USING large_src s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = t.v + 1")
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck.rows())
