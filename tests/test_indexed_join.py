"""Plain Spark joins through the index (``IndexedJoin.java``): ``spark.read.format("indexeddf")
.load(p).join(probe, "k")`` with a small probe reads only the rows of the probe's keys (on the
driver, or tasks that read only candidate row groups), and answers exactly what Spark's join of
the full scan answers. The reference is DuckDB joining ``to_arrow()`` of the same version with
the same probe rows; DataFrames are loaded once and joined many times.
"""

from __future__ import annotations

import tempfile

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connector_helpers import physical, rows_of
from connector_helpers import read as load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.functions import broadcast

import indexeddf
from indexeddf import IndexedTable

pytestmark = pytest.mark.spark

@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Five versions: keys 0..299 (k 7 twice, two null keys), an unindexed append (hybrid scan),
    a delete, a secondary index on s."""
    path = tmp_path_factory.mktemp("join") / "t"
    t = IndexedTable.create(str(path), rows_of(list(range(300)) + [None, None, 7]), index_columns=["k"],
                            num_buckets=8)
    # Tiny files: the appended bytes are a large share, still answered through a hybrid scan.
    t.set_properties({"indexeddf.index.autoRefresh": "false", "indexeddf.hybridScan.maxAppendedRatio": "0.9",
                      "indexeddf.hybridScan.maxDeletedRatio": "0.9"})
    t.append(rows_of(list(range(250, 320)), tag="b"))  # k 250..299 twice; 300..319 unindexed
    t.delete("k > 310")
    t.create_index("by_s", ["s"])
    return path


def probe_of(spark, keys, kind):
    """A probe DataFrame of (pk, tag): local rows (an Arrow table), Python rows (an RDD of
    unknown size: joined through the index only with a broadcast hint), or a plan Spark must run
    (a filtered range)."""
    if kind == "local":
        return spark.createDataFrame(pa.table({"pk": pa.array(keys, pa.int64()),
                                               "tag": pa.array(range(len(keys)), pa.int64())}))
    if kind in ("parquet", "parquet_filtered"):
        # A small Parquet file: the connector reads it in the driver's JVM, with no job
        path = tempfile.mkdtemp(prefix="probe-") + "/p.parquet"
        pq.write_table(pa.table({"pk": pa.array(keys, pa.int64()), "tag": pa.array(range(len(keys)), pa.int64())}), path)
        df = spark.read.parquet(path)
        return df.where("tag % 2 = 0").selectExpr("pk", "tag * 1 AS tag") if kind == "parquet_filtered" else df
    if kind == "rows":
        return broadcast(spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "pk long, tag long"))
    # Spark runs this plan to find the keys: every third id of a range, shifted.
    present = [k for k in keys if k is not None]
    lo, hi = min(present, default=0), max(present, default=0) + 1
    return spark.range(lo, hi).where("id % 3 = 0").selectExpr("id AS pk", "id AS tag")


def probe_rows(probe) -> pa.Table:
    return pa.Table.from_pylist([r.asDict() for r in probe.collect()],
                                schema=pa.schema([("pk", pa.int64()), ("tag", pa.int64())]))


def joined(df, probe, how, table_left, null_safe):
    cond = df.k.eqNullSafe(probe.pk) if null_safe else df.k == probe.pk
    return df.join(probe, cond, how) if table_left else probe.join(df, cond, how)


def expected(path, version, probe: pa.Table, how, table_left, null_safe) -> list:
    con = duckdb.connect()
    con.register("t", IndexedTable.for_path(str(path), version=version).to_arrow())
    con.register("p", probe)
    eq = "t.k IS NOT DISTINCT FROM p.pk" if null_safe else "t.k = p.pk"
    left, right = ("t", "p") if table_left else ("p", "t")
    kind = {"inner": "JOIN", "left_semi": "SEMI JOIN", "left_anti": "ANTI JOIN", "left_outer": "LEFT JOIN",
            "right_outer": "RIGHT JOIN"}[how]
    columns = f"{left}.*" if how in ("left_semi", "left_anti") else (
        "t.k, t.s, t.v, p.pk, p.tag" if table_left else "p.pk, p.tag, t.k, t.s, t.v")
    return sorted(map(repr, con.execute(f"SELECT {columns} FROM {left} {kind} {right} ON {eq}").fetchall()))


def got_rows(df) -> list:
    return sorted(repr(tuple(r)) for r in df.collect())


HOWS = ["inner", "left_semi", "left_anti", "left_outer", "right_outer"]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_plain_joins_answer_like_duckdb_on_one_reused_dataframe(spark, table, data):
    version = data.draw(st.integers(0, IndexedTable.for_path(str(table)).version), label="version")
    df = load(spark, table, versionAsOf=version)  # one DataFrame, joined many ways
    spark.conf.set("spark.indexeddf.driverLookup.maxKeys", data.draw(st.sampled_from(["2", "1000"]), label="maxKeys"))
    spark.conf.set("spark.indexeddf.rowCache.maxBytes", data.draw(st.sampled_from(["0", "16m"]), label="rowCache"))
    try:
        for _ in range(3):
            keys = data.draw(st.lists(st.one_of(st.none(), st.integers(-3, 330)), max_size=12), label="probe keys")
            kind = data.draw(st.sampled_from(["local", "rows", "range", "parquet", "parquet_filtered"]), label="probe kind")
            how = data.draw(st.sampled_from(HOWS), label="how")
            table_left = data.draw(st.booleans(), label="table left")
            null_safe = data.draw(st.booleans(), label="null safe")
            probe = probe_of(spark, keys, kind)
            want = expected(table, version, probe_rows(probe), how, table_left, null_safe)
            assert got_rows(joined(df, probe, how, table_left, null_safe)) == want, (how, table_left, null_safe)
    finally:
        spark.conf.unset("spark.indexeddf.driverLookup.maxKeys")
        spark.conf.unset("spark.indexeddf.rowCache.maxBytes")


def test_a_small_probe_reads_only_its_keys_through_the_index(spark, table):
    df = load(spark, table)
    version = IndexedTable.for_path(str(table)).version
    probe = probe_of(spark, [0, 40], "range")  # 0, 3, ..., 39: Spark runs it to find the keys
    for how, table_left in (("inner", True), ("left_semi", True), ("left_semi", False), ("left_outer", False),
                            ("left_anti", False), ("right_outer", True)):
        q = joined(df, probe, how, table_left, False)
        text = physical(q)
        assert "FileScan parquet" not in text and "LocalTableScan" in text, (how, table_left, text)
        assert got_rows(q) == expected(table, version, probe_rows(probe), how, table_left, False), (how, table_left)
    # past the driver's key limit: Spark tasks read only the candidate row groups (here most of
    # a tiny table's bytes, so the read limit is lifted)
    spark.conf.set("spark.indexeddf.driverLookup.maxKeys", "2")
    spark.conf.set("spark.indexeddf.lookup.maxReadFraction", "1.0")
    try:
        q = joined(df, probe, "inner", True, False)
        assert "Scan ExistingRDD" in physical(q) and "FileScan parquet" not in physical(q)
        assert got_rows(q) == expected(table, version, probe_rows(probe), "inner", True, False)
    finally:
        spark.conf.unset("spark.indexeddf.driverLookup.maxKeys")
        spark.conf.unset("spark.indexeddf.lookup.maxReadFraction")
    # a secondary index answers a join on its column
    q = df.join(spark.createDataFrame(pa.table({"s": ["a3", "b1"]})), "s")
    assert "FileScan parquet" not in physical(q)
    assert len(q.collect()) == df.where("s IN ('a3', 'b1')").count()
    # Python rows are an RDD of unknown size, which Spark would not broadcast: a hint marks them small
    rows = spark.createDataFrame([(3,), (4,)], "k long")
    assert "FileScan parquet" in physical(df.join(rows, "k"))
    assert "FileScan parquet" not in physical(df.join(broadcast(rows), "k"))
    assert df.join(broadcast(rows), "k").count() == df.where("k IN (3, 4)").count()


def test_a_small_parquet_probe_is_read_without_a_job(spark, table):
    df = load(spark, table)
    probe = probe_of(spark, [3, 4, 250, None, 999], "parquet_filtered")  # tags 0, 2, 4: pk 3, 250, 999
    q = joined(df, probe, "inner", True, False)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    q._jdf.queryExecution().optimizedPlan()  # the rule has run: the probe is read, the table looked up
    assert set(tracker.getJobIdsForGroup(None)) == before
    version = IndexedTable.for_path(str(table)).version
    assert got_rows(q) == expected(table, version, probe_rows(probe), "inner", True, False)


def test_the_table_side_stays_a_scan_where_unmatched_rows_count(spark, table):
    df = load(spark, table)
    probe = spark.range(0, 10).selectExpr("id AS k")
    # outer rows of the table's side, anti join of the table: every table row matters
    for q in (df.join(probe, "k", "left_outer"), df.join(probe, "k", "left_anti"), df.join(probe, "k", "full_outer"),
              probe.join(df, "k", "right_outer")):
        assert "FileScan parquet" in physical(q)
    assert df.join(probe, "k", "left_anti").count() == df.count() - df.where("k < 10").count()


def test_switches_and_limits(spark, table):
    df = load(spark, table)
    probe = spark.range(0, 30).selectExpr("id AS k")
    matches = df.where("k < 30").count()
    for confs in ([("spark.indexeddf.indexedJoin.enabled", "false")],
                  [("spark.sql.autoBroadcastJoinThreshold", "-1")],  # the default probe size limit is Spark's
                  [("spark.indexeddf.indexedJoin.maxProbeBytes", "100b")],
                  [("spark.indexeddf.indexedJoin.maxProbeRows", "29")],
                  [("spark.indexeddf.driverLookup.enabled", "false"), ("spark.indexeddf.lookupTasks.enabled", "false")]):
        for key, value in confs:
            spark.conf.set(key, value)
        try:
            assert "FileScan parquet" in physical(df.join(probe, "k")), confs
            assert df.join(probe, "k").count() == matches, confs
        finally:
            for key, _ in confs:
                spark.conf.unset(key)
    # Declined by the index (here: both lookup paths off), the table's side stays Spark's scan,
    # without the bucketing: the small side is broadcast, one task per bucket would only add tasks.
    spark.conf.set("spark.indexeddf.driverLookup.enabled", "false")
    spark.conf.set("spark.indexeddf.lookupTasks.enabled", "false")
    spark.conf.set("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    try:
        text = physical(df.join(probe, "k"))
        assert "FileScan parquet" in text and "Bucketed" not in text, text
        assert "Bucketed: true" in physical(df.groupBy("k").count())  # other queries keep it
    finally:
        for key in ("spark.indexeddf.driverLookup.enabled", "spark.indexeddf.lookupTasks.enabled",
                    "spark.sql.sources.bucketing.autoBucketedScan.enabled"):
            spark.conf.unset(key)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    spark.conf.set("spark.indexeddf.indexedJoin.maxProbeBytes", "10m")
    try:
        assert "FileScan parquet" not in physical(df.join(probe, "k"))
        assert df.join(probe, "k").count() == matches
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.unset("spark.indexeddf.indexedJoin.maxProbeBytes")


def test_a_reused_joined_dataframe_keeps_its_answer(spark, table):
    df = load(spark, table)
    a = df.join(spark.range(5, 9).selectExpr("id AS k"), "k")
    b = df.join(spark.range(250, 252).selectExpr("id AS k"), "k")
    first_a, first_b = got_rows(a), got_rows(b)
    assert len(first_a) == 5 and len(first_b) == 4
    for q, want in ((b, first_b), (a, first_a), (a, first_a), (b, first_b)):
        assert got_rows(q) == want


def _leaf_rdds(q) -> list[str]:
    """Class names of the RDDs under the optimized plan's RDD leaves."""
    leaves = q._jdf.queryExecution().optimizedPlan().collectLeaves()
    out = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRDD":
            out.append(leaf.rdd().getClass().getName())
    return out


