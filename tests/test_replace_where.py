"""Selective overwrites: ``IndexedTable.overwrite(data, predicate=...)`` (delta-rs's name) and
Spark's ``option("replaceWhere", ...)`` (Delta's), on partitioned and unpartitioned tables,
copy on write and deletion vectors.

The oracle is DuckDB over the previous version's rows: ``DELETE WHERE predicate`` then
``INSERT`` the new rows. The new version is read by indexeddf (full reads and lookups),
DuckDB's delta extension and delta-rs (which cannot read deletion vectors).
"""

from __future__ import annotations

import os
import sys

import deltalake
import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from test_delta_oracles import duckdb_delta  # noqa: E402

from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import InvalidOptionError, ReplaceWhereMismatchError, SchemaMismatchError  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int32()), ("v", pa.int64()),
                    ("s", pa.string())])
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]

PREDICATES = [
    "day = '2026-11-01'",  # partition only: whole files
    "day IN ('2026-11-01', '2026-11-03')",
    "n IS NULL",
    "day = '2026-11-02' AND n = 1",
    "v > 50",  # data columns: the rows are deleted
    "day = '2026-11-01' AND v % 2 = 0",  # mixed: only that partition's files are read
    "id IN (1, 2, 3, 40)",  # fixes the index column: the index finds the files
    "day = '2026-11-02' OR v < 10",
    "s LIKE 'a%' AND n IS NOT NULL",
]


def rows(ids, v0: int = 0) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array([DAYS[i % 3] for i in ids]),
        "n": pa.array([None if i % 5 == 0 else i % 3 for i in ids], pa.int32()),
        "v": pa.array([(i * 7 + v0) % 100 for i in ids], pa.int64()),
        "s": pa.array([("a", "b", "ab")[(i + v0) % 3] + str(i) for i in ids]),
    }, schema=SCHEMA)


def table(path: str, partitioned: bool, vectors: bool, n: int = 60) -> IndexedTable:
    props = {"delta.enableDeletionVectors": "true"} if vectors else {}
    t = IndexedTable.create(path, rows(list(range(n))), index_columns=["id"], num_buckets=4,
                            partition_by=["day", "n"] if partitioned else [], properties=props)
    t.append(rows(list(range(n, n + 10)), 3))  # a second commit: more than one file a partition
    return t


def matching(candidates: pa.Table, predicate: str) -> pa.Table:
    """The candidate rows the predicate selects (DuckDB decides)."""
    con = duckdb.connect()
    con.register("c", candidates)
    return con.execute(f"SELECT * FROM c WHERE {predicate}").to_arrow_table().cast(SCHEMA)


def oracle(before: pa.Table, predicate: str, new: pa.Table) -> list[dict]:
    """DuckDB over the previous version's rows: DELETE WHERE predicate; INSERT the new rows."""
    con = duckdb.connect()
    con.register("b", before)
    con.register("x", new)
    con.execute("CREATE TABLE t AS SELECT * FROM b")
    con.execute(f"DELETE FROM t WHERE {predicate}")
    con.execute("INSERT INTO t SELECT * FROM x")
    return ordered(con.execute("SELECT * FROM t").to_arrow_table())


def ordered(t: pa.Table) -> list[dict]:
    return sorted(t.select(SCHEMA.names).cast(SCHEMA).to_pylist(), key=lambda r: (r["id"], r["v"], r["s"]))


def check_reads(path: str, want: list[dict], vectors: bool) -> None:
    t = IndexedTable.for_path(path)
    assert ordered(t.to_arrow()) == want
    ids = sorted({r["id"] for r in want} | {999, 1000})
    assert ordered(t.lookup(ids)) == want  # the indexes stay exact
    duck = duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    assert ordered(duck) == want
    if not vectors:  # delta-rs 1.6.6 does not read deletion vectors
        assert ordered(deltalake.DeltaTable(path).to_pyarrow_table()) == want


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=st.sampled_from(PREDICATES), partitioned=st.booleans(), vectors=st.booleans(),
       ids=st.lists(st.integers(0, 120), max_size=30, unique=True), v0=st.integers(0, 99))
def test_replace_where_is_delete_then_insert(tmp_path_factory, predicate, partitioned, vectors, ids, v0):
    path = str(tmp_path_factory.mktemp("rw") / "t")
    t = table(path, partitioned, vectors)
    before = t.to_arrow()
    new = matching(rows(ids, v0), predicate)
    version = t.version
    got = t.overwrite(new, predicate=predicate)
    want = oracle(before, predicate, new)
    assert got == t.version
    check_reads(path, want, vectors)
    if got > version:  # one commit, named as Delta names it
        entry = t.history()[0]
        assert (entry.operation, entry.parameters) == ("WRITE", {"mode": "Overwrite", "predicate": predicate})
    # The previous version stays readable as it was.
    assert ordered(IndexedTable.for_path(path).to_arrow(version=version)) == ordered(before)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=st.sampled_from(PREDICATES), mode=st.sampled_from(["name", "id"]), vectors=st.booleans(),
       ids=st.lists(st.integers(0, 120), max_size=30, unique=True))
