"""The JVM connector (``connector/``, format ``indexeddf`` in the test session): its answers
are ``to_arrow()``'s for every version of random tables, its scans are Spark's own Parquet
scans (pruned columns, pushed filters, bucket pruning), and it reads by timestamp, refuses
what the Python reader refuses, handles every save mode and answers SQL on a path.

Reference answers come from indexeddf's Python reader (``to_arrow``) filtered by DuckDB
(an independent SQL engine), never from the connector itself.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
import warnings
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from connector_helpers import physical as plan
from connector_helpers import read
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table_ops import operations, run_op

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import UnsupportedFeatureError
from indexeddf.spark.connector import build_jar, is_built, jar_path, sources_hash

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([
    ("k", pa.int64()),
    ("s", pa.string()),
    ("f", pa.float64()),
    ("d", pa.decimal128(12, 3)),
    ("day", pa.date32()),
    ("flag", pa.bool_()),
])


def batch(keys: list[int]) -> pa.Table:
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "s": [None if k % 7 == 0 else f"s{k % 13}" for k in keys],
        "f": [k / 3 for k in keys],
        "d": [decimal.Decimal(k) / 1000 for k in keys],
        "day": [dt.date(2026, 1, 1) + dt.timedelta(days=k % 40) for k in keys],
        "flag": [k % 2 == 0 for k in keys],
    }, schema=SCHEMA)


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    assert indexeddf.register(spark) == "connector"
    return spark


def rows(t: pa.Table, schema: pa.Schema) -> list[str]:
    """A table's rows as a sorted list (a multiset), in ``schema``'s types."""
    return sorted(repr(tuple(r.values())) for r in t.select(schema.names).cast(schema).to_pylist())


# -- every version of random tables -----------------------------------------------------------
FILTERS = [
    "k = {n}",
    "k IN ({n}, {m}, 7)",
    "k > {n} AND k <= {m}",
    "k = {n} OR s = 's3'",
    "s = 's{small}'",
    "s IS NULL",
    "flag AND k < {m}",
    "d > {n} / 1000.0",
    "day = DATE '2026-01-{day:02d}'",
    "f < {n}",
    "k IS NOT NULL",
    "k <=> {n} AND f > 1",
    "s IN ('s{small}', 's1') AND k < {m}",
]
COLUMN_SETS = [["k"], ["s"], ["k", "s"], ["d", "day"], ["flag", "f", "k"], SCHEMA.names]

ops = operations(vacuum=True)
queries = st.lists(
    st.tuples(st.integers(0, len(FILTERS) - 1), st.integers(0, len(COLUMN_SETS) - 1),
              st.integers(0, 320), st.integers(0, 320), st.integers(0, 12), st.integers(1, 28)),
    min_size=2,
    max_size=5,
)


# Four random histories a run (each version read many ways): the versions of random tables
# are also read through the connector by test_spark_reads.py (a reused DataFrame and an old
# version while another writer moves on) and test_connect.py, and by delta-rs and DuckDB in
# test_delta_oracles.py.
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.integers(1, 4), st.data())
def test_every_version_reads_as_to_arrow_on_one_reused_dataframe(spark, tmp_path_factory, sequence, checkpoint_every,
                                                                  data):
    path = str(tmp_path_factory.mktemp("connector"))
    t = IndexedTable.create(path, batch(list(range(0, 60))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.checkpointInterval": str(checkpoint_every)})
    for op in sequence:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_op(t, op, batch)
    con = duckdb.connect()
    versions = list(range(t.version + 1))
    for v in data.draw(st.permutations(versions), label="version order"):
        expected = IndexedTable.for_path(path, version=v).to_arrow()
        con.register("expected", expected)
        df = read(spark, path, versionAsOf=v)  # ONE DataFrame per version, queried many ways
        # lookups of several keys answered on the driver, or by Spark tasks past maxKeys
        spark.conf.set("spark.indexeddf.driverLookup.maxKeys", data.draw(st.sampled_from(["1", "1000"]), label="maxKeys"))
        assert df.schema.names == SCHEMA.names
        for f, c, n, m, small, day in data.draw(queries, label=f"queries of version {v}"):
            where = FILTERS[f].format(n=n, m=m, small=small, day=day)
            columns = COLUMN_SETS[c]
            sub = pa.schema([SCHEMA.field(name) for name in columns])
            got = df.where(where).select(*columns).toArrow()
            sql_where = where.replace("<=>", "IS NOT DISTINCT FROM")  # DuckDB's words for Spark's <=>
            want = con.execute(f"SELECT {', '.join(columns)} FROM expected WHERE {sql_where}").arrow()
            want = want.read_all() if isinstance(want, pa.RecordBatchReader) else want
            assert rows(got, sub) == rows(want, sub), (v, where, columns)
            assert df.count() == expected.num_rows, (v, "a full count after a filtered query")
        assert rows(df.toArrow(), SCHEMA) == rows(expected, SCHEMA), v
        con.unregister("expected")
    spark.conf.unset("spark.indexeddf.driverLookup.maxKeys")


# -- native scans -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bucketed(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bucketed") / "t")
    t = IndexedTable.create(path, batch(list(range(200))), index_columns=["k"], num_buckets=4)
    t.append(batch(list(range(200, 260))))
    return path


@pytest.fixture
def no_driver_lookup(spark):
    """Spark's own scan answers key equalities (index lookups, on the driver or in tasks, step aside)."""
    spark.conf.set("spark.indexeddf.driverLookup.enabled", "false")
    spark.conf.set("spark.indexeddf.lookupTasks.enabled", "false")
    yield
    spark.conf.unset("spark.indexeddf.driverLookup.enabled")
    spark.conf.unset("spark.indexeddf.lookupTasks.enabled")


