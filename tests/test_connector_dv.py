"""Deletion vectors on every read path of the JVM connector: Spark scans (full, filtered,
pruned, bucketed, SQL on a catalog table), driver lookups, probing tasks (``ProbeRDD``),
tasks reading candidate row groups (``LookupRDD``), joins through the index (small probe side)
and Spark's join (big probe side), the row cache, hybrid scans of unindexed files, a table
with DVs as a join's probe side, time travel and DataFrames loaded before a DV commit.

DVs are hand-written (``dv_commits``: file DVs with and without a random prefix, inline DVs, a
DV deleting every row of a file, DVs replacing DVs); the reference is DuckDB's delta extension
(delta-kernel-rs), an independent Delta reader.
"""

from __future__ import annotations

import json
import subprocess

import pyarrow as pa
import pytest
from connector_helpers import SCHEMA, jvm_cache_clear, jvm_cache_stats, lineage, physical, rows_of
from connector_helpers import read as load
from dv_commits import delete_keys, delete_rows, file_rows, live_adds, ordinals_where, write_checkpoint
from oracles import duckdb_delta

import indexeddf
from indexeddf import IndexedTable
from indexeddf.spark import connector as jvm_connector

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


# Keys deleted by DVs in the module's table: every third key (file DVs), 40..60 (inline DVs on
# top of them, in a second commit), every row of one appended file, and unindexed rows.
THIRDS = [k for k in range(0, 800) if k % 3 == 0]
RANGE = list(range(40, 61))
UNINDEXED_DELETED = [701, 702, 705, 777]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Keys 0..599 (several row groups a file), 500..699 appended (twice: 500..599), a secondary
    index on s, 700..779 appended unindexed (hybrid scan); then three DV commits."""
    path = tmp_path_factory.mktemp("dv") / "t"
    t = IndexedTable.create(str(path), rows_of(list(range(600)) + [None, 7]), index_columns=["k"], num_buckets=4,
                            properties={"indexeddf.targetRowGroupBytes": "1024",
                                        "indexeddf.hybridScan.maxAppendedRatio": "0.9"})
    t.append(rows_of(list(range(500, 700)), tag="b"))
    t.create_index("by_s", ["s"])
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows_of(list(range(700, 780)), tag="c"))
    before = t.version
    delete_keys(path, "k", THIRDS, prefix="p7")
    delete_keys(path, "k", RANGE + UNINDEXED_DELETED, inline=True)
    # Every row of one file of the first append (k 500..699, tag b) is deleted.
    appended = [f for f, a in live_adds(path).items() if a["deletionVector"] is not None and "b" in _tags(path, f)]
    whole = appended[0]
    delete_rows(path, {whole: list(range(file_rows(path, whole)))})
    return {"path": path, "before": before, "whole": whole}


def _tags(path, file) -> set:
    import pyarrow.parquet as pq
    return {s[0] for s in pq.read_table(path / file, columns=["s"])["s"].to_pylist() if s}


def oracle(path, where="true", cols="k, s, v") -> list:
    got = duckdb_delta().execute(f"SELECT {cols} FROM delta_scan('{path}') WHERE {where}").fetchall()
    return rows(got)


def rows(tuples) -> list:
    """A multiset of rows, comparable whatever the types of its cells (None sorts apart)."""
    return sorted(repr(tuple(r)) for r in tuples)


def spark_rows(df) -> list:
    return rows(tuple(r) for r in df.collect())


def test_the_dvs_delete_what_they_say(table):
    path = table["path"]
    deleted = sum(a["deletionVector"]["cardinality"] for a in live_adds(path).values() if a["deletionVector"])
    assert deleted > len(THIRDS)
    assert len(oracle(path)) == 602 + 200 + 80 - deleted
    assert oracle(path, "k = 6") == [] and oracle(path, "k = 50") == [] and oracle(path, "k = 701") == []
    assert oracle(path, "k = 7") != []


def test_scans_drop_deleted_rows(spark, table, conf):
    path = table["path"]
    df = load(spark, path)
    assert "FileScan parquet" in physical(df)
    assert spark_rows(df) == oracle(path)
    assert df.count() == len(oracle(path))
    for where in ("v > 100", "v < 30 OR v > 250", "s LIKE 'b%'", "k + 1 = 8", "k > 690"):
        q = df.where(where)
        assert "FileScan parquet" in physical(q), where  # the index cannot answer these
        assert spark_rows(q) == oracle(path, where), where
    assert spark_rows(df.select("v")) == oracle(path, cols="v")  # column pruning
    assert spark_rows(df.select("k").distinct()) == sorted(set(oracle(path, cols="k")))
    # Bucketed: a group by the key reads each bucket's files in one task, no shuffle.
    grouped = df.groupBy("k").count()
    assert "Bucketed: true" in physical(grouped)
    want = duckdb_delta().execute(f"SELECT k, count(*) FROM delta_scan('{path}') GROUP BY k").fetchall()
    assert spark_rows(grouped) == rows(want)
    conf("spark.sql.parquet.enableVectorizedReader", "false")  # parquet-mr's rows keep their row index too
    assert spark_rows(load(spark, path).where("v > 100")) == oracle(path, "v > 100")


def test_sql_on_a_catalog_table(spark, table):
    spark.sql(f"CREATE TABLE dv_events USING indexeddf LOCATION '{table['path']}'")
    try:
        got = spark.sql("SELECT k, v FROM dv_events WHERE v >= 50 AND v < 400")
        assert spark_rows(got) == oracle(table["path"], "v >= 50 AND v < 400", "k, v")
        assert spark.sql("SELECT count(*) FROM dv_events").collect()[0][0] == len(oracle(table["path"]))
    finally:
        spark.sql("DROP TABLE dv_events")


LOOKUPS = ["k = 6", "k = 7", "k = 50", "k IN (3, 4, 5, 550, 551)", "k IN (40, 41, 61, 62, 63)", "s = 'a3'",
           "s IN ('b1', 'c2') AND k > 500", "k = 701", "k IN (700, 701, 703, 777, 778)", "k IS NULL"]


def test_driver_lookups(spark, table):
    path = table["path"]
    df = load(spark, path)
    for where in LOOKUPS:
        q = df.where(where)
        assert "LocalTableScan" in physical(q), where
        assert spark_rows(q) == oracle(path, where), where


def test_a_file_with_every_row_deleted(spark, table):
    import pyarrow.parquet as pq
    path, whole = table["path"], table["whole"]
    keys = [k for k in pq.read_table(path / whole, columns=["k"])["k"].to_pylist() if k is not None][:5]
    df = load(spark, path)
    where = f"k IN ({', '.join(map(str, keys))})"
    assert "LocalTableScan" in physical(df.where(where))
    assert spark_rows(df.where(where)) == oracle(path, where)
    assert spark_rows(df.where(f"s = 'b{keys[0] % 7}'")) == oracle(path, f"s = 'b{keys[0] % 7}'")


def test_many_keys_are_probed_by_tasks(spark, table, conf):
    path = table["path"]
    df = load(spark, path)
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    for where in ("k IN (1, 2, 3, 6, 50, 51, 520, 521, 703, 705)", "s IN ('a1', 'b2', 'c3')"):
        q = df.where(where)
        assert "ProbeRDD" in lineage(q), where
        assert spark_rows(q) == oracle(path, where), where
    conf("spark.indexeddf.driverLookup.maxRows", "5")  # one key with more rows: tasks read what the driver found
    q = df.where("s = 'a3'")
    assert "LookupRDD" in lineage(q)
    assert spark_rows(q) == oracle(path, "s = 'a3'")


def test_joins_through_the_index_and_spark_joins(spark, table, conf):
    path = table["path"]
    df = load(spark, path)
    keys = [3, 4, 6, 7, 45, 46, 61, 62, 555, 556, 701, 704, 999]
    probe = spark.createDataFrame(pa.table({"pk": pa.array(keys, pa.int64())}))
    q = df.join(probe, df.k == probe.pk)
    assert "FileScan parquet" not in physical(q)
    in_list = ", ".join(map(str, keys))
    assert spark_rows(q.select("k", "s", "v")) == oracle(path, f"k IN ({in_list})")
    semi = df.join(probe, df.k == probe.pk, "left_semi")
    assert spark_rows(semi) == oracle(path, f"k IN ({in_list})")
    # A big probe side: Spark's own join over the scan.
    conf("spark.indexeddf.indexedJoin.maxProbeRows", "5")
    q = df.join(probe, df.k == probe.pk)
    assert "FileScan parquet" in physical(q)
    assert spark_rows(q.select("k", "s", "v")) == oracle(path, f"k IN ({in_list})")
    big = spark.range(0, 800).selectExpr("id AS pk")
    assert spark_rows(df.join(big, df.k == big.pk).select("k", "s", "v")) == oracle(path, "k < 800")


def test_a_dv_table_as_the_probe_side(spark, table, tmp_path):
    """The probe side of an index join is read in the driver's JVM when small: its DVs apply."""
    other = IndexedTable.create(str(tmp_path / "o"), rows_of(list(range(0, 100))), index_columns=["k"], num_buckets=2)
    delete_keys(other.path, "k", range(0, 100, 2))
    probe = load(spark, other.path).selectExpr("k AS pk")
    df = load(spark, table["path"])
    q = df.join(probe, df.k == probe.pk)
    assert "FileScan parquet" not in physical(q)
    odd = ", ".join(str(k) for k in range(1, 100, 2))
    assert spark_rows(q.select("k", "s", "v")) == oracle(table["path"], f"k IN ({odd})")


