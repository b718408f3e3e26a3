"""Index lifecycle: every state transition is a commit, transient states come first,
operations that cannot run together fail typed, readers stay right at every version,
and a refresh killed with SIGKILL is cancelled back to ACTIVE without leftovers, as is an
index build whose Spark driver is killed while its job runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from indexeddf import IndexedTable
from indexeddf.errors import ConcurrentIndexError, IndexExistsError, InvalidIndexStateError, InvalidOptionError
from indexeddf.format.snapshot import load_snapshot
from indexeddf.spec.states import TRANSIENT_STATES
from indexeddf.writer import index_ops, lifecycle


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()), "s": [f"s{i % 5}" for i in range(start, start + n)]})


@pytest.fixture
def table(table_path) -> IndexedTable:
    t = IndexedTable.create(table_path, rows(0, 40), index_columns=["k"], num_buckets=4)
    t.create_index("by_s", ["s"], num_buckets=2)
    t.append(rows(40, 10))
    return t


def key_rows(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=lambda r: (r["k"], r["s"]))


def assert_lookups_right(t: IndexedTable, index: str = "by_s", since: int = 0) -> None:
    """At every version, lookups (through ``index`` while it exists, from version
    ``since``) equal a filter."""
    for v in range(t.update_incremental().version + 1):
        full = t.to_arrow(version=v)
        want = full.filter(pc.is_in(full.column("s"), pa.array(["s1", "s3"])))
        if v >= since and index in load_snapshot(t.snapshot.storage, v).indexes:
            assert key_rows(t.lookup(["s1", "s3"], version=v, index=index)) == key_rows(want), v
        want = full.filter(pc.is_in(full.column("k"), pa.array([3, 44], pa.int64())))
        assert key_rows(t.lookup([3, 44], version=v)) == key_rows(want), v


def states(t: IndexedTable, name: str = "by_s") -> list[str]:
    """The state of index ``name`` at every version where it exists."""
    out = []
    for v in range(t.update_incremental().version + 1):
        e = load_snapshot(t.snapshot.storage, v).indexes.get(name)
        if e is not None and (not out or out[-1] != e.state):
            out.append(e.state)
    return out


def files_under(root: str, rel: str) -> set[str]:
    out = set()
    for folder, _, names in os.walk(os.path.join(root, rel)):
        out |= {os.path.relpath(os.path.join(folder, n), root) for n in names}
    return out


def test_every_transition_is_a_commit_transient_first(table, table_path):
    t = table
    t.refresh(index="by_s", mode="full")
    assert t.optimize_index("by_s", "full") == t.version  # one file per bucket already: no commit
    t.append(rows(45, 3))
    t.optimize_index("by_s", "full")
    t.append(rows(50, 3))
    t.append(rows(53, 3))
    n = t.indexes()[0].num_files
    t.optimize_index("by_s", "quick")
    assert t.indexes()[0].num_files < n
    t.drop_index("by_s")
    assert t.indexes()[0].state == "DELETED" and t.indexes()[0].num_files > 0  # soft: files kept
    kept = {f.path for f in t.snapshot.indexes["by_s"].files}
    assert kept <= files_under(table_path, "_indexes")
    t.restore_index("by_s")
    active_version = t.version  # by_s ACTIVE, with the files vacuum_index deletes below
    t.drop_index("by_s")
    assert_lookups_right(t)
    t.vacuum_index("by_s")
    assert not kept & files_under(table_path, "_indexes")
    assert states(t) == ["CREATING", "ACTIVE", "REFRESHING", "ACTIVE", "OPTIMIZING", "ACTIVE", "OPTIMIZING", "ACTIVE",
                         "DELETING", "DELETED", "RESTORING", "ACTIVE", "DELETING", "DELETED", "VACUUMING", "DELETED"]
    ops = [(h.operation, h.parameters.get("state")) for h in reversed(t.history())]
    assert ("CREATE INDEX", "CREATING") in ops and ("VACUUM INDEX", "DELETED") in ops
    with pytest.raises(InvalidIndexStateError, match="vacuumed"):
        t.restore_index("by_s")
    # Re-creating a DELETED index starts from no files.
    t.create_index("by_s", ["s"], num_buckets=3)
    assert t.indexes()[0].state == "ACTIVE" and t.snapshot.indexes["by_s"].numBuckets == 3
    # At versions before the vacuum, lookups through it find its files gone and scan.
    assert_lookups_right(t)
    assert "were deleted since (vacuum_index or vacuum)" in t.explain("s = 's1'", version=active_version)


def test_transitions_that_cannot_run_are_refused(table):
    t = table
    with pytest.raises(InvalidIndexStateError):
        t.cancel_index("by_s")  # nothing to cancel
    with pytest.raises(InvalidIndexStateError):
        t.restore_index("by_s")  # not DELETED
    with pytest.raises(InvalidIndexStateError):
        t.vacuum_index("by_s")  # only a DELETED index is vacuumed
    with pytest.raises(InvalidOptionError):
        t.drop_index("primary")
    snap = t.snapshot
    lifecycle.begin(snap, snap.indexes["by_s"], "DELETING", "DROP INDEX", {"name": "by_s"})
    with pytest.raises(InvalidIndexStateError, match="cancel_index"):
        t.refresh(index="by_s")  # refresh while DELETING
    with pytest.raises(IndexExistsError):
        t.create_index("by_s", ["s"])
    t.cancel_index("by_s")
    t.drop_index("by_s")
    with pytest.raises(InvalidIndexStateError):
        t.drop_index("by_s")  # drop of a DELETED index
    snap = t.update_incremental().snapshot
    lifecycle.begin(snap, snap.indexes["by_s"], "VACUUMING", "VACUUM INDEX", {"name": "by_s"})
    with pytest.raises(InvalidIndexStateError):
        t.restore_index("by_s")  # restore while VACUUMING
    assert_lookups_right(t)


@pytest.mark.parametrize("transient,stable", [("CREATING", "DELETED"), ("REFRESHING", "ACTIVE"), ("OPTIMIZING", "ACTIVE"),
                                              ("DELETING", "ACTIVE"), ("RESTORING", "DELETED"), ("VACUUMING", "DELETED")])
def test_cancel_returns_each_transient_state_to_its_stable_one(table, table_path, transient, stable):
    t = table
    if TRANSIENT_STATES[transient] == "DELETED":
        t.drop_index("by_s")
    snap = t.update_incremental().snapshot
    entry = snap.indexes["by_s"]
    started = lifecycle.begin(snap, entry, transient, "TEST", {})
    files_before = {f.path for f in started.entry.files}
    assert files_before == {f.path for f in entry.files}  # the transient action keeps the files
    partial = f"{started.pending_dir}/bucket=00000/part-partial.parquet"
    t.snapshot.storage.write_bytes(partial, b"partial")
    t.cancel_index("by_s")
    after = t.snapshot.indexes["by_s"]
    assert after.state == stable
    assert not any(k in after.properties for k in lifecycle.TRANSIENT_KEYS)
    assert not os.path.exists(os.path.join(table_path, partial))
    if transient in ("CREATING", "VACUUMING"):
        assert after.files == () and after.properties["vacuumed"] == "true"
    else:
        assert {f.path for f in after.files} == files_before
    # A cancelled vacuum is finished (its files are gone): earlier versions' lookups
    # through that index would need them.
    assert_lookups_right(t, since=t.version if transient == "VACUUMING" else 0)


def test_two_operations_from_one_snapshot_one_fails_with_a_conflict(table):
    snap = table.snapshot
    lifecycle.drop_index(snap, "by_s")
    with pytest.raises(ConcurrentIndexError):
        index_ops.refresh_index(snap, "by_s", "full")
    assert table.update_incremental().indexes()[0].state == "DELETED"


def test_a_failing_operation_goes_back_to_its_stable_state(table, table_path, monkeypatch):
    t = table
    t.append(rows(60, 20))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(lifecycle, "build_files", boom)
    with pytest.raises(OSError):
        t.refresh(index="by_s", mode="full")
    entry = t.update_incremental().snapshot.indexes["by_s"]
    assert entry.state == "ACTIVE" and [h.operation for h in t.history(limit=3)] == ["CANCEL INDEX", "REFRESH INDEX", "WRITE"]
    assert_lookups_right(t)


def test_lookups_during_a_transient_state_use_the_stable_files(table):
    t = table
    snap = t.snapshot
    lifecycle.begin(snap, snap.indexes["by_s"], "REFRESHING", "REFRESH INDEX", {})
    t.append(rows(100, 7))  # not maintained while REFRESHING: scanned by lookups
    assert t.snapshot.indexes["by_s"].state == "REFRESHING"
    assert_lookups_right(t)
    t.cancel_index("by_s")
    t.refresh(index="by_s")
    assert_lookups_right(t)


KILLED_REFRESH = textwrap.dedent("""
    import sys, time
    from indexeddf import IndexedTable
    from indexeddf.format.snapshot import load_snapshot
    from indexeddf.format.storage import TableStorage
    from indexeddf.writer import index_ops, lifecycle
    lifecycle.BUILD_CHUNK_BYTES = 1          # one chunk of index files per data file
    snap = load_snapshot(TableStorage(sys.argv[1]))
    index_ops.refresh_index(snap, "by_s", "full", progress=lambda m: time.sleep(0.3))
