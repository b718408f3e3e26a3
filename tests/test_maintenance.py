"""optimize, vacuum and restore on real files: rows never change, every version inside
the retention stays readable, optimize and appends both commit when they race."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from indexeddf import IndexedTable
from indexeddf.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    InvalidIndexStateError,
    InvalidOptionError,
    VersionNotFoundError,
)
from indexeddf.format.log import commit_path, read_commit
from indexeddf.spec.actions import AddFile, RemoveFile
from indexeddf.writer import lifecycle, maintenance, operations


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()), "s": [f"s{i % 5}" for i in range(start, start + n)]})


def content(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=lambda r: (r["k"], r["s"]))


def snapshot_contents(t: IndexedTable) -> dict[int, list]:
    return {v: content(t.to_arrow(version=v)) for v in range(t.update_incremental().version + 1)}


def assert_lookups_right(t: IndexedTable, versions) -> None:
    for v in versions:
        full = t.to_arrow(version=v)
        want = full.filter(pc.is_in(full.column("k"), pa.array([1, 7, 33, 101], pa.int64())))
        assert content(t.lookup([1, 7, 33, 101], version=v)) == content(want), v
        if "by_s" in t.snapshot_at(v).indexes:
            want = full.filter(pc.equal(full.column("s"), "s2"))
            assert content(t.lookup(["s2"], version=v, index="by_s")) == content(want), v


def assert_indexes_complete(t: IndexedTable) -> None:
    """Every data file an index names has all its entries in that index, at every
    version (PROTOCOL.md §4.5.2), also for files that are no longer live."""
    import collections

    import pyarrow.parquet as pq

    records = {}
    for v in range(t.update_incremental().version + 1):
        records |= {a.fileId: a.stats.numRecords for a in t.snapshot_at(v).files.values()}
    for v in range(t.version + 1):
        for entry in t.snapshot_at(v).indexes.values():
            counts = collections.Counter()
            for f in entry.files:
                ids = pq.read_table(t.snapshot.storage.full(f.path)).column("file_id").to_pylist()
                assert set(ids) == set(f.fileIds)
                counts.update(ids)
            assert all(counts[i] == records[i] for i in counts), (v, entry.name)


def disk_files(root: str, rel: str) -> set[str]:
    out = set()
    for folder, _, names in os.walk(os.path.join(root, rel)):
        out |= {os.path.relpath(os.path.join(folder, n), root) for n in names}
    return out


@pytest.fixture
def table(table_path) -> IndexedTable:
    t = IndexedTable.create(table_path, rows(0, 40), index_columns=["k"], num_buckets=4)
    t.create_index("by_s", ["s"], num_buckets=2)
    for i in range(6):
        t.append(rows(40 + 10 * i, 10))
    return t


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_optimize_compacts_per_bucket_and_keeps_every_row(table, mode):
    t = table
    before = snapshot_contents(t)
    n_files = len(t.snapshot.files)
    v = t.optimize(mode=mode)
    assert v == max(before) + 1
    assert len(t.snapshot.files) == 4 < n_files  # one file per bucket
    assert content(t.to_arrow()) == before[max(before)]
    assert all(content(t.to_arrow(version=u)) == rows_ for u, rows_ in before.items())  # time travel unchanged
    actions = read_commit(t.snapshot.storage, v)
    assert all(not a.dataChange for a in actions if isinstance(a, (AddFile, RemoveFile)))
    live = t.snapshot.file_ids
    for name in ("primary", "by_s"):
        entry = t.snapshot.indexes[name]
        covered = {i for f in entry.files for i in f.fileIds}
        assert covered == live and len(entry.files) <= entry.numBuckets  # index files compacted in step
    assert t.history(limit=1)[0].operation == "OPTIMIZE"
    assert t.detail()["indexes"][0]["deleted_ratio"] == 0.0
    assert_lookups_right(t, range(t.version + 1))
    assert t.optimize(mode=mode) == v  # nothing left to do: no commit
    t.delete("k IN (3, 44, 57)")
    t.append(rows(300, 9))
    t.optimize_index("by_s", mode)
    t.optimize(mode=mode)
    assert_lookups_right(t, range(v, t.version + 1))
    assert_indexes_complete(t)


def test_quick_optimize_leaves_big_files(table):
    t = table
    sizes = sorted(a.size for a in t.snapshot.files.values())
    threshold = sizes[len(sizes) // 2]
    result = maintenance.optimize(t.snapshot, "quick", small_file_bytes=threshold)
    kept = [a for a in result.snapshot.files.values() if a.size >= threshold and a.path in t.snapshot.files]
    assert kept and content(IndexedTable(result.snapshot).to_arrow()) == content(t.to_arrow())
    t.delete("k < 3")
    maintenance.optimize(t.update_incremental().snapshot, "quick", small_file_bytes=threshold)
    assert_lookups_right(t, range(t.update_incremental().version + 1))
    assert_indexes_complete(t)


def test_optimize_and_append_from_one_snapshot_both_commit(table):
    read = table.snapshot
    operations.append(read, rows(500, 8))
    maintenance.optimize(read, "full")  # loses the race to the append, rebases
    t = table.update_incremental()
    assert content(t.to_arrow()) == content(pa.concat_tables([rows(0, 100), rows(500, 8)]))
    assert_lookups_right(t, [t.version])
    t.append(rows(600, 4))
    read = t.snapshot
    maintenance.optimize(read, "full")
    operations.append(read, rows(700, 4))  # the append loses to optimize and rebases
    t.update_incremental()
    assert content(t.to_arrow()) == content(pa.concat_tables([rows(0, 100), rows(500, 8), rows(600, 4), rows(700, 4)]))
    assert_lookups_right(t, range(t.version + 1))


def test_optimize_fails_when_a_delete_removed_its_files(table):
    read = table.snapshot
    operations.delete_rows(read, "k = 45")
    with pytest.raises(ConcurrentDeleteDeleteError):
        maintenance.optimize(read, "full")
    assert content(table.update_incremental().to_arrow()) == content(rows(0, 100).filter(pc.not_equal(rows(0, 100).column("k"), 45)))


RACING_APPENDS = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from indexeddf import IndexedTable
    t = IndexedTable.for_path(sys.argv[1])
    for i in range(15):
        t.append(pa.table({"k": pa.array(range(1000 + 10 * i, 1010 + 10 * i), pa.int64()), "s": ["x"] * 10}))
""")


