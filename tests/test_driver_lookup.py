"""Index lookups the JVM connector answers on the driver (``DriverLookup.java``): no Spark
job, a local relation of exactly the matching rows, the same planner rules as the Python
reader (usable index, staleness limits, hybrid scan of unindexed files), and Spark's own
scan whenever the driver should not answer. Reference answers are ``to_arrow()`` filtered
by DuckDB, or ``IndexedTable.lookup``; DataFrames are loaded once and queried many times.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from connector_helpers import SCHEMA, jvm_cache_clear, jvm_cache_stats, lineage, physical, rows_of
from connector_helpers import read as load

import indexeddf
from indexeddf import IndexedTable

pytestmark = pytest.mark.spark

@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


def collected(df) -> pa.Table:
    """``collect()``, as users call it (``toArrow()`` always runs a job, even on local rows)."""
    return pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=SCHEMA)


def jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def expected(path, where, version=None):
    con = duckdb.connect()
    con.register("t", IndexedTable.for_path(str(path), version=version).to_arrow())
    sql_where = where.replace("<=>", "IS NOT DISTINCT FROM")  # Spark's null-safe equality, in DuckDB's words
    out = con.execute(f"SELECT k, s, v FROM t WHERE {sql_where}").arrow()
    return out.read_all() if isinstance(out, pa.RecordBatchReader) else out


def same(got: pa.Table, want: pa.Table) -> bool:
    key = lambda r: repr(tuple(r.values()))  # noqa: E731
    return sorted(got.cast(SCHEMA).to_pylist(), key=key) == sorted(want.cast(SCHEMA).to_pylist(), key=key)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("driver") / "t"
    t = IndexedTable.create(str(path), rows_of(list(range(0, 400)) + [None, None, 7, 7]), index_columns=["k"],
                            num_buckets=8)
    t.append(rows_of(list(range(300, 500)), tag="b"))  # k 300..399 twice
    t.create_index("by_s", ["s"])
    t.delete("k > 450")
    t.refresh()  # the delete rewrote a third of the bytes: past maxDeletedRatio until a refresh
    return path


QUERIES = ["k = 7", "k = 350", "k = 999", "k IN (1, 2, 350, 7)", "k <=> 12", "k IS NULL", "k = 350 AND v > 100",
           "s = 'a3'", "s IN ('b1', 'a2') AND k < 320", "k = 351 OR k = 352",
           # a list long enough to be checked as a hash set; its NULL matches no row (not even k IS NULL)
           "k IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 350, NULL)"]


def test_lookups_run_no_spark_job_and_answer_like_the_python_reader(spark, table):
    df = load(spark, table)  # one DataFrame, queried many times in a shuffled order
    for where in QUERIES[::-1] + QUERIES:
        q = df.where(where)
        before = jobs(spark)
        got = collected(q)
        assert jobs(spark) == before, where
        assert "LocalTableScan" in physical(q), where
        assert same(got, expected(table, where)), where
    # The driver-side lookup keeps a reused DataFrame's other queries Spark's own scans.
    assert df.count() == IndexedTable.for_path(str(table)).to_arrow().num_rows
    assert "FileScan parquet" in physical(df.where("v > 3"))


def test_the_row_cache_answers_like_the_files(spark, table, conf):
    """With ``rowCache.maxBytes``, decoded row groups stay in the JVM: a second lookup of the
    same rows is served from memory, with the same answer; without it nothing is cached."""
    jvm_cache_clear(spark, "RowCache")
    df = load(spark, table)
    for where in QUERIES:
        collected(df.where(where))
    assert jvm_cache_stats(spark, "RowCache")[0] == 0  # off by default
    conf("spark.indexeddf.rowCache.maxBytes", "64m")
    for rounds in range(2):  # cold: decoded and kept; warm: from the cache
        for where in QUERIES:
            q = df.where(where)
            assert "LocalTableScan" in physical(q), where
            assert same(collected(q), expected(table, where)), (rounds, where)
        groups, rows, held = jvm_cache_stats(spark, "RowCache")
        assert groups > 0 and rows > 0 and held > 0
    # Past maxKeys, tasks would decode the rows (and keep them in their executor's cache).
    # In local mode the driver's JVM is that executor: the driver decodes and keeps them
    # itself, so the first run already has the plan of the warm runs.
    conf("spark.indexeddf.driverLookup.maxKeys", "1")
    jvm_cache_clear(spark, "RowCache")
    where = "k IN (3, 4, 360)"
    assert "LocalTableScan" in physical(df.where(where))
    assert jvm_cache_stats(spark, "RowCache")[0] > 0
    assert same(collected(df.where(where)), expected(table, where))
    assert "LocalTableScan" in physical(df.where(where))
    assert same(collected(df.where(where)), expected(table, where))
    conf("spark.indexeddf.rowCache.maxBytes", "0")  # without the row cache, tasks read the rows
    assert "Scan ExistingRDD" in physical(df.where(where))
    assert same(collected(df.where(where)), expected(table, where))
    conf("spark.indexeddf.rowCache.maxBytes", "64m")
    conf("spark.indexeddf.rowCache.maxBytes", "16b")  # a bound smaller than any row group: nothing is kept
    jvm_cache_clear(spark, "RowCache")
    assert same(collected(df.where("k IN (1, 2, 350)")), expected(table, "k IN (1, 2, 350)"))
    assert jvm_cache_stats(spark, "RowCache")[0] == 0


def test_a_lookup_answer_equals_indexed_table_lookup(spark, table):
    t = IndexedTable.for_path(str(table))
    df = load(spark, table)
    for keys in ([7], [350, 351, 0], [None], [123456]):
        in_list = ", ".join("NULL" if k is None else str(k) for k in keys)
        where = f"k IN ({in_list})" if None not in keys else "k IS NULL"
        assert same(df.where(where).toArrow(), t.lookup(keys)), keys


def test_unindexed_appends_are_scanned_on_the_driver_too(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(2000))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows_of([5, 6, 2500], tag="new"))
    df = load(spark, t.path)
    for where in ("k = 5", "k = 2500", "k IN (6, 7)"):
        q = df.where(where)
        assert "LocalTableScan" in physical(q), where
        assert same(q.toArrow(), expected(t.path, where)), where


def test_past_the_driver_limits_spark_tasks_read_only_the_candidate_row_groups(spark, table, conf):
    df = load(spark, table)
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    for where in ("k IN (1, 2, 3)", "k IN (1, 2, 350, 7, 999)", "s IN ('a1', 'b2', 'a3')", QUERIES[-1]):
        q = df.where(where)
        text = physical(q)
        assert "Scan ExistingRDD" in text and "FileScan" not in text, text
        assert "ProbeRDD" in lineage(q)  # more keys than maxKeys: the tasks probe the index themselves
        assert same(collected(q), expected(table, where)), where
    assert "LocalTableScan" in physical(df.where("k IN (1, 2)"))
    conf("spark.indexeddf.driverLookup.maxRows", "5")  # 's = a3' matches more rows than that
    q = df.where("s = 'a3'")
    assert "Scan ExistingRDD" in physical(q)
    assert "LookupRDD" in lineage(q)  # one key: the driver probed, the tasks read what it found
    assert same(collected(q), expected(table, "s = 'a3'"))
    assert "LocalTableScan" in physical(df.where("k = 7"))


def test_spark_scans_when_the_index_would_not_save_reading(spark, table, conf):
    df = load(spark, table)
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    conf("spark.indexeddf.lookup.maxReadFraction", "0.0")  # any read is too much
    q = df.where("k IN (1, 2, 3)")
    assert "FileScan parquet" in physical(q)
    assert same(collected(q), expected(table, "k IN (1, 2, 3)"))
    conf("spark.indexeddf.lookup.maxReadFraction", "0.5")
    conf("spark.indexeddf.lookupTasks.enabled", "false")
    assert "FileScan parquet" in physical(df.where("k IN (1, 2, 3)"))
    assert "LocalTableScan" in physical(df.where("k = 7"))
    conf("spark.indexeddf.driverLookup.enabled", "false")
    assert "FileScan parquet" in physical(df.where("k = 7"))


def test_a_stale_index_is_not_used(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(100))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows_of(list(range(100, 1000))))  # most bytes unindexed: over maxAppendedRatio
    q = load(spark, t.path).where("k = 500")
    assert "FileScan parquet" in physical(q)
    assert same(q.toArrow(), expected(t.path, "k = 500"))
    t.refresh()
    q = load(spark, t.path).where("k = 500")
    assert "LocalTableScan" in physical(q)
    assert same(q.toArrow(), expected(t.path, "k = 500"))


def test_an_older_version_whose_index_files_were_vacuumed_is_scanned(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(300))), index_columns=["k"], num_buckets=4)
    t.create_index("by_s", ["s"])
    v = t.version
    t.drop_index("by_s")
    t.vacuum_index("by_s")
    q = load(spark, t.path, versionAsOf=v).where("s = 'a3'")
    assert "FileScan parquet" in physical(q)
    assert same(q.toArrow(), expected(t.path, "s = 'a3'", version=v))
    # the primary index of that version still answers on the driver
    q = load(spark, t.path, versionAsOf=v).where("k = 3")
    assert "LocalTableScan" in physical(q)
    assert same(q.toArrow(), expected(t.path, "k = 3", version=v))


def test_a_newer_index_state_serves_an_older_version(spark, tmp_path):
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(100))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows_of(list(range(100, 1000))))
    stale = t.version  # its own index state covers a tenth of the bytes: too stale to use
    t.refresh()  # the newest state covers every file of that version too
    q = load(spark, t.path, versionAsOf=stale).where("k = 500")
    assert "LocalTableScan" in physical(q)
    assert same(collected(q), expected(t.path, "k = 500", version=stale))


def test_a_checkpoint_without_index_state_replays_the_index_log(spark, tmp_path):
    """Another Delta engine's checkpoint has no _indexes/_state file beside it: the index
    state is replayed from the commits, as the Python reader does."""
    t = IndexedTable.create(str(tmp_path / "t"), rows_of(list(range(300))), index_columns=["k"], num_buckets=4)
    t.set_properties({"indexeddf.checkpointInterval": "3"})
    for i in range(4):
        t.append(rows_of([1000 + i]))
    states = sorted((tmp_path / "t" / "_indexes" / "_state").glob("*.json"))
    assert states
    for s in states:
        s.unlink()
    for where in ("k = 7", "k = 1003"):
        q = load(spark, t.path).where(where)
        assert "LocalTableScan" in physical(q), where
        assert same(collected(q), expected(t.path, where)), where


def test_a_projection_reads_only_the_columns_it_and_the_filter_use(spark, table):
    df = load(spark, table)
    q = df.where("k IN (7, 350) AND v >= 0").select("s")
    text = physical(q)
    assert "LocalTableScan [s#" in text, text
    want = expected(table, "k IN (7, 350) AND v >= 0")
    assert sorted(r.s or "" for r in q.collect()) == sorted(s or "" for s in want.column("s").to_pylist())


def test_a_lookup_handed_to_spark_keeps_every_row(spark, table):
    """PySpark 4.3.0's createDataFrame(arrow_table) drops the rows after a table's first
    empty record batch; lookup() returns none (keys that miss used to leave some)."""
    t = IndexedTable.for_path(str(table))
    raw = pa.Table.from_batches([pa.record_batch({"k": pa.array(x, pa.int64())}) for x in ([1, 2], [], [3])])
    assert spark.createDataFrame(raw).count() < raw.num_rows  # the PySpark behaviour this guards against
    for start in range(0, 400, 40):
        got = t.lookup(list(range(start, start + 9)) + [10_000 + start, 20_000 + start])
        assert all(b.num_rows for b in got.to_batches())
        assert spark.createDataFrame(got).count() == got.num_rows > 0


def test_many_keys_read_through_the_index_only_when_they_touch_few_row_groups(spark, tmp_path, conf):
    # Sorted files with small row groups (about 100 rows): 200 consecutive keys sit in a few
    # row groups of each bucket's file, 200 keys spread over the whole range in nearly all.
    # The tasks that probe leave the driver no probe to count: it reads the row groups'
    # statistics instead (a uniform guess would say 200 keys touch nearly every row group).
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows_of(list(range(4000))), index_columns=["k"], num_buckets=4,
                        properties={"indexeddf.targetRowGroupBytes": "2048"})
    conf("spark.indexeddf.driverLookup.maxKeys", "10")
    df = load(spark, path)
    clustered = f"k IN ({', '.join(map(str, range(1000, 1200)))})"
    spread = f"k IN ({', '.join(map(str, range(0, 4000, 20)))})"
    assert "ProbeRDD" in lineage(df.where(clustered))
    assert "FileScan parquet" in physical(df.where(spread))
    for where in (clustered, spread):
        assert same(collected(df.where(where)), expected(path, where)), where


def test_string_keys_are_estimated_by_row_group_statistics_too(spark, tmp_path, conf):
    names = [f"user{i:05d}" for i in range(4000)]
    path = tmp_path / "t"
    IndexedTable.create(str(path), pa.table({"name": names, "n": list(range(4000))}), index_columns=["name"],
                        num_buckets=4, properties={"indexeddf.targetRowGroupBytes": "2048"})
    conf("spark.indexeddf.driverLookup.maxKeys", "10")
    df = load(spark, path)
    clustered = names[1000:1200] + ["user99999", "nobody"]  # absent keys too
    spread = names[::20]
    for keys, plan in ((clustered, "ProbeRDD"), (spread, "FileScanRDD")):
        q = df.where(f"name IN ({', '.join(repr(k) for k in keys)})")
        assert plan in lineage(q)
        assert sorted(r.n for r in q.collect()) == sorted(names.index(k) for k in keys if k in names)


def test_a_long_in_list_left_to_spark_skips_its_bucket_pruning(spark, tmp_path, conf):
    # Spark's bucket pruning builds a projection for each IN value (about 1 s for 5,000):
    # when the values fall in every bucket it keeps every file, so the scan is read
    # unbucketed (an aggregation above then shuffles the filtered rows).
    path = tmp_path / "t"
    IndexedTable.create(str(path), rows_of(list(range(4000))), index_columns=["k"], num_buckets=4)
    conf("spark.indexeddf.driverLookup.maxKeys", "10")
    conf("spark.indexeddf.lookup.maxReadFraction", "0.0")  # Spark's scan answers
    df = load(spark, path)
    for n, bucketed in ((999, True), (1000, False)):
        where = f"k IN ({', '.join(map(str, range(n)))})"
        text = physical(df.where(where))
        assert "FileScan parquet" in text and ("Bucketed:" in text) == bucketed, (n, text)
        assert same(collected(df.where(where)), expected(path, where)), n
    # As many values, all in one bucket: pruning keeps a quarter of the files, so it stays.
    one_bucket = [r.id for r in spark.range(6000).where("pmod(hash(id), 4) = 0").limit(1000).collect()]
    text = physical(df.where(f"k IN ({', '.join(map(str, one_bucket))})"))
    assert "Bucketed:" in text, text


def test_a_few_keys_read_index_blocks_and_many_keys_the_whole_file(spark, tmp_path, conf):
    # One bucket whose index file has 7 blocks (row groups of ENTRY_ROW_GROUP entries), a key
    # repeated past a block, deletion vectors, and an append the index does not cover (hybrid
    # scan): a few keys read the blocks their hashes fall in, on the driver and in tasks, 40
    # keys the whole file; every answer is DuckDB's.
    from dv_helpers import mark_deleted

    from indexeddf.writer.index_files import ENTRY_ROW_GROUP

    path = tmp_path / "t"
    n = 5 * ENTRY_ROW_GROUP
    t = IndexedTable.create(str(path), rows_of(list(range(n)) + [7] * (ENTRY_ROW_GROUP + 100)), index_columns=["k"],
                            num_buckets=1, properties={"indexeddf.index.autoRefresh": "false",
                                                       "indexeddf.targetRowGroupBytes": "4096"})
    entries = sum(f.numEntries for e in t.snapshot.indexes.values() for f in e.files)
    mark_deleted(str(path), {a.path: list(range(0, a.stats.numRecords, 3)) for a in t.snapshot.live_files()})
    IndexedTable.for_path(str(path)).append(rows_of(list(range(100, 200)) + [7], tag="b"))  # not indexed
    df = load(spark, path)
    jvm_cache_clear(spark, "IndexSegments")
    for where in ("k = 7", "k = 150", "k = 70000", "k IN (3, 5, 81000)", "k = 99999999"):
        assert same(collected(df.where(where)), expected(path, where)), where
        held = jvm_cache_stats(spark, "IndexSegments")[1]
        assert 0 < held < entries, (where, held)  # blocks of the index file, not all of it
    # Past the driver's key limit the tasks probe (local mode: in this JVM), reading blocks too.
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    jvm_cache_clear(spark, "IndexSegments")
    few = "k IN (3, 5, 81000)"
    assert "ProbeRDD" in lineage(df.where(few))
    assert same(collected(df.where(few)), expected(path, few))
    assert 0 < jvm_cache_stats(spark, "IndexSegments")[1] < entries
    jvm_cache_clear(spark, "IndexSegments")
    spread = f"k IN ({', '.join(map(str, range(0, n, n // 40)))})"
    assert same(collected(df.where(spread)), expected(path, spread))
    assert jvm_cache_stats(spark, "IndexSegments")[:2] == [1, entries]  # the file whole, once


def test_lookups_through_compact_footers_equal_spark_and_pyarrow_reads(spark, tmp_path):
    # Many data row groups and index blocks in two buckets, an append the index does not cover
    # (hybrid scan), then deletion vectors. The JVM keeps each footer as its row groups' Thrift
    # bytes and decodes, for a read, only the row groups it reads: lookups from a cold footer
    # cache and from a warm one give Spark's own Parquet read of the live files (before the
    # DVs) and pyarrow's read of the files without the rows the DVs delete (after them), both
    # filtered by DuckDB; the cache counts bytes.
    import pyarrow.parquet as pq
    from dv_helpers import mark_deleted

    from indexeddf.writer.index_files import ENTRY_ROW_GROUP

    path = tmp_path / "t"
    n = 3 * ENTRY_ROW_GROUP
    IndexedTable.create(str(path), rows_of(list(range(n)) + [11] * 50), index_columns=["k"], num_buckets=2,
                        properties={"indexeddf.index.autoRefresh": "false", "indexeddf.targetRowGroupBytes": "4096"})
    IndexedTable.for_path(str(path)).append(rows_of(list(range(n - 50, n + 50)) + [11], tag="b"))  # not indexed
    wheres = ["k = 11", "k = 5", "k = 12345", f"k = {n - 10}", f"k = {n + 20}", f"k IN (1, 4000, {n - 1}, {n + 1})",
              "k = -1", f"k = {n // 2} AND v > 3"]

    def duck(rows: pa.Table, where: str) -> pa.Table:
        con = duckdb.connect()
        con.register("t", rows)
        out = con.execute(f"SELECT k, s, v FROM t WHERE {where}").arrow()
        return out.read_all() if isinstance(out, pa.RecordBatchReader) else out

    def check(reference: pa.Table):
        df = load(spark, path)
        for cold in (True, False):
            if cold:
                jvm_cache_clear(spark, "Footers")
                jvm_cache_clear(spark, "IndexSegments")
            for where in wheres:
                q = df.where(where)
                before = jobs(spark)
                got = collected(q)
                assert jobs(spark) == before, where  # answered on the driver
                assert same(got, duck(reference, where)), (where, cold)
        footers, held = jvm_cache_stats(spark, "Footers")
        # Hundreds of bytes a row group (parquet-mr's decoded footer holds about 1 KB a column chunk).
        assert 0 < footers and 0 < held < 1500 * groups + 20_000 * footers, (footers, held, groups)

    snap = IndexedTable.for_path(str(path)).snapshot
    index_files = [path / f.path for e in snap.indexes.values() for f in e.files]
    counts = [pq.ParquetFile(p).metadata.num_row_groups for p in [path / a.path for a in snap.live_files()] + index_files]
    groups = sum(counts)
    assert max(counts) > 20
    files = [str(path / a.path) for a in snap.live_files()]
    check(pa.Table.from_pylist([r.asDict() for r in spark.read.parquet(*files).select("k", "s", "v").collect()],
                               schema=SCHEMA))
    mark_deleted(str(path), {a.path: list(range(0, a.stats.numRecords, 3)) for a in snap.live_files()})
    kept = [pq.read_table(f, columns=["k", "s", "v"]) for f in files]  # the DVs delete every third row of each
    check(pa.concat_tables([t.filter(pa.array([i % 3 != 0 for i in range(t.num_rows)])) for t in kept]))


def test_index_blocks_decoded_from_their_pages_answer_as_spark_and_pyarrow_reads(spark, tmp_path):
    # The connector decodes index blocks straight from their pages (parquet-mr's page reader
    # and values decoders, not Spark's vectorized reader). Many blocks in two buckets, a key
    # repeated past a block, an append the index does not cover (hybrid scan) and deletion
    # vectors: lookups of new keys one at a time and a list touching several blocks of a file
    # (read in one pass) give pyarrow's read of the live files without the rows the DVs delete,
    # filtered by DuckDB; so they do once the index files are re-encoded as other Parquet
    # writers could (data page v2, snappy, no dictionary, required columns), still decoded
    # from their pages.
    import pyarrow.parquet as pq
    from connector_helpers import jvm_diagnostic
    from dv_helpers import mark_deleted

    from indexeddf.writer.index_files import ENTRY_ROW_GROUP

    path = tmp_path / "t"
    n = 6 * ENTRY_ROW_GROUP
    IndexedTable.create(str(path), rows_of(list(range(n)) + [13] * (ENTRY_ROW_GROUP + 40)), index_columns=["k"],
                        num_buckets=2, properties={"indexeddf.index.autoRefresh": "false",
                                                   "indexeddf.targetRowGroupBytes": "4096"})
    IndexedTable.for_path(str(path)).append(rows_of(list(range(n - 30, n + 30)) + [13], tag="b"))  # not indexed
    snap = IndexedTable.for_path(str(path)).snapshot
    mark_deleted(str(path), {a.path: list(range(0, a.stats.numRecords, 4)) for a in snap.live_files()})
    kept = [pq.read_table(path / a.path, columns=["k", "s", "v"]) for a in snap.live_files()]
    reference = pa.concat_tables([t.filter(pa.array([i % 4 != 0 for i in range(t.num_rows)])) for t in kept])
    index_files = [path / f.path for e in snap.indexes.values() for f in e.files]
    assert min(pq.ParquetFile(p).metadata.num_row_groups for p in index_files) >= 3

    def duck(where: str) -> pa.Table:
        con = duckdb.connect()
        con.register("t", reference)
        out = con.execute(f"SELECT k, s, v FROM t WHERE {where}").arrow()
        return out.read_all() if isinstance(out, pa.RecordBatchReader) else out

    wheres = [f"k = {k}" for k in (13, 0, 4, 5, 1000, 17_000, 33_333, 70_001, n - 1, n - 20, n + 10, -5)]
    wheres += [f"k IN ({', '.join(map(str, range(1, n, n // 12)))})", "k = 13 AND v > 100"]

    def check():
        df = load(spark, path)
        direct, through_spark = (int(x) for x in jvm_diagnostic(spark, "indexBlockReads"))
        for where in wheres:
            jvm_cache_clear(spark, "IndexSegments")  # each lookup reads its blocks
            before = jobs(spark)
            got = collected(df.where(where))
            assert jobs(spark) == before, where  # answered on the driver
            assert same(got, duck(where)), where
        now = [int(x) for x in jvm_diagnostic(spark, "indexBlockReads")]
        assert now[0] > direct + len(wheres) and now[1] == through_spark, (direct, through_spark, now)

    check()
    required = pa.schema([pa.field(f.name, f.type, nullable=False) for f in pq.read_schema(index_files[0])])
    for p in index_files:
        pq.write_table(pq.read_table(p).cast(required), p, row_group_size=ENTRY_ROW_GROUP, data_page_version="2.0",
                       compression="snappy", use_dictionary=False, write_statistics=["hash"])
    jvm_cache_clear(spark, "Footers")
    check()


def test_a_point_read_of_a_large_row_group_stops_after_its_last_row(spark, tmp_path):
    # A lookup of a few rows decodes a data row group in small batches and stops after the last
    # wanted row (data files are sorted by key). One row group of 6,000 rows: keys at its start,
    # across batch boundaries, at its end, a key of 20 rows (read in full batches) and deletion
    # vectors give pyarrow's read of the file without the rows the DVs delete, filtered by DuckDB.
    import pyarrow.parquet as pq
    from dv_helpers import mark_deleted

    path = tmp_path / "t"
    keys = [k for k in range(3000) for _ in range(2)] + [1023] + [4000] * 20
    IndexedTable.create(str(path), rows_of(keys), index_columns=["k"], num_buckets=1)
    snap = IndexedTable.for_path(str(path)).snapshot
    (live,) = snap.live_files()
    assert pq.ParquetFile(path / live.path).metadata.row_group(0).num_rows > 4096
    mark_deleted(str(path), {live.path: list(range(1, live.stats.numRecords, 5))})
    table = pq.read_table(path / live.path, columns=["k", "s", "v"])
    reference = table.filter(pa.array([i % 5 != 1 for i in range(table.num_rows)]))
    df = load(spark, path)
    for where in ("k = 0", "k = 511", "k = 512", "k = 1023", "k = 2047", "k = 2999", "k = 4000", "k IN (3, 1500, 2998)",
                  "k = 3500"):
        con = duckdb.connect()
        con.register("t", reference)
        want = con.execute(f"SELECT k, s, v FROM t WHERE {where}").arrow()
        want = want.read_all() if isinstance(want, pa.RecordBatchReader) else want
        before = jobs(spark)
        assert same(collected(df.where(where)), want), where
        assert jobs(spark) == before, where  # answered on the driver
