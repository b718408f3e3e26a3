"""Table ``optimize`` as a Spark job (``optimize(mode, spark=)``).

Each test optimizes the same table twice (a copy of its folder: same files, ids and
version), once in this process and once as a Spark job, and checks that both wrote the same
data files (each file's bucket, partition and rows in file order, read with pyarrow) and the
same index entries (each pointing at the same row of the same file), that the table's rows
after the Spark optimize equal DuckDB's read (its delta extension, delta-kernel-rs) of the
rows before, and that lookups through every index (Python ``lookup`` and the connector)
equal DuckDB's answer. A job failing on an unreadable file commits nothing and leaves only
files ``vacuum`` deletes; an append another writer commits during the job still lands.
"""

from __future__ import annotations

import pathlib
import shutil

import deltalake
import pyarrow.parquet as pq
import pytest
from oracles import duckdb_delta
from test_spark_maintenance import (
    _break_newest_file,
    _index_files_on_disk,
    _log_states,
    check_lookups,
    entries,
    make,
    rows,
)

import indexeddf
from indexeddf import IndexedTable
from indexeddf.errors import MissingFileError
from indexeddf.writer.index_files import read_entries

pytestmark = pytest.mark.spark

DV = {"delta.enableDeletionVectors": "true"}
DELETED = "k IN (3, 40, 105, 150, 151)"


@pytest.fixture(scope="module", autouse=True)
def connector(spark):
    assert indexeddf.register(spark) == "connector"


def duck_rows(path: str, columns: str = "k, v, s") -> list:
    """The table's rows at its newest version, as DuckDB reads them."""
    return sorted(repr(r) for r in duckdb_delta().execute(f"SELECT {columns} FROM delta_scan('{path}')").fetchall())


def layout(path: str) -> tuple[list, dict]:
    """Every live data file as (bucket, partition values, its rows in file order, read with
    pyarrow), sorted; and each index's entries as (index bucket, hash, the data file's place
    in that list, row), sorted: comparable across two tables whose file ids differ."""
    snap = IndexedTable.for_path(path).snapshot
    described = {}
    for a in snap.live_files():
        assert a.deletionVector is None, "optimize leaves no deletion vector"
        data = pq.read_table(snap.storage.full(a.path))
        described[a.fileId] = (a.bucket, sorted(a.partitionValues.items()), repr(data.to_pylist()))
    files = sorted(described.values(), key=repr)
    place = {fid: files.index(d) for fid, d in described.items()}
    entries = {}
    for name, entry in snap.indexes.items():
        out = []
        for f in entry.files:
            e = read_entries(snap.storage, f)
            out += [(f.bucket, h, place[i], r) for h, i, r in
                    zip(*(e.column(c).to_pylist() for c in ("hash", "file_id", "row")))]
        entries[name] = sorted(out)
    return files, entries


def twin(path, tmp_path) -> tuple[IndexedTable, IndexedTable]:
    """The table at ``path`` and a copy of it: (single-process side, Spark side)."""
    copy = tmp_path / "spark_side"
    shutil.copytree(path, copy)
    return IndexedTable.for_path(str(path)), IndexedTable.for_path(str(copy))


def optimize_both(spark, single: IndexedTable, parallel: IndexedTable, mode: str) -> list[str]:
    """Optimize both sides; the Spark side's progress lines. Both commit the same versions
    with the same metrics but the bytes written: this process writes several buckets' rows
    at once, and a file's row group size follows the average row of what is written at once."""
    lines, version = [], single.version
    v_single = single.optimize(mode)
    v_parallel = parallel.optimize(mode, spark=spark, progress=lines.append)
    assert v_parallel == v_single > version
    metrics = [[{k: n for k, n in h.metrics.items() if k != "numAddedBytes"} for h in t.history(2)]
               for t in (single, parallel)]
    assert metrics[1] == metrics[0]
    assert any("Spark job" in line for line in lines)
    return lines


