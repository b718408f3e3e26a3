"""Partitioned Delta tables (``metaData.partitionColumns``): converted in place, read by
every path with the partition columns typed from ``add.partitionValues``, pruned by
partition, and written so that delta-rs and DuckDB read the result.

The tables are written by delta-rs with NULL partitions, strings Delta escapes in paths,
dates, timestamps and integers; DuckDB's delta extension and delta-rs are the oracles.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from connector_helpers import lineage, physical, read  # noqa: E402
from oracles import duckdb_delta  # noqa: E402

import indexeddf  # noqa: E402
from indexeddf import IndexedTable  # noqa: E402
from indexeddf.errors import MissingFileError, UnsupportedFeatureError  # noqa: E402
from indexeddf.format.snapshot import load_snapshot  # noqa: E402
from indexeddf.format.transaction import Transaction  # noqa: E402
from indexeddf.spec.actions import AddFile  # noqa: E402

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("s", pa.string()),
    ("d", pa.date32()),
    ("t", pa.timestamp("us", tz="UTC")),
    ("n", pa.int32()),
    ("v", pa.string()),
])
PARTITIONS = ["s", "d", "t", "n"]
STRINGS = ["a/b", "x=y", None, "sp ace", "pct%41", "é#?:"]
"""Partition strings with characters Delta escapes in paths (``%41`` must not be unescaped), and NULL."""


def rows(ids, v="r") -> pa.Table:
    """Rows of :data:`SCHEMA`: the partition columns cycle through a few values each (NULLs too)."""
    base = dt.datetime(2024, 1, 2, 0, 30, 15, 123456, tzinfo=dt.timezone.utc)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "s": pa.array([STRINGS[i % len(STRINGS)] for i in ids]),
        "d": pa.array([dt.date(2024, 1, 1 + i % 3) for i in ids]),
        "t": pa.array([base + dt.timedelta(hours=i % 2) for i in ids], pa.timestamp("us", tz="UTC")),
        "n": pa.array([None if i % 5 == 0 else i % 4 for i in ids], pa.int32()),
        "v": pa.array([f"{v}{i}" for i in ids]),
    }, schema=SCHEMA)


def duck(path: str, where: str = "true") -> pa.Table:
    return duckdb_delta().execute(f"SELECT * FROM delta_scan('{path}') WHERE {where}").to_arrow_table()


def ordered(t: pa.Table) -> list[dict]:
    """The rows of ``t`` in :data:`SCHEMA` (DuckDB's types cast to it), sorted by id."""
    return t.select(SCHEMA.names).cast(SCHEMA).sort_by("id").to_pylist()


@pytest.fixture
def converted(tmp_path):
    """A delta-rs table partitioned by four columns, converted (index on ``id``), then
    appended to by delta-rs (files the index does not cover: hybrid scans)."""
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(list(range(60))), partition_by=PARTITIONS)
    # Small partition files: the delta-rs append is most of the table's bytes, past the
    # default staleness limit, and the index is to answer with a hybrid scan anyway.
    IndexedTable.convert(path, index_columns=["id"], num_buckets=4,
                         properties={"indexeddf.hybridScan.maxAppendedRatio": "0.9"})
    deltalake.write_deltalake(path, rows(list(range(60, 72)), "late"), partition_by=PARTITIONS, mode="append")
    return path


def test_the_partition_values_are_as_delta_serialises_them(converted):
    snap = load_snapshot(IndexedTable.for_path(converted).snapshot.storage)
    assert snap.metadata.partitionColumns == tuple(PARTITIONS)
    values = {tuple(sorted(a.partitionValues.items(), key=str)) for a in snap.files.values()}
    # delta-rs wrote these strings: the reading below relies on each form.
    flat = {kv for v in values for kv in v}
    assert ("s", None) in flat and ("n", None) in flat and ("s", "pct%41") in flat
    assert ("t", "2024-01-02 00:30:15.123456") in flat and ("d", "2024-01-03") in flat