def test_the_row_cache(spark, table, conf):
    path = table["path"]
    conf("spark.indexeddf.rowCache.maxBytes", "64m")
    jvm_cache_clear(spark, "RowCache")
    df = load(spark, path)
    for _ in range(2):  # decoded, then from the cache: deleted rows stay out either way
        for where in LOOKUPS:
            assert spark_rows(df.where(where)) == oracle(path, where), where
    assert jvm_cache_stats(spark, "RowCache")[1] > 0
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    where = "k IN (1, 2, 3, 6, 50, 51, 520, 521, 703, 705)"
    assert spark_rows(df.where(where)) == oracle(path, where)


def test_time_travel_reads_the_rows_back(spark, table):
    path, before = table["path"], table["before"]
    old = load(spark, path, versionAsOf=str(before))
    want = IndexedTable.for_path(str(path), version=before).to_arrow()
    assert old.count() == want.num_rows
    assert spark_rows(old.where("k = 6")) == rows([(6, None if 6 % 5 == 0 else "a6", 6.0)])
    assert spark_rows(old.where("k IN (50, 701)")).__len__() == 2
    assert spark_rows(old) == rows(tuple(r.values()) for r in want.select(SCHEMA.names).to_pylist())


def test_a_dataframe_keeps_the_version_it_loaded(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(50))), index_columns=["k"], num_buckets=2)
    df = load(spark, t.path)
    assert df.where("k = 4").count() == 1
    assert "Batched: true" in physical(df)  # no DV: Spark's columnar scan, as before DVs were read
    delete_keys(t.path, "k", [4, 5, 6])
    assert df.count() == 50 and df.where("k = 4").count() == 1
    fresh = load(spark, t.path)
    assert fresh.count() == 47 and fresh.where("k = 4").count() == 0
    assert "Batched: true" in physical(fresh)  # the DV's rows leave Spark's columnar batches
    assert spark_rows(fresh) == oracle(tmp_path / "t")
    delete_keys(t.path, "k", [7], inline=True)  # a DV replacing a DV: the union of both
    assert load(spark, t.path).where("k IN (4, 7, 8)").count() == 1 and load(spark, t.path).count() == 46