def test_replace_where_on_a_column_mapped_partitioned_table(tmp_path_factory, predicate, mode, vectors, ids):
    """Partition values and stats are keyed by physical names there (PROTOCOL §19): a
    predicate on partition columns must still find whole files by their logical names."""
    path = str(tmp_path_factory.mktemp("rwm") / "t")
    props = {"delta.columnMapping.mode": mode, **({"delta.enableDeletionVectors": "true"} if vectors else {})}
    t = IndexedTable.create(path, rows(list(range(60))), index_columns=["id"], num_buckets=4,
                            partition_by=["day", "n"], properties=props)
    t.append(rows(list(range(60, 70)), 3))
    before = t.to_arrow()
    new = matching(rows(ids, 11), predicate)
    t.overwrite(new, predicate=predicate)
    want = oracle(before, predicate, new)
    t = IndexedTable.for_path(path)
    assert ordered(t.to_arrow()) == want
    assert ordered(t.lookup(sorted({r["id"] for r in want} | {999}))) == want
    # DuckDB's delta extension reads a column-mapped table's partition columns as NULL
    # (PROTOCOL §19); delta-rs's DataFusion reader resolves the physical names (its
    # to_pyarrow_table does not) and reads the table where it has no deletion vectors.
    if not vectors:
        qb = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
        assert ordered(pa.table(qb.execute("SELECT * FROM t").read_all())) == want


def test_a_partition_predicate_removes_whole_files_without_reading_them(tmp_path):
    path = str(tmp_path / "t")
    t = table(path, partitioned=True, vectors=True)
    gone = [a for a in t.snapshot.live_files() if a.partitionValues["day"] == "2026-11-01"]
    before = t.to_arrow()
    for a in gone:  # a file that is read would fail: they are only removed
        os.remove(os.path.join(path, a.path))
    new = matching(rows(list(range(200, 230))), "day = '2026-11-01'")
    t.overwrite(new, predicate="day = '2026-11-01'")
    entry = t.history()[0]
    assert entry.metrics["numRemovedFiles"] == len(gone)
    assert not any(a.deletionVector for a in t.snapshot.live_files())  # whole files, no deletion vectors
    check_reads(path, oracle(before, "day = '2026-11-01'", new), vectors=True)


def test_a_mixed_predicate_reads_only_its_partitions(tmp_path):
    path = str(tmp_path / "t")
    t = table(path, partitioned=True, vectors=False)
    before = t.to_arrow()
    other = next(a for a in t.snapshot.live_files() if a.partitionValues["day"] == "2026-11-02")
    predicate = "day = '2026-11-01' AND v > 40"
    new = matching(rows(list(range(300, 330))), predicate)
    data = open(os.path.join(path, other.path), "rb").read()
    os.remove(os.path.join(path, other.path))  # read, it would fail the write
    t.overwrite(new, predicate=predicate)
    open(os.path.join(path, other.path), "wb").write(data)
    check_reads(path, oracle(before, predicate, new), vectors=False)


def test_rows_the_predicate_does_not_select_are_refused(tmp_path):
    path = str(tmp_path / "t")
    t = table(path, partitioned=True, vectors=False)
    version, files = t.version, sorted(os.listdir(path))
    bad = rows([500, 501, 502])  # days 2026-11-03, 2026-11-01, 2026-11-02
    with pytest.raises(ReplaceWhereMismatchError, match="2 of its 3 rows") as e:
        t.overwrite(bad, predicate="day = '2026-11-01'")
    assert e.value.rows == 2 and e.value.predicate == "day = '2026-11-01'"
    # NULL is not true: a row whose n is NULL fails "n = 1" (Delta's check constraint).
    with pytest.raises(ReplaceWhereMismatchError):
        t.overwrite(rows([5]), predicate="n = 1 OR n = 2")
    with pytest.raises(ReplaceWhereMismatchError):
        t.overwrite(rows([5, 7]), predicate="v > 40")  # v: 35 and 49
    assert IndexedTable.for_path(path).version == version
    assert sorted(os.listdir(path)) == files
    data_files = {os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs
                  if f.endswith(".parquet") and "/_indexes" not in d and "/_delta_log" not in d}
    assert {os.path.join(path, a.path) for a in t.snapshot.live_files()} == data_files  # nothing left behind
    with pytest.raises(SchemaMismatchError):
        t.overwrite(rows([1]), predicate="nope = 1")
    with pytest.raises(InvalidOptionError):
        t.overwrite(rows([1]), predicate="day +")
    with pytest.raises(InvalidOptionError, match="schema"):
        t.overwrite(rows([1]), predicate="day = '2026-11-02'", schema_mode="merge")