def test_a_scan_is_spark_parquet_with_pruned_columns_and_pushed_filters(spark, bucketed, no_driver_lookup):
    df = read(spark, bucketed).where("k = 43").select("s")
    text = plan(df)
    assert "FileScan parquet" in text and "SnapshotFileIndex" in text
    assert "ReadSchema: struct<k:bigint,s:string>" in text  # 2 of the table's 6 columns
    assert "EqualTo(k,43)" in text
    assert [r.s for r in df.collect()] == ["s4"]


def test_bucket_pruning_on_a_key_equality(spark, bucketed, no_driver_lookup):
    t = IndexedTable.for_path(bucketed)
    spark.conf.set("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    try:
        df = read(spark, bucketed).where("k = 42")
        text = plan(df)
        assert "Bucketed: true" in text and "SelectedBucketsCount: 1 out of 4" in text, text
        assert [r.k for r in df.collect()] == [42]
        # Spark's bucketed scan of the whole table: one task per bucket, each row in its bucket.
        whole = read(spark, bucketed)
        assert whole.rdd.getNumPartitions() == 4
        per_task = whole.rdd.mapPartitionsWithIndex(lambda i, it: [(i, r.k) for r in it]).collect()
    finally:
        spark.conf.unset("spark.sql.sources.bucketing.autoBucketedScan.enabled")
    spark_bucket = {r.k: r.b for r in spark.range(260).selectExpr("id as k", "pmod(hash(id), 4) as b").collect()}
    assert all(spark_bucket[k] == i for i, k in per_task)  # task i read exactly bucket i
    assert sorted(k for _, k in per_task) == list(range(260))
    assert len(t.snapshot.live_files()) > 4  # two writes: buckets of several files each


def test_join_on_the_index_column_shuffles_only_the_other_side(spark, bucketed):
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        probe = spark.range(0, 300, 3).selectExpr("id as k")
        joined = read(spark, bucketed).join(probe, "k")
        text = plan(joined)
        assert text.count("Exchange hashpartitioning") == 1, text  # the probe side only
        assert sorted(r.k for r in joined.collect()) == list(range(0, 260, 3))
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


def test_no_bucketing_for_floating_point_index_columns(spark, tmp_path):
    path = str(tmp_path / "f")
    IndexedTable.create(path, batch(list(range(50))), index_columns=["f"], num_buckets=4)
    spark.conf.set("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    try:
        df = read(spark, path).where("f = 1.0")
        assert "SelectedBucketsCount" not in plan(df) and "Bucketed: true" not in plan(df)
        assert [r.k for r in df.collect()] == [3]
    finally:
        spark.conf.unset("spark.sql.sources.bucketing.autoBucketedScan.enabled")


# -- time travel by timestamp -----------------------------------------------------------------
def test_timestamp_as_of_is_the_newest_version_committed_at_or_before(spark, tmp_path):
    path = str(tmp_path / "tt")
    t = IndexedTable.create(path, batch(list(range(10))), index_columns=["k"], num_buckets=2)
    for start in (10, 20):
        time.sleep(0.02)
        t.append(batch(list(range(start, start + 10))))
    stamps = {h.version: h.timestamp for h in t.history()}
    for v, stamp in stamps.items():
        want = IndexedTable.for_path(path, version=v).to_arrow().num_rows
        assert read(spark, path, timestampAsOf=stamp.strftime("%Y-%m-%d %H:%M:%S.%f")).count() == want
        assert read(spark, path, timestampAsOf=stamp.isoformat().replace("+00:00", "Z")).count() == want
        later = (stamp + dt.timedelta(milliseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")
        assert read(spark, path, timestampAsOf=later).count() == want  # between two commits: the earlier
    with pytest.raises(Exception, match="VersionNotFoundError"):
        read(spark, path, timestampAsOf="2000-01-01")
    with pytest.raises(Exception, match="InvalidOptionError: .*not ISO 8601"):
        read(spark, path, timestampAsOf="yesterday")


# -- refusals -----------------------------------------------------------------------------------
def _commit(path: str, version: int, *actions: dict) -> None:
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (Path(path) / "_delta_log" / f"{version:020d}.json").write_text(text)


# Deletion vectors are read by the connector (tests/test_connector_dv.py) and the Python readers
# (tests/test_dv_reads.py), and column mapping in both modes (tests/test_column_mapping.py,
# tests/test_connector_column_mapping.py): neither refuses them.
def test_what_the_python_reader_refuses_the_connector_refuses(spark, tmp_path):
    path = str(tmp_path / "refused")
    IndexedTable.create(path, batch(list(range(10))), index_columns=["k"], num_buckets=2)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000) + 1000, "operation": "WRITE"}}
    feature = "fancyNewFeature"
    _commit(path, 1, info, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                         "readerFeatures": [feature], "writerFeatures": [feature]}})
    with pytest.raises(UnsupportedFeatureError, match=feature):
        IndexedTable.for_path(path)
    with pytest.raises(Exception, match=f"UnsupportedFeatureError: .*{feature}") as refused:
        read(spark, path).collect()
    assert "indexeddf does not implement" in str(refused.value)
    assert read(spark, path, versionAsOf=0).count() == 10  # the version before it stays readable


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_are_read_in_both_modes(spark, tmp_path, mode):
    path = str(tmp_path / mode)
    IndexedTable.create(path, batch(list(range(10))), index_columns=["k"], num_buckets=2,
                        properties={"delta.columnMapping.mode": mode})
    assert read(spark, path).count() == IndexedTable.for_path(path).to_arrow().num_rows == 10


