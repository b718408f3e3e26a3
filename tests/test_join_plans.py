"""Where the index declines or is not used, a join through ``spark.read.format("indexeddf")`` is
planned as Spark plans the same join on ``spark.read.parquet`` of the same files: the same join
operators and exchanges, the table read unbucketed in as many tasks (``UnneededBuckets.java``),
the relation's size the log's. Where the table's bucketing spares a shuffle, the connector's plan
keeps it (fewer exchanges than Parquet's). Answers are checked against DuckDB's join of the
same version.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connector_helpers import read as load
from pyspark.sql import functions as F
from pyspark.sql.functions import broadcast

import indexeddf
from indexeddf import IndexedTable

pytestmark = pytest.mark.spark

JOINS = ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin", "BroadcastNestedLoopJoin", "CartesianProduct")


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """8 buckets, one sorted file each after an append and a full optimize: k indexed (about 3
    rows a key), u not indexed."""
    path = tmp_path_factory.mktemp("floor") / "t"
    n = 6000
    rows = pa.table({"k": pa.array([i % 2000 for i in range(n)], pa.int64()),
                     "u": pa.array([(i * 7) % 5000 for i in range(n)], pa.int64()),
                     "amount": pa.array([i / 4 for i in range(n)], pa.float64())})
    t = IndexedTable.create(str(path), rows.slice(0, n // 2), index_columns=["k"], num_buckets=8)
    t.append(rows.slice(n // 2))
    t.optimize(mode="full", progress=None)
    return path


@pytest.fixture(scope="module")
def parquet(spark, table):
    """``spark.read.parquet`` of the version's live files (the floor's plan)."""
    snapshot = IndexedTable.for_path(str(table)).snapshot
    return spark.read.parquet(*[snapshot.storage.full(a.path) for a in snapshot.live_files()])


@pytest.fixture(scope="module")
def probe(spark, tmp_path_factory):
    """A small Parquet probe: 300 keys of the table (k and u both hold them)."""
    path = str(tmp_path_factory.mktemp("probe") / "p.parquet")
    pq.write_table(pa.table({"key": pa.array(range(0, 1500, 5), pa.int64())}), path)
    return spark.read.parquet(path)


def _plan(df):
    """The physical plan as it runs (with adaptive execution, its current plan)."""
    plan = df._jdf.queryExecution().executedPlan()
    return plan.executedPlan() if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec" else plan


def _nodes(plan):
    out = [plan]
    children = plan.children()
    for i in range(children.size()):
        out.extend(_nodes(children.apply(i)))
    return out


def shape(df, root) -> dict:
    """What decides a join's cost in its plan: its join operators, its shuffles, and the
    table's scan (bucketed or not, and its number of tasks)."""
    nodes = _nodes(_plan(df))
    scans = [n for n in nodes if n.getClass().getSimpleName() == "FileSourceScanExec"
             and str(root) in n.relation().location().rootPaths().head().toString()]
    assert len(scans) == 1, [n.nodeName() for n in nodes]
    return {"joins": [n.nodeName() for n in nodes if n.nodeName() in JOINS],
            "shuffles": sum(n.nodeName() == "Exchange" for n in nodes),
            "bucketed": scans[0].bucketedScan(),
            "tasks": scans[0].inputRDD().getNumPartitions()}


def duckdb_join(table, probe, column: str, agg: bool):
    con = duckdb.connect()
    con.register("t", IndexedTable.for_path(str(table)).to_arrow())
    con.register("p", pa.Table.from_pylist([r.asDict() for r in probe.collect()]))
    if agg:
        return con.execute(f"SELECT count(*), sum(amount) FROM t JOIN p ON t.{column} = p.key").fetchall()[0]
    return sorted(con.execute(f"SELECT t.k, t.u, t.amount FROM t JOIN p ON t.{column} = p.key").fetchall())


def query(df, probe, column: str, agg: bool, hint: bool = False):
    side = broadcast(probe) if hint else probe
    joined = df.join(side, df[column] == side.key)
    return joined.agg(F.count("*"), F.sum("amount")) if agg else joined.select("k", "u", "amount")


