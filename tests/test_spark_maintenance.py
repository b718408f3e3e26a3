"""Index builds and refreshes as Spark jobs (``create_index(..., spark=)``, ``refresh(..., spark=)``).

Each test builds the same table twice (a copy of its folder: same files, ids and version),
once in this process and once as a Spark job, and checks that both committed the same
index entries (read back from the index files), and that lookups through the Spark-built
index (Python ``lookup`` and the connector's filtered read) equal DuckDB's answer (its delta
extension, delta-kernel-rs) on the same table. A job that fails on an unreadable data file
(a real fault, in a task) leaves the log as the single-process failure leaves it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import time

import foreign_tables
import pyarrow as pa
import pytest
from connector_helpers import read as load
from oracles import duckdb_delta
from pyspark.sql import functions as F

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import MissingFileError
from indexeddf.spec.bucketing import KEY_HASH_SEED, bucket_ids, key_hash, seed_prefix
from indexeddf.writer.index_files import read_entries
from indexeddf.writer.maintenance import vacuum

pytestmark = pytest.mark.spark
KEY_PREFIX = seed_prefix(KEY_HASH_SEED)
"""Spark's ``hash(KEY_PREFIX, keys...)`` is the key hash of index entries."""

KEYS = list(range(0, 120)) + list(range(100, 200))
"""The keys of ``make``'s table (100..119 written twice), each in two rows."""
S_KEYS = ["s3", "s17", "s40", "s41", "nope"]
V_KEYS = [3, 17, 40, 123]


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


def rows(keys, part=None) -> pa.Table:
    """k each key twice; v a bigint; s a short string (NULL for every seventh key)."""
    ks = [k for k in keys for _ in range(2)]
    data = {"k": pa.array(ks, pa.int64()), "v": pa.array([k % 50 for k in ks], pa.int64()),
            "s": pa.array([None if k % 7 == 0 else f"s{k % 60}" for k in ks], pa.string())}
    if part is not None:
        data["p"] = pa.array([f"p{k % part}" for k in ks], pa.string())
    return pa.table(data)


def make(path, properties=None, part=None) -> IndexedTable:
    """A table of several files: three writes, small row groups (several a file)."""
    props = {"indexeddf.targetRowGroupBytes": "1024", **(properties or {})}
    t = IndexedTable.create(str(path), rows(range(0, 120), part), index_columns=["k"], num_buckets=4,
                            properties=props, partition_by=["p"] if part else ())
    t.append(rows(range(100, 180), part))
    t.append(rows(range(180, 200), part))
    return t


def twin(path, tmp_path) -> tuple[IndexedTable, IndexedTable]:
    """The table at ``path`` and a copy of it: (single-process side, Spark side)."""
    copy = tmp_path / "spark_side"
    shutil.copytree(path, copy)
    return IndexedTable.for_path(str(path)), IndexedTable.for_path(str(copy))


def entries(t: IndexedTable, name: str) -> list[tuple]:
    """Every entry of index ``name`` as (bucket, hash, file id, row), sorted."""
    snap = IndexedTable.for_path(t.path).snapshot
    out = []
    for f in snap.indexes[name].files:
        e = read_entries(snap.storage, f)
        out += [(f.bucket, *r) for r in zip(*(e.column(c).to_pylist() for c in ("hash", "file_id", "row")))]
    return sorted(out)


def by_content(t: IndexedTable, name: str) -> list[tuple]:
    """:func:`entries` with each file id replaced by what its file holds (bucket, rows, key
    range): two copies of a table that each took the same append name its files apart."""
    snap = IndexedTable.for_path(t.path).snapshot
    content = {a.fileId: (a.bucket, a.stats.numRecords, repr(a.stats.minValues), repr(a.stats.maxValues))
               for a in snap.live_files()}
    return sorted((b, h, content[f], r) for b, h, f, r in entries(t, name))


def sorted_rows(table: pa.Table, cols) -> list:
    return sorted(repr(r) for r in zip(*(table.column(c).to_pylist() for c in cols)))