def test_python_readers_return_duckdbs_and_delta_rs_rows(converted):
    t = IndexedTable.for_path(converted)
    want = ordered(duck(converted))
    assert len(want) == 72
    assert t.to_arrow().schema == SCHEMA
    assert ordered(t.to_arrow()) == want
    assert ordered(deltalake.DeltaTable(converted).to_pyarrow_table()) == want
    # Projections of only partition columns still give every row.
    assert t.to_arrow(columns=["s", "n"]).num_rows == 72
    assert ordered(t.to_arrow(filter=pc.field("s") == "pct%41")) == ordered(duck(converted, "s = 'pct%41'"))
    # Lookups: covered files (tries) and the delta-rs appends (hybrid scan), NULL partitions included.
    probes = [0, 2, 4, 5, 10, 33, 59, 60, 62, 65, 71, 999]
    from indexeddf.optimizer.planner import plan_keys

    plan = plan_keys(t.snapshot, probes)
    assert plan.why_not is None and plan.scanned_files  # the index answers, with a hybrid scan
    got = t.lookup(probes)
    assert got.schema == SCHEMA
    assert ordered(got) == ordered(duck(converted, f"id IN ({', '.join(map(str, probes))})"))
    assert t.lookup([62], columns=["s", "t"]).to_pylist() == [{"s": None, "t": rows([62])["t"][0].as_py()}]
    # A filter on a partition column skips the other partitions' files: one of them gone
    # (deleted behind the log's back) fails a full read, not the filtered one.
    other = next(a for a in t.snapshot.live_files() if a.partitionValues["s"] != "x=y")
    os.remove(os.path.join(converted, other.path))
    assert ordered(t.to_arrow(filter=pc.field("s") == "x=y")) == ordered(duck(converted, "s = 'x=y'"))
    with pytest.raises(MissingFileError):
        t.to_arrow()


def test_an_index_on_a_partition_column_and_pruning(converted):
    t = IndexedTable.for_path(converted)
    t.create_index("by_s", ["s"])
    for key in ["a/b", "pct%41", None, "absent"]:
        where = "s IS NULL" if key is None else f"s = '{key}'"
        assert ordered(t.lookup([key], index="by_s")) == ordered(duck(converted, where)), key
    # Unindexed files (appended by delta-rs after the index) of other partitions are skipped.
    deltalake.write_deltalake(converted, rows(list(range(100, 112)), "new"), partition_by=PARTITIONS, mode="append")
    t = IndexedTable.for_path(converted)
    from indexeddf.optimizer.planner import plan_keys

    plan = plan_keys(t.snapshot, ["x=y"], "by_s")
    assert plan.scanned_files and all(a.partitionValues["s"] == "x=y" for a in plan.scanned_files)
    assert ordered(t.lookup(["x=y"], index="by_s")) == ordered(duck(converted, "s = 'x=y'"))
    t.refresh()  # the index reads the new files' partition values too
    assert not plan_keys(IndexedTable.for_path(converted).snapshot, ["x=y"], "by_s").scanned_files
    assert ordered(t.lookup(["x=y"], index="by_s")) == ordered(duck(converted, "s = 'x=y'"))
    text = t.explain("d = '2024-01-02'")
    live = len(t.snapshot.files)
    kept = sum(1 for a in t.snapshot.files.values() if a.partitionValues["d"] == "2024-01-02")
    assert f"partitions: the filter on ['d'] keeps {kept} of {live} live files" in text, text
    assert 0 < kept < live


def test_appends_and_optimize_keep_partitions(converted):
    t = IndexedTable.for_path(converted)
    extra = rows(list(range(200, 230)), "app")
    empty = pa.table({**{c: extra[c] for c in SCHEMA.names}, "s": pa.array([""] * 30)}, schema=SCHEMA).slice(0, 3)
    t.append(pa.concat_tables([extra, empty.set_column(0, "id", pa.array([300, 301, 302], pa.int64()))]))
    t = IndexedTable.for_path(converted)
    mine = t.snapshot.live_files()[-1]
    assert set(mine.partitionValues) == set(PARTITIONS) and mine.bucket is not None
    want = ordered(duck(converted))
    assert len(want) == 72 + 33
    assert ordered(t.to_arrow()) == want == ordered(deltalake.DeltaTable(converted).to_pyarrow_table())
    assert [r["s"] for r in t.lookup([300, 301]).to_pylist()] == [None, None]  # an empty string is a NULL partition
    before = len(t.snapshot.files)
    t.optimize(mode="full")
    t = IndexedTable.for_path(converted)
    assert all(a.bucket is not None for a in t.snapshot.files.values())
    # Buckets inside partitions: no file mixes partitions, and each (partition, bucket) has one file.
    groups = [(tuple(sorted(a.partitionValues.items(), key=str)), a.bucket) for a in t.snapshot.files.values()]
    assert len(groups) == len(set(groups)) and len(groups) <= before
    for a in t.snapshot.files.values():
        assert a.path.startswith("s="), a.path  # laid out in its partition's directory
    assert ordered(t.to_arrow()) == want == ordered(duck(converted))
    assert ordered(deltalake.DeltaTable(converted).to_pyarrow_table()) == want
    assert ordered(t.lookup([0, 61, 201, 300])) == ordered(duck(converted, "id IN (0, 61, 201, 300)"))
    # A checkpoint keeps every file's partition values.
    from indexeddf.format.checkpoint import write_checkpoint

    write_checkpoint(t.snapshot.storage, t.snapshot)
    assert ordered(IndexedTable.for_path(converted).to_arrow()) == want == ordered(duck(converted))


