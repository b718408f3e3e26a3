"""Delta's change data feed read through the JVM connector: ``readChangeFeed`` on a path and on a
catalog table, ``table_changes`` / ``table_changes_by_path`` in SQL, and a stream of the feed.

Most tables are written by delta-rs (an engine nobody here wrote), which records the feed from
its MERGE, DELETE and UPDATE (``_change_data/`` files) once ``delta.enableChangeDataFeed`` is
set; indexeddf only indexes the table first (``IndexedTable.convert``, before the feed is on).
The concurrent writer's table is indexeddf's own. Every read is compared, as sorted rows, with
delta-rs's ``DeltaTable.load_cdf`` of the same range.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracles import duckdb_delta

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import InvalidOptionError, MissingChangeDataError, VersionNotFoundError

pytestmark = pytest.mark.spark

FEED_ON = 2
"""The version at which the tables turn the feed on (0: write, 1: convert, 2: the property)."""


def rows(a: int, b: int) -> pa.Table:
    return pa.table({"id": pa.array(range(a, b), pa.int64()), "v": [f"r{i}" for i in range(a, b)],
                     "g": pa.array([i % 2 for i in range(a, b)], pa.int32())})


def make(path: str, partitioned: bool) -> None:
    """Versions: 0 write, 1 convert, 2 feed on, 3 append, 4 merge (update + insert + delete),
    5 delete, 6 update, 7 optimize (no data change)."""
    write_deltalake(path, rows(0, 10), partition_by=["g"] if partitioned else None)
    IndexedTable.convert(path, ["id"], 2)
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    write_deltalake(path, rows(10, 15), mode="append")
    source = pa.table({"id": pa.array([3, 4, 20, 21, 7], pa.int64()), "v": ["u3", "u4", "n20", "n21", "d7"],
                       "g": pa.array([1, 0, 0, 1, 1], pa.int32())})
    (DeltaTable(path).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_delete("s.v = 'd7'").when_matched_update_all().when_not_matched_insert_all().execute())
    DeltaTable(path).delete("id = 12")
    DeltaTable(path).update(updates={"v": "'upd'"}, predicate="id < 2")
    DeltaTable(path).optimize.compact()


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The unpartitioned and the partitioned table, by name."""
    root = tmp_path_factory.mktemp("feed")
    out = {}
    for name, partitioned in (("flat", False), ("partitioned", True)):
        out[name] = str(root / name)
        make(out[name], partitioned)
    return out


def expected(path: str, start: int, end: int | None = None) -> list[tuple]:
    """delta-rs's feed of the range, sorted."""
    kw = {} if end is None else {"ending_version": end}
    con = duckdb.connect()
    con.register("feed", pa.table(DeltaTable(path).load_cdf(starting_version=start, **kw)))
    return sorted(con.execute("SELECT id, v, g, _change_type, _commit_version::BIGINT, _commit_timestamp "
                              "FROM feed").fetchall())


def got(df) -> list[tuple]:
    """A Spark frame of the feed as sorted tuples (timestamps naive UTC, as delta-rs gives them)."""
    out = []
    for r in df.collect():
        ts = r["_commit_timestamp"]
        out.append((r["id"], r["v"], r["g"], r["_change_type"], r["_commit_version"],
                    ts.astimezone(timezone.utc).replace(tzinfo=None) if ts.tzinfo else ts))
    return sorted(out)


def feed(spark, path: str, **options):
    reader = spark.read.format("indexeddf").option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(path)