def check_lookups(spark, t: IndexedTable, name: str, column: str, keys: list) -> None:
    """Lookups through index ``name`` equal DuckDB's rows for the same keys."""
    t = IndexedTable.for_path(t.path)
    listed = ", ".join(repr(k) for k in keys)
    want = sorted(repr(r) for r in duckdb_delta().execute(
        f"SELECT k, v, s FROM delta_scan('{t.path}') WHERE {column} IN ({listed})").fetchall())
    assert want, "the keys must find rows"
    assert sorted_rows(t.lookup(keys, columns=["k", "v", "s"], index=name), ["k", "v", "s"]) == want
    got = load(spark, t.path).where(F.col(column).isin(keys)).select("k", "v", "s").collect()
    assert sorted(repr(tuple(r)) for r in got) == want


@pytest.mark.parametrize("columns", [["s"], ["v"], ["s", "v"]])
def test_create_index_as_a_spark_job_writes_the_entries_of_the_single_process_build(spark, tmp_path, columns):
    make(tmp_path / "t")
    single, parallel = twin(tmp_path / "t", tmp_path)
    lines = []
    single.create_index("by", columns)
    parallel.create_index("by", columns, spark=spark, progress=lines.append)
    assert entries(parallel, "by") == entries(single, "by")
    assert len(entries(parallel, "by")) == 2 * len(KEYS)
    assert any("Spark job" in line for line in lines)
    assert parallel.snapshot.indexes["by"].state == "ACTIVE"
    assert parallel.snapshot.indexes["by"].coveredVersion == parallel.version
    if columns == ["s"]:
        check_lookups(spark, parallel, "by", "s", S_KEYS)
    elif columns == ["v"]:
        check_lookups(spark, parallel, "by", "v", V_KEYS)


def test_a_table_opened_with_a_session_runs_its_maintenance_there(spark, tmp_path):
    """``for_path(spark=)``: create_index, refresh, optimize and optimize_index run as Spark
    jobs of that session when a call names none, and write what the single process writes."""
    make(tmp_path / "t")
    single, _ = twin(tmp_path / "t", tmp_path)
    parallel = IndexedTable.for_path(str(tmp_path / "spark_side"), spark=spark)
    lines = []
    single.create_index("by", ["s"])
    parallel.create_index("by", ["s"], progress=lines.append)
    assert any("Spark job" in line for line in lines), lines
    assert entries(parallel, "by") == entries(single, "by")
    for t in (single, parallel):
        t.set_properties({"indexeddf.index.autoRefresh": "false"})
        t.append(rows(range(200, 230)))
    lines.clear()
    single.refresh("by", mode="full")
    parallel.refresh("by", mode="full", progress=lines.append)
    assert any("Spark job" in line for line in lines), lines
    assert by_content(parallel, "by") == by_content(single, "by")
    lines.clear()
    parallel.optimize(mode="full", progress=lines.append)
    parallel.optimize_index("by", mode="full", progress=lines.append)
    assert any("optimize: Spark job" in line for line in lines), lines
    check_lookups(spark, parallel, "by", "s", S_KEYS)


def test_create_index_on_a_partitioned_table_with_a_partition_column(spark, tmp_path):
    make(tmp_path / "t", part=3)
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.create_index("by", ["p", "s"])
    parallel.create_index("by", ["p", "s"], spark=spark)
    assert entries(parallel, "by") == entries(single, "by")
    single.create_index("by_s", ["s"])
    parallel.create_index("by_s", ["s"], spark=spark)
    assert entries(parallel, "by_s") == entries(single, "by_s")
    got = parallel.lookup([("p1", "s40"), ("p2", "s41")], columns=["k", "p", "s"], index="by")
    want = duckdb_delta().execute(f"SELECT k, p, s FROM delta_scan('{parallel.path}') "
                                  "WHERE (p, s) IN (('p1', 's40'), ('p2', 's41'))").fetchall()
    assert want and sorted_rows(got, ["k", "p", "s"]) == sorted(repr(r) for r in want)