@pytest.mark.parametrize("mode", ["copy-on-write", "deletion vectors", "optimized"])
def test_changes_keep_partitions(converted, mode):
    t = IndexedTable.for_path(converted)
    deletion_vectors = mode == "deletion vectors"
    if deletion_vectors:
        t.set_properties({"delta.enableDeletionVectors": "true"})
    if mode == "optimized":  # sorted bucket files: a change rewrites what it keeps of one as one file
        t.optimize(mode="full")
        assert all(a.sorted for a in IndexedTable.for_path(converted).snapshot.files.values())
    t.update({"v": "'changed'"}, "id = 3")
    t.update({"s": "'moved'"}, "id = 4")  # to another partition
    t.delete("id = 5")
    source = pa.concat_tables([rows([6], "merged"), rows([400], "inserted")])
    t.merge(source, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    t = IndexedTable.for_path(converted)
    assert all(set(a.partitionValues) == set(PARTITIONS) for a in t.snapshot.files.values())
    want = ordered(duck(converted))
    assert ordered(t.to_arrow()) == want
    if not deletion_vectors:  # delta-rs 1.6.6 reads no deletion vectors
        assert ordered(deltalake.DeltaTable(converted).to_pyarrow_table()) == want
    got = {r["id"]: r for r in want}
    assert got[3]["v"] == "changed" and got[4]["s"] == "moved" and 5 not in got
    assert got[6]["v"] == "merged6" and got[400] == rows([400], "inserted").to_pylist()[0]
    assert ordered(t.lookup([3, 4, 5, 6, 400])) == ordered(duck(converted, "id IN (3, 4, 5, 6, 400)"))


def test_an_index_on_partition_columns_only(tmp_path):
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(list(range(40))), partition_by=["n", "d"])
    t = IndexedTable.convert(path, index_columns=["n"], num_buckets=2)
    for key in [None, 1, 3, 7]:
        assert ordered(t.lookup([key])) == ordered(duck(path, "n IS NULL" if key is None else f"n = {key}")), key
    t.append(rows(list(range(40, 50)), "more"))
    t.optimize(mode="full")
    assert ordered(t.to_arrow()) == ordered(duck(path)) == ordered(deltalake.DeltaTable(path).to_pyarrow_table())
    assert ordered(t.lookup([None, 2])) == ordered(duck(path, "n IS NULL OR n = 2"))


def test_writes_that_would_lose_a_partition_column_are_refused(converted):
    t = IndexedTable.for_path(converted)
    version = t.version
    with pytest.raises(Exception, match="partition column"):
        t.overwrite(rows([1]).drop_columns(["s"]), overwrite_schema=True)
    assert deltalake.DeltaTable(converted).version() == version


def test_a_file_without_its_partition_values_is_never_committed(converted):
    snap = IndexedTable.for_path(converted).snapshot
    bare = AddFile(path="data/x.parquet", size=1, modificationTime=0, bucket=None, fileId=7)
    with pytest.raises(UnsupportedFeatureError, match=r"partitioned by \['s', 'd', 't', 'n'\].*without its partition"):
        Transaction(snap, "WRITE", {}, read_buckets=()).commit([bare])
    assert deltalake.DeltaTable(converted).version() == snap.version


def files_read(df) -> int:
    """The files the scan of ``df`` (executed) read: its ``numFiles`` metric."""
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    return sum(int(leaves.apply(i).metrics().apply("numFiles").value()) for i in range(leaves.size()))