@pytest.mark.parametrize("mode, props, delete", [
    ("quick", {}, False), ("full", {}, False), ("quick", DV, True), ("full", DV, True),
    ("full", {"delta.columnMapping.mode": "name"}, False),
])
def test_optimize_as_a_spark_job_writes_the_files_of_the_single_process_optimize(spark, tmp_path, mode, props, delete):
    t = make(tmp_path / "t", props)
    t.create_index("by_s", ["s"])
    if delete:
        t.delete(DELETED)  # deletion vectors: their rows are purged by the rewrite
        assert any(a.deletionVector is not None for a in IndexedTable.for_path(t.path).snapshot.live_files())
    before = duck_rows(t.path)
    single, parallel = twin(tmp_path / "t", tmp_path)
    optimize_both(spark, single, parallel, mode)
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path) == before
    snap = IndexedTable.for_path(parallel.path).snapshot
    assert len(snap.live_files()) == 4  # one file a bucket
    assert {e.state for e in snap.indexes.values()} == {"ACTIVE"}
    check_lookups(spark, parallel, "primary", "k", [3, 17, 105, 199])
    check_lookups(spark, parallel, "by_s", "s", ["s3", "s17", "s40", "s41", "nope"])


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_buckets_not_rewritten_keep_their_files_and_entries(spark, tmp_path, mode):
    """After a first optimize (one file a bucket), appends of a few keys touch some buckets:
    only those are rewritten, and the merged index files keep the other files' entries."""
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])
    t.optimize("full")
    for keys in ([1, 2], [5, 400], [2, 401]):
        t.append(rows(keys))
    before = duck_rows(t.path)
    single, parallel = twin(tmp_path / "t", tmp_path)
    kept = {a.path for a in parallel.snapshot.live_files()}
    optimize_both(spark, single, parallel, mode)
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path) == before
    assert kept & set(IndexedTable.for_path(parallel.path).snapshot.files), "some bucket is not rewritten"
    check_lookups(spark, parallel, "primary", "k", [1, 2, 5, 17, 105, 400, 401])
    check_lookups(spark, parallel, "by_s", "s", ["s1", "s2", "s5", "s40", "s41"])


def test_a_partitioned_table(spark, tmp_path):
    t = make(tmp_path / "t", DV, part=3)
    t.create_index("by_ps", ["p", "s"])
    t.delete(DELETED)
    before = duck_rows(t.path, "k, v, s, p")
    single, parallel = twin(tmp_path / "t", tmp_path)
    optimize_both(spark, single, parallel, "full")
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path, "k, v, s, p") == before
    assert len(IndexedTable.for_path(parallel.path).snapshot.live_files()) == 12  # 3 partitions x 4 buckets
    check_lookups(spark, parallel, "primary", "k", [4, 17, 105, 199])
    got = IndexedTable.for_path(parallel.path).lookup([("p1", "s40"), ("p2", "s41")], columns=["k", "p", "s"],
                                                      index="by_ps")
    want = duckdb_delta().execute(f"SELECT k, p, s FROM delta_scan('{parallel.path}') "
                                  "WHERE (p, s) IN (('p1', 's40'), ('p2', 's41'))").fetchall()
    assert want and sorted(repr(r) for r in zip(*got.to_pydict().values())) == sorted(repr(r) for r in want)


def test_files_another_writer_added_get_buckets(spark, tmp_path):
    """A table delta-rs wrote, indexed with ``convert``: ``full`` rewrites its files (no
    bucket) into buckets in a commit of its own, then compacts the buckets."""
    path = str(tmp_path / "t")
    for keys in (range(0, 120), range(100, 200)):
        deltalake.write_deltalake(path, rows(keys), mode="append")
    IndexedTable.convert(path, ["k"], num_buckets=4)
    before = duck_rows(path)
    single, parallel = twin(path, tmp_path)
    optimize_both(spark, single, parallel, "full")
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path) == before
    assert all(a.bucket is not None for a in IndexedTable.for_path(parallel.path).snapshot.live_files())
    check_lookups(spark, parallel, "primary", "k", [3, 105, 199])


def _table_files_on_disk(path: str) -> set[str]:
    root = pathlib.Path(path)
    return {str(p.relative_to(root)) for d in ("data", "_indexes") for p in (root / d).rglob("*.parquet")}


@pytest.mark.parametrize("fault", ["garbage", "missing"])
def test_a_failed_job_commits_nothing_and_vacuum_deletes_what_it_wrote(spark, tmp_path, fault):
    _a_failed_optimize_leaves_nothing(tmp_path, fault, lambda path: IndexedTable.for_path(path).optimize("full", spark=spark))


def test_an_append_committed_during_the_job_still_lands(spark, tmp_path):
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])
    before = duck_rows(t.path)
    version = t.version
    appended = rows(range(300, 310))

    def other_writer(line: str) -> None:
        if "Spark job" in line:  # the job is planned, its tasks not yet run: another writer commits
            IndexedTable.for_path(t.path).append(appended)

    v = IndexedTable.for_path(t.path).optimize("full", spark=spark, progress=other_writer)
    assert v == version + 2  # the append's version, then optimize's, rebased over it
    history = IndexedTable.for_path(t.path).history(2)
    assert [h.operation for h in history] == ["OPTIMIZE", "WRITE"]
    added = sorted(repr(r) for r in zip(*(appended.column(c).to_pylist() for c in ("k", "v", "s"))))
    assert duck_rows(t.path) == sorted(before + added)
    check_lookups(spark, t, "primary", "k", [3, 105, 300, 309])
    check_lookups(spark, t, "by_s", "s", ["s3", "s10", "s45"])