# -- writes -----------------------------------------------------------------------------------
def test_every_save_mode(spark, tmp_path):
    path = str(tmp_path / "modes")
    df = spark.range(5).selectExpr("id as k", "'a' as s")

    def ids():
        return sorted(IndexedTable.for_path(path).to_arrow()["k"].to_pylist())

    df.write.format("indexeddf").option("indexColumns", "k").save(path)  # errorifexists, the default: creates
    assert ids() == list(range(5))
    with pytest.raises(Exception, match="TableExistsError: a table already exists"):
        df.write.format("indexeddf").save(path)
    with pytest.raises(Exception, match="TableExistsError"):
        df.write.format("indexeddf").mode("error").save(path)
    df.write.format("indexeddf").mode("ignore").save(path)
    assert IndexedTable.for_path(path).version == 0 and ids() == list(range(5))
    spark.range(5, 8).selectExpr("id as k", "'b' as s").write.format("indexeddf").mode("append").save(path)
    assert ids() == list(range(8))
    spark.range(100, 102).selectExpr("id as k", "'c' as s").write.format("indexeddf").mode("overwrite").save(path)
    assert ids() == [100, 101] and IndexedTable.for_path(path).version == 2
    fresh = str(tmp_path / "ignored-new")
    df.write.format("indexeddf").option("indexColumns", "k").option("numBuckets", 2).mode("ignore").save(fresh)
    assert IndexedTable.for_path(fresh).num_buckets == 2  # ignore creates a missing table
    assert [h.parameters.get("mode") for h in IndexedTable.for_path(fresh).history()] == ["ignore"]
    # What the connector reads after each write is the newest version.
    assert sorted(r.k for r in read(spark, path).collect()) == [100, 101]


def test_sql_on_a_path_and_a_catalog_table(spark, bucketed):
    want = IndexedTable.for_path(bucketed).to_arrow()
    got = spark.sql(f"SELECT * FROM indexeddf.`{bucketed}` WHERE k < 100").toArrow()
    assert rows(got, SCHEMA) == rows(want.filter(pa.compute.less(want["k"], 100)), SCHEMA)
    assert spark.sql(f"SELECT count(*) AS n FROM indexeddf.`{bucketed}`").collect()[0].n == want.num_rows
    spark.sql(f"CREATE TABLE connector_events USING indexeddf LOCATION '{bucketed}'")
    try:
        assert spark.sql("SELECT count(*) AS n FROM connector_events WHERE k = 7").collect()[0].n == 1
    finally:
        spark.sql("DROP TABLE connector_events")
    assert IndexedTable.for_path(bucketed).to_arrow().num_rows == want.num_rows  # dropping the entry keeps the data


