"""An indexeddf table as a streaming source (``spark.readStream.format("indexeddf")``), as Delta's is.

Each run is ``trigger(availableNow=True)`` with its checkpoint in ``tmp_path``; ``foreachBatch``
gathers each micro-batch's rows. What a stream read is checked against delta-rs's read of the
table's versions (the rows of the newer version that are not in the older one, by DuckDB's
``EXCEPT ALL``): every row committed after the checkpoint arrives once, and a restart reads
nothing again.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from oracles import duckdb_delta

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import InvalidOptionError
from indexeddf.spark.source import PythonNamedDataSource

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    indexeddf.register(spark)


def rows(n0: int, n1: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n1), pa.int64()), "v": [f"r{i}" for i in range(n0, n1)]})


def run(spark, source: str, checkpoint, table: bool = False, batches: list | None = None,
        **options) -> list[list[tuple]]:
    """One ``availableNow`` run of a stream of ``source`` (a path, or a catalog name with
    ``table``): the rows of each micro-batch, sorted (also put in ``batches``, kept when the
    run fails)."""
    batches = [] if batches is None else batches
    reader = spark.readStream.format("indexeddf")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    df = reader.table(source) if table else reader.load(source)
    q = (df.writeStream.foreachBatch(lambda b, _: batches.append(sorted(tuple(r) for r in b.collect())))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    if q.exception() is not None:
        raise q.exception()
    return batches


def added(path: str, old: int | None, new: int) -> list[tuple]:
    """delta-rs's rows of version ``new`` that version ``old`` (None: no version) does not have."""
    con = duckdb.connect()
    con.register("new_rows", DeltaTable(path, version=new).to_pyarrow_table())
    if old is None:
        return sorted(con.execute("SELECT id, v FROM new_rows").fetchall())
    con.register("old_rows", DeltaTable(path, version=old).to_pyarrow_table())
    return sorted(con.execute("SELECT id, v FROM new_rows EXCEPT ALL SELECT id, v FROM old_rows").fetchall())


def flat(batches: list[list[tuple]]) -> list[tuple]:
    return sorted(r for b in batches for r in b)


def test_appends_arrive_exactly_once_across_restarts(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 20), ["id"], 2)
    t.append(rows(20, 25))
    first = run(spark, path, ck, maxFilesPerTrigger=2)
    # The initial snapshot (the whole table at its version) first, two files a batch.
    assert len(first) == -(-len(DeltaTable(path).file_uris()) // 2)
    assert flat(first) == added(path, None, 1)
    v1 = t.version
    t.append(rows(25, 30))
    spark.createDataFrame(rows(30, 40).to_pandas()).write.format("indexeddf").mode("append").save(path)
    t = IndexedTable.for_path(path)
    second = run(spark, path, ck)
    assert len(second) == 1 and flat(second) == added(path, v1, t.version)
    # A restart with nothing committed since reads nothing again.
    assert run(spark, path, ck) == []
    # maxBytesPerTrigger: at least one file a batch, the file that reaches the limit closes it.
    before = t.version
    t.append(rows(40, 50))
    third = run(spark, path, ck, maxBytesPerTrigger=1)
    new_files = set(DeltaTable(path).file_uris()) - set(DeltaTable(path, version=before).file_uris())
    assert len(third) == len(new_files) >= 2
    assert flat(third) == added(path, before, before + 1)


def test_starting_version_and_latest(spark, tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(0, 10), ["id"], 2)
    t.append(rows(10, 15))
    t.append(rows(15, 20))
    assert flat(run(spark, path, tmp_path / "ck1", startingVersion=1)) == added(path, 0, 2)
    # startingTimestamp: the first version committed at or after it.
    at_1 = next(c.timestamp for c in t.history() if c.version == 1)
    since_1 = run(spark, path, tmp_path / "ck5", startingTimestamp=f"{at_1:%Y-%m-%d %H:%M:%S.%f}")
    assert flat(since_1) == added(path, 0, 2)
    assert run(spark, path, tmp_path / "ck2", startingVersion="latest") == []
    t.append(rows(20, 23))
    assert flat(run(spark, path, tmp_path / "ck2", startingVersion="latest")) == added(path, 2, 3)
    with pytest.raises(Exception, match="VersionNotFoundError.*startingVersion 9"):
        run(spark, path, tmp_path / "ck3", startingVersion=9)
    with pytest.raises(Exception, match="InvalidOptionError.*startingVersion"):
        run(spark, path, tmp_path / "ck4", startingVersion="soon")


def test_a_delete_stops_the_stream_unless_skipped(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 10), ["id"], 2)
    assert flat(run(spark, path, ck)) == added(path, None, 0)
    t.append(rows(10, 12))
    t.delete("id < 3")
    before: list = []
    with pytest.raises(Exception, match="SourceChangedError.*DELTA_SOURCE_TABLE_IGNORE_CHANGES.*skipChangeCommits"):
        run(spark, path, ck, batches=before)
    # The rows committed before the DELETE arrived first.
    assert flat(before) == added(path, 0, 1)
    t.append(rows(12, 14))
    # Skipped: the DELETE's rewritten files are not read again; the append after it is.
    assert flat(run(spark, path, ck, skipChangeCommits="true")) == added(path, 2, 3)
    # A commit that only removes files: Delta's other error, and ignoreDeletes skips it.
    t.delete("id >= 0")
    with pytest.raises(Exception, match="SourceChangedError.*DELTA_SOURCE_IGNORE_DELETE.*ignoreDeletes"):
        run(spark, path, ck)
    t.append(rows(20, 21))
    assert flat(run(spark, path, ck, ignoreDeletes="true")) == [(20, "r20")]