@pytest.mark.spark
def test_spark_reads_and_prunes_partitions(spark, converted, conf):
    want = ordered(duck(converted))
    df = read(spark, converted)
    assert [f.name for f in df.schema.fields] == SCHEMA.names
    assert ordered(pa.Table.from_pylist([r.asDict() for r in df.collect()])) == want
    pruned = df.where("s = 'pct%41' AND d = date'2024-01-02'")
    text = physical(pruned)
    assert "PartitionFilters: [isnotnull(s" in text, text
    files = {a.path for a in IndexedTable.for_path(converted).snapshot.files.values()
             if a.partitionValues["s"] == "pct%41" and a.partitionValues["d"] == "2024-01-02"}
    assert ordered(pa.Table.from_pylist([r.asDict() for r in pruned.collect()])) == \
        ordered(duck(converted, "s = 'pct%41' AND d = DATE '2024-01-02'"))
    assert files and files_read(pruned) == len(files) < len(IndexedTable.for_path(converted).snapshot.files)
    # Index lookups fill each file's partition values into the rows they read: on the
    # driver, in tasks that probe the index, in tasks that read what the driver found, and
    # in joins; with a partition column in the condition too.
    for where in ("id IN (0, 5, 62, 999)", "id IN (2, 8, 14, 61) AND s IS NULL", "id = 10 AND d = date'2024-01-02'",
                  "id IN (3, 4, 64) AND t > timestamp'2024-01-02 01:00:00'"):
        q = df.where(where)
        assert "LocalTableScan" in physical(q), (where, physical(q))
        assert ordered(pa.Table.from_pylist([r.asDict() for r in q.collect()])) == ordered(duck(converted, where)), where
    conf("spark.indexeddf.driverLookup.maxKeys", "2")
    conf("spark.indexeddf.lookup.maxReadFraction", "1.0")  # a tiny table: tasks are not worth it otherwise
    for where in ("id IN (0, 5, 62, 999)", "id IN (2, 8, 14, 61) AND s IS NULL"):
        q = df.where(where)
        assert "ProbeRDD" in lineage(q), where
        assert ordered(pa.Table.from_pylist([r.asDict() for r in q.collect()])) == ordered(duck(converted, where)), where
    conf("spark.indexeddf.driverLookup.maxKeys", "1000")
    conf("spark.indexeddf.driverLookup.maxRows", "1")
    q = df.where("id IN (1, 7, 60, 61)")
    assert "LookupRDD" in lineage(q)
    assert ordered(pa.Table.from_pylist([r.asDict() for r in q.collect()])) == ordered(duck(converted, "id IN (1, 7, 60, 61)"))
    probe = spark.createDataFrame([(k,) for k in (1, 2, 61)], "id bigint")
    joined = df.join(probe, "id")
    assert "Scan ExistingRDD" in physical(joined) or "LocalTableScan" in physical(joined), physical(joined)
    assert ordered(pa.Table.from_pylist([r.asDict() for r in joined.collect()])) == ordered(duck(converted, "id IN (1, 2, 61)"))
    # to_df: Spark reads the version with the partition values the log gives.
    t = IndexedTable.for_path(converted)
    for bucketed in (False, True):
        assert ordered(pa.Table.from_pylist([r.asDict() for r in t.to_df(spark, bucketed=bucketed).collect()])) == want
    # The Python API's joins read the index's rows and the unindexed files with their partitions.
    keys = [0, 2, 5, 33, 60, 61, 71, 999]
    probe = spark.createDataFrame([(k, f"p{k}") for k in keys], "id long, tag string")
    t = IndexedTable.for_path(converted)
    for strategy in ("shuffle", "broadcast"):
        got = t.join(probe, on="id", strategy=strategy).drop("tag").collect()
        assert ordered(pa.Table.from_pylist([r.asDict() for r in got])) == \
            ordered(duck(converted, f"id IN ({', '.join(map(str, keys))})")), strategy
    indexeddf.register(spark)
    py = spark.read.format("indexeddf_python").load(converted)
    assert ordered(pa.Table.from_pylist([r.asDict() for r in py.collect()])) == want
    assert py.select("s", "n").count() == 72
    # A Spark append through the connector writes each row in its partition.
    spark.createDataFrame(rows(list(range(500, 520)), "spark")).write.format("indexeddf").mode("append").save(converted)
    t = IndexedTable.for_path(converted)
    assert all(set(a.partitionValues) == set(PARTITIONS) for a in t.snapshot.files.values())
    want = ordered(duck(converted))
    assert len(want) == 92 and ordered(t.to_arrow()) == want
    assert ordered(pa.Table.from_pylist([r.asDict() for r in read(spark, converted).collect()])) == want
    # The connector reads partition values from a checkpoint too.
    from indexeddf.format.checkpoint import write_checkpoint

    write_checkpoint(t.snapshot.storage, t.snapshot)
    again = read(spark, converted)
    assert ordered(pa.Table.from_pylist([r.asDict() for r in again.collect()])) == want
    assert ordered(pa.Table.from_pylist([r.asDict() for r in again.where("id IN (3, 503)").collect()])) == \
        ordered(duck(converted, "id IN (3, 503)"))
    # A lookup's hybrid scan skips the unindexed files of other partitions: one of them gone
    # (deleted behind the log's back) fails a full read, not the lookup.
    from indexeddf.optimizer.planner import covered_ids

    snap = IndexedTable.for_path(converted).snapshot
    covered = covered_ids(snap.indexes["primary"])
    victim = next(a for a in snap.files.values() if a.fileId not in covered and a.partitionValues["s"] is not None)
    os.remove(os.path.join(converted, victim.path))
    where = "id IN (60, 61, 62, 63, 64, 65, 66, 67) AND s IS NULL"
    q = read(spark, converted).where(where)
    assert "LocalTableScan" in physical(q)
    expected = [r for r in want if 60 <= r["id"] <= 67 and r["s"] is None]
    assert expected and ordered(pa.Table.from_pylist([r.asDict() for r in q.collect()])) == expected
    with pytest.raises(Exception, match="missing|FileNotFound|does not exist"):
        read(spark, converted).collect()