""")


def test_sigkill_during_refresh_then_cancel(table, table_path):
    t = table
    for i in range(12):
        t.append(rows(200 + 10 * i, 10))
    before = t.version
    proc = subprocess.Popen([sys.executable, "-c", KILLED_REFRESH, table_path])
    try:
        deadline = time.time() + 60
        pending = None
        while time.time() < deadline:
            entry = t.update_incremental().snapshot.indexes["by_s"]
            if entry.state == "REFRESHING":
                pending = entry.properties["pendingDir"]
                if len(files_under(table_path, pending)) >= 2:
                    break
            time.sleep(0.05)
        assert pending is not None, "the refresh never committed REFRESHING"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    partial = files_under(table_path, pending)
    assert partial  # the killed build left index files that no version names
    t.update_incremental()
    assert t.version == before + 1 and t.snapshot.indexes["by_s"].state == "REFRESHING"
    assert_lookups_right(t)  # readers are right while it is stuck
    t.cancel_index("by_s")
    entry = t.snapshot.indexes["by_s"]
    assert entry.state == "ACTIVE" and "pendingDir" not in entry.properties
    assert not files_under(table_path, pending)
    assert_lookups_right(t)
    t.refresh(index="by_s")  # and it works again
    assert_lookups_right(t)


KILLED_SPARK_BUILD = textwrap.dedent("""
    import sys
    import indexeddf
    from indexeddf import IndexedTable
    spark = indexeddf.local_session("indexeddf-killed-build", cores=2)
    IndexedTable.for_path(sys.argv[1], spark=spark).create_index("by_v", ["v"])
