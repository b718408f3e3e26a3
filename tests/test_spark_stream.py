"""The streaming sink: ``writeStream.format("indexeddf")`` lands every micro-batch exactly once.

The source is a folder of JSON files read one file per micro-batch; ``txnAppId`` plus
Spark's batch id make each commit idempotent. The crash that matters is the one between
the sink's commit (the table version advanced) and Spark's own commit log entry: Spark
then replays the batch on restart, and the sink must drop it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import indexeddf
from indexeddf import IndexedTable
from indexeddf.format.log import list_log
from indexeddf.format.storage import TableStorage

pytestmark = pytest.mark.spark

ROWS_PER_FILE = 5


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    indexeddf.register(spark)


def make_source(folder: Path, files: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + files):
        with open(folder / f"part-{i:04d}.json", "w") as f:
            for j in range(ROWS_PER_FILE):
                f.write(json.dumps({"id": i * 100 + j, "tag": f"file{i}"}) + "\n")
        # Distinct modification times keep the file source's order stable.
        os.utime(folder / f"part-{i:04d}.json", (1_700_000_000 + i, 1_700_000_000 + i))


def expected_ids(files: int) -> list[int]:
    return sorted(i * 100 + j for i in range(files) for j in range(ROWS_PER_FILE))


def run_stream(spark, source: Path, table: Path, checkpoint: Path, app_id: str = "clicks", **options):
    events = spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).json(str(source))
    writer = (events.writeStream.format("indexeddf").option("checkpointLocation", str(checkpoint))
              .option("indexColumns", "id").option("numBuckets", 4).trigger(availableNow=True))
    if app_id is not None:
        writer = writer.option("txnAppId", app_id)
    for k, v in options.items():
        writer = writer.option(k, v)
    query = writer.start(str(table))
    query.awaitTermination()
    return query


def drop_spark_commit(checkpoint: Path, batch: int) -> None:
    """Forget that Spark finished ``batch``: as if it crashed right after the sink's commit."""
    commits = checkpoint / "commits"
    (commits / str(batch)).unlink()
    crc = commits / f".{batch}.crc"
    if crc.exists():
        crc.unlink()


def live_and_on_disk(table: Path) -> tuple[set[str], set[str]]:
    snap = IndexedTable.for_path(str(table)).snapshot
    on_disk = {str(p.relative_to(table)) for p in (table / "data").rglob("*.parquet")}
    return set(snap.files), on_disk


def test_each_micro_batch_lands_once_and_a_replayed_batch_is_dropped(spark, tmp_path):
    source, table, ck = tmp_path / "src", tmp_path / "table", tmp_path / "ck"
    make_source(source, 3)
    run_stream(spark, source, table, ck)
    t = IndexedTable.for_path(str(table))
    assert sorted(t.to_arrow()["id"].to_pylist()) == expected_ids(3)
    assert t.version == 2 and t.snapshot.txn_version("clicks") == 2  # version 0 created the table
    assert [h.operation for h in t.history()] == ["STREAMING UPDATE", "STREAMING UPDATE", "CREATE TABLE"]

    # Spark lost its record of batch 2 (crash after our commit): the restart replays it.
    drop_spark_commit(ck, 2)
    run_stream(spark, source, table, ck)
    assert (ck / "commits" / "2").exists()  # Spark did run batch 2 again
    t = IndexedTable.for_path(str(table))
    assert t.version == 2 and sorted(t.to_arrow()["id"].to_pylist()) == expected_ids(3)
    live, on_disk = live_and_on_disk(table)
    assert live == on_disk  # the replay's files were deleted, not left behind

    # New input continues with new batch ids.
    make_source(source, 2, start=3)
    run_stream(spark, source, table, ck)
    t = IndexedTable.for_path(str(table))
    assert sorted(t.to_arrow()["id"].to_pylist()) == expected_ids(5)
    assert t.snapshot.txn_version("clicks") == 4
    got = spark.read.format("indexeddf").load(str(table))
    assert sorted(r.id for r in got.collect()) == expected_ids(5)


SIGKILL_FILES = 6
"""The source files (micro-batches) of :func:`killed_stream`."""