def test_deletion_vectors(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 30), ["id"], 2, properties={"delta.enableDeletionVectors": "true"})
    t.delete("id % 3 = 0")
    t = IndexedTable.for_path(path)
    assert any(a.deletionVector for a in t._snapshot.live_files())
    # The initial snapshot reads the files through their deletion vectors (DuckDB's delta
    # extension reads the table: delta-rs does not read deletion vectors).
    con = duckdb_delta()
    at_1 = sorted(con.execute(f"SELECT id, v FROM delta_scan('{path}')").fetchall())
    assert flat(run(spark, path, ck)) == at_1 and len(at_1) == 20
    t.delete("id = 1")
    with pytest.raises(Exception, match="SourceChangedError.*version 2"):
        run(spark, path, ck)
    at_2 = sorted(con.execute(f"SELECT id, v FROM delta_scan('{path}')").fetchall())
    t.append(rows(30, 33))
    now = sorted(con.execute(f"SELECT id, v FROM delta_scan('{path}')").fetchall())
    assert flat(run(spark, path, ck, skipChangeCommits="true")) == sorted(set(now) - set(at_2))


def test_a_schema_change_asks_for_a_restart(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 5), ["id"], 2)
    seen: list[tuple] = []
    q = (spark.readStream.format("indexeddf").load(path).writeStream
         .foreachBatch(lambda b, _: seen.extend(tuple(r) for r in b.collect()))
         .option("checkpointLocation", str(ck)).start())
    try:
        q.processAllAvailable()
        assert sorted(seen) == added(path, None, 0)
        t.add_columns([pa.field("w", pa.int64())])
        t.append(pa.table({"id": pa.array([5], pa.int64()), "v": ["r5"], "w": pa.array([7], pa.int64())}))
        with pytest.raises(Exception, match="(?s)SourceSchemaChangedError.*DELTA_SCHEMA_CHANGED.*restarting the query"):
            q.processAllAvailable()
    finally:
        q.stop()
    # The restart reads on with the new schema.
    assert flat(run(spark, path, ck)) == [(5, "r5", 7)]


def test_a_catalog_table_by_read_stream_table(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 8), ["id"], 2)
    spark.sql(f"CREATE TABLE stream_source USING indexeddf LOCATION '{path}'")
    try:
        assert flat(run(spark, "stream_source", ck, table=True)) == added(path, None, 0)
        spark.sql("INSERT INTO stream_source VALUES (8, 'r8'), (9, 'r9')")
        assert flat(run(spark, "stream_source", ck, table=True)) == added(path, 0, t.version + 1)
    finally:
        spark.sql("DROP TABLE stream_source")


def test_a_path_by_read_stream_table(spark, tmp_path):
    """readStream.table("indexeddf.`/path`") is the same source as load(path), options included."""
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    t = IndexedTable.create(path, rows(0, 6), ["id"], 2)
    name = f"indexeddf.`{path}`"
    assert flat(run(spark, name, ck, table=True)) == added(path, None, 0)
    t.append(rows(6, 9))
    t.append(rows(9, 11))
    batches = run(spark, name, ck, table=True, maxFilesPerTrigger=1)
    assert flat(batches) == added(path, 0, 2) and len(batches) > 1  # one file a batch
    assert run(spark, name, ck, table=True) == []  # a restart reads nothing again
    assert flat(run(spark, name, tmp_path / "ck2", table=True, startingVersion=2)) == added(path, 1, 2)


def test_options_are_checked(spark, tmp_path):
    path = str(tmp_path / "t")
    IndexedTable.create(path, rows(0, 2), ["id"], 1)
    with pytest.raises(Exception, match="InvalidOptionError.*unknown option 'maxfiles'"):
        spark.readStream.format("indexeddf").option("maxFiles", "1").load(path)
    with pytest.raises(Exception, match="InvalidOptionError.*startingVersion or startingTimestamp"):
        (spark.readStream.format("indexeddf").option("startingVersion", "0")
         .option("startingTimestamp", "2020-01-01").load(path))
    # The Python data source (a session without the connector) refuses, naming the connector
    # (called directly: Spark's Python streaming worker takes seconds to start).
    with pytest.raises(InvalidOptionError, match="JVM connector"):
        PythonNamedDataSource({"path": path}).streamReader(None)


def test_a_column_mapped_partitioned_table(spark, tmp_path):
    path, ck = str(tmp_path / "t"), tmp_path / "ck"
    data = pa.table({"id": pa.array(range(6), pa.int64()), "v": [f"r{i}" for i in range(6)],
                     "p": ["a", "b", "a", "b", "a", "b"]})
    t = IndexedTable.create(path, data, ["id"], 2, partition_by=["p"],
                            properties={"delta.columnMapping.mode": "name"})
    t.rename_column("v", "w")
    t.append(pa.table({"id": pa.array([6], pa.int64()), "w": ["r6"], "p": ["c"]}))
    # Files written before and after the rename, read by their physical names, with their
    # partition values; checked against delta-rs's DataFusion reader (it resolves physical names).
    qb = QueryBuilder().register("t", DeltaTable(path))
    expected = sorted(tuple(r.values()) for r in pa.table(qb.execute("SELECT id, w, p FROM t").read_all()).to_pylist())
    assert flat(run(spark, path, ck, maxFilesPerTrigger=3)) == expected