def test_many_matched_rows_ship_packed_to_the_join_tasks(spark, tmp_path):
    """Where the join streams thousands of the table's matched rows, they go to the tasks as
    packed byte arrays (PackedRows) instead of a local relation's one object a row; where the
    table's side is the one built, it stays a local relation. Answers as DuckDB's, reused."""
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows_of([k for k in range(5000) for _ in range(3)] + [None]),
                        index_columns=["k"], num_buckets=4)
    version = IndexedTable.for_path(str(path)).version
    df = load(spark, path)
    probe = probe_of(spark, list(range(0, 6000, 3)) + [None], "local")  # 1,667 keys of the table: 5,001 rows
    spark.conf.set("spark.indexeddf.driverLookup.maxKeys", "2000")  # answered on the driver
    try:
        for how, table_left, packed in (("inner", True, True), ("inner", False, True), ("left_semi", True, True),
                                        ("left_outer", False, False), ("left_semi", False, False)):
            q = joined(df, probe, how, table_left, False)
            assert "FileScan parquet" not in physical(q)
            assert ("io.indexeddf.spark.exec.PackedRows" in _leaf_rdds(q)) == packed, (how, table_left)
            want = expected(path, version, probe_rows(probe), how, table_left, False)
            for _ in range(2):  # the same joined DataFrame, collected again
                assert got_rows(q) == want, (how, table_left)
    finally:
        spark.conf.unset("spark.indexeddf.driverLookup.maxKeys")