def test_the_log_is_what_delta_writers_read(converted):
    """The converted table's metaData keeps partitionColumns (as delta-rs wrote them)."""
    log = os.path.join(converted, "_delta_log")
    meta = [json.loads(line)["metaData"] for f in sorted(os.listdir(log)) if f.endswith(".json")
            for line in open(os.path.join(log, f)) if '"metaData"' in line]
    assert meta[-1]["partitionColumns"] == PARTITIONS


@pytest.mark.spark
def test_spark_bucketed_scans_of_optimized_partitions(spark, tmp_path, conf):
    """After optimize, files are bucketed inside partitions: Spark is told the bucketing,
    prunes buckets and partitions together, and each file keeps its partition's values."""
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows(list(range(80))), partition_by=["d", "n"])
    t = IndexedTable.convert(path, index_columns=["id"], num_buckets=4)
    t.optimize(mode="full")
    conf("spark.indexeddf.driverLookup.enabled", "false")  # Spark's own scan answers
    conf("spark.indexeddf.lookupTasks.enabled", "false")
    conf("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    q = read(spark, path).where("id = 42 AND d = date'2024-01-01'")
    text = physical(q)
    assert "Bucketed: true" in text and "SelectedBucketsCount: 1 out of 4" in text and "PartitionFilters: [" in text, text
    assert ordered(pa.Table.from_pylist([r.asDict() for r in q.collect()])) == \
        ordered(duck(path, "id = 42 AND d = DATE '2024-01-01'"))
    whole = read(spark, path)
    assert whole.rdd.getNumPartitions() == 4  # one task per bucket, across partitions
    assert ordered(pa.Table.from_pylist([r.asDict() for r in whole.collect()])) == ordered(duck(path))
    # partitionBy(...) may repeat the table's partition columns, and nothing else.
    indexeddf.register(spark)  # Spark writes go through the Python data source
    extra = spark.createDataFrame(rows([900, 901]))
    extra.write.format("indexeddf").partitionBy("d", "n").mode("append").save(path)
    with pytest.raises(Exception, match=r"partitionBy\(s\): the table is partitioned by \[d, n\]"):
        extra.write.format("indexeddf").partitionBy("s").mode("append").save(path)
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck(path))
    assert len(duck(path, "id >= 900")) == 2