@pytest.mark.parametrize("deleted", [[k for k in range(200) if k % 3 == 0], [185]])
def test_rows_a_deletion_vector_deletes_get_no_entry(spark, tmp_path, deleted):
    """Every file with a deletion vector, or one file with one and the others without."""
    t = make(tmp_path / "t", {"delta.enableDeletionVectors": "true"})
    t.delete(f"k IN ({', '.join(map(str, deleted))})")
    live = IndexedTable.for_path(t.path).snapshot.live_files()
    with_vector = [a for a in live if a.deletionVector is not None]
    assert len(with_vector) == (len(live) if len(deleted) > 1 else 1)
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.create_index("by_s", ["s"])
    parallel.create_index("by_s", ["s"], spark=spark)
    assert entries(parallel, "by_s") == entries(single, "by_s")
    assert len(entries(parallel, "by_s")) == 2 * len([k for k in KEYS if k not in deleted])
    check_lookups(spark, parallel, "by_s", "s", S_KEYS + ["s5"])


def test_spark_hash_with_the_seed_prefix_is_the_key_hash(spark):
    """What Spark's scan computes for the entries of SQL's builds (``hash(KEY_PREFIX, keys)``,
    and the bucket ``pmod(hash(keys), n)``) equals ``key_hash`` and ``bucket_ids``, value for
    value, for every kind of key type; strings of one length (every row hashed a word at a
    time, no gather) too."""
    data = pa.table({
        "i": pa.array([0, -1, 7, None, 2**31 - 1], pa.int32()), "l": pa.array([0, -1, 2**40, None, -(2**63)], pa.int64()),
        "d": pa.array([0.0, -0.0, 1.5, None, float("nan")], pa.float64()),
        "s": pa.array(["", "a", "hello wörld", None, "x" * 67]), "b": pa.array([b"", b"\x00", b"\xff" * 5, None, b"ab"]),
        "t": pa.array([0, -1, 10**15, None, 86_400_000_000], pa.timestamp("us", tz="UTC")),
        "day": pa.array([0, -1, 19000, None, 3], pa.date32()), "dec": pa.array([0, -1, 12345, None, 10**15], pa.decimal128(18, 2)),
    })
    df = spark.createDataFrame(data).select(
        *[F.col(c).cast(t) for c, t in [("i", "int"), ("l", "long"), ("d", "double"), ("s", "string"), ("b", "binary"),
                                        ("t", "timestamp"), ("day", "date"), ("dec", "decimal(18,2)")]])
    for cols in [["i"], ["l"], ["d"], ["s"], ["b"], ["t"], ["day"], ["dec"], ["s", "l"], ["i", "s", "d"]]:
        keys = [F.col(c) for c in cols]
        got = df.select(F.pmod(F.hash(F.lit(KEY_PREFIX), *keys).cast("long"), F.lit(1 << 32)).alias("h"),
                        F.pmod(F.hash(*keys), F.lit(7)).alias("b")).collect()
        arrays = [data.column(c) for c in cols]
        assert [r.h for r in got] == key_hash(arrays).tolist(), cols
        assert [r.b for r in got] == bucket_ids(arrays, 7).tolist(), cols
    fixed = pa.array([f"{i * 7919:016x}{i % 3}" for i in range(40)])  # 17 bytes: four words and a tail byte
    got = spark.createDataFrame(pa.table({"f": fixed})).select(
        F.pmod(F.hash(F.lit(KEY_PREFIX), "f").cast("long"), F.lit(1 << 32)).alias("h"),
        F.pmod(F.hash("f"), F.lit(7)).alias("b")).collect()
    assert [r.h for r in got] == key_hash([fixed]).tolist()
    assert [r.b for r in got] == bucket_ids([fixed], 7).tolist()


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping(spark, tmp_path, mode):
    make(tmp_path / "t", {"delta.columnMapping.mode": mode})
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.create_index("by_s", ["s"])
    parallel.create_index("by_s", ["s"], spark=spark)
    assert entries(parallel, "by_s") == entries(single, "by_s")
    check_lookups(spark, parallel, "by_s", "s", S_KEYS)