def answer(q, agg: bool):
    rows = [tuple(r) for r in q.collect()]
    return (rows[0][0], pytest.approx(rows[0][1])) if agg else sorted(rows)


LOOKUPS_OFF = {"spark.indexeddf.driverLookup.enabled": "false", "spark.indexeddf.lookupTasks.enabled": "false"}
CASES = {
    # the probe is read and the lookup declined (here: both lookup paths off)
    "index declines": ("k", LOOKUPS_OFF, False),
    "index declines, broadcast hint": ("k", LOOKUPS_OFF, True),
    "join rule off": ("k", {"spark.indexeddf.indexedJoin.enabled": "false"}, False),
    "probe past maxProbeRows": ("k", {"spark.indexeddf.indexedJoin.maxProbeRows": "10"}, False),
    "join on a column no index has": ("u", {}, False),
}


@pytest.mark.parametrize("agg", [True, False], ids=["aggregate", "rows"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_join_the_index_does_not_answer_is_planned_as_on_parquet(spark, conf, table, parquet, probe, case, agg):
    column, confs, hint = CASES[case]
    for key, value in confs.items():
        conf(key, value)
    df = load(spark, table)
    ours, theirs = query(df, probe, column, agg, hint), query(parquet, probe, column, agg, hint)
    got = shape(ours, table)
    assert got == shape(theirs, table), case
    assert got["joins"] == ["BroadcastHashJoin"] and not got["bucketed"], got
    want = duckdb_join(table, probe, column, agg)
    assert answer(ours, agg) == (answer(theirs, agg) if agg else want)
    if agg:
        assert answer(ours, agg) == (want[0], pytest.approx(want[1]))


def test_the_bucketing_stays_where_it_spares_a_shuffle(spark, conf, table, parquet, probe):
    conf("spark.indexeddf.indexedJoin.enabled", "false")  # Spark's join of the bucketed relation
    df = load(spark, table)
    # an aggregation on the key above a broadcast join: the scan's buckets are its groups
    grouped = query(df, probe, "k", False).groupBy("k").count()
    got, floor = shape(grouped, table), shape(query(parquet, probe, "k", False).groupBy("k").count(), table)
    assert got["bucketed"] and got["shuffles"] == floor["shuffles"] - 1, (got, floor)
    # a sort-merge join on the key (no broadcast): only the probe is shuffled
    conf("spark.sql.autoBroadcastJoinThreshold", "-1")
    got, floor = shape(query(df, probe, "k", True), table), shape(query(parquet, probe, "k", True), table)
    assert got["joins"] == floor["joins"] == ["SortMergeJoin"], (got, floor)
    assert got["bucketed"] and got["shuffles"] == floor["shuffles"] - 1, (got, floor)
    assert answer(query(df, probe, "k", True), True) == answer(query(parquet, probe, "k", True), True)


def test_the_relation_reports_the_logs_size(spark, table, parquet):
    snapshot = IndexedTable.for_path(str(table)).snapshot
    logged = sum(a.size for a in snapshot.live_files())

    def size(df):
        return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))

    assert size(load(spark, table)) == logged == size(parquet)


def test_a_declined_join_is_planned_once(spark, conf, table, probe):
    """The probe side is read and the lookup planned once per query even where the lookup is
    declined: later optimizer passes see the table's side marked, whatever they made of the
    probe's rows (an inferred IS NOT NULL filter above them)."""
    for key, value in LOOKUPS_OFF.items():
        conf(key, value)
    df = load(spark, table)
    for p in (probe.selectExpr("key AS k"),  # nullable keys
              spark.range(0, 90).selectExpr("IF(id % 3 = 0, id, NULL) AS k")):  # Spark runs it
        q = df.join(p, "k")
        qe = q._jdf.queryExecution()
        qe.optimizedPlan()
        rule = qe.tracker().rules().get("io.indexeddf.spark.plan.IndexedJoin").get()
        assert rule.numEffectiveInvocations() == 1
        assert q.count() == df.join(p.where("k IS NOT NULL").distinct(), "k").count()