@pytest.mark.parametrize("damage, message", [
    ("crc", "CRC-32 mismatch"), ("version", "format version"), ("truncated", "truncated"),
    ("size", "bytes, the log says"), ("cardinality", "cardinality says 4"), ("missing", "MissingFileError"),
])
def test_damaged_dvs_fail_the_read_by_name(spark, tmp_path, damage, message):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(50))), index_columns=["k"], num_buckets=1)
    version = delete_keys(t.path, "k", [4, 5, 6])
    (dv_file,) = (tmp_path / "t").glob("deletion_vector_*.bin")
    raw = bytearray(dv_file.read_bytes())
    commit = tmp_path / "t" / "_delta_log" / f"{version:020d}.json"
    if damage == "crc":
        raw[-1] ^= 0xFF
    elif damage == "version":
        raw[0] = 2
    elif damage == "truncated":
        raw = raw[:-2]
    elif damage == "size":
        raw[1:5] = (len(raw) - 9 + 1).to_bytes(4, "big")
    elif damage == "cardinality":
        commit.write_text(commit.read_text().replace('"cardinality": 3', '"cardinality": 4'))
    dv_file.write_bytes(bytes(raw))
    if damage == "missing":
        dv_file.unlink()
    for query in (lambda df: df.collect(), lambda df: df.where("k = 5").collect()):  # a scan, a driver lookup
        with pytest.raises(Exception, match="CorruptDeletionVectorError|MissingFileError") as e:
            query(load(spark, t.path))
        assert message in str(e.value) and "deletion_vector_" in str(e.value)