# -- optimize_index(spark=): an index's own small files merged per index bucket ----------------
def _small_index_files(path) -> IndexedTable:
    """``make``'s table with an index ``by_s`` of several files per index bucket (created, then
    maintained by two appends), and a delete that removes some data files (copy-on-write)."""
    t = make(path)
    t.create_index("by_s", ["s"])
    t.append(rows(range(200, 230)))
    t.append(rows(range(230, 260)))
    t.delete("k >= 100 AND k < 110")
    return IndexedTable.for_path(t.path)


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_optimize_index_as_a_spark_job_writes_the_entries_of_the_single_process_merge(spark, tmp_path, mode):
    t = _small_index_files(tmp_path / "t")
    before = {b: sum(1 for f in t.snapshot.indexes["by_s"].files if f.bucket == b) for b in range(4)}
    assert min(before.values()) >= 2
    single, parallel = twin(tmp_path / "t", tmp_path)
    lines = []
    assert parallel.optimize_index("by_s", mode, spark=spark, progress=lines.append) == \
        single.optimize_index("by_s", mode) == t.version + 2
    assert any("Spark job" in line for line in lines)
    assert entries(parallel, "by_s") == entries(single, "by_s")
    for side in (single, parallel):
        e = IndexedTable.for_path(side.path).snapshot.indexes["by_s"]
        assert e.state == "ACTIVE" and sorted(f.bucket for f in e.files) == [0, 1, 2, 3]  # one file a bucket
        assert IndexedTable.for_path(side.path).history(1)[0].metrics == single.history(1)[0].metrics
    check_lookups(spark, parallel, "by_s", "s", ["s3", "s17", "s40", "s41", "s45", "nope"])


def test_optimize_index_with_nothing_to_merge_runs_no_job(spark, tmp_path):
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])  # one file per index bucket
    lines = []
    assert t.optimize_index("by_s", "quick", spark=spark, progress=lines.append) == t.version
    assert not lines


def test_a_failed_optimize_index_job_leaves_the_log_as_a_failed_single_process_merge(spark, tmp_path):
    """A real fault in one task (an index file's bytes replaced by garbage): the operation's
    own cancel puts the index back ACTIVE with its files, and deletes what the other tasks
    wrote under its pending folder, as the single-process failure does."""
    t = _small_index_files(tmp_path / "t")
    victim = t.snapshot.indexes["by_s"].files[0]
    with open(t.snapshot.storage.full(victim.path), "wb") as f:
        f.write(b"not parquet" * 100)
    single, parallel = twin(tmp_path / "t", tmp_path)
    kept = _index_files_on_disk(parallel, "by_s")
    with pytest.raises(Exception):
        single.optimize_index("by_s", "full")
    with pytest.raises(Exception):
        parallel.optimize_index("by_s", "full", spark=spark)
    assert _log_states(parallel, "by_s") == _log_states(single, "by_s")
    final = IndexedTable.for_path(parallel.path).snapshot.indexes["by_s"]
    assert final.state == "ACTIVE" and {f.path for f in final.files} == {f.path for f in t.snapshot.indexes["by_s"].files}
    assert _index_files_on_disk(parallel, "by_s") == kept


# -- SQL OPTIMIZE: the rewrite in Spark's tasks -----------------------------------------------------
@pytest.mark.parametrize("props, delete", [({}, False), (DV, True)])
def test_sql_optimize_rewrites_in_spark_tasks_what_the_single_process_optimize_writes(spark, sql, tmp_path, props,
                                                                                      delete):
    t = make(tmp_path / "t", props)
    t.create_index("by_s", ["s"])
    if delete:
        t.delete(DELETED)  # deletion vectors: their rows are purged by the rewrite
    before = duck_rows(t.path)
    single, parallel = twin(tmp_path / "t", tmp_path)
    assert single.optimize("quick") > t.version
    group = f"sql-optimize-{len(props)}"
    spark.sparkContext.setJobGroup(group, "indexeddf test")
    try:
        [row] = sql(f"OPTIMIZE indexeddf.`{parallel.path}`")
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    tracker = spark.sparkContext.statusTracker()
    tasks = [tracker.getStageInfo(s).numTasks for j in tracker.getJobIdsForGroup(group)
             for s in tracker.getJobInfo(j).stageIds]
    assert max(tasks) > 1  # the rewrite and the merge ran as tasks, not in the commit's one
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path) == before
    metrics = [{k: n for k, n in IndexedTable.for_path(side.path).history(1)[0].metrics.items() if k != "numAddedBytes"}
               for side in (single, parallel)]
    assert metrics[1] == metrics[0]
    assert IndexedTable.for_path(parallel.path).history(1)[0].operation == "OPTIMIZE"
    assert (row["metrics"]["numFilesAdded"], row["metrics"]["numFilesRemoved"]) == \
        (metrics[0]["numAddedFiles"], metrics[0]["numRemovedFiles"])
    check_lookups(spark, parallel, "primary", "k", [4, 17, 105, 199])
    check_lookups(spark, parallel, "by_s", "s", ["s3", "s17", "s40", "s41", "nope"])
    # Nothing left to compact: no job, nothing committed.
    version = IndexedTable.for_path(parallel.path).version
    [row] = sql(f"OPTIMIZE indexeddf.`{parallel.path}`")
    assert row["metrics"]["numFilesRemoved"] == 0 and IndexedTable.for_path(parallel.path).version == version