@pytest.mark.parametrize("mode", ["incremental", "full"])
def test_refresh_after_appends_and_deletes(spark, tmp_path, mode):
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows(range(200, 260)))
    t.delete("k >= 100 AND k < 110")  # copy-on-write: files of the index go
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.refresh("by_s", mode=mode)
    lines = []
    parallel.refresh("by_s", mode=mode, spark=spark, progress=lines.append)
    assert entries(parallel, "by_s") == entries(single, "by_s")
    assert len(entries(parallel, "by_s")) == 2 * len([k for k in KEYS + list(range(200, 260)) if not 100 <= k < 110])
    assert any("Spark job" in line for line in lines)
    check_lookups(spark, parallel, "by_s", "s", S_KEYS + ["s45"])
    # The primary index too (its files are built with the data): rebuilt by a full refresh.
    single.refresh("primary", mode="full")
    parallel.refresh("primary", mode="full", spark=spark)
    assert entries(parallel, "primary") == entries(single, "primary")
    check_lookups(spark, parallel, "primary", "k", [3, 105, 111, 250])


def test_refresh_quick_runs_no_job(spark, tmp_path):
    t = make(tmp_path / "t")
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(rows(range(200, 210)))
    before = entries(t, "primary")
    t.refresh("primary", mode="quick", spark=spark)
    assert entries(t, "primary") == before


def _break_newest_file(t: IndexedTable, fault: str) -> None:
    """A real fault in a read task: the newest data file's bytes replaced by garbage, or the
    file deleted outside indexeddf."""
    snap = IndexedTable.for_path(t.path).snapshot
    newest = max(snap.live_files(), key=lambda a: a.fileId)
    if fault == "missing":
        os.remove(snap.storage.full(newest.path))
        return
    with open(snap.storage.full(newest.path), "wb") as f:
        f.write(b"not parquet" * 100)


def _log_states(t: IndexedTable, name: str) -> list:
    """The index's state and file paths' count at every version, and the last version."""
    fresh = IndexedTable.for_path(t.path)
    out = []
    for v in range(fresh.version + 1):
        e = fresh.snapshot_at(v).indexes.get(name)
        out.append(None if e is None else (e.state, len(e.files), e.properties.get("vacuumed")))
    return out


def _index_files_on_disk(t: IndexedTable, name: str) -> set:
    root = t.snapshot.storage.full(f"_indexes/{name}")
    return {str(p.relative_to(root)) for p in pathlib.Path(root).rglob("*.parquet")}


@pytest.mark.parametrize("operation, fault", [("create", "garbage"), ("refresh", "garbage"), ("create", "missing")])
def test_a_failed_job_leaves_the_log_as_a_failed_single_process_build(spark, tmp_path, operation, fault):
    t = make(tmp_path / "t")
    if operation == "refresh":
        t.create_index("by_s", ["s"])
        t.set_properties({"indexeddf.index.autoRefresh": "false"})
        t.append(rows(range(200, 260)))
    _break_newest_file(t, fault)
    single, parallel = twin(tmp_path / "t", tmp_path)
    kept = _index_files_on_disk(parallel, "by_s") if operation == "refresh" else set()

    def run(table, **spark_arg):
        if operation == "create":
            table.create_index("by_s", ["s"], **spark_arg)
        else:
            table.refresh("by_s", mode="full", **spark_arg)

    # A task's indexeddf error is raised as itself (not as Spark's wrapper of it).
    expected = MissingFileError if fault == "missing" else Exception
    with pytest.raises(expected):
        run(single)
    with pytest.raises(expected):
        run(parallel, spark=spark)
    assert _log_states(parallel, "by_s") == _log_states(single, "by_s")
    final = IndexedTable.for_path(parallel.path).snapshot.indexes["by_s"]
    assert final.state == ("DELETED" if operation == "create" else "ACTIVE")
    # What the tasks wrote is gone (the failed operation's cancel deleted its pending folder),
    # and a vacuum finds nothing of the job's left to delete.
    assert _index_files_on_disk(parallel, "by_s") == kept
    IndexedTable.for_path(parallel.path).vacuum(retention_hours=0, enforce_retention=False)
    assert _index_files_on_disk(parallel, "by_s") == kept