def test_boolean_decimal_float_byte_and_local_timestamp_partitions(tmp_path):
    """Delta's serialization of the other partition types, read and written (an append)
    as DuckDB and delta-rs read them."""
    import decimal

    def typed(ids):
        n = len(ids)
        return pa.table({
            "id": pa.array(ids, pa.int64()),
            "b": pa.array([[True, False, None][i % 3] for i in ids]),
            "dec": pa.array([[decimal.Decimal("1.25"), decimal.Decimal("3.50"), None][i % 3] for i in ids],
                            pa.decimal128(5, 2)),
            "f": pa.array([[1.5, -0.25, None, 2.0][i % 4] for i in ids], pa.float64()),
            "i8": pa.array([[1, -2, None][i % 3] for i in ids], pa.int8()),
            "ntz": pa.array([[None, 1_700_000_000_123_456, 0][i % 3] for i in ids], pa.timestamp("us")),
            "v": pa.array([f"v{i}" for i in range(n)]),
        })

    path = str(tmp_path / "t")
    columns = ["b", "dec", "f", "i8", "ntz"]
    deltalake.write_deltalake(path, typed(list(range(24))), partition_by=columns)
    t = IndexedTable.convert(path, index_columns=["id"], num_buckets=2)
    t.append(typed(list(range(100, 112))))

    def same(ours: pa.Table, where: str = "true") -> bool:
        theirs = duck(path, where).select(ours.schema.names).cast(ours.schema).sort_by("id")
        return ours.sort_by("id").equals(theirs)

    assert same(t.to_arrow())
    assert t.to_arrow().sort_by("id").equals(deltalake.DeltaTable(path).to_pyarrow_table().sort_by("id"))
    assert same(t.lookup([0, 1, 2, 100, 104]), "id IN (0, 1, 2, 100, 104)")
    written = [a.partitionValues for a in t.snapshot.live_files() if a.bucket is not None]
    assert {"b": "true", "dec": "1.25", "f": "1.5", "i8": "1", "ntz": None} in written


def test_create_a_partitioned_table(tmp_path):
    path = str(tmp_path / "t")
    t = IndexedTable.create(path, rows(list(range(30))), index_columns=["id"], num_buckets=2, partition_by=["d", "s"])
    assert t.snapshot.metadata.partitionColumns == ("d", "s")
    assert all(a.path.startswith("d=") and set(a.partitionValues) == {"d", "s"} for a in t.snapshot.files.values())
    assert ordered(t.to_arrow()) == ordered(duck(path)) == ordered(deltalake.DeltaTable(path).to_pyarrow_table())
    assert deltalake.DeltaTable(path).metadata().partition_columns == ["d", "s"]
    assert ordered(t.lookup([0, 2, 29])) == ordered(duck(path, "id IN (0, 2, 29)"))
    # delta-rs appends to it in its partitions; indexeddf reads them.
    deltalake.write_deltalake(path, rows(list(range(30, 36))), mode="append", partition_by=["d", "s"])
    assert ordered(IndexedTable.for_path(path).to_arrow()) == ordered(duck(path))
    from indexeddf.errors import InvalidOptionError, SchemaMismatchError

    with pytest.raises(SchemaMismatchError, match="partition columns \\['nope'\\] are not in the table"):
        IndexedTable.create(str(tmp_path / "u"), rows([1]), index_columns=["id"], partition_by=["nope"])
    with pytest.raises(InvalidOptionError, match="every column would be a partition column"):
        IndexedTable.create(str(tmp_path / "u"), rows([1]), index_columns=["id"], partition_by=SCHEMA.names)


def test_vacuum_deletes_the_removed_files_of_partition_folders(converted):
    """The converted table's files live in partition folders (delta-rs's paths): after an
    overwrite, vacuum with no retention deletes the removed ones, keeps the live ones and a
    Parquet file no version named (not the table's to delete), and the table still equals
    DuckDB's read of it."""
    t = IndexedTable.for_path(converted)
    before = set(t.snapshot.files)
    folder = os.path.dirname(os.path.join(converted, sorted(before)[0]))
    stray = os.path.join(folder, "part-stray-never-committed.parquet")
    with open(stray, "wb") as f:
        f.write(b"PAR1")
    os.utime(stray, (0, 0))  # older than any retention
    t.overwrite(rows(list(range(5)), "again"))
    t = IndexedTable.for_path(converted)
    kept = set(t.snapshot.files)
    result = t.vacuum(retention_hours=0, enforce_retention=False)
    deleted = set(result.files)
    assert before <= deleted and os.path.relpath(stray, converted) not in deleted and not kept & deleted
    assert not any(os.path.exists(os.path.join(converted, p)) for p in before) and os.path.exists(stray)
    assert all(os.path.exists(os.path.join(converted, p)) for p in kept)
    assert ordered(t.to_arrow()) == ordered(duck(converted)) and len(ordered(t.to_arrow())) == 5