def test_optimize_racing_appends_in_another_process(table, table_path):
    proc = subprocess.Popen([sys.executable, "-c", RACING_APPENDS, table_path])
    try:
        optimized = 0
        while proc.poll() is None or optimized == 0:
            if table.optimize(mode="full") is not None:
                optimized += 1
            if proc.poll() is not None:
                break
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    t = table.update_incremental()
    ks = sorted(t.to_arrow().column("k").to_pylist())
    assert ks == list(range(100)) + list(range(1000, 1150))
    assert sum(h.operation == "OPTIMIZE" for h in t.history()) >= 1
    assert_lookups_right(t, [t.version])


def test_vacuum_keeps_every_version_inside_the_retention(table, table_path):
    t = table
    with pytest.raises(InvalidOptionError, match="minRetentionHours"):
        t.vacuum(retention_hours=1)
    assert t.vacuum().files == []  # nothing is older than 168 hours
    t.optimize(mode="full")
    t.delete("k < 5")
    boundary = t.version  # versions from here on must stay readable
    time.sleep(0.05)
    t.append(rows(300, 5))
    t.optimize(mode="full")
    t.drop_index("by_s")
    expected = snapshot_contents(t)
    # An aborted write: a data file and a Spark staging manifest no version names.
    aborted = ["data/bucket=00001/part-aborted.parquet", "data/_staging/w1/m.json", "_indexes/by_s/x/bucket=00000/part-a.parquet"]
    young = "data/bucket=00002/part-inflight.parquet"
    # Old files vacuum does not recognise as its own: index state beside a checkpoint,
    # and a file some other tool left in data/.
    foreign = ["_indexes/_state/00000000000000000001.json", "data/notes.txt"]
    for rel in aborted + [young] + foreign:
        t.snapshot.storage.write_bytes(rel, b"x")
    ts = {h.version: h.timestamp.timestamp() * 1000 for h in t.history()}
    now = int(time.time() * 1000)
    hours = (now - ts[boundary]) / 3_600_000
    for rel in aborted + foreign:
        old = (ts[boundary] - 10_000) / 1000
        os.utime(os.path.join(table_path, rel), (old, old))
    dry = maintenance.vacuum(t.snapshot, hours, dry_run=True, enforce_retention=False, now_ms=now)
    assert dry.files and all(os.path.exists(os.path.join(table_path, p)) for p in dry.files)
    assert set(aborted) <= set(dry.files) and young not in dry.files
    log = disk_files(table_path, "_delta_log")
    result = maintenance.vacuum(t.snapshot, hours, enforce_retention=False, now_ms=now)
    assert result.files == dry.files and result.oldest_version_kept == boundary
    assert not any(os.path.exists(os.path.join(table_path, p)) for p in result.files)
    assert disk_files(table_path, "_delta_log") == log  # the log is untouched
    assert all(os.path.exists(os.path.join(table_path, p)) for p in foreign)
    assert not os.path.exists(os.path.join(table_path, "data/_staging/w1"))
    for v in range(boundary, t.version + 1):  # time travel inside the retention still works
        assert content(t.to_arrow(version=v)) == expected[v]
    assert_lookups_right(t, range(boundary, t.version + 1))
    with pytest.raises(Exception):
        t.to_arrow(version=1)  # older than the retention: its files are gone (documented)
    with pytest.raises(VersionNotFoundError, match="vacuum"):
        t.restore(1)