# -- convert(spark=): the primary index of a Delta table another engine wrote -------------------
CONVERTED = {"plain": lambda p: foreign_tables.appended(p, foreign_tables.three()),
             "deletion_vectors": foreign_tables.with_deletion_vectors,
             "partitioned": foreign_tables.part_multi}
"""delta-rs tables (``tests/foreign_tables.py``): three writes; with another writer's deletion
vectors (Python tasks read those files, Spark's scan the others); partitioned by three columns."""


@pytest.mark.parametrize("case, columns", [("plain", ["id"]), ("deletion_vectors", ["id"]),
                                           ("partitioned", ["id"]), ("partitioned", ["s", "id"])])
def test_convert_as_a_spark_job_writes_the_entries_of_the_single_process_convert(spark, tmp_path, case, columns):
    CONVERTED[case](str(tmp_path / "t"))
    copy = tmp_path / "spark_side"
    shutil.copytree(tmp_path / "t", copy)
    single = IndexedTable.convert(str(tmp_path / "t"), columns, num_buckets=3)
    lines = []
    parallel = IndexedTable.convert(str(copy), columns, num_buckets=3, spark=spark, progress=lines.append)
    assert any("Spark job" in line for line in lines)
    assert parallel.version == single.version and parallel.history(1)[0].operation == "CONVERT"
    assert entries(parallel, "primary") == entries(single, "primary")
    live = duckdb_delta().execute(f"SELECT count(*) FROM delta_scan('{parallel.path}')").fetchone()[0]
    assert len(entries(parallel, "primary")) == live
    _check_converted_lookups(parallel.path, columns)


def _check_converted_lookups(path: str, columns: list[str]) -> None:
    """Lookups of keys found and not (500; ("a/b", 3)) by the index's columns equal DuckDB's."""
    keys = [3, 4, 41, 42, 77, 500] if columns == ["id"] else [("sp ace", 3), ("a/b", 42), ("x=y", 43), ("a/b", 3)]
    listed = ", ".join(repr(k) for k in keys)
    want = sorted(repr(r) for r in duckdb_delta().execute(
        f"SELECT id, v FROM delta_scan('{path}') WHERE ({', '.join(columns)}) IN ({listed})").fetchall())
    got = IndexedTable.for_path(path).lookup(keys, columns=["id", "v"])
    assert want and sorted_rows(got, ["id", "v"]) == want


@pytest.mark.parametrize("case, columns, buckets", [("plain", ["id"], 3), ("deletion_vectors", ["id"], 3),
                                                    ("partitioned", ["s", "id"], 3), ("plain", ["id"], None)])
def test_sql_convert_builds_the_primary_index_in_the_statements_job(spark, sql, tmp_path, case, columns, buckets):
    """SQL ``CONVERT TO INDEXEDDF`` builds as ``convert(spark=)`` does (Python tasks that read
    delta-rs's files, deletion vectors and partition values included) and commits what the
    single-process convert commits."""
    CONVERTED[case](str(tmp_path / "t"))
    copy = str(tmp_path / "sql_side")
    shutil.copytree(tmp_path / "t", copy)
    single = IndexedTable.convert(str(tmp_path / "t"), columns, num_buckets=buckets)
    clause = f" BUCKETS {buckets}" if buckets else ""
    _check_no_entry_in_the_jvm(_build_plans(
        spark, lambda: sql(f"CONVERT TO INDEXEDDF delta.`{copy}` INDEX BY ({', '.join(columns)}){clause}")))
    converted = IndexedTable.for_path(copy)
    assert converted.version == single.version
    assert [(h.operation, h.parameters) for h in converted.history(1)] == [
        (h.operation, h.parameters) for h in single.history(1)]
    assert converted.num_buckets == single.num_buckets
    assert entries(converted, "primary") == entries(single, "primary")
    live = duckdb_delta().execute(f"SELECT count(*) FROM delta_scan('{copy}')").fetchone()[0]
    assert len(entries(converted, "primary")) == live
    _check_converted_lookups(copy, columns)