""")


def _running_tokens(table_path: str) -> list[str]:
    """The tokens of Spark tasks of a maintenance job that are running (``spark/job_fence.py``)."""
    return [n for n in files_under(table_path, "_indexes/_jobs") if n.endswith(".running")]


@pytest.mark.spark_elsewhere  # the killed driver is a program of its own
@pytest.mark.slow
def test_a_spark_build_whose_driver_dies_is_cancelled_and_built_again(table_path):
    """``create_index(spark=)`` from a driver program (local[2]: its Python, JVM and workers)
    SIGKILLed once a task of its job runs: the table stays readable with the index CREATING,
    ``cancel_index`` drops it (DELETED) with the files its tasks wrote, and it is built again."""
    n = 600_000
    data = pa.table({"k": pa.array(range(n), pa.int64()), "s": [f"s{i % 5}" for i in range(n)],
                     "v": pa.array([f"{i * 7919 % n:032d}" for i in range(n)])})
    t = IndexedTable.create(table_path, data, index_columns=["k"], num_buckets=8)
    for i in range(3):
        t.append(rows(n + 10 * i, 10).append_column("v", pa.array([f"x{j}" for j in range(10)])))
    before = t.version
    driver = subprocess.Popen([sys.executable, "-c", KILLED_SPARK_BUILD, table_path], start_new_session=True,
                              env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not _running_tokens(table_path):
            assert driver.poll() is None, "the build ended before any task was seen running"
            assert time.monotonic() < deadline, "no task of the build started"
            time.sleep(0.02)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    t.update_incremental()
    entry = t.snapshot.indexes["by_v"]
    assert t.version == before + 1 and entry.state == "CREATING"
    pending = entry.properties["pendingDir"]
    assert_lookups_right(t, index="by_s")  # readers are right while it is stuck (lookups by k; no by_s here)
    t.cancel_index("by_v")
    assert t.snapshot.indexes["by_v"].state == "DELETED"
    assert not files_under(table_path, pending)
    t.vacuum_index("by_v")
    t.create_index("by_v2", ["v"])  # and an index on the column is built again
    keys = [f"{3 * 7919 % n:032d}", "x4"]
    full = t.to_arrow()
    want = full.filter(pc.is_in(full.column("v"), pa.array(keys)))
    assert len(want) == 4 and key_rows(t.lookup(keys, index="by_v2").select(["k", "s"])) == key_rows(
        want.select(["k", "s"]))