@pytest.mark.parametrize("fault", ["garbage", "missing"])
def test_a_failed_sql_optimize_commits_nothing_and_vacuum_deletes_what_it_wrote(spark, sql, tmp_path, fault):
    _a_failed_optimize_leaves_nothing(tmp_path, fault, lambda path: sql(f"OPTIMIZE indexeddf.`{path}`"))


def _a_failed_optimize_leaves_nothing(tmp_path, fault: str, optimize) -> None:
    """``optimize(path)`` on a table with a broken file fails (a task's indexeddf error raised
    as itself, not as Spark's wrapper of it), commits nothing, and vacuum leaves exactly the
    files the version names (less the one deleted outside indexeddf)."""
    t = make(tmp_path / "t")
    t.create_index("by_s", ["s"])
    _break_newest_file(t, fault)  # a real fault: one task cannot read its files
    version = IndexedTable.for_path(t.path).version
    with pytest.raises(MissingFileError if fault == "missing" else Exception):
        optimize(t.path)
    t = IndexedTable.for_path(t.path)
    assert t.version == version
    t.vacuum(retention_hours=0, enforce_retention=False)
    snap = IndexedTable.for_path(t.path).snapshot
    named = set(snap.files) | {f.path for e in snap.indexes.values() for f in e.files}
    gone = {p for p in named if not pathlib.Path(snap.storage.full(p)).exists()}
    assert len(gone) == (1 if fault == "missing" else 0)  # the file deleted outside indexeddf
    assert _table_files_on_disk(t.path) == named - gone


# -- the rewrite tasks write the index files: merged per index bucket only where needed -------------
def _parquet_files(path: str) -> set[str]:
    """Every data and index file under the table's folder (partition folders too), not the log's."""
    root = pathlib.Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


@pytest.mark.parametrize("way, mode", [("api", "quick"), ("api", "full"), ("sql", "quick")])
def test_two_indexes_a_partitioned_table_and_deletion_vectors(spark, sql, tmp_path, way, mode):
    """Index buckets that get entries from several rewrite tasks (a partitioned table: a data
    bucket is several groups; the secondary indexes hash other columns), a string index and an
    integer one, deletion vectors, and index buckets whose rewritten files keep entries of files
    not rewritten (appends after a first optimize): the files and entries are those of the
    single-process optimize, no file a rewrite task wrote is left beside them, and lookups
    through every index equal DuckDB's."""
    t = make(tmp_path / "t", DV, part=3)
    t.create_index("by_s", ["s"])
    t.create_index("by_v", ["v"], num_buckets=3)
    t.optimize("full")
    for keys in (range(300, 340), [1, 2, 5], range(400, 430)):
        t.append(rows(keys, 3))
    t.delete("k IN (3, 40, 105, 150, 151, 301, 402)")
    before = duck_rows(t.path, "k, v, s, p")
    single, parallel = twin(tmp_path / "t", tmp_path)
    on_disk_before = _parquet_files(parallel.path)
    if way == "api":
        optimize_both(spark, single, parallel, mode)
    else:
        assert single.optimize("quick") > t.version
        sql(f"OPTIMIZE indexeddf.`{parallel.path}`")
    assert layout(parallel.path) == layout(single.path)
    assert duck_rows(parallel.path, "k, v, s, p") == before
    snap = IndexedTable.for_path(parallel.path).snapshot
    named = set(snap.files) | {f.path for e in snap.indexes.values() for f in e.files}
    # Only the new version's files were added: the files merged away are deleted.
    assert _parquet_files(parallel.path) - on_disk_before == named - on_disk_before
    def files_a_bucket(side):  # as many index files in each index bucket as one process leaves
        return {n: sorted(f.bucket for f in e.files) for n, e in IndexedTable.for_path(side.path).snapshot.indexes.items()}

    assert files_a_bucket(parallel) == files_a_bucket(single)
    check_lookups(spark, parallel, "primary", "k", [1, 2, 5, 17, 105, 301, 333, 401])
    check_lookups(spark, parallel, "by_s", "s", ["s1", "s2", "s5", "s40", "s41", "nope"])
    check_lookups(spark, parallel, "by_v", "v", [0, 1, 2, 5, 49])