def log_dump(path) -> dict:
    jar = jvm_connector.build_jar()
    done = subprocess.run(["java", "-cp", f"{jar}:{jvm_connector._pyspark_jars() / '*'}", "io.indexeddf.log.LogDump",
                           str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_log_dump_shows_each_files_dv(table):
    files = {f["path"]: f for f in log_dump(table["path"])["files"]}
    adds = live_adds(table["path"])
    assert set(files) == set(adds)
    from indexeddf.spec.deletion_vectors import DeletionVectorDescriptor
    for p, a in adds.items():
        if a.get("deletionVector") is None:
            assert "deletionVector" not in files[p]
        else:
            d = DeletionVectorDescriptor.model_validate(a["deletionVector"])
            assert files[p]["deletionVector"] == {"uniqueId": d.unique_id, "cardinality": d.cardinality}


def test_a_checkpoint_carries_the_dvs_and_either_order_of_add_and_remove(spark, tmp_path):
    """A file re-vectored with its add before its remove is live with the new DV (files are
    keyed by path and DV id, no tombstone left); a checkpoint's add.deletionVector is read."""
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows_of(list(range(300))), index_columns=["k"], num_buckets=2,
                        properties={"indexeddf.targetRowGroupBytes": "1024"})
    delete_keys(path, "k", range(0, 300, 4), add_first=True)
    delete_rows(path, ordinals_where(path, "k", [1, 2, 3]), inline=True, add_first=True)
    before = log_dump(path)
    assert len(before["files"]) == 2 and all("deletionVector" in f for f in before["files"])
    want = oracle(path)
    assert len(want) == 300 - 75 - 3
    assert spark_rows(load(spark, path)) == want
    q = load(spark, path).where("k IN (1, 4, 5, 9)")
    assert "LocalTableScan" in physical(q)  # a re-vectored file is live, not a deletion that makes the index stale
    assert spark_rows(q) == oracle(path, "k IN (1, 4, 5, 9)")
    version = write_checkpoint(path)
    # The index state beside the checkpoint (the DV commits changed no index): lookups still use it.
    from indexeddf.format import checkpoint as ckpt
    indexes = [e.model_dump(mode="json") for e in IndexedTable.for_path(str(path), version=0).snapshot.indexes.values()]
    (path / ckpt.index_state_path(version)).parent.mkdir(parents=True, exist_ok=True)
    (path / ckpt.index_state_path(version)).write_text(json.dumps({"version": version, "timestamp": 0,
                                                                    "indexes": indexes}))
    for f in (path / "_delta_log").glob("*.json"):
        if int(f.name[:20]) < version:
            f.unlink()  # only the checkpoint holds the files now
    after = log_dump(path)
    assert after["files"] == before["files"] and after["indexes"] == before["indexes"]
    assert after["version"] == version
    assert oracle(path) == want
    df = load(spark, path)
    assert spark_rows(df) == want
    assert "LocalTableScan" in physical(df.where("k IN (1, 4, 5, 9)"))
    assert spark_rows(df.where("k IN (1, 4, 5, 9)")) == oracle(path, "k IN (1, 4, 5, 9)")


def _file_scans(df) -> list:
    """The FileSourceScanExec nodes of the plan Spark executes for ``df``."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    return [leaves.apply(i) for i in range(leaves.size())
            if leaves.apply(i).getClass().getSimpleName() == "FileSourceScanExec"]


def _nested_rows(keys) -> pa.Table:
    """Rows of k, a partition column p, v, a struct, a list and a string with nulls."""
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "p": pa.array(["even" if k % 2 == 0 else "odd" for k in keys]),
        "v": pa.array([k * 0.5 for k in keys]),
        "st": pa.array([{"a": k, "b": None if k % 11 == 0 else f"b{k}"} for k in keys],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "arr": pa.array([None if k % 13 == 0 else [k, k + 1][: k % 3] for k in keys], pa.list_(pa.int64())),
        "s": pa.array([None if k % 5 == 0 else f"s{k}" for k in keys]),
    })


def _plain(rows_) -> list:
    """Spark rows (structs as dicts) as a multiset comparable with DuckDB's tuples."""
    return rows(tuple(c.asDict(recursive=True) if hasattr(c, "asDict") else c for c in r) for r in rows_)


def test_a_dv_tables_scan_is_columnar_and_reads_what_duckdb_reads(spark, tmp_path):
    """A partitioned, bucketed table whose SQL DELETEs leave deletion vectors (twice on the same
    files) is scanned in Spark's columnar batches, narrowed to the kept rows: full, filtered and
    pruned, bucketed, with _metadata.row_index (each row's ordinal in its file); small batches
    make some batches lose no row and some every row."""
    import pyarrow.parquet as pq

    path = tmp_path / "t"
    IndexedTable.create(str(path), _nested_rows(list(range(800))), index_columns=["k"], num_buckets=2,
                        partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    spark.conf.set("spark.sql.parquet.columnarReaderBatchSize", "16")
    try:
        for n, where in enumerate(["k % 7 = 3", "k BETWEEN 100 AND 300 OR k % 10 = 4"]):
            spark.sql(f"DELETE FROM indexeddf.`{path}` WHERE {where}").collect()
            adds = live_adds(path)
            assert adds and all(a["deletionVector"] is not None for a in adds.values())
            if n == 0:
                first = set(adds)
            else:  # the second DELETE replaced the same files' DVs
                assert set(adds) == first
            df = load(spark, path)
            grouped = df.groupBy("k").count()
            meta = df.select("*", "_metadata.file_path", "_metadata.row_index")
            cond = "k > 400 AND p = 'odd'"
            narrow = df.where(cond).select("k", "st", "arr")
            for query in (df, grouped, meta, narrow):
                (scan,) = _file_scans(query)
                assert scan.supportsColumnar()  # Spark's vectorized reader hands its batches on
            assert _file_scans(grouped)[0].bucketedScan()
            assert "PushedFilters: [IsNotNull(k), GreaterThan(k,400)]" in physical(narrow)
            assert _plain(narrow.collect()) == oracle(path, cond, cols="k, st, arr")
            got = meta.collect()
            assert _plain(r[:-2] for r in got) == oracle(path, cols="k, p, v, st, arr, s")
            files = {}
            for r in got:  # the row index is the row's ordinal in its file
                if r.file_path not in files:
                    files[r.file_path] = pq.read_table(r.file_path.removeprefix("file:"), columns=["k"])["k"]
                assert files[r.file_path][r.row_index].as_py() == r.k
    finally:
        spark.conf.unset("spark.sql.parquet.columnarReaderBatchSize")