def test_restore_gives_the_old_content_and_indexes(table):
    t = table
    old_version = 3
    old = content(t.to_arrow(version=old_version))
    t.delete("s = 's1'")
    t.optimize(mode="full")
    t.create_index("by_k_s", ["k", "s"])
    v = t.restore(old_version)
    assert content(t.to_arrow()) == old
    assert t.snapshot.indexes["by_k_s"].state == "DELETED"  # did not exist then
    for name in ("primary", "by_s"):
        was = t.snapshot_at(old_version).indexes[name]
        now = t.snapshot.indexes[name]
        assert {f.path for f in now.files} == {f.path for f in was.files} and now.state == "ACTIVE"
    assert t.history(limit=1)[0].operation == "RESTORE" and t.history(limit=1)[0].parameters == {"version": old_version}
    assert_lookups_right(t, [v])
    t.append(rows(900, 3))  # writes go on normally
    assert_lookups_right(t, [t.version])
    assert t.restore(t.version) == t.version  # nothing differs: no commit


def test_restore_refuses_a_concurrent_write_and_transient_indexes(table):
    read = table.snapshot
    operations.append(read, rows(800, 2))
    with pytest.raises(ConcurrentAppendError):
        maintenance.restore(read, 2)
    snap = table.update_incremental().snapshot
    lifecycle.begin(snap, snap.indexes["by_s"], "REFRESHING", "REFRESH INDEX", {})
    with pytest.raises(InvalidIndexStateError):
        table.restore(2)


def test_restore_brings_back_an_old_schema(table_path):
    t = IndexedTable.create(table_path, rows(0, 10), index_columns=["k"], num_buckets=2)
    wide = rows(0, 3).append_column("x", pa.array([1, 2, 3], pa.int32()))
    t.overwrite(wide, overwrite_schema=True)
    t.restore(0)
    assert t.schema.names == ["k", "s"] and content(t.to_arrow()) == content(rows(0, 10))


def test_commit_files_name_the_operations(table):
    t = table
    t.optimize()
    text = t.snapshot.storage.read_bytes(commit_path(t.version)).decode()
    info = json.loads(text.splitlines()[0])["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["operationParameters"] == {"mode": "quick"}
    assert info["operationMetrics"]["numAddedFiles"] == 4


def test_optimize_with_lagging_and_dropped_indexes(table_path):
    t = IndexedTable.create(table_path, rows(0, 40), index_columns=["k"], num_buckets=4,
                            properties={"indexeddf.index.autoRefresh": "false"})
    t.create_index("by_s", ["s"], num_buckets=2)
    t.create_index("by_k_s", ["k", "s"])
    for i in range(4):
        t.append(rows(40 + 10 * i, 10))  # not indexed: scanned by lookups
    t.drop_index("by_k_s")
    dropped = {f.path for f in t.snapshot.indexes["by_k_s"].files}
    t.optimize(mode="full")
    live = t.snapshot.file_ids
    assert {i for f in t.snapshot.indexes["by_s"].files for i in f.fileIds} == live  # now fully covered
    assert {f.path for f in t.snapshot.indexes["by_k_s"].files} == dropped  # a DELETED index is left alone
    r = t.vacuum(retention_hours=0, enforce_retention=False)
    assert not dropped & set(r.files)  # vacuum keeps a DELETED index's files: it can be restored
    t.restore_index("by_k_s")
    assert_lookups_right(t, [t.version])
    full = t.to_arrow()
    want = full.filter(pc.and_(pc.equal(full.column("k"), 47), pc.equal(full.column("s"), "s2")))
    assert content(t.lookup([(47, "s2")], index="by_k_s")) == content(want)
    t.refresh(index="by_k_s")
    assert content(t.lookup([(47, "s2")], index="by_k_s")) == content(want)


def test_compaction_of_some_index_buckets_keeps_indexes_complete(table_path):
    from indexeddf.spec.bucketing import bucket_ids

    values = [f"v{i}" for i in range(40)]
    buckets = bucket_ids([pa.array(values)], 2).tolist()
    zero = [v for v, b in zip(values, buckets) if b == 0]
    data = pa.table({"k": pa.array(range(40), pa.int64()), "s": values})
    t = IndexedTable.create(table_path, data, index_columns=["k"], num_buckets=1)
    t.create_index("by_s", ["s"], num_buckets=2)  # one index file per bucket, both naming the data file
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.delete("k = 0")  # the data file dies (its rewrite is not indexed)
    t.set_properties({"indexeddf.index.autoRefresh": "true"})
    for i in range(2):  # more small files in index bucket 0 only: bucket 1 is not rewritten
        t.append(pa.table({"k": pa.array([100 + i], pa.int64()), "s": [zero[i]]}))
    t.optimize_index("by_s", "quick")
    assert_indexes_complete(t)
    assert_lookups_right(t, range(t.version + 1))
    for v in range(1, t.version + 1):
        full = t.to_arrow(version=v)
        want = full.filter(pc.is_in(full.column("s"), pa.array(values[:6])))
        assert content(t.lookup(values[:6], index="by_s", version=v)) == content(want)
