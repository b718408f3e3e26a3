"""Tables on S3 through a real S3 endpoint on loopback (moto's server, its own process)
with s3fs: the whole API, concurrent writer processes, races decided by the endpoint,
and an endpoint without conditional writes refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from s3_endpoint import MotoServer, NoConditionalWritesProxy

from indexeddf import IndexedTable
from indexeddf.errors import UnsupportedStorageError

pytestmark = pytest.mark.slow
WORKERS = Path(__file__).parent / "workers"


@pytest.fixture(scope="module")
def s3():
    server = MotoServer()
    server.endpoint.create_bucket("lake")
    yield server
    server.stop()


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array([i % 97 for i in range(start, start + n)], pa.int64()),
                     "v": pa.array(range(start, start + n), pa.int64())})


def test_a_table_lives_on_s3(s3):
    opts = s3.endpoint.options()
    url = "s3://lake/events"
    t = IndexedTable.create(url, rows(0, 300), index_columns=["k"], num_buckets=4, storage_options=opts)
    for i in range(1, 12):  # past the checkpoint at version 10
        t.append(rows(i * 1000, 50))
    t.create_index("by_v", ["v"], num_buckets=2)
    t.delete("k = 5")
    assert t.optimize(mode="full") > 0
    keys = s3.endpoint.keys("lake", "events/")
    assert any(k.endswith(".checkpoint.parquet") for k in keys)
    assert not any(".indexeddf-probe-" in k for k in keys)

    reopened = IndexedTable.for_path(url, storage_options=opts)
    assert reopened.version == t.version
    full = reopened.to_arrow()
    written = [*range(300), *(i * 1000 + j for i in range(1, 12) for j in range(50))]
    assert sorted(full["v"].to_pylist()) == sorted(v for v in written if v % 97 != 5)
    got = reopened.lookup([3, 4])
    want = full.filter(pc.is_in(full["k"], pa.array([3, 4], pa.int64())))
    assert Counter(got["v"].to_pylist()) == Counter(want["v"].to_pylist())
    assert reopened.lookup([1005], index="by_v")["v"].to_pylist() == [1005]
    assert reopened.to_arrow(version=0).num_rows == 300  # time travel
    assert reopened.lookup([5], version=3).num_rows > 0 and reopened.lookup([5]).num_rows == 0
    dry = reopened.vacuum(retention_hours=0, dry_run=True, enforce_retention=False)
    assert dry.files  # the optimized and deleted files
    done = reopened.vacuum(retention_hours=0, enforce_retention=False)
    assert sorted(done.files) == sorted(dry.files)
    assert IndexedTable.for_path(url, storage_options=opts).to_arrow().num_rows == full.num_rows


def test_four_processes_append_on_s3_and_lose_nothing(s3):
    opts = s3.endpoint.options()
    url = "s3://lake/concurrent"
    schema = pa.schema([("k", pa.int64()), ("worker", pa.int32())])
    IndexedTable.create(url, schema.empty_table(), index_columns=["k"], num_buckets=4, storage_options=opts)
    procs = [subprocess.Popen([sys.executable, str(WORKERS / "append_loop.py"), url, str(w), "5", "10", json.dumps(opts)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in outs]
    versions = sorted(int(v) for out, _ in outs for v in out.split())
    assert versions == list(range(1, 21))
    keys = IndexedTable.for_path(url, storage_options=opts).to_arrow(columns=["k"])["k"].to_pylist()
    assert len(keys) == len(set(keys)) == 4 * 5 * 10


def test_the_endpoint_decides_who_wins_a_version(s3):
    """Six processes race for each of three objects (one process start for all three races):
    exactly one wins each, and the object holds the winner's bytes."""
    from indexeddf.format.storage import TableStorage

    opts = json.dumps(s3.endpoint.options())
    rels = [f"_race/{round_:020d}.json" for round_ in range(3)]
    start = time.time() + 4
    procs = [subprocess.Popen([sys.executable, str(WORKERS / "race_put.py"), "s3://lake/race", opts, f"w{w}",
                               str(start), "1.0", *rels], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [e for _, e in outs]
    results = [out.split() for out, _ in outs]
    for i, rel in enumerate(rels):
        won = [f"w{w}" for w, r in enumerate(results) if r[i] == "1"]
        assert len(won) == 1, outs
        assert TableStorage("s3://lake/race", json.loads(opts)).read_bytes(rel).decode() == won[0]


def test_an_endpoint_without_conditional_writes_is_refused_before_any_write(s3):
    proxy = NoConditionalWritesProxy(s3.port)
    try:
        opts = proxy.endpoint.options()
        with pytest.raises(UnsupportedStorageError, match="conditional"):
            IndexedTable.create("s3://lake/unsafe", rows(0, 10), index_columns=["k"], num_buckets=2, storage_options=opts)
        assert s3.endpoint.keys("lake", "unsafe") == []
        assert not any(".indexeddf-probe-" in k for k in s3.endpoint.keys("lake"))
    finally:
        proxy.stop()


@pytest.mark.spark
def test_spark_reads_and_writes_a_table_on_s3(s3, spark):
    """A table on S3 from Spark: pyspark ships no Hadoop file system for s3a://, so the JVM
    connector refuses with a typed error that names both ways out; the Python data source
    reaches the table with fsspec and ``storageOptions``; writes through the connector's name
    go to the Python writer and take ``storageOptions`` too."""
    import indexeddf
    from indexeddf.spark import typed_error

    assert indexeddf.register(spark) == "connector"
    opts = s3.endpoint.options()
    url = "s3://lake/from_spark"
    t = IndexedTable.create(url, rows(0, 200), index_columns=["k"], num_buckets=2, storage_options=opts)
    with pytest.raises(Exception) as refused:
        spark.read.format("indexeddf").option("storageOptions", json.dumps(opts)).load(url).count()
    err = typed_error(refused.value)
    assert isinstance(err, UnsupportedStorageError), refused.value
    assert "indexeddf_python" in str(err) and "hadoop-aws" in str(err) and "s3a://" in str(err)

    df = spark.read.format("indexeddf_python").option("storageOptions", json.dumps(opts)).load(url)
    full = t.to_arrow()
    assert sorted(tuple(r) for r in df.collect()) == sorted(zip(full["k"].to_pylist(), full["v"].to_pylist()))
    fives = [v for v in range(200) if v % 97 == 5]
    assert sorted(r.v for r in df.where("k = 5").collect()) == fives
    new = spark.createDataFrame([(5, 10_000), (96, 10_001)], "k bigint, v bigint")
    new.write.format("indexeddf").mode("append").option("storageOptions", json.dumps(opts)).save(url)
    again = IndexedTable.for_path(url, storage_options=opts)
    assert again.version == t.version + 1
    assert sorted(again.lookup([5])["v"].to_pylist()) == fives + [10_000]
    # The same DataFrame, loaded before the append, still answers its own version.
    assert sorted(r.v for r in df.where("k = 5").collect()) == fives


@pytest.mark.parametrize("vectors", [False, True])
def test_a_pipeline_upserts_a_table_on_s3(s3, vectors, monkeypatch):
    """MERGE, UPDATE and DELETE of a table on S3, rows found through the index (a few keys
    a bucket) and by the key columns (many), against DuckDB running the same statements."""
    import duckdb

    from indexeddf.reader import locate

    opts = s3.endpoint.options()
    url = f"s3://lake/upserted-{vectors}"
    first = pa.table({"k": pa.array(range(0, 400, 2), pa.int64()), "v": pa.array(range(200), pa.int64())})
    t = IndexedTable.create(url, first, index_columns=["k"], num_buckets=4, storage_options=opts,
                            properties={"delta.enableDeletionVectors": str(vectors).lower()})
    duck = duckdb.connect()
    duck.register("first_rows", first)
    duck.execute("CREATE TABLE target AS SELECT * FROM first_rows")
    for i, (keys, rows_per_key) in enumerate([([1, 2, 4, 999], 0), (list(range(0, 300, 3)), 1 << 40)]):
        monkeypatch.setattr(locate, "INDEX_ROWS_PER_KEY", rows_per_key)  # through the index, then by key columns
        src = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([1000 * (i + 1) + k for k in keys], pa.int64())})
        m = t.merge(src, "t.k = s.k", source_alias="s", target_alias="t").when_matched_update_all() \
            .when_not_matched_insert_all().execute()
        assert m["rows_found_by"] == "index"
        duck.register("source_rows", src)
        duck.execute("MERGE INTO target AS t USING source_rows AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v "
                     "WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v)")
    t.update({"v": "v + 1"}, "k IN (6, 8)")
    duck.execute("UPDATE target SET v = v + 1 WHERE k IN (6, 8)")
    t.delete("k = 10 OR k = 12")
    duck.execute("DELETE FROM target WHERE k = 10 OR k = 12")
    want = sorted(duck.execute("SELECT k, v FROM target").fetchall())
    reopened = IndexedTable.for_path(url, storage_options=opts)
    assert sorted(zip(*[reopened.to_arrow().column(c).to_pylist() for c in ("k", "v")])) == want
    got = reopened.lookup([2, 3, 6, 10, 999])
    assert sorted(zip(got["k"].to_pylist(), got["v"].to_pylist())) == [r for r in want if r[0] in (2, 3, 6, 10, 999)]