def test_sql_inserts_commit_and_catalog_tables_read_the_newest_version(spark, tmp_path):
    """INSERT INTO / INSERT OVERWRITE a catalog table (and ``insertInto``, and a path) commit
    through the writer: Spark would write them as loose Parquet files (INSERT INTO lost the
    rows, INSERT OVERWRITE deleted the table's folder, log and all). Every query of a catalog
    table reads the newest version, whoever wrote it; a DataFrame keeps the version it loaded."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())}),
                            index_columns=["k"], num_buckets=2)
    spark.sql(f"CREATE TABLE inserted USING indexeddf LOCATION '{path}'")
    try:
        held = spark.table("inserted")

        def same_as_log() -> list:
            got = sorted(tuple(r) for r in spark.sql("SELECT k, v FROM inserted").collect())
            full = IndexedTable.for_path(path).to_arrow()
            assert got == sorted(zip(full["k"].to_pylist(), full["v"].to_pylist()))
            return got

        spark.sql("INSERT INTO inserted VALUES (100, 100)")
        assert (100, 100) in same_as_log()
        t.append(pa.table({"k": pa.array([101], pa.int64()), "v": pa.array([101], pa.int64())}))  # another writer
        assert (101, 101) in same_as_log()
        spark.createDataFrame([(102, 102)], "k bigint, v bigint").write.insertInto("inserted")
        spark.sql(f"INSERT INTO indexeddf.`{path}` VALUES (103, 103)")
        spark.sql("INSERT INTO inserted (v, k) VALUES (1040, 104)")
        assert {(102, 102), (103, 103), (104, 1040)} <= set(same_as_log())
        assert spark.sql("SELECT v FROM inserted WHERE k = 104").collect()[0].v == 1040  # through the index
        before = IndexedTable.for_path(path).version
        spark.sql("INSERT OVERWRITE inserted VALUES (200, 200)")
        assert same_as_log() == [(200, 200)]
        # The overwrite is a commit: the log and every older version are still there.
        assert read(spark, path, versionAsOf=before).count() == 15
        assert held.count() == 10  # the DataFrame loaded first keeps its version
        with pytest.raises(Exception, match="PARTITION clause is not supported"):
            spark.sql("INSERT INTO inserted PARTITION (k = 1) VALUES (1)")
    finally:
        spark.sql("DROP TABLE inserted")


def test_a_catalog_entry_never_changes_the_schema_behind_the_log(spark, tmp_path):
    """ALTER TABLE ADD COLUMNS changes the table's log first (then the entry); after the
    table's own schema changes otherwise, the entry reads the schema the log has now."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array([1, 2], pa.int64())}), index_columns=["k"], num_buckets=2)
    spark.sql(f"CREATE TABLE altered USING indexeddf LOCATION '{path}'")
    try:
        spark.sql("ALTER TABLE altered ADD COLUMNS (w bigint)")
        assert t.update_incremental().schema.names == ["k", "w"]
        assert spark.sql("SELECT count(*) AS n FROM altered WHERE w IS NULL").collect()[0].n == 2
        t.overwrite(pa.table({"k": pa.array([3], pa.int64()), "v": pa.array([30], pa.int64())}), overwrite_schema=True)
        assert spark.table("altered").columns == ["k", "v"]
        assert [tuple(r) for r in spark.sql("SELECT k, v FROM altered").collect()] == [(3, 30)]
    finally:
        spark.sql("DROP TABLE IF EXISTS altered")