# -- SQL CREATE INDEX / REFRESH INDEX: the build in the statement's tasks --------------------------
def _task_counts(spark, group: str) -> list[int]:
    """The task count of every stage of the jobs run in job group ``group``."""
    tracker = spark.sparkContext.statusTracker()
    return sorted(tracker.getStageInfo(s).numTasks for j in tracker.getJobIdsForGroup(group)
                  for s in tracker.getJobInfo(j).stageIds)


def _in_group(spark, group: str, run) -> None:
    """``run()`` with its jobs in the job group ``group`` (a name no other test uses)."""
    spark.sparkContext.setJobGroup(group, "indexeddf test")
    try:
        run()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def _build_plans(spark, run) -> list[str]:
    """``run()``, and the physical plans of the queries it ran."""
    store = spark._jsparkSession.sharedState().statusStore()
    # By id, not by count: past spark.sql.ui.retainedExecutions (a long test run), the store
    # holds fewer executions than have run.
    before = store.executionsList()
    seen = {before.apply(i).executionId() for i in range(before.size())}
    run()
    execs = store.executionsList()
    return [execs.apply(i).physicalPlanDescription() for i in range(execs.size())
            if execs.apply(i).executionId() not in seen]


def _check_no_entry_in_the_jvm(plans: list[str]) -> None:
    """The statement ran two writes of row numbers (the one that began it, then the build's,
    a row a group of files) and no scan or hash of Spark's: the Python tasks read the data
    files themselves, as ``create_index(spark=)``'s do."""
    writes = [p for p in plans if "AppendData" in p]
    assert len(writes) == 2, plans
    assert all("Range" in p for p in writes), writes
    assert not [p for p in plans if "Scan" in p or "hash(" in p], plans


@pytest.mark.parametrize("properties", [{}, {"delta.enableDeletionVectors": "true"}])
def test_sql_create_and_refresh_index_build_in_the_statements_tasks(spark, sql, tmp_path, properties):
    t = make(tmp_path / "t", properties)
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    if properties:
        t.delete("k IN (3, 40, 105, 150)")  # deletion vectors: their rows get no entry
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.create_index("by_s", ["s"])
    group = f"create-{len(properties)}"
    plans = _build_plans(spark, lambda: _in_group(
        spark, group, lambda: sql(f"CREATE INDEX by_s ON indexeddf.`{parallel.path}` (s)")))
    # Two writes: the one-task commit that began it, then a task per core that built the files.
    assert _task_counts(spark, group) == [1, spark.sparkContext.defaultParallelism]
    assert entries(parallel, "by_s") == entries(single, "by_s")
    _check_no_entry_in_the_jvm(plans)
    # Appended files the index does not cover (autoRefresh off), then a copy: the same files and ids.
    single.append(rows(range(300, 320)))
    shutil.copytree(single.path, tmp_path / "refreshed")
    parallel = IndexedTable.for_path(str(tmp_path / "refreshed"))
    for mode in ("INCREMENTAL", "FULL"):
        single.refresh("by_s", mode=mode.lower())
        sql(f"REFRESH INDEX by_s ON indexeddf.`{parallel.path}` {mode}")
        assert entries(parallel, "by_s") == entries(single, "by_s")
    # The same commits; the index files' count follows the tasks (each writes one a bucket).
    history = [[(h.operation, h.parameters, h.metrics.get("numIndexedFiles"))
                for h in IndexedTable.for_path(side.path).history(4)] for side in (single, parallel)]
    assert history[1] == history[0]
    assert IndexedTable.for_path(parallel.path).snapshot.indexes["by_s"].state == "ACTIVE"
    check_lookups(spark, parallel, "by_s", "s", S_KEYS + ["s20"])


@pytest.mark.parametrize("case, columns", [("plain", ["v"]), ("plain", ["d", "t", "n", "x", "m"]),
                                           ("deletion_vectors", ["s"]), ("partitioned", ["s", "v"])])