def killed_stream(folder: Path) -> None:
    """A separate Spark application (``spark_app.py stream``) streaming ``SIGKILL_FILES`` files
    from ``folder / "src"`` into ``folder / "table"``, killed with SIGKILL (its process group:
    the driver and its JVM, no clean shutdown) right after the table advanced past
    micro-batch 1. Prints one JSON line: its stderr's tail if it ended before the kill, else
    None (``python test_spark_stream.py FOLDER``: ``conftest.py`` starts it from the run's
    first test on, beside the tests)."""
    source, table, ck = folder / "src", folder / "table", folder / "ck"
    make_source(source, SIGKILL_FILES)
    app = str(Path(__file__).with_name("spark_app.py"))
    proc = subprocess.Popen(
        [sys.executable, app, "stream", str(source), str(table), str(ck), "clicks"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    storage = TableStorage(str(table))
    deadline = time.time() + 180
    ended = None
    try:
        while time.time() < deadline and proc.poll() is None:
            commits, _ = list_log(storage)
            if commits and commits[-1] >= 1:  # micro-batch 1 is in the table
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            ended = proc.stderr.read()[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM: no clean shutdown
        proc.wait(timeout=60)
    print(json.dumps({"ended_before_the_kill": ended}), flush=True)


def test_a_restarted_query_after_sigkill_never_duplicates(spark, killed_stream_run):
    """A separate Spark application killed with SIGKILL right after the table advanced
    (:func:`killed_stream`), then the query restarted here from its checkpoint."""
    done, folder = killed_stream_run
    assert done.returncode == 0, done.stderr[-3000:]
    ended = json.loads(done.stdout.strip().splitlines()[-1])["ended_before_the_kill"]
    assert ended is None, f"the query ended before it could be killed: {ended}"
    source, table, ck = folder / "src", folder / "table", folder / "ck"
    files = SIGKILL_FILES

    t = IndexedTable.for_path(str(table))
    committed = t.snapshot.txn_version("clicks")
    assert committed is not None and committed >= 1
    # Whatever Spark managed to record, make it the worst case: it never learnt that the
    # last batch the table holds was committed, so the restart must replay it.
    if (ck / "commits" / str(committed)).exists():
        drop_spark_commit(ck, committed)
    run_stream(spark, source, table, ck)

    t = IndexedTable.for_path(str(table))
    ids = t.to_arrow()["id"].to_pylist()
    assert sorted(ids) == expected_ids(files)  # every row of every batch exactly once
    assert t.snapshot.txn_version("clicks") == files - 1
    live, on_disk = live_and_on_disk(table)
    assert live <= on_disk


def test_without_txn_app_id_the_query_id_keys_each_batch(spark, tmp_path):
    """As Delta's sink: txn=(the streaming query's id, batchId); the id lives in the checkpoint,
    so a restarted query drops the batch the table already holds."""
    source, table, ck = tmp_path / "src", tmp_path / "table", tmp_path / "ck"
    make_source(source, 2)
    query = run_stream(spark, source, table, ck, app_id=None)
    t = IndexedTable.for_path(str(table))
    assert t.version == 1 and t.snapshot.txn_version(str(query.id)) == 1
    drop_spark_commit(ck, 1)
    again = run_stream(spark, source, table, ck, app_id=None)
    assert again.id == query.id and again.runId != query.runId
    t = IndexedTable.for_path(str(table))
    assert t.version == 1 and sorted(t.to_arrow()["id"].to_pylist()) == expected_ids(2)
    live, on_disk = live_and_on_disk(table)
    assert live == on_disk
    with pytest.raises(Exception) as info:
        run_stream(spark, source, tmp_path / "t2", tmp_path / "ck2", app_id="  ")
    assert "InvalidOptionError" in str(info.value) and "txnAppId" in str(info.value)
    with pytest.raises(Exception) as info:
        run_stream(spark, source, tmp_path / "t2", tmp_path / "ck2", overwriteSchema="true")
    assert "InvalidOptionError: unknown option 'overwriteschema'" in str(info.value)
    assert not (tmp_path / "t2").exists()


def test_complete_mode_replaces_the_table_each_batch(spark, tmp_path):
    source, table, ck = tmp_path / "src", tmp_path / "table", tmp_path / "ck"
    make_source(source, 3)
    counts = (spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).json(str(source))
              .groupBy("tag").count())
    query = (counts.writeStream.format("indexeddf").outputMode("complete")
             .option("checkpointLocation", str(ck))
             .option("indexColumns", "tag").option("numBuckets", 2).trigger(availableNow=True).start(str(table)))
    query.awaitTermination()
    t = IndexedTable.for_path(str(table))
    assert sorted((r["tag"], r["count"]) for r in t.to_arrow().to_pylist()) == [
        (f"file{i}", ROWS_PER_FILE) for i in range(3)]
    assert t.version == 2 and t.snapshot.txn_version(str(query.id)) == 2
    assert [h.parameters["outputMode"] for h in t.history()[:2]] == ["Complete", "Complete"]
    assert sorted(r["tag"] for r in t.to_arrow(version=0).to_pylist()) == ["file0"]


def test_a_stream_into_a_catalog_table(spark, tmp_path):
    """writeStream.format("indexeddf").toTable(name) commits each micro-batch to the table the
    catalog entry names; each query of the entry sees the batches so far."""
    source, table, ck = tmp_path / "src", tmp_path / "table", tmp_path / "ck"
    make_source(source, 2)
    IndexedTable.create(str(table), pa.table({"id": pa.array([-1], pa.int64()), "tag": ["seed"]}),
                        index_columns=["id"], num_buckets=4)
    spark.sql(f"CREATE TABLE streamed USING indexeddf LOCATION '{table}'")
    try:
        events = spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).json(str(source))
        query = (events.writeStream.format("indexeddf").option("checkpointLocation", str(ck))
                 .option("txnAppId", "catalog").trigger(availableNow=True).toTable("streamed"))
        query.awaitTermination()
        assert query.exception() is None
        assert sorted(r.id for r in spark.sql("SELECT id FROM streamed").collect()) == [-1] + expected_ids(2)
        assert IndexedTable.for_path(str(table)).snapshot.txn_version("catalog") == 1
    finally:
        spark.sql("DROP TABLE streamed")


def test_to_table_creates_a_table_that_does_not_exist(spark, tmp_path):
    """writeStream.toTable(name) of a new name creates the table, as Delta's does: empty, with
    the stream's schema and its indexColumns / numBuckets, before the first micro-batch."""
    source, table = tmp_path / "src", tmp_path / "table"
    make_source(source, 2)

    def start(ck, **options):
        events = spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).json(str(source))
        writer = (events.writeStream.format("indexeddf").option("checkpointLocation", str(ck))
                  .option("path", str(table)).trigger(availableNow=True))
        for k, v in options.items():
            writer = writer.option(k, v)
        query = writer.toTable("stream_made")
        query.awaitTermination()
        return query

    try:
        with pytest.raises(Exception, match="InvalidOptionError.*indexColumns"):
            start(tmp_path / "ck0")  # no index columns: refused before the query runs
        assert not (table / "_delta_log").exists() and not list((tmp_path / "ck0").rglob("offsets/0"))
        query = start(tmp_path / "ck", indexColumns="id", numBuckets="4")
        assert query.exception() is None
        t = IndexedTable.for_path(str(table))
        assert t.index_columns == ["id"] and t.num_buckets == 4
        assert [h.operation for h in t.history()] == ["STREAMING UPDATE", "STREAMING UPDATE", "CREATE TABLE"]
        assert t.to_arrow(version=0).num_rows == 0 and t.to_arrow(version=0).column_names == ["id", "tag"]
        assert t.snapshot.txn_version(str(query.id)) == 1
        assert sorted(r.id for r in spark.table("stream_made").collect()) == expected_ids(2)
        make_source(source, 1, start=2)
        start(tmp_path / "ck")  # the table exists now: an append, options not needed
        assert sorted(r.id for r in spark.table("stream_made").collect()) == expected_ids(3)
    finally:
        spark.sql("DROP TABLE IF EXISTS stream_made")


if __name__ == "__main__":
    killed_stream(Path(sys.argv[1]))