def test_tables_created_from_sql_and_save_as_table(spark, tmp_path):
    """CREATE TABLE ... AS SELECT, CREATE TABLE with columns and no rows, and saveAsTable make
    indexeddf tables through the writer; their OPTIONS (indexColumns, numBuckets), which Spark
    hands to every later read of the entry, are accepted there and the log decides them."""
    src = str(tmp_path / "src")
    IndexedTable.create(src, pa.table({"k": pa.array(range(6), pa.int64()), "s": [str(i) for i in range(6)]}),
                        index_columns=["k"], num_buckets=2)
    made = {name: str(tmp_path / name) for name in ("ctas", "empty", "saved")}
    try:
        spark.sql(f"CREATE TABLE ctas USING indexeddf OPTIONS (indexColumns 'k', numBuckets 3) "
                  f"LOCATION '{made['ctas']}' AS SELECT * FROM indexeddf.`{src}` WHERE k < 4")
        spark.sql(f"CREATE TABLE empty (k bigint, s string) USING indexeddf OPTIONS (indexColumns 's', numBuckets 2) "
                  f"LOCATION '{made['empty']}'")
        assert spark.sql("SELECT count(*) AS n FROM empty").collect()[0].n == 0
        spark.sql("INSERT INTO empty SELECT * FROM ctas WHERE k = 1")
        spark.sql("INSERT INTO ctas VALUES (9, 'nine')")
        (read(spark, src).where("k = 5").write.format("indexeddf").option("indexColumns", "k").option("numBuckets", 2)
         .option("path", made["saved"]).saveAsTable("saved"))
        read(spark, src).where("k = 0").write.format("indexeddf").mode("append").saveAsTable("saved")
        assert sorted(r.k for r in spark.sql("SELECT k FROM ctas").collect()) == [0, 1, 2, 3, 9]
        assert [tuple(r) for r in spark.sql("SELECT * FROM empty").collect()] == [(1, "1")]
        assert sorted(r.k for r in spark.sql("SELECT k FROM saved").collect()) == [0, 5]
        for name, (columns, buckets) in {"ctas": (["k"], 3), "empty": (["s"], 2), "saved": (["k"], 2)}.items():
            t = IndexedTable.for_path(made[name])
            assert (t.index_columns, t.num_buckets) == (columns, buckets), name
        assert spark.sql("SELECT s FROM ctas WHERE k = 9").collect()[0].s == "nine"  # through the index
    finally:
        for name in made:
            spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_spark_cache_serves_later_loads_of_the_same_version(spark, tmp_path):
    """df.cache() and CACHE TABLE serve a later load of the same version (two loads of one
    version are the same relation), and never a newer version."""
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, pa.table({"k": pa.array(range(10), pa.int64())}), index_columns=["k"], num_buckets=2)
    cached = read(spark, path).cache()
    try:
        assert cached.count() == 10
        assert "InMemoryTableScan" in plan(read(spark, path))
        spark.sql(f"CREATE TABLE cached_events USING indexeddf LOCATION '{path}'")
        spark.sql("CACHE TABLE cached_events")
        assert "InMemoryTableScan" in plan(spark.sql("SELECT * FROM cached_events"))
        t.append(pa.table({"k": pa.array([100], pa.int64())}))
        newer = spark.sql("SELECT * FROM cached_events")
        assert "InMemoryTableScan" not in plan(newer) and newer.count() == 11
        assert "InMemoryTableScan" not in plan(read(spark, path)) and cached.count() == 10
    finally:
        cached.unpersist()
        spark.sql("DROP TABLE IF EXISTS cached_events")


def test_a_table_created_again_at_the_same_path_is_read_anew(spark, tmp_path):
    """Snapshots are kept per JVM by version, and Spark's cache matches loads of one version:
    a table deleted and created again at its path starts at version 0 again, and must be read
    as the new table, not the old one's kept snapshot or cached rows."""
    import shutil

    path = str(tmp_path / "t")
    IndexedTable.create(path, pa.table({"k": pa.array(range(10), pa.int64())}), index_columns=["k"], num_buckets=2)
    assert read(spark, path).count() == 10
    cached = read(spark, path).cache()
    try:
        assert cached.count() == 10
        shutil.rmtree(path)
        IndexedTable.create(path, pa.table({"k": pa.array(range(100, 105), pa.int64())}), index_columns=["k"],
                            num_buckets=2)
        again = read(spark, path)
        assert "InMemoryTableScan" not in plan(again)
        assert sorted(r.k for r in again.collect()) == list(range(100, 105))
    finally:
        cached.unpersist()


# -- the jar ----------------------------------------------------------------------------------
def test_the_jar_is_built_from_the_current_sources():
    assert build_jar() == jar_path() and is_built()
    assert Path(str(jar_path()) .replace(".jar", ".sha256")).read_text().strip() == sources_hash()


@pytest.mark.slow
def test_a_session_without_the_connector_falls_back_to_the_python_source(fallback_run):
    done, _ = fallback_run  # workers/fallback_session.py in its own process, started with the run (conftest.py)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert "fallback: all checks passed" in done.stdout