def typed(call):
    """The indexeddf error ``call`` fails with (raised again as the typed Python error)."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the typed error Spark carried
        t = indexeddf.spark.typed_error(e)
        if t is None:
            raise
        raise t from None


@pytest.mark.parametrize("name", ["flat", "partitioned"])
def test_every_range_is_delta_rs_feed(spark, tables, name):
    path = tables[name]
    # The whole feed: inserts of the append, the merge's cdc rows (pre/post images, insert, delete),
    # the delete's and the update's; nothing from the optimize.
    whole = expected(path, FEED_ON)
    assert {r[3] for r in whole} == {"insert", "delete", "update_preimage", "update_postimage"}
    assert got(feed(spark, path, startingVersion=FEED_ON)) == whole
    for start in range(FEED_ON + 1, 8):
        for end in (start, None):
            assert got(feed(spark, path, startingVersion=start, endingVersion=end if end is not None else "")) \
                == expected(path, start, end), (start, end)
    df = feed(spark, path, startingVersion=3)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema][-3:] == [
        ("_change_type", "string"), ("_commit_version", "bigint"), ("_commit_timestamp", "timestamp")]
    # Delta's older option name, an end past the newest version, and a filter on the feed's columns.
    assert got(spark.read.format("indexeddf").option("readChangeData", "true").option("startingVersion", 4)
               .option("endingVersion", 99).load(path)) == expected(path, 4)
    assert got(df.where("_commit_version = 5")) == expected(path, 5, 5)
    assert got(df.where("g = 1 AND _commit_version IN (4, 6) AND _change_type <> 'insert'")) == [
        r for r in expected(path, 4) if r[2] == 1 and r[4] in (4, 6) and r[3] != "insert"]


def test_timestamps_select_the_versions_committed_in_them(spark, tables):
    path = tables["flat"]
    times = {h["version"]: h["timestamp"] for h in DeltaTable(path).history()}

    def iso(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    # startingTimestamp: the first version committed at or after it; endingTimestamp: the last at or before it.
    assert got(feed(spark, path, startingTimestamp=iso(times[4]), endingTimestamp=iso(times[5]))) \
        == expected(path, 4, 5)
    assert got(feed(spark, path, startingTimestamp=iso(times[4] - 1), endingTimestamp=iso(times[6] - 1))) \
        == expected(path, 4, 5)
    assert got(feed(spark, path, startingTimestamp=times[6])) == expected(path, 6)


def test_errors_are_deltas(spark, tables):
    path = tables["flat"]
    with pytest.raises(InvalidOptionError, match="DELTA_NO_START_FOR_CDC_READ"):
        typed(lambda: feed(spark, path).collect())
    with pytest.raises(MissingChangeDataError, match=r"DELTA_MISSING_CHANGE_DATA.*version \[1\]"):
        typed(lambda: feed(spark, path, startingVersion=1).collect())
    with pytest.raises(VersionNotFoundError, match=r"DELTA_INVALID_CDC_RANGE.*Start version\(9\).*table\(7\)"):
        typed(lambda: feed(spark, path, startingVersion=9).collect())
    with pytest.raises(InvalidOptionError, match="DELTA_INVALID_CDC_RANGE.*End cannot be before start"):
        typed(lambda: feed(spark, path, startingVersion=5, endingVersion=4).collect())
    with pytest.raises(VersionNotFoundError, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):
        typed(lambda: feed(spark, path, startingTimestamp="2999-01-01").collect())
    with pytest.raises(InvalidOptionError, match="DELTA_MULTIPLE_CDC_BOUNDARY"):
        typed(lambda: feed(spark, path, startingVersion=3, startingTimestamp="2020-01-01").collect())
    with pytest.raises(InvalidOptionError, match="startingVersion bounds a read of the change data feed"):
        typed(lambda: spark.read.format("indexeddf").option("startingVersion", 3).load(path).collect())


def test_catalog_table_and_table_changes(spark, sql, tables, tmp_path):
    path = tables["partitioned"]
    sql(f"CREATE TABLE feed_t USING indexeddf LOCATION '{path}'")
    df = spark.read.option("readChangeFeed", "true").option("startingVersion", 3).option("endingVersion", 5) \
        .table("feed_t")
    assert got(df) == expected(path, 3, 5)
    assert got(spark.sql("SELECT * FROM table_changes('feed_t', 3, 5)")) == expected(path, 3, 5)
    assert got(spark.sql(f"SELECT * FROM table_changes_by_path('{path}', 4)")) == expected(path, 4)
    assert got(spark.sql("SELECT * FROM feed_t WITH ('readChangeFeed' = 'true', 'startingVersion' = '6')")) \
        == expected(path, 6)
    assert sorted(r for b in stream(spark, "feed_t", tmp_path / "ck", table=True, startingVersion=5) for r in b) \
        == expected(path, 5)
    assert spark.table("feed_t").count() == DeltaTable(path).to_pyarrow_table().num_rows  # the rows again
    times = {h["version"]: h["timestamp"] for h in DeltaTable(path).history()}
    start = datetime.fromtimestamp(times[4] / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert got(spark.sql(f"SELECT * FROM table_changes('feed_t', '{start}', 5)")) == expected(path, 4, 5)
    with pytest.raises(MissingChangeDataError, match="DELTA_MISSING_CHANGE_DATA"):
        sql("SELECT * FROM table_changes('feed_t', 1)")
    with pytest.raises(InvalidOptionError, match="no indexeddf table"):
        sql("SELECT * FROM table_changes('no_such_table', 0)")


def stream(spark, path: str, checkpoint, table: bool = False, **options) -> list[list[tuple]]:
    """One ``availableNow`` run of a stream of the feed of ``path`` (a catalog name with
    ``table``): each micro-batch's rows, sorted."""
    batches: list[list[tuple]] = []
    reader = spark.readStream.format("indexeddf").option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    q = ((reader.table(path) if table else reader.load(path)).writeStream.foreachBatch(lambda b, _: batches.append(got(b)))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    if q.exception() is not None:
        raise q.exception()
    return batches


def test_stream_of_the_feed_reads_each_change_once_across_restarts(spark, tables, tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(tables["flat"], path)
    first = stream(spark, path, tmp_path / "ck", startingVersion=3, maxFilesPerTrigger=1)
    assert len(first) > 1
    assert sorted(r for b in first for r in b) == expected(path, 3)
    DeltaTable(path).delete("id >= 20")
    write_deltalake(path, rows(30, 32), mode="append")
    second = stream(spark, path, tmp_path / "ck", startingVersion=3)
    assert sorted(r for b in second for r in b) == expected(path, 8)
    assert stream(spark, path, tmp_path / "ck", startingVersion=3) == []
    # Without a start: the table at its newest version as inserts of that version, then the changes.
    initial = stream(spark, path, tmp_path / "ck2")
    snapshot = sorted(tuple(r) for r in spark.read.format("indexeddf").load(path).collect())
    assert sorted(r[:3] for b in initial for r in b) == snapshot
    assert {(r[3], r[4]) for b in initial for r in b} == {("insert", 9)}
    with pytest.raises(MissingChangeDataError, match=r"DELTA_MISSING_CHANGE_DATA.*version \[1\]"):
        typed(lambda: stream(spark, path, tmp_path / "ck3", startingVersion=1))


def test_rows_deletion_vectors_delete_are_the_deletes(spark, tmp_path):
    """A DELETE that marks rows in deletion vectors (remove and add of the same file, the new
    vector holding the old one's rows and more) and writes no change data files, as delta-spark's
    DELETE with deletion vectors does: the feed's deletes are the rows the new vector adds."""
    path = str(tmp_path / "dv")
    data = pa.table({"id": pa.array(range(20), pa.int64()), "v": [f"r{i}" for i in range(20)]})
    t = IndexedTable.create(path, data, ["id"], 2, properties={"delta.enableDeletionVectors": "true"})
    # The feed on from version 0: indexeddf refuses to write such a table, so its first commit's
    # metaData gets the property afterwards, as another Delta writer would have set it.
    t.delete("id IN (3, 4, 11)")
    t.delete("id IN (5, 12)")
    first = tmp_path / "dv" / "_delta_log" / f"{0:020}.json"
    lines = []
    for line in first.read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.enableChangeDataFeed"] = "true"
        lines.append(json.dumps(action))
    first.write_text("\n".join(lines) + "\n")
    con = duckdb_delta()
    con.register("data", data)
    gone = sorted(con.execute(f"SELECT id, v FROM data EXCEPT SELECT id, v FROM delta_scan('{path}')").fetchall())
    changes = sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"])
                     for r in feed(spark, path, startingVersion=1).collect())
    assert changes == sorted((i, v, "delete", 1 if i in (3, 4, 11) else 2) for i, v in gone)
    assert [i for i, *_ in changes] == [3, 4, 5, 11, 12]


def test_the_python_fallback_names_the_connector(spark, tables):
    indexeddf.register(spark)
    with pytest.raises(InvalidOptionError, match="read by the JVM connector"):
        typed(lambda: spark.read.format("indexeddf_python").option("readChangeFeed", "true")
              .option("startingVersion", 3).load(tables["flat"]).collect())


@pytest.mark.parametrize("option", ["skipChangeCommits", "ignoreDeletes", "ignoreChanges"])
def test_a_stream_of_the_feed_reads_deletes_and_updates_whatever_the_skip_options_say(spark, tables, tmp_path, option):
    """As Delta's: the options that make a stream of a table's rows skip (or read again) commits
    that remove rows have nothing to do on a stream of the feed, which reads those commits as
    changes (versions 3 to 7: an append, a MERGE with a delete, a DELETE, an UPDATE, OPTIMIZE)."""
    got_rows = sorted(r for b in stream(spark, tables["flat"], tmp_path / "ck", startingVersion=3, **{option: "true"})
                      for r in b)
    assert got_rows == expected(tables["flat"], 3)
    assert {r[3] for r in got_rows} == {"insert", "delete", "update_preimage", "update_postimage"}


def test_a_stream_of_the_feed_gets_every_change_a_concurrent_writer_commits(spark, tmp_path):
    """A stage reading a table's feed while another writer changes the table (indexeddf's Python
    engine on a thread of its own, copy on write, the feed on): every change arrives once, as
    delta-rs reads the feed, and a restart from the checkpoint reads only later commits."""
    import threading

    path = str(tmp_path / "silver")
    IndexedTable.create(path, rows(0, 40), ["id"], 4, properties={"delta.enableChangeDataFeed": "true"})
    seen: list[tuple] = []
    query = (spark.readStream.format("indexeddf").option("readChangeFeed", "true").option("startingVersion", "latest")
             .load(path).writeStream.foreachBatch(lambda b, _: seen.extend(got(b)))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())

    def writer(first: int, n: int) -> None:
        w = IndexedTable.for_path(path)
        for i in range(first, first + n):
            src = rows(i * 3, i * 3 + 2).set_column(1, "v", pa.array([f"w{i}"] * 2))
            (w.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
            w.delete(f"id = {30 + i}")
            w.append(rows(100 + i, 101 + i))
            time.sleep(0.1)

    try:
        query.processAllAvailable()  # the stream starts after version 0
        thread = threading.Thread(target=writer, args=(0, 4))
        thread.start()
        thread.join(120)
        query.processAllAvailable()
    finally:
        query.stop()
    end = IndexedTable.for_path(path).version
    assert end == 12 and sorted(seen) == expected(path, 1, end)
    assert {r[3] for r in seen} == {"insert", "delete", "update_preimage", "update_postimage"}
    writer(4, 2)  # the query is stopped: its restart reads these commits and nothing before them
    assert sorted(r for b in stream(spark, path, tmp_path / "ck") for r in b) == expected(path, end + 1)