def test_idempotent_and_empty(tmp_path):
    path = str(tmp_path / "t")
    t = table(path, partitioned=True, vectors=False)
    before = t.to_arrow()
    new = matching(rows(list(range(400, 410))), "day = '2026-11-03'")
    v = t.overwrite(new, predicate="day = '2026-11-03'", txn=("job", 1))
    assert t.overwrite(new, predicate="day = '2026-11-03'", txn=("job", 1)) == v  # a retry commits nothing
    check_reads(path, oracle(before, "day = '2026-11-03'", new), vectors=False)
    # No rows: the predicate's rows are deleted (an overwrite of them with nothing).
    before = t.to_arrow()
    t.overwrite(SCHEMA.empty_table(), predicate="v < 20")
    check_reads(path, oracle(before, "v < 20", SCHEMA.empty_table()), vectors=False)
    # Nothing selected and nothing written: no commit.
    v = t.version
    assert t.overwrite(SCHEMA.empty_table(), predicate="day = '1999-01-01'") == v


@pytest.mark.spark
@pytest.mark.parametrize("vectors", [False, True])
def test_spark_replace_where(spark, tmp_path, vectors):
    import indexeddf

    indexeddf.register(spark)
    path = str(tmp_path / "t")
    t = table(path, partitioned=True, vectors=vectors)
    for predicate, ids in (("day = '2026-11-01'", range(600, 640)), ("v >= 50 AND n IS NOT NULL", range(700, 760)),
                           ("id IN (3, 4, 5)", range(3, 6))):
        before = IndexedTable.for_path(path).to_arrow()
        new = matching(rows(list(ids), 11), predicate)
        df = spark.createDataFrame(new.to_pandas(), "id long, day string, n int, v long, s string")
        df.write.format("indexeddf").mode("overwrite").option("replaceWhere", predicate).save(path)
        check_reads(path, oracle(before, predicate, new), vectors)
        entry = IndexedTable.for_path(path).history()[0]
        assert (entry.operation, entry.parameters["predicate"]) == ("WRITE", predicate)
        assert [r.asDict() for r in spark.read.format("indexeddf").load(path).where(predicate).collect()] != [] \
            or new.num_rows == 0
    version = IndexedTable.for_path(path).version
    bad = spark.createDataFrame(rows([800, 801]).to_pandas(), "id long, day string, n int, v long, s string")
    with pytest.raises(Exception, match="does not conform to the overwrite's predicate"):
        bad.write.format("indexeddf").mode("overwrite").option("replaceWhere", "day = '2026-11-01'").save(path)
    with pytest.raises(Exception, match="needs mode"):
        bad.write.format("indexeddf").mode("append").option("replaceWhere", "day = '2026-11-01'").save(path)
    assert IndexedTable.for_path(path).version == version
    # The Python API's Spark path: the same predicate= as for Arrow data.
    before = IndexedTable.for_path(path).to_arrow()
    new = matching(rows(list(range(900, 930)), 5), "day = '2026-11-02'")
    t = IndexedTable.for_path(path)
    t.overwrite(spark.createDataFrame(new.to_pandas(), "id long, day string, n int, v long, s string"),
                predicate="day = '2026-11-02'")
    with pytest.raises(ReplaceWhereMismatchError):
        t.overwrite(bad, predicate="day = '2026-11-02'")
    check_reads(path, oracle(before, "day = '2026-11-02'", new), vectors)


@pytest.mark.spark
def test_sql_insert_replace_where(spark, tmp_path):
    """``INSERT INTO ... REPLACE WHERE`` (Delta's SQL form) is the replaceWhere option."""
    import indexeddf

    indexeddf.register(spark)
    path = str(tmp_path / "t")
    table(path, partitioned=True, vectors=False)
    spark.sql(f"CREATE TABLE replaced USING indexeddf LOCATION '{path}'")
    try:
        for predicate, ids in (("day = '2026-11-03'", range(900, 920)), ("v < 30", range(950, 990))):
            before = IndexedTable.for_path(path).to_arrow()
            new = matching(rows(list(ids), 2), predicate)
            spark.createDataFrame(new.to_pandas(), "id long, day string, n int, v long, s string") \
                .createOrReplaceTempView("incoming")
            spark.sql(f"INSERT INTO replaced REPLACE WHERE {predicate} SELECT * FROM incoming")
            want = oracle(before, predicate, new)
            check_reads(path, want, vectors=False)
            assert ordered(pa.Table.from_pylist([r.asDict() for r in spark.table("replaced").collect()])) == want
            assert IndexedTable.for_path(path).history()[0].operation == "WRITE"
        with pytest.raises(Exception, match="does not conform"):
            spark.sql("INSERT INTO replaced REPLACE WHERE day = '2026-11-01' SELECT * FROM incoming")
    finally:
        spark.sql("DROP TABLE IF EXISTS replaced")