def test_sql_create_index_on_files_another_engine_wrote(spark, sql, tmp_path, case, columns):
    """delta-rs's files (its Parquet writer, date, UTC timestamp, NULLs, NaN and decimal keys;
    its deletion vectors; an index on a partition column, ``s``), indexed by SQL as by
    ``create_index()`` in one process."""
    CONVERTED[case](str(tmp_path / "t"))
    IndexedTable.convert(str(tmp_path / "t"), ["id"], num_buckets=3)
    single, parallel = twin(tmp_path / "t", tmp_path)
    single.create_index("by", columns)
    _check_no_entry_in_the_jvm(_build_plans(
        spark, lambda: sql(f"CREATE INDEX by ON indexeddf.`{parallel.path}` ({', '.join(columns)})")))
    assert entries(parallel, "by") == entries(single, "by")
    live = duckdb_delta().execute(f"SELECT count(*) FROM delta_scan('{parallel.path}')").fetchone()[0]
    assert len(entries(parallel, "by")) == live
    if len(columns) > 2:
        return
    keys = [("sp ace", "r3"), ("a/b", "r42"), ("x=y", "r43")] if len(columns) == 2 else (
        ["r3", "r41", "r77", "nope"] if columns == ["v"] else ["sp ace", "a/b", "nope"])
    listed = ", ".join(repr(k) for k in keys)
    want = sorted(repr(r) for r in duckdb_delta().execute(
        f"SELECT id, v FROM delta_scan('{parallel.path}') WHERE ({', '.join(columns)}) IN ({listed})").fetchall())
    got = IndexedTable.for_path(parallel.path).lookup(keys, columns=["id", "v"], index="by")
    assert want and sorted_rows(got, ["id", "v"]) == want


def test_sql_index_statements_that_read_no_data_run_no_build(spark, sql, tmp_path):
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])
    version = t.version
    _in_group(spark, "none", lambda: sql(f"CREATE INDEX IF NOT EXISTS by_s ON indexeddf.`{t.path}` (s)"))
    _in_group(spark, "none", lambda: sql(f"REFRESH INDEX by_s ON indexeddf.`{t.path}` QUICK"))
    assert _task_counts(spark, "none") == [1, 1]  # each statement's one write
    assert IndexedTable.for_path(t.path).version == version + 2  # the refresh's two commits


@pytest.mark.parametrize("fault", ["garbage", "missing"])
def test_a_failed_sql_build_leaves_the_log_as_a_failed_single_process_build(spark, sql, tmp_path, fault):
    t = make(tmp_path / "t")
    _break_newest_file(t, fault)  # a real fault: one task cannot read its data file
    single, parallel = twin(tmp_path / "t", tmp_path)
    # A task's indexeddf error reaches the statement's caller as itself.
    expected = MissingFileError if fault == "missing" else Exception
    with pytest.raises(expected):
        single.create_index("by_s", ["s"])
    with pytest.raises(expected):
        sql(f"CREATE INDEX by_s ON indexeddf.`{parallel.path}` (s)")
    assert _log_states(parallel, "by_s") == _log_states(single, "by_s")
    assert IndexedTable.for_path(parallel.path).snapshot.indexes["by_s"].state == "DELETED"
    # The abort waited for the tasks Spark was still cancelling (the job's fence), then deleted
    # their files with the pending folder: nothing is left, before any vacuum.
    assert _index_files_on_disk(parallel, "by_s") == set()
    # The fence's marker outlives a vacuum of no retention (a task Spark launched before the
    # failure may start after it and must still find it); vacuum deletes it after an hour.
    table = IndexedTable.for_path(parallel.path)
    table.vacuum(retention_hours=0, enforce_retention=False)
    assert _index_files_on_disk(parallel, "by_s") == set()
    markers = list((pathlib.Path(parallel.path) / "_indexes" / "_jobs").rglob("_aborted"))
    assert len(markers) == 1
    hour_later = int(time.time() * 1000) + 3_700_000
    gone = vacuum(table.snapshot, retention_hours=0, enforce_retention=False, now_ms=hour_later).files
    assert any(f.endswith("/_aborted") for f in gone) and not markers[0].exists()
